"""The results table refuses scores of another decode config (issue 23, B1)."""

from __future__ import annotations

import json

import pytest

from paravg.errors import ConfigError
from paravg.report import write_results_table

OPTIONS = {"acoustic_scale": 0.1, "beam": 14.0, "lattice_beam": 8.0}


def make_run(root, beams, tuned_on=None, phones=True):
    exp = root / "exp" / "default"
    (exp / "eval").mkdir(parents=True)
    (exp / "final.json").write_text(json.dumps({"combined_from": 3}))
    for s, beam in beams.items():
        (exp / "eval" / f"{s}.json").write_text(
            json.dumps({"frame_accuracy": 0.5, "cross_entropy": 1.5, "frames": 100})
        )
        (exp / "decode" / s).mkdir(parents=True)
        scores = {"wer": 40.0, "per": 50.0, "wer_setting": "10_0", "per_setting": "7_0",
                  "wer_own": 38.5, "wer_own_setting": "12_0.5",
                  "per_own": 50.0, "per_own_setting": "7_0",
                  "decode_options": {**OPTIONS, "beam": beam},
                  "tuned_on": (tuned_on or {}).get(s)}  # fmt: skip
        if not phones:  # no phone graph: scoring writes no PER keys
            scores = {k: v for k, v in scores.items() if not k.startswith("per")}
        (exp / "decode" / s / "scores.json").write_text(json.dumps(scores))
    return root / "exp"


def table(root, exp_root, sets, tune_set=None):
    decode = {"enabled": True, "options": OPTIONS, "tune_set": tune_set}
    return write_results_table(exp_root, ["default"], sets, root / "r.md", root / "r.tsv", decode)


def test_one_config_gives_the_table(tmp_path):
    rows = table(tmp_path, make_run(tmp_path, {"test": 14.0, "dev": 14.0}), ["test", "dev"])
    assert [r["wer"] for r in rows] == [40.0, 40.0] and (tmp_path / "r.md").is_file()


def test_a_set_decoded_with_the_old_beam_stops_the_table(tmp_path):
    exp_root = make_run(tmp_path, {"test": 14.0, "dev": 15.0})
    with pytest.raises(
        ConfigError, match=r"dev/scores\.json: decoded with beam 15\.0 \(config: 14\.0\)"
    ):
        table(tmp_path, exp_root, ["test", "dev"])
    assert not (tmp_path / "r.md").exists()


def test_scores_tuned_on_another_set_than_the_config_says_stop_the_table(tmp_path):
    exp_root = make_run(tmp_path, {"test": 14.0, "dev": 14.0})  # tuned on nothing
    with pytest.raises(ConfigError, match=r"test/scores\.json: tuned on None, config: decode"):
        table(tmp_path, exp_root, ["test", "dev"], tune_set="dev")
    tuned = {"test": str(tmp_path / "b" / "exp" / "default" / "decode" / "dev" / "scores.json")}
    exp_root = make_run(tmp_path / "b", {"test": 14.0, "dev": 14.0}, tuned)
    assert len(table(tmp_path / "b", exp_root, ["test", "dev"], tune_set="dev")) == 2


def test_the_table_shows_the_tuned_rate_and_each_sets_own_best_beside_it(tmp_path):
    """Issue 22: the tuned WER (what a paper may report) and score.sh's best on the set
    itself (optimistic) side by side, labelled."""
    table(tmp_path, make_run(tmp_path, {"test": 14.0}), ["test"])
    header, _, row = (tmp_path / "r.md").read_text().splitlines()
    assert "| WER % (LMWT/WIP) | WER % own best | PER % (LMWT/WIP) | PER % own best |" in header
    assert row.endswith("| 40.00 (10/0) | 38.50 (12/0.5) | 50.00 (7/0) | 50.00 (7/0) |")
    tsv = (tmp_path / "r.tsv").read_text().splitlines()
    assert "wer_own" in tsv[0].split("\t") and "38.5" in tsv[1].split("\t")


def test_a_run_without_a_phone_graph_says_so_in_the_per_columns(tmp_path):
    """data.targets: gmm decodes words only: the PER cells say why they are empty."""
    table(tmp_path, make_run(tmp_path, {"test": 14.0}, phones=False), ["test"])
    row = (tmp_path / "r.md").read_text().splitlines()[2]
    assert row.endswith(
        "| 40.00 (10/0) | 38.50 (12/0.5) | – (no phone graph) | – (no phone graph) |"
    )
