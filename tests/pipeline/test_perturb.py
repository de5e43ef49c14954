"""data.perturb through the real Snakefile (issue 41, item 3): rule perturb_data makes
Kaldi's 3-way speed + volume copies of the tiny demo's training set before its features,
one resumable job; the features' targets check passes with no frame of difference; the egs
hold out every copy of a held-out utterance together (utt2uniq).

The i-vectors are off here to stay near a minute (the DAG test in tests/unit/test_perturb.py
shows that the i-vector models train on the copies' features)."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import pytest

from .conftest import WARM, check_ok, run_snakemake

pytestmark = pytest.mark.pipeline

OVERLAY = {
    "data": {"perturb": {"speed": [0.9, 1.0, 1.1], "volume": True}},
    "ivector": {"enabled": False},
}
PREFIXES = ("sp0.9-", "sp1.0-", "sp1.1-")


def rows(path: Path) -> dict[str, str]:
    return dict(line.split(maxsplit=1) for line in path.read_text().splitlines())


def test_perturbed_copies_feed_the_features_and_the_egs_held_out_together(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    proc = run_snakemake(ws, "--cores", "2", *WARM, "results/egs/info.json", overlay=OVERLAY)
    check_ok(proc, "the tiny pipeline up to the egs plan with data.perturb")
    assert proc.stdout.count("rule perturb_data:") == 1

    r = ws / "results"
    source, copies = rows(r / "data/train/utt2spk"), rows(r / "data/train_sp/utt2spk")
    assert sorted(copies) == sorted(p + u for p in PREFIXES for u in source)
    report = json.loads((r / "data/train_sp/report.json").read_text())
    assert report["perturb"]["speed"] == [0.9, 1.0, 1.1]
    # the copies last 0.9⁻¹ + 1 + 1.1⁻¹ = 3.02 times the source
    assert report["duration_s"] / report["source_duration_s"] == pytest.approx(3.02, abs=0.01)
    feats = json.loads((r / "feats/train_sp/report.json").read_text())
    assert feats["num_utterances"] == len(copies)
    assert feats["max_target_length_difference"] == 0  # targets have the copies' frames
    assert not (r / "feats/train").exists()  # the source's own features are never made

    uniq = rows(r / "data/train_sp/utt2uniq")
    held_out = {line.split()[0] for line in (r / "egs/lists/valid").read_text().splitlines()}
    trained_on = {
        line.split()[0]
        for job in (r / "egs/lists").glob("job.*")
        for line in job.read_text().splitlines()
    }
    copies_of = defaultdict(set)
    for utt, src in uniq.items():
        copies_of[src].add(utt)
    assert held_out
    for utt in held_out:  # every copy of a held-out utterance is held out, none trained on
        assert copies_of[uniq[utt]] <= held_out
        assert not copies_of[uniq[utt]] & trained_on

    again = run_snakemake(ws, "--cores", "2", *WARM, "results/egs/info.json", overlay=OVERLAY)
    check_ok(again, "the same command again")
    assert "rule perturb_data:" not in again.stdout  # resumable: one node, done once
