"""paravg's modules import one another without a circle (imports inside functions too).

A circle of imports closed by a function-level import never fails at import time, so it
goes unnoticed: this test reads every module of ``paravg/`` with :mod:`ast`, builds the
graph of its imports of other paravg modules (``import`` and ``from`` at any depth of the
module, relative ones resolved against the importing module's package) and fails naming
every strongly connected component of more than one module, and every module that
imports itself. A function-level import is for keeping torch out of the main snakemake,
never for hiding a loop (docs/architecture.md, "Layers").
"""

from __future__ import annotations

import ast
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


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module, and self-imports (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1 or v in graph.get(v, ()):
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_circles_finds_a_loop_and_a_self_import():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"d"}, "e": {"a"}}
    assert circles(graph) == [["a", "b", "c"], ["d"]]
    assert circles({"a": {"b"}, "b": set()}) == []


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
    assert circles(graph) == [["paravg.low", "paravg.sub.high"]]


def test_paravg_has_no_import_circle():
    graph = import_graph()
    assert len(graph) > 50 and "paravg.layout" in graph
    found = circles(graph)
    if found:
        pytest.fail(
            "import circles in paravg/ (imports inside functions counted): "
            + "; ".join(" <-> ".join(c) for c in found)
        )
