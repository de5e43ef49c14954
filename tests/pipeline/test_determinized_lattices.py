"""``decode.determinize_lattice: true`` in a real run (issue 40): the decode jobs rerun and
write determinised CompactLattices for the word graph (transition-id strings, one arc per
word from a state), the phone graph's stay raw, scoring reads them, and every setting's
hypotheses are the raw lattices' (the tiny config's one word setting is LMWT 10, the
determinisation's own scale, so its best path is always within the beam). Turning it
off again decodes anew (the options are the decode's params)."""

from __future__ import annotations

import copy
import gzip
import json
from collections import Counter

import pytest

from .conftest import TRAINED_OVERLAY, check_ok, run_snakemake

pytestmark = pytest.mark.pipeline


def test_determinised_lattices_score_as_the_raw_ones(clone_trained):
    ws = clone_trained("determinized")
    decode = ws / "results" / "exp" / "default" / "decode" / "test"
    raw_hyps = json.loads((decode / "hyps.json").read_text())
    raw_scores = json.loads((decode / "scores.json").read_text())
    overlay = copy.deepcopy(TRAINED_OVERLAY)
    overlay["decode"] = {"determinize_lattice": True}
    proc = run_snakemake(ws, "--cores", "2", overlay=overlay)
    check_ok(proc, "the run with determinised lattices")
    split = json.loads((decode / "split0.json").read_text())
    assert split["options"]["determinize_lattice"] is True
    assert split["written_arcs_per_frame"]["words"] < split["lattice_links_per_frame"]["words"]
    assert split["written_arcs_per_frame"]["phones"] == split["lattice_links_per_frame"]["phones"]
    for j in (0, 1):
        with gzip.open(decode / f"lat.{j}.gz", "rt") as fh:
            entries = fh.read().split("\n\n")
        arcs = Counter()
        for entry in filter(str.strip, entries):
            key, *lines = entry.strip("\n").splitlines()
            for line in lines:
                fields = line.split("\t")
                if len(fields) == 4:
                    assert fields[2] != "0", f"{key}: an epsilon arc"
                    arcs[(key, fields[0], fields[2])] += 1
        assert arcs and max(arcs.values()) == 1  # deterministic on words
    hyps = json.loads((decode / "hyps.json").read_text())
    assert hyps == raw_hyps
    scores = json.loads((decode / "scores.json").read_text())
    assert scores["wer"] == raw_scores["wer"] and scores["per"] == raw_scores["per"]
    assert scores["timing"]["determinize_seconds"] >= 0
    overlay["decode"] = {"determinize_lattice": False}
    proc = run_snakemake(ws, "--dry-run", "--cores", "2", overlay=overlay)
    check_ok(proc, "dry run with it off again")
    assert "decode_split" in proc.stdout  # the raw lattices are decoded again
