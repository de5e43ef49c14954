"""Determinised lattices, the default (``decode.determinize_lattice: true``, issue 40), in
a real run: the decode jobs write determinised CompactLattices for the word graph
(transition-id strings, one arc per word from a state), the phone graph's stay raw,
scoring reads them and the CTM is word-aligned with MBR confidences. Turned off, the
decode jobs rerun and write raw lattices, and every setting's hypotheses are the same
(the tiny config's one word setting is LMWT 10, the determinisation's own scale, so its
best path is always within the beam); with ``ctm_decode_mbr: false`` the CTM's words are
the best path's."""

from __future__ import annotations

import copy
import gzip
import json
from collections import Counter

import pytest

from .conftest import TRAINED_OVERLAY, check_ok, run_snakemake

pytestmark = pytest.mark.pipeline


def _arcs_per_state_and_word(path) -> Counter:
    """(utterance, state, word) -> arcs, over the arc lines of a lattice archive."""
    with gzip.open(path, "rt") as fh:
        entries = fh.read().split("\n\n")
    arcs = Counter()
    for entry in filter(str.strip, entries):
        key, *lines = entry.strip("\n").splitlines()
        for line in lines:
            fields = line.split("\t")
            if len(fields) == 4:
                assert fields[2] != "0", f"{key}: an epsilon arc"
                arcs[(key, fields[0], fields[2])] += 1
    return arcs


def test_determinised_lattices_by_default_score_as_the_raw_ones(clone_trained):
    ws = clone_trained("determinized")
    decode = ws / "results" / "exp" / "default" / "decode" / "test"
    split = json.loads((decode / "split0.json").read_text())
    assert split["options"]["determinize_lattice"] is True
    assert split["written_arcs_per_frame"]["words"] < split["lattice_links_per_frame"]["words"]
    assert split["written_arcs_per_frame"]["phones"] == split["lattice_links_per_frame"]["phones"]
    for j in (0, 1):
        arcs = _arcs_per_state_and_word(decode / f"lat.{j}.gz")
        assert arcs and max(arcs.values()) == 1  # deterministic on words
    det_hyps = json.loads((decode / "hyps.json").read_text())
    det_scores = json.loads((decode / "scores.json").read_text())
    assert det_scores["timing"]["determinize_seconds"] >= 0
    # the CTM: word-aligned, the MBR words (Kaldi's default)
    assert det_scores["ctm"]["not_word_aligned"] == 0 and det_scores["ctm"]["decode_mbr"] is True

    overlay = copy.deepcopy(TRAINED_OVERLAY)
    overlay["decode"] = {"ctm_decode_mbr": False}
    proc = run_snakemake(ws, "--cores", "2", overlay=overlay)
    check_ok(proc, "the CTM with the best path's words")
    assert "decode_split" not in proc.stdout  # scoring only
    scores = json.loads((decode / "scores.json").read_text())
    assert scores["ctm"]["decode_mbr"] is False and scores["ctm"]["not_word_aligned"] == 0
    setting = scores["ctm"]["setting"]
    ctm = [line.split() for line in (decode / "ctm").read_text().splitlines()]
    hyps = det_hyps["words"][setting]
    assert [f[4] for f in ctm] == [w for u in sorted(hyps) for w in hyps[u].split()]

    overlay["decode"] = {"determinize_lattice": False}
    proc = run_snakemake(ws, "--cores", "2", overlay=overlay)
    check_ok(proc, "the run with raw lattices")
    assert "decode_split" in proc.stdout  # the options are the decode's params
    split = json.loads((decode / "split0.json").read_text())
    assert split["options"]["determinize_lattice"] is False
    assert split["written_arcs_per_frame"]["words"] == split["lattice_links_per_frame"]["words"]
    assert json.loads((decode / "hyps.json").read_text()) == det_hyps
    scores = json.loads((decode / "scores.json").read_text())
    assert scores["wer"] == det_scores["wer"] and scores["per"] == det_scores["per"]
    assert scores["ctm"]["not_word_aligned"] == 0  # raw lattices are determinised for it
