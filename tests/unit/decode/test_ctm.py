"""The CTM's words, times and confidences (steps/get_ctm_conf.sh: lattice-prune,
lattice-align-words, lattice-to-ctm-conf), from a raw lattice whose posteriors are known."""

import math

import numpy as np
import pytest
from lattice_synth import TRANSITION_MDL, lattice_of_paths

from paravg.decode.ctm import ctm_conf_spans, ctm_lines
from paravg.decode.determinize import determinize_lattice_phone_pruned
from paravg.decode.lattice import Lattice
from paravg.graph.load import read_transition_model

BOUNDARY = {1: "singleton", 2: "singleton"}


@pytest.fixture
def trans(tmp_path):
    (tmp_path / "transition.mdl").write_text(TRANSITION_MDL)
    return read_transition_model(tmp_path / "transition.mdl")


# "A B" (A 3 frames, B 2) against "A" (5 frames), cost 2 against 2.1 at LMWT 1
TWO = [[(1, 3, 0.0, 1.0), (2, 2, 0.0, 1.0)], [(1, 5, 0.1, 2.0)]]
P_AB = 1.0 / (1.0 + math.exp(-0.1))  # exp(-2) / (exp(-2) + exp(-2.1))


def test_ctm_of_two_competing_paths_gives_mbr_times_and_confidences(trans):
    """A is certain, B's bin holds B (P_AB) and nothing (1 - P_AB). A's times average
    its two alignments, (0, 3) and (0, 5): (0, 3 P_AB + 5 (1 - P_AB)), which overlaps
    B's (3, 5); the two share [0, 5] in proportion to their durations."""
    spans, aligned = ctm_conf_spans(lattice_of_paths(TWO), 1.0, 0.0, trans, BOUNDARY)
    assert aligned
    assert [s.word for s in spans] == [1, 2]
    assert [s.confidence for s in spans] == pytest.approx([1.0, P_AB], rel=1e-9)
    a_end = 3 * P_AB + 5 * (1 - P_AB)
    mid = 5.0 * a_end / (a_end + 2.0)
    assert np.allclose([(s.start, s.end) for s in spans], [(0, mid), (mid, 5)], rtol=1e-9)
    lines = ctm_lines("utt", spans, {1: "A", 2: "B"})
    assert lines == [f"utt 1 0.00 {mid / 100:.2f} A 1.00", f"utt 1 {mid / 100:.2f} "
                     f"{(5 - mid) / 100:.2f} B {P_AB:.2f}"]  # fmt: skip


def test_the_word_insertion_penalty_of_the_setting_applies(trans):
    """With WIP 0.2, "A" (2.1 + 0.2) beats "A B" (2 + 0.4): B's bin is 0.475 B against
    0.525 nothing, and the CTM has "A" alone."""
    lattice = lattice_of_paths(TWO)
    spans, _ = ctm_conf_spans(lattice, 1.0, 0.2, trans, BOUNDARY)
    assert [s.word for s in spans] == [1]
    spans, _ = ctm_conf_spans(lattice, 1.0, 0.0, trans, BOUNDARY, decode_mbr=False)
    assert [s.word for s in spans] == [1, 2]


def test_the_same_ctm_from_the_raw_and_the_determinised_lattice(trans):
    raw = lattice_of_paths(TWO)
    clat = determinize_lattice_phone_pruned(
        raw, 8.0, 1.0, trans.tid_to_phone, trans.tid_starts_phone
    )
    word_level = Lattice.word_level(clat.num_states, clat.src, clat.dst, clat.word, clat.graph,
                                    clat.acoustic, clat.strings, clat.final)  # fmt: skip
    assert ctm_conf_spans(word_level, 1.0, 0.0, trans, BOUNDARY) == ctm_conf_spans(
        raw, 1.0, 0.0, trans, BOUNDARY
    )


def test_without_word_boundaries_words_keep_the_lattice_arcs_times(trans):
    spans, aligned = ctm_conf_spans(lattice_of_paths([TWO[0]]), 10.0, 0.0, trans, None)
    assert not aligned
    assert [(s.word, s.start, s.end, s.confidence) for s in spans] == [
        (1, 0.0, 3.0, 1.0),
        (2, 3.0, 5.0, 1.0),
    ]


def test_with_segments_the_ctm_is_in_recording_time(tmp_path):
    """utils/convert_ctm.pl: a segment's start is added, the recording's file and
    channel replace the utterance (channel 1 without reco2file_and_channel)."""
    from paravg.decode.ctm import recording_ctm_lines

    (tmp_path / "segments").write_text("u2 rec1 12.50 14.00\nu1 rec1 3.25 5.00\nu3 rec2 0.5 2\n")
    lines = ["u1 1 0.10 0.30 A 0.90", "u2 1 0.00 0.50 B 1.00", "u3 1 0.20 0.10 A 0.50"]
    assert recording_ctm_lines(lines, tmp_path / "segments") == [
        "rec1 1 3.35 0.30 A 0.90",
        "rec1 1 12.50 0.50 B 1.00",
        "rec2 1 0.70 0.10 A 0.50",
    ]
    (tmp_path / "reco2file_and_channel").write_text("rec1 sw02001 A\nrec2 sw02001 B\n")
    out = recording_ctm_lines(lines, tmp_path / "segments", tmp_path / "reco2file_and_channel")
    assert out[0] == "sw02001 A 3.35 0.30 A 0.90" and out[2] == "sw02001 B 0.70 0.10 A 0.50"
