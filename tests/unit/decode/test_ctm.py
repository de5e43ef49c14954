"""Word times and confidences of a best path (steps/get_ctm.sh, lattice-align-words)."""

import numpy as np
import pytest
from lattice_synth import TRANSITION_MDL, lattice_of_paths

from paravg.decode.ctm import align_words, ctm_lines, phone_spans, word_spans_from_phones
from paravg.graph.load import read_transition_model


@pytest.fixture
def trans(tmp_path):
    (tmp_path / "transition.mdl").write_text(TRANSITION_MDL)
    return read_transition_model(tmp_path / "transition.mdl")


def test_a_reordered_alignment_splits_into_phones_at_forward_transitions(trans):
    # phone 1 for 3 frames, phone 1 again for 2 (a new instance), phone 2 for 2
    tids = np.array([2, 1, 1, 2, 1, 4, 3])
    assert phone_spans(tids, trans.tid_to_phone, trans.tid_starts_phone) == [
        (1, 0, 3),
        (1, 3, 5),
        (2, 5, 7),
    ]


def test_words_span_begin_to_end_phones_and_silence_belongs_to_none():
    boundary = {1: "nonword", 2: "begin", 3: "internal", 4: "end", 5: "singleton"}
    spans = [(1, 0, 4), (2, 4, 6), (3, 6, 9), (4, 9, 10), (1, 10, 12), (5, 12, 15)]
    assert word_spans_from_phones(spans, boundary) == [(4, 10), (12, 15)]
    assert word_spans_from_phones([(3, 0, 2)], boundary) is None  # internal outside a word
    assert word_spans_from_phones([(9, 0, 2)], boundary) is None  # phone without a class


def test_ctm_of_two_competing_paths_gives_times_and_posteriors(trans):
    # "A B" (3 + 2 frames) against "A" (5 frames) with nearly equal cost at LMWT 1:
    # A is certain (both paths start with it over frames 0-2), B is not
    lattice = lattice_of_paths([[(1, 3, 0.0, 1.0), (2, 2, 0.0, 1.0)], [(1, 5, 0.1, 2.0)]])
    links = lattice.best_paths([1], [0.0])[(1, 0.0)]
    post = lattice.link_posteriors(1.0)
    boundary = {1: "singleton", 2: "singleton"}
    spans = align_words(lattice, links, trans.tid_to_phone, trans.tid_starts_phone, boundary, post)
    assert [(s.word, s.start, s.end) for s in spans] == [(1, 0, 3), (2, 3, 5)]
    p_ab = 1.0 / (1.0 + np.exp(-0.1))  # exp(-2) / (exp(-2) + exp(-2.1))
    assert spans[0].confidence == pytest.approx(1.0)
    assert spans[1].confidence == pytest.approx(p_ab)
    lines = ctm_lines("utt", spans, {1: "A", 2: "B"})
    assert lines == ["utt 1 0.00 0.03 A 1.00", f"utt 1 0.03 0.02 B {p_ab:.2f}"]


def test_without_word_boundaries_a_word_runs_from_its_label_to_the_next(trans):
    lattice = lattice_of_paths([[(1, 3, 0.0, 1.0), (2, 2, 0.0, 1.0)]])
    links = lattice.best_paths([10], [0.0])[(10, 0.0)]
    spans = align_words(lattice, links, trans.tid_to_phone, trans.tid_starts_phone, None)
    assert [(s.start, s.end, s.confidence) for s in spans] == [(0, 3, 1.0), (3, 5, 1.0)]


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
