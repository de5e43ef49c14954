"""Sentence grammar (paravg.corpus.text)."""

import re
from pathlib import Path

import pytest

from paravg.corpus.phones import ARPABET, festival_label
from paravg.corpus.text import kaldi_transcript, sentence_pools, vocabulary

CMUDICT = Path("/usr/share/festival/dicts/cmu/cmudict-0.4.out")


def test_pools_are_seeded_distinct_and_disjoint():
    train, test = sentence_pools(3, 200, 80)
    assert (train, test) == sentence_pools(3, 200, 80)
    assert sentence_pools(4, 200, 80)[0] != train
    keys_train = {kaldi_transcript(s) for s in train}
    keys_test = {kaldi_transcript(s) for s in test}
    assert len(keys_train) == 200 and len(keys_test) == 80
    assert not keys_train & keys_test


def test_sentences_use_only_vocabulary_words():
    vocab = vocabulary()
    train, _ = sentence_pools(0, 300, 0)
    for sentence in train:
        assert set(kaldi_transcript(sentence).lower().split()) <= vocab, sentence


def test_kaldi_transcript():
    assert kaldi_transcript("Is the cup red or blue?") == "IS THE CUP RED OR BLUE"


def test_article_before_vowel():
    train, _ = sentence_pools(0, 500, 0)
    assert not [s for s in train if re.search(r"\ba [aeio]", s)]


@pytest.mark.skipif(not CMUDICT.exists(), reason="festival's CMUdict is not installed")
def test_vocabulary_is_in_cmudict_and_covers_all_phones():
    pron = {}
    for line in CMUDICT.read_text(encoding="latin-1").splitlines():
        match = re.match(r'\("([^"]+)" \S+ (.*)\)$', line.strip())
        if match:
            pron.setdefault(match.group(1), re.findall(r"[a-z]+", match.group(2)))
    vocab = vocabulary()
    assert 300 <= len(vocab) <= 600
    assert sorted(w for w in vocab if w not in pron) == []
    phones = {festival_label(p) for w in vocab for p in pron[w]}
    assert phones == set(ARPABET)
