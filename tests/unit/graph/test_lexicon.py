"""The demo lexicon: word segmentation of phone sequences and learnt pronunciations."""

import shutil

import pytest

from paravg.graph.lexicon import (
    edit_distance,
    festival_pronunciations,
    learn_lexicon,
    segment_words,
)


def test_edit_distance():
    assert edit_distance(["k", "ae", "t"], ["k", "ae", "t"]) == 0
    assert edit_distance(["k", "ae", "t"], ["k", "ah", "t", "s"]) == 2
    assert edit_distance([], ["a", "b"]) == 2


def test_segmentation_recovers_word_chunks_with_variants():
    base = {"the": ("dh", "ah"), "cat": ("k", "ae", "t"), "sat": ("s", "ae", "t")}
    phones = ["dh", "iy", "k", "ae", "t", "s", "ae", "t"]  # "the" spoken as dh iy
    chunks = segment_words(phones, ["the", "cat", "sat"], base)
    assert chunks == [("dh", "iy"), ("k", "ae", "t"), ("s", "ae", "t")]
    assert segment_words(["k"], ["the", "cat", "sat"], base) is None


def test_learnt_lexicon_keeps_frequent_variants_and_the_base():
    base = {"the": ("dh", "ah"), "cat": ("k", "ae", "t")}
    text = {f"u{i}": ["THE", "CAT"] for i in range(10)}
    phones = {
        f"u{i}": ["sil", "dh", "iy" if i < 6 else "ah", "k", "ae", "t", "sil"] for i in range(10)
    }
    phones["u9"] = ["dh", "ah", "k", "ae", "ae", "t"]  # a one-off variant: dropped
    entries = learn_lexicon(text, phones, base)
    the = [(e.phones, e.prob) for e in entries if e.word == "THE"]
    assert the == [(("dh", "iy"), 1.0), (("dh", "ah"), pytest.approx(4 / 6, abs=1e-6))]
    cat = [e.phones for e in entries if e.word == "CAT"]
    assert cat == [("k", "ae", "t")]


@pytest.mark.skipif(shutil.which("festival") is None, reason="festival not installed")
def test_festival_base_pronunciations_in_the_label_set():
    prons = festival_pronunciations(["the", "before", "measured"])
    assert prons["the"] == ("dh", "ah")  # ax folded into ah
    assert prons["measured"] == ("m", "eh", "zh", "er", "d")
    assert prons["before"][0] == "b"
