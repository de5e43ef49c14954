"""paravg's modules import one another without a circle (imports inside functions too).

A circle of imports closed by a function-level import never fails at import time, so it
goes unnoticed: this test reads every module of ``paravg/`` with :mod:`ast`, builds the
graph of its imports of other paravg modules (``import`` and ``from`` at any depth of the
module, relative ones resolved against the importing module's package) and fails naming
a circle (or a module that imports itself). A function-level import is for keeping torch
out of the main snakemake, never for hiding a loop (docs/architecture.md, "Layers").
"""

from __future__ import annotations

import ast
import graphlib
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "paravg"


def module_name(path: Path, package: Path = PACKAGE) -> str:
    parts = list(path.relative_to(package.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def resolve(name: str, modules: set[str]) -> str | None:
    """The paravg module ``name`` denotes: itself, or the longest prefix that is a module
    (``paravg.sync.registry.NODE_KINDS`` -> ``paravg.sync.registry``); None outside paravg."""
    while name:
        if name in modules:
            return name
        name = name.rpartition(".")[0]
    return None


def imports_of(tree: ast.Module, module: str, is_package: bool, modules: set[str]) -> set[str]:
    """The paravg modules a module imports, at any depth (inside functions too):
    ``import a.b`` -> ``a.b``; ``from a import b`` -> ``a.b`` when that is a module, else
    ``a``; relative ``from`` imports resolved against the importing module's package."""
    package = module if is_package else module.rpartition(".")[0]
    found: set[str | None] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(resolve(alias.name, modules) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                stem = ".".join([*base, node.module] if node.module else base)
            else:
                stem = node.module or ""
            for alias in node.names:
                submodule = f"{stem}.{alias.name}"
                found.add(submodule if submodule in modules else resolve(stem, modules))
    return found - {None}


def import_graph(package: Path = PACKAGE) -> dict[str, set[str]]:
    """paravg module -> the paravg modules it imports (a package is its ``__init__``)."""
    files = {module_name(p, package): p for p in sorted(package.rglob("*.py"))}
    modules = set(files)
    return {
        module: imports_of(
            ast.parse(path.read_text(), filename=str(path)),
            module,
            path.name == "__init__.py",
            modules,
        )
        for module, path in files.items()
    }


def circle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import circle of ``graph`` (its modules in import order, the first repeated at
    the end; a self-import is ``[m, m]``), or None: the standard library's topological
    sorter finds it."""
    try:
        graphlib.TopologicalSorter(graph).prepare()
    except graphlib.CycleError as exc:
        return list(exc.args[1])
    return None


def test_circle_finds_a_loop_and_a_self_import():
    found = circle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "e": {"a"}})
    assert found[0] == found[-1] and set(found) == {"a", "b", "c"}
    assert circle({"d": {"d"}}) == ["d", "d"]
    assert circle({"a": {"b"}, "b": set()}) is None


def test_function_level_and_relative_imports_are_read(tmp_path):
    pkg = tmp_path / "paravg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "low.py").write_text("def f():\n    from paravg.sub.high import g\n")
    (pkg / "sub" / "high.py").write_text("from ..low import f\n")
    (pkg / "sub" / "other.py").write_text("from . import high\n")
    graph = import_graph(pkg)
    assert graph["paravg.low"] == {"paravg.sub.high"}
    assert graph["paravg.sub.high"] == {"paravg.low"}
    assert graph["paravg.sub.other"] == {"paravg.sub.high"}
    assert set(circle(graph)) == {"paravg.low", "paravg.sub.high"}


def test_paravg_has_no_import_circle():
    graph = import_graph()
    assert len(graph) > 50 and "paravg.layout" in graph
    found = circle(graph)
    if found:
        pytest.fail(
            "an import circle in paravg/ (imports inside functions counted): " + " -> ".join(found)
        )
