"""The model-family table (:mod:`paravg.nnet.families`): every family is one entry, and
nothing in ``paravg/`` outside the table compares a family with a name.

The scan reads every module of ``paravg/`` with :mod:`ast` and fails naming file:line
for (a) a comparison of a family-name string with an expression that reads a family
(``model.family == "tdnnf"``, ``cfg.get("family") in ("tdnn_lstm",)``,
``family in RECURRENT_FAMILIES``), and (b) a read of the family key with its own default
(``cfg.get("family", "tdnn")``, ``getattr(model, "family", "tdnn")``): the table's
:func:`~paravg.nnet.families.family_of` and ``DEFAULT_FAMILY`` say both once. A layer
type that shares a family's name (``layer["type"] == "tdnn"`` inside the TDNN-LSTM) is
not a family and is not flagged.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
import yaml

from paravg.config import SCHEMA_PATH
from paravg.errors import ConfigError
from paravg.nnet.acoustic import AcousticModel
from paravg.nnet.families import (
    DEFAULT_FAMILY,
    FAMILIES,
    families_with,
    family_of,
    get_family,
    known_family,
    trainer_keys_of_others,
)

PACKAGE = Path(__file__).resolve().parents[3] / "paravg"
TABLE = PACKAGE / "nnet" / "families.py"


def _strings(node: ast.AST) -> set[str]:
    """The string constants of a comparison operand (itself, or a tuple/list/set's items)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return {node.value}
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return set().union(*(_strings(e) for e in node.elts)) if node.elts else set()
    return set()


def _reads_family(node: ast.AST) -> bool:
    """Whether an expression mentions a family: a name or attribute spelled with
    "famil" (``family``, ``model.family``, ``RECURRENT_FAMILIES``) or the key "family"."""
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name) and "famil" in sub.id.lower():
            return True
        if isinstance(sub, ast.Attribute) and "famil" in sub.attr.lower():
            return True
        if isinstance(sub, ast.Constant) and sub.value == "family":
            return True
    return False


def family_comparisons(source: str, names=frozenset(FAMILIES)) -> list[tuple[int, str]]:
    """(line, what) of every family comparison and defaulted family read in ``source``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            named = set().union(*(_strings(o) for o in operands)) & names
            reads = [o for o in operands if _reads_family(o) and not (_strings(o) & names)]
            set_test = any(isinstance(op, (ast.In, ast.NotIn)) for op in node.ops) and any(
                _reads_family(o) for o in node.comparators
            )
            if (named and reads) or set_test:
                found.append((node.lineno, ast.unparse(node)))
        elif isinstance(node, ast.Call):
            func, args = node.func, node.args
            getter = isinstance(func, ast.Attribute) and func.attr == "get" and len(args) == 2
            attr = isinstance(func, ast.Name) and func.id == "getattr" and len(args) == 3
            key = args[1] if attr else args[0] if getter else None
            if isinstance(key, ast.Constant) and key.value == "family":
                found.append((node.lineno, ast.unparse(node)))
    return sorted(found)


def test_the_scan_finds_each_spelling_and_spares_layer_types():
    source = "\n".join(
        [
            'a = model.family == "tdnnf"',
            'b = cfg.get("family") in ("tdnn_lstm",)',
            'c = cfg.get("family", "tdnn")',
            'd = getattr(model, "family", "tdnn")',
            "e = family in RECURRENT_FAMILIES",
            'f = "tdnn" != family',
            'g = layer["type"] == "tdnn"',
            'h = kind == "tdnn"',
            "i = family_of(cfg).chunk_egs",
            'j = cfg.get("family")',
        ]
    )
    assert [line for line, _ in family_comparisons(source)] == [1, 2, 3, 4, 5, 6]


def test_no_family_comparison_outside_the_table():
    assert TABLE.is_file()
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path == TABLE:
            continue
        for line, text in family_comparisons(path.read_text()):
            found.append(f"{path.relative_to(PACKAGE.parent)}:{line}: {text}")
    if found:
        pytest.fail(
            "model families compared by name outside paravg/nnet/families.py (read the "
            "family's entry instead: family_of(model_cfg).<property>):\n" + "\n".join(found)
        )


def test_the_schema_offers_exactly_the_table_s_families():
    schema = yaml.safe_load(SCHEMA_PATH.read_text())
    assert schema["$defs"]["model"]["properties"]["family"]["enum"] == list(FAMILIES)
    assert DEFAULT_FAMILY in FAMILIES


@pytest.mark.parametrize("name", list(FAMILIES))
def test_each_entry_resolves_to_its_model_and_nnet3_builder(name):
    family = FAMILIES[name]
    cls = family.model_class()
    assert issubclass(cls, AcousticModel) and cls.family == name
    assert callable(family.nnet3_builder())
    assert family.egs in ("frame", "chunk")
    if family.section_defaults:
        assert family.section  # a section to fill with the schema's defaults


def test_lookups_and_properties():
    assert family_of({}) is FAMILIES[DEFAULT_FAMILY]  # a file written before TDNN-F
    assert family_of({"family": "tdnn_lstm"}).chunk_egs
    assert not family_of({"family": "tdnnf"}).chunk_egs
    assert known_family({"family": "gru"}) is None and known_family({"family": [1]}) is None
    with pytest.raises(ConfigError, match=r"'gru' is not one of \['tdnn', 'tdnn_lstm', 'tdnnf'\]"):
        get_family("gru")
    assert families_with(egs="chunk") == ["tdnn_lstm"]
    assert families_with(dropout=True) == ["tdnnf"]
    assert families_with(l2_regularize=False) == ["tdnn"]
    assert trainer_keys_of_others(FAMILIES["tdnn_lstm"]) == ()
    assert "shrink_value" in trainer_keys_of_others(FAMILIES["tdnn"])


def test_job_params_of_chunk_training_are_train_rnn_py_s_defaults_or_the_config_s():
    lstm, tdnn = FAMILIES["tdnn_lstm"], FAMILIES["tdnn"]
    assert tdnn.job_params({"num_chunk_per_minibatch": "64"}) == {}
    assert lstm.job_params({}) == {
        "minibatch_size": "100",
        "chunk_training": True,
        "deriv_truncate_margin": 8,
        "momentum": 0.5,
    }
    given = lstm.job_params({"num_chunk_per_minibatch": "64,32", "deriv_truncate_margin": 10})
    assert given["minibatch_size"] == "64,32" and given["deriv_truncate_margin"] == 10


def test_a_dropout_schedule_is_refused_for_a_family_without_dropout():
    """tdnn and tdnn_lstm have no dropout components: the schedule is refused when the
    config is read (not by the first job whose proportion is above 0)."""
    from tests.unit.test_chunk_config import CHUNK_EGS, LSTM, config

    schedule = {"dropout_schedule": "0,0@0.20,0.5@0.50,0"}
    lstm = {**LSTM, "trainer": {**LSTM["trainer"], **schedule}}
    for name, overrides in (
        ("tdnn", {"experiments": {"x": {"trainer": schedule}}}),
        ("tdnn_lstm", {"egs": CHUNK_EGS, "experiments": {"x": lstm}}),
    ):
        with pytest.raises(
            ConfigError, match=rf"family {name} has no dropout: use model.family tdnnf"
        ):
            config(overrides)
    tdnnf = {"model": {"family": "tdnnf"}, "trainer": schedule}
    assert config({"experiments": {"x": tdnnf}})["experiments"]["x"]["trainer"] == schedule
