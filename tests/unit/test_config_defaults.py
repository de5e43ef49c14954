"""The config is validated once, at the boundary: schema defaults are the code's defaults,
experiment overrides are strict, unknown keys are errors wherever a section is read."""

import dataclasses
import re

import pytest
import yaml

from paravg.config import REPO_CONFIG, deep_merge, load_schema, validate_config
from paravg.egs.plan import EgsOptions
from paravg.errors import ConfigError
from paravg.features import MfccOptions
from paravg.optim.ngsgd import NgsgdOptions

SCHEMA = load_schema()


def schema_defaults(section: dict) -> dict:
    props = section.get("properties", {})
    return {k: v["default"] for k, v in props.items() if isinstance(v, dict) and "default" in v}


@pytest.mark.parametrize(
    "cls, section",
    [
        (EgsOptions, SCHEMA["properties"]["egs"]),
        (NgsgdOptions, SCHEMA["$defs"]["trainer"]["properties"]["ngsgd"]),
        (MfccOptions, SCHEMA["properties"]["features"]),
    ],
)
def test_schema_defaults_are_the_dataclass_defaults(cls, section):
    defaults = schema_defaults(section)
    for f in dataclasses.fields(cls):
        if f.name in defaults:
            assert defaults[f.name] == f.default, f"{cls.__name__}.{f.name}"


def base():
    return yaml.safe_load(REPO_CONFIG.read_text())


def test_unknown_keys_of_an_experiment_are_errors():
    cfg = deep_merge(base(), {"experiments": {"x": {"trainer": {"keep_job_models": True}}}})
    with pytest.raises(ConfigError, match="keep_job_models"):
        validate_config(cfg)


def test_ivectors_cannot_be_turned_on_by_an_experiment_when_off_globally():
    cfg = deep_merge(base(), {"ivector": {"enabled": False},
                              "experiments": {"x": {"ivector": {"enabled": True}}}})  # fmt: skip
    with pytest.raises(ConfigError, match=r"ivector\.enabled is false"):
        validate_config(cfg)


def test_egs_options_refuse_unknown_keys():
    with pytest.raises(ConfigError, match="samples_per_itr"):
        EgsOptions.from_config({"samples_per_itr": 3}, 4, 4)


def test_a_yaml11_string_number_gets_a_hint_that_parses():
    """PyYAML reads ``5e-05`` as a string: the error says how to write it as a number."""
    override = yaml.safe_load("experiments: {x: {trainer: {initial_effective_lrate: 5e-05}}}")
    with pytest.raises(ConfigError, match="initial_effective_lrate") as err:
        validate_config(deep_merge(base(), override))
    hint = re.search(r"write (\S+) or (\S+) ", str(err.value))
    assert hint, str(err.value)
    assert [yaml.safe_load(v) for v in hint.groups()] == [5e-05, 5e-05]


@pytest.mark.parametrize(
    "path", sorted((REPO_CONFIG.parent / "experiments").glob("*.yaml")), ids=lambda p: p.name
)
def test_every_shipped_experiment_config_validates(path, tmp_path):
    """The experiment commands of docs/experiments.md and docs/sync-methods.md pass these
    files to snakemake after config.yaml: a key the schema does not know, or a combination
    the workflow's start-up checks refuse (the DAG's, e.g. chain experiments on GMM
    targets), must fail here, not when a user runs the documented command."""
    from paravg.dag import Dag

    with open(REPO_CONFIG) as f:
        base = yaml.safe_load(f)
    with open(path) as f:
        config = validate_config(deep_merge(base, yaml.safe_load(f)))
    assert config["experiments"], f"{path} defines no experiment"
    Dag(validate_config(deep_merge(config, {"results": str(tmp_path / "results")})))


def test_the_demo_has_a_dev_set_only_when_asked():
    """eval_sets may name the demo's dev set only while demo.dev_fraction > 0."""
    import yaml

    from paravg.config import REPO_CONFIG, deep_merge, validate_config
    from paravg.errors import ConfigError

    base = yaml.safe_load(REPO_CONFIG.read_text())
    assert validate_config(deep_merge(base, {}))["eval_sets"] == ["dev", "test"]
    with pytest.raises(ConfigError, match=r"eval_sets names \['dev'\], but the demo corpus"):
        validate_config(deep_merge(base, {"demo": {"dev_fraction": 0}}))
    no_dev = {"demo": {"dev_fraction": 0}, "eval_sets": ["test"], "decode": {"tune_set": None}}
    assert validate_config(deep_merge(base, no_dev))["eval_sets"] == ["test"]


def test_data_sets_without_the_training_set_add_sets_beside_the_demo_corpus():
    """Issue 34, item 5: the demo's sets stay while data.sets does not name the training
    set, so a set added to a demo run is only that set (the demo's keep their inputs)."""
    import yaml

    from paravg.config import (
        REPO_CONFIG,
        data_set_sources,
        deep_merge,
        demo_beside_own_sets,
        uses_demo,
        validate_config,
    )
    from paravg.errors import ConfigError

    base = yaml.safe_load(REPO_CONFIG.read_text())
    added = validate_config(
        deep_merge(base, {"data": {"sets": {"t2": "/d/t2"}}, "eval_sets": ["dev", "test", "t2"]})
    )
    assert uses_demo(added)
    assert data_set_sources(added, lambda s: f"demo/{s}") == {
        "train": "demo/train", "test": "demo/test", "dev": "demo/dev", "t2": "/d/t2"
    }  # fmt: skip
    assert "training on the demo corpus, with data.sets ['t2']" in demo_beside_own_sets(added)
    own_test = deep_merge(added, {"data": {"sets": {"test": "/d/test"}}})
    assert data_set_sources(own_test, lambda s: f"demo/{s}")["test"] == "/d/test"
    demo_only = validate_config(deep_merge(base, {}))
    assert uses_demo(demo_only) and demo_beside_own_sets(demo_only) is None
    own = deep_merge(base, {"data": {"sets": {"train": "/d/train", "test": "/d/test"}}})
    own = validate_config(deep_merge(own, {"eval_sets": ["test"], "decode": {"tune_set": None}}))
    assert not uses_demo(own) and demo_beside_own_sets(own) is None
    assert data_set_sources(own, lambda s: f"demo/{s}") == {"train": "/d/train", "test": "/d/test"}
    with pytest.raises(ConfigError, match=r"eval_sets names \['t3'\].*or data.sets \['t2'\]"):
        validate_config(deep_merge(added, {"eval_sets": ["t3"]}))
    with pytest.raises(ConfigError, match=r"data\.train_set 'mine' is neither in data\.sets"):
        validate_config(deep_merge(added, {"data": {"train_set": "mine"}}))
