"""Cross-key checks of the graph/decode config sections name the key."""

import copy

import pytest
import yaml

from paravg.config import validate_config
from paravg.errors import ConfigError
from paravg.graph.settings import check_recognition_config, decoding_enabled

from .conftest import REPO_CONFIG


def config(**graph):
    cfg = copy.deepcopy(yaml.safe_load(REPO_CONFIG.read_text()))
    cfg["graph"].update(graph)
    return validate_config(cfg)


def test_default_config_passes():
    """The shipped config is a demo-graph run that decodes: the check accepts it as it is
    (returns nothing, changes nothing), and so it does every valid edge of each cross-key
    rule (a one-value LMWT range, a tune set among the eval sets, a complete lang/hclg)."""
    cfg = config()
    assert cfg["graph"]["source"] == "demo"
    assert (cfg["decode"]["lmwt_min"], cfg["decode"]["lmwt_max"]) == (7, 17)
    # tuned on the demo's dev set, reported on its test set
    assert cfg["decode"]["tune_set"] == "dev" and cfg["eval_sets"] == ["dev", "test"]
    before = copy.deepcopy(cfg)
    assert check_recognition_config(cfg) is None
    assert cfg == before
    assert decoding_enabled(cfg) == (True, None)
    edges = [
        {"decode": {"lmwt_min": 10, "lmwt_max": 10}},
        {"decode": {"tune_set": "test"}},
        {"decode": {"tune_set": None}},
        {"graph": {"source": "lang", "lang_dir": "l", "lm": "G.fst", "final_mdl": "m"}},
        {"graph": {"source": "hclg", "hclg_dir": "d", "final_mdl": "m"}},
    ]
    for edge in edges:
        valid = copy.deepcopy(before)
        for section, values in edge.items():
            valid[section].update(values)
        assert check_recognition_config(valid) is None, edge


@pytest.mark.parametrize(
    ("graph", "message"),
    [
        ({"source": "lang"}, "graph.lang_dir, graph.lm, graph.final_mdl"),
        ({"source": "hclg", "hclg_dir": "d"}, "graph.final_mdl"),
    ],
)
def test_a_source_names_the_keys_it_needs(graph, message):
    with pytest.raises(ConfigError, match=message):
        check_recognition_config(config(**graph))


def test_unknown_graph_key_is_rejected_by_the_schema():
    cfg = copy.deepcopy(yaml.safe_load(REPO_CONFIG.read_text()))
    cfg["decode"]["beams"] = 3
    with pytest.raises(ConfigError, match="beams"):
        validate_config(cfg)


def test_lmwt_range_and_tune_set():
    cfg = config()
    cfg["decode"].update(lmwt_min=12, lmwt_max=10)
    with pytest.raises(ConfigError, match="lmwt_min"):
        check_recognition_config(cfg)
    cfg["decode"].update(lmwt_min=7, lmwt_max=17, per_lmwt_min=11)
    with pytest.raises(ConfigError, match=r"per_lmwt_min \(11\) must not exceed"):
        check_recognition_config(cfg)
    cfg["decode"].update(per_lmwt_min=1, tune_set="eval2000")
    with pytest.raises(ConfigError, match="tune_set 'eval2000' is not in eval_sets"):
        check_recognition_config(cfg)


def test_own_data_with_the_demo_graph_trains_without_decoding_and_says_so():
    """Own data with its own alignments (data.targets: data): the demo graph is not of
    its model, so the run trains and evaluates only (with data.targets: gmm the GMM
    path's graph is of the user's text and decodes: test_dag_gmm)."""
    cfg = config()
    cfg["data"]["targets"] = "data"
    assert decoding_enabled(cfg) == (True, None)
    cfg["data"]["sets"] = {"train": "/d/train", "test": "/d/test"}
    cfg["eval_sets"] = ["test"]  # tune_set dev names no eval set, but nothing is decoded
    check_recognition_config(cfg)  # no error: the run trains and evaluates
    on, why = decoding_enabled(cfg)
    assert not on and "graph.source: lang" in why
    cfg["decode"]["enabled"] = False
    assert decoding_enabled(cfg) == (False, None)


def test_a_set_added_beside_the_demo_corpus_is_decoded_on_the_demo_graph():
    """Issue 34, item 5: data.sets without the training set adds sets to a demo run, whose
    model and graph are the demo's: the run decodes them (OOVs count as errors)."""
    cfg = config()
    cfg["data"]["sets"] = {"t2": "/d/t2"}
    cfg["eval_sets"] = ["dev", "test", "t2"]
    assert decoding_enabled(cfg) == (True, None)


def test_min_active_above_max_active_is_refused_at_start_up():
    """B4: Kaldi's LatticeFasterDecoderConfig::Check asserts min_active <= max_active (a
    raw C++ assertion after training), and vosk refuses such a model.conf."""
    cfg = config()
    cfg["decode"].update(min_active=7001, max_active=7000)
    with pytest.raises(ConfigError, match=r"decode.min_active \(7001\) must not exceed"):
        check_recognition_config(cfg)
    cfg["decode"].update(min_active=7000)  # the edge is valid
    assert check_recognition_config(cfg) is None
    cfg["export"].update(min_active=300, max_active=250)  # the exported model.conf's too
    with pytest.raises(ConfigError, match=r"export.min_active \(300\) must not exceed"):
        check_recognition_config(cfg)
    cfg["export"].update(min_active=200)
    raw = copy.deepcopy(yaml.safe_load(REPO_CONFIG.read_text()))
    raw["decode"]["max_active"] = 1  # Kaldi: max_active > 1
    with pytest.raises(ConfigError, match="max_active"):
        validate_config(raw)


def test_a_tune_set_without_transcripts_is_refused_at_start_up(tmp_path):
    """B5: scoring would silently fall back to each set's own best while recording
    ``tuned_on``; the set that chooses LMWT and WIP must have a text file."""
    for name in ("train", "dev", "test"):
        (tmp_path / name).mkdir()
    (tmp_path / "test" / "text").write_text("u1 A\n")
    cfg = config()
    cfg["data"]["sets"] = {n: str(tmp_path / n) for n in ("train", "dev", "test")}
    cfg["eval_sets"] = ["dev", "test"]
    cfg["decode"]["tune_set"] = "dev"
    with pytest.raises(ConfigError, match=rf"tune_set 'dev': {tmp_path}/dev/text does not exist"):
        check_recognition_config(cfg)
    cfg["decode"]["tune_set"] = "test"
    assert check_recognition_config(cfg) is None
