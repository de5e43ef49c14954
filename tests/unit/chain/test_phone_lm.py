"""The phone LM (Kaldi's LanguageModelEstimator) on hand-worked corpora."""

import math

import pytest

from paravg.chain.fst_arrays import fst_to_arrays
from paravg.chain.phone_lm import LanguageModelOptions, estimate_phone_lm


def arcs(fst):
    a = fst_to_arrays(fst)
    return a, {
        (int(s), int(lab)): (int(d), math.exp(-w))
        for s, d, lab, w in zip(a.src, a.dst, a.ilabel, a.weight, strict=True)
    }


def sequence_prob(fst, phones):
    a, table = arcs(fst)
    state, prob = a.start, 1.0
    for p in phones:
        if (state, p) not in table:
            return 0.0
        state, q = table[(state, p)]
        prob *= q
    return prob * math.exp(-a.final[state])


def test_unpruned_trigram_is_maximum_likelihood():
    # [1 2] twice, [1 3] once; trigram, biphone histories never pruned
    opts = LanguageModelOptions(ngram_order=3, no_prune_ngram_order=2, num_extra_lm_states=10)
    fst, est = estimate_phone_lm([[1, 2], [1, 3], [1, 2]], opts)
    a, table = arcs(fst)
    # states with counts, in order of creation: (0,) (0,1) (1,2) (1,3)
    assert a.num_states == 4 and a.start == 0
    assert table[(0, 1)] == (1, pytest.approx(1.0, rel=1e-5))
    assert table[(1, 2)] == (2, pytest.approx(2 / 3, rel=1e-5))
    assert table[(1, 3)] == (3, pytest.approx(1 / 3, rel=1e-5))
    assert a.final.tolist() == [math.inf, math.inf, 0.0, 0.0]
    assert sequence_prob(fst, [1, 2]) == pytest.approx(2 / 3, rel=1e-5)
    assert sequence_prob(fst, [1, 3]) == pytest.approx(1 / 3, rel=1e-5)
    assert sequence_prob(fst, [2]) == 0.0  # no smoothing: unseen n-grams are impossible
    assert est.perplexity == pytest.approx(math.exp(-(2 * math.log(2 / 3) + math.log(1 / 3)) / 9))


def test_hard_backoff_prunes_low_count_states_in_kaldis_order():
    """[1 1] and [2 1]; 3 basic states (histories of length 1), 5 with counts, target 3.

    Worked by hand after language-model.cc: the zero-cost merges go largest-index first:
    (2,1) -> (1,), (0,2) -> (2,); (1,1)'s queued cost is then stale (-1e-15 -> 0) and it
    merges at cost 0 (4 states); at the last target (0,1) merges at cost
    3 log 3 - 2 log 2 ... into (1,), leaving (0,) {1:1, 2:1}, (1,) {1:1, </s>:2}, (2,) {1:1}.
    """
    opts = LanguageModelOptions(ngram_order=3, no_prune_ngram_order=2, num_extra_lm_states=0)
    fst, est = estimate_phone_lm([[1, 1], [2, 1]], opts)
    a, table = arcs(fst)
    assert a.num_states == 3 and a.start == 0
    assert table[(0, 1)] == (1, pytest.approx(0.5, rel=1e-5))
    assert table[(0, 2)] == (2, pytest.approx(0.5, rel=1e-5))
    assert table[(1, 1)] == (1, pytest.approx(1 / 3, rel=1e-5))  # a backed-off self-loop
    assert table[(2, 1)] == (1, pytest.approx(1.0, rel=1e-5))
    assert math.exp(-a.final[1]) == pytest.approx(2 / 3, rel=1e-5)
    assert math.isinf(a.final[0]) and math.isinf(a.final[2])
    assert sequence_prob(fst, [1, 1]) == pytest.approx(1 / 2 * 1 / 3 * 2 / 3, rel=1e-5)
    assert sequence_prob(fst, [2, 1]) == pytest.approx(1 / 2 * 2 / 3, rel=1e-5)
    # hard backoff gives mass to unseen sequences only through the merged states
    assert sequence_prob(fst, [1]) == pytest.approx(1 / 2 * 2 / 3, rel=1e-5)
    assert "pruned from 5 to 3" in est.log[0]


def test_never_a_unigram_state_and_probabilities_normalise():
    sentences = [[1, 2, 3, 1, 2], [2, 3, 3, 1], [1, 1, 2, 3], [3, 2, 1]]
    fst, _ = estimate_phone_lm(sentences, LanguageModelOptions(num_extra_lm_states=0))
    a, _ = arcs(fst)
    for s in range(a.num_states):
        out = sum(math.exp(-w) for w in a.weight[a.src == s]) + math.exp(-a.final[s])
        assert out == pytest.approx(1.0, rel=1e-5)
    # 4-gram, no_prune 3: at least every seen biphone history survives (3 phones + BOS)
    assert a.num_states >= 4


def test_rejects_phone_zero():
    with pytest.raises(ValueError, match="> 0"):
        estimate_phone_lm([[1, 0, 2]])
