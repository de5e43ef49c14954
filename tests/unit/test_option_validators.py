"""One code-side validator per option group, holding the schema's defaults and bounds (issue
35, item 6): NG-SGD (paravg.optim.options.NgsgdOptions) and the search
(paravg.decode.options.SearchOptions). A bad value is refused naming the option and the
bound; the code and the schema accept exactly the same values; the NG-SGD bounds are
Kaldi's (natural-gradient-online.cc, OnlineNaturalGradient::InitDefault)."""

from __future__ import annotations

import dataclasses
import math

import pytest
import yaml

from paravg import schema
from paravg.config import REPO_CONFIG, deep_merge, validate_config
from paravg.decode.options import SearchOptions, check_search_options
from paravg.errors import ConfigError
from paravg.graph.settings import check_recognition_config
from paravg.optim.options import NgsgdOptions

GROUPS = {"trainer.ngsgd": NgsgdOptions, "decode": SearchOptions}


def base() -> dict:
    return yaml.safe_load(REPO_CONFIG.read_text())


def with_value(section: str, key: str, value) -> dict:
    override: dict = {key: value}
    for name in reversed(section.split(".")):
        override = {name: override}
    return deep_merge(base(), override)


@pytest.mark.parametrize("section, cls", GROUPS.items())
def test_defaults_are_the_schemas(section, cls):
    defaults = schema.defaults(section)
    built = dataclasses.asdict(cls())
    assert {k: built[k] for k in built if k in defaults} == {
        k: v for k, v in defaults.items() if k in built
    }
    assert set(built) - set(defaults) <= {"num_minibatches_history"}  # not a config key


@pytest.mark.parametrize(
    "cls, key, value, says",
    [
        (NgsgdOptions, "alpha", -1.0, "trainer.ngsgd.alpha = -1.0: expected a number >= 0"),
        (NgsgdOptions, "alpha", math.inf, "trainer.ngsgd.alpha = inf: expected a number >= 0"),
        (NgsgdOptions, "epsilon", 1.0e-3, "epsilon = 0.001: expected a number in (0, 1e-05]"),
        (NgsgdOptions, "epsilon", 0.0, "epsilon = 0.0: expected a number in (0, 1e-05]"),
        (NgsgdOptions, "delta", 0.05, "delta = 0.05: expected a number in (0, 0.01]"),
        (NgsgdOptions, "delta", math.nan, "delta = nan: expected a number in (0, 0.01]"),
        (NgsgdOptions, "num_samples_history", 2.0e6, "expected a number in (0, 1e+06]"),
        (NgsgdOptions, "update_period", 0, "update_period = 0: expected an integer >= 1"),
        (NgsgdOptions, "rank_in", 2.5, "rank_in = 2.5: expected an integer >= 1"),
        (NgsgdOptions, "rank_out", True, "rank_out = True: expected an integer >= 1"),
        (NgsgdOptions, "enabled", "yes", "enabled = 'yes': expected true or false"),
        (NgsgdOptions, "num_minibatches_history", 1.0, "expected 0 (unused) or a number in (1,"),
        (SearchOptions, "beam", 0.0, "decode.beam = 0.0: expected a number > 0"),
        (SearchOptions, "lattice_beam", -1, "decode.lattice_beam = -1: expected a number > 0"),
        (SearchOptions, "max_active", 1, "decode.max_active = 1: expected an integer >= 2"),
        (SearchOptions, "min_active", -1, "decode.min_active = -1: expected an integer >= 0"),
        (SearchOptions, "acoustic_scale", 0, "acoustic_scale = 0: expected a number > 0"),
        (SearchOptions, "min_active", 8000, "decode.min_active (8000) must not exceed"),
    ],
)
def test_a_bad_value_is_refused_naming_the_option_and_the_bound(cls, key, value, says):
    with pytest.raises(ConfigError) as err:
        cls(**{key: value})
    assert says in str(err.value)


def test_the_ngsgd_bounds_are_kaldis():
    """InitDefault: alpha >= 0, 0 < epsilon <= 1e-5, 0 < delta <= 1e-2,
    0 < num_samples_history <= 1e6 (the schema once said alpha > 0, the code alpha >= 0)."""
    NgsgdOptions(alpha=0.0, epsilon=1.0e-5, delta=1.0e-2, num_samples_history=1.0e6)
    validate_config(with_value("trainer.ngsgd", "alpha", 0.0))
    props = schema.section("trainer.ngsgd")["properties"]
    assert props["alpha"]["minimum"] == 0 and "exclusiveMinimum" not in props["alpha"]
    assert (props["epsilon"]["exclusiveMinimum"], props["epsilon"]["maximum"]) == (0, 1.0e-5)
    assert (props["delta"]["exclusiveMinimum"], props["delta"]["maximum"]) == (0, 1.0e-2)


def edge_values(prop: dict) -> list:
    """Values at and beside each numeric bound of a key."""
    step = 1 if prop.get("type") == "integer" else None
    out = []
    for name in ("minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"):
        if name in prop:
            b = prop[name]
            near = [b - step, b + step] if step else [b * (1 - 1e-9) - 1e-300, b * (1 + 1e-9)]
            out += [b, *near]
    return out


@pytest.mark.parametrize(
    "section, key",
    [
        (section, key)
        for section, cls in GROUPS.items()
        for key in (f.name for f in dataclasses.fields(cls))
        if key in schema.section(section)["properties"]
    ],
)
def test_the_code_and_the_schema_accept_the_same_values(section, key):
    prop = schema.section(section)["properties"][key]
    cls = GROUPS[section]
    values = edge_values(prop) or [True, False, 0, "x"]
    for value in values:
        try:
            cls(**{key: value})
            code_ok = True
        except ConfigError:
            code_ok = False
        try:
            config = validate_config(with_value(section, key, value))
            if section == "decode":
                check_recognition_config(config)
            schema_ok = True
        except ConfigError:
            schema_ok = False
        assert code_ok == schema_ok, f"{section}.{key} = {value!r}: code {code_ok}"


def test_the_ngsgd_validator_runs_at_start_up_for_every_experiment():
    """What jsonschema lets through (an infinite alpha) the code refuses at start-up,
    naming the experiment's key, not in the first training job an hour later."""
    cfg = deep_merge(base(), {"experiments": {"x": {"trainer": {"ngsgd": {"alpha": math.inf}}}}})
    with pytest.raises(ConfigError, match=r"experiments\.x\.trainer\.ngsgd\.alpha = inf"):
        validate_config(cfg)


def test_from_config_names_unknown_keys_and_the_config_path():
    with pytest.raises(ConfigError, match=r"trainer\.ngsgd: unknown option\(s\) \['rnak_in'\]"):
        NgsgdOptions.from_config({"rnak_in": 3})
    with pytest.raises(ConfigError, match=r"experiments\.e\.trainer\.ngsgd\.delta = 0\.5"):
        NgsgdOptions.from_config({"delta": 0.5}, "experiments.e.trainer.ngsgd")


def test_the_export_sections_search_options_are_held_to_its_own_bounds():
    check_search_options({"beam": 10.0, "max_active": 2000, "min_active": 200}, "export")
    with pytest.raises(ConfigError, match=r"export\.lattice_beam = 0: expected a number > 0"):
        check_search_options({"lattice_beam": 0, "max_active": 2, "min_active": 0}, "export")
    with pytest.raises(ConfigError, match=r"export\.min_active \(300\) must not exceed"):
        check_search_options({"max_active": 200, "min_active": 300}, "export")


def test_the_determinisation_beam_is_recorded_only_when_it_is_on():
    from paravg.decode.options import SEARCH_KEYS, recorded_options

    off = recorded_options(vars(SearchOptions(determinize_lattice=False, determinize_beam=5.0)))
    assert list(off) == ["acoustic_scale", "beam", "lattice_beam", "max_active", "min_active",
                         "determinize_lattice"]  # fmt: skip
    assert off["determinize_lattice"] is False
    # what rule decode_split's script builds from its params: off stays off
    assert SearchOptions(**off).determinize_lattice is False
    on = recorded_options(vars(SearchOptions(determinize_lattice=True, determinize_beam=5.0)))
    assert list(on) == list(SEARCH_KEYS) and on["determinize_beam"] == 5.0
    assert SearchOptions(lattice_beam=6.0, determinize_beam=None).determinize_at == 6.0
    assert SearchOptions(lattice_beam=6.0, determinize_beam=4.0).determinize_at == 4.0
    with pytest.raises(ConfigError, match="determinize_beam"):
        SearchOptions(determinize_beam=0.0)
