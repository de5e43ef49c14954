"""lhotse manifests through the real Snakefile (issue 41, item 1): the tiny demo's test set
exported with ``paravg.lhotse`` (lhotse's own classes) and named in ``data.sets`` as a
manifest dir is converted by rule lhotse_to_kaldi, prepared, and gives the same features
and targets as the Kaldi dir it came from; a bad manifest line stops the run naming it."""

from __future__ import annotations

import gzip
import json

import numpy as np
import pytest

from paravg.kaldi_io import iter_int_vectors, load_scp
from paravg.lhotse import export_manifests

from .conftest import WARM, check_ok, run_snakemake

pytestmark = pytest.mark.pipeline


def test_a_manifest_set_gives_the_features_and_targets_of_its_kaldi_dir(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    check_ok(run_snakemake(ws, "--cores", "2", "results/data/test/report.json"), "test set")
    manifests = ws / "user" / "mine"
    export_manifests(ws / "results/data/test", manifests)
    overlay = {"data": {"sets": {"mine": str(manifests)}}, "eval_sets": ["test", "mine"]}
    targets = ["results/feats/mine/feats.scp", "results/feats/test/feats.scp"]
    proc = run_snakemake(ws, "--cores", "2", *WARM, *targets, overlay=overlay)
    check_ok(proc, "features of the manifest set")
    assert proc.stdout.count("rule lhotse_to_kaldi:") == 1

    r = ws / "results"
    mine, test = load_scp(r / "feats/mine/feats.scp"), load_scp(r / "feats/test/feats.scp")
    assert sorted(mine) == sorted(test)
    for utt in test:
        assert np.array_equal(np.asarray(mine[utt]), np.asarray(test[utt])), utt

    def pdf_ids(s):
        return {k: v.tolist() for k, v, _ in iter_int_vectors(r / f"data/{s}/targets.scp")}

    assert pdf_ids("mine") == pdf_ids("test")
    assert (r / "data/mine/text").read_text() == (r / "data/test/text").read_text()

    # a supervision without a speaker: the run stops before any job of that set's features
    sups = manifests / "supervisions.jsonl"
    with gzip.open(manifests / "supervisions.jsonl.gz", "rt") as f:
        rows = [json.loads(line) for line in f.read().splitlines()]
    (manifests / "supervisions.jsonl.gz").unlink()
    rows[2].pop("speaker")
    sups.write_text("".join(json.dumps(row) + "\n" for row in rows))
    bad = run_snakemake(ws, "--cores", "2", *WARM, *targets, overlay=overlay)
    assert bad.returncode != 0
    assert f"{sups}:3: supervision {rows[2]['id']!r}: field 'speaker' missing" in bad.stdout
