"""Minimum Bayes risk decoding and the confusion network (Kaldi's sausages.cc), on a
lattice whose posteriors are known by hand."""

import math

import numpy as np
import pytest

from paravg.decode.determinize import CompactLattice
from paravg.decode.mbr import minimum_bayes_risk

A, B, C, D = 1, 2, 3, 4


def clat(arcs, final, n):
    """(src, dst, word, cost, frames) arcs; final: state -> cost."""
    return CompactLattice(
        num_states=n,
        src=np.array([a[0] for a in arcs]),
        dst=np.array([a[1] for a in arcs]),
        word=np.array([a[2] for a in arcs]),
        graph=np.array([a[3] for a in arcs], dtype=float),
        acoustic=np.zeros(len(arcs)),
        strings=[tuple([7] * a[4]) for a in arcs],
        final={s: (c, 0.0, ()) for s, c in final.items()},
    )


# three paths: "A B" 0.4, "C B" 0.3, "C D" 0.3; A and C take frames 0-3, B and D 3-5
THREE = clat(
    [(0, 1, A, -math.log(0.4), 3), (0, 2, C, -math.log(0.6), 3),
     (1, 3, B, 0.0, 2), (2, 3, B, -math.log(0.5), 2), (2, 3, D, -math.log(0.5), 2)],
    {3: 0.0}, 4,
)  # fmt: skip


def test_mbr_picks_the_words_of_least_expected_errors_not_the_best_path():
    """The best path is "A B" (0.4), but the bins hold A 0.4 / C 0.6 and B 0.7 / D 0.3:
    "C B" has 0.4 + 0.3 = 0.7 expected errors against "A B"'s 0.6 + 0.3 = 0.9."""
    out = minimum_bayes_risk(THREE, decode_mbr=True)
    assert out.words == [C, B]
    assert out.confidences == pytest.approx([0.6, 0.7], rel=1e-9)
    assert out.bayes_risk == pytest.approx(0.7, rel=1e-9)
    assert np.allclose(out.times, [(0.0, 3.0), (3.0, 5.0)], rtol=1e-9)
    # the sausage: epsilon bins around the two word bins, each summing to 1
    bins = [dict(b) for b in out.sausage]
    assert bins[1] == pytest.approx({C: 0.6, A: 0.4}) and bins[3] == pytest.approx({B: 0.7, D: 0.3})
    for b in (bins[0], bins[2], bins[4]):
        assert b == pytest.approx({0: 1.0})


def test_without_decode_mbr_the_best_path_keeps_its_words_with_their_bin_posteriors():
    out = minimum_bayes_risk(THREE, decode_mbr=False)
    assert out.words == [A, B]
    assert out.confidences == pytest.approx([0.4, 0.7], rel=1e-9)
    assert out.bayes_risk == pytest.approx(0.9, rel=1e-9)


def test_a_word_some_paths_lack_has_an_epsilon_share_and_averaged_times():
    """ "A B" (0.75: A frames 2-7, B 7-9) against "B" (0.25: B frames 2-4): A's bin is
    A 0.75 / nothing 0.25; B's bin is B 1.0 at the average times 0.75 * (7, 9) + 0.25 *
    (2, 4) = (5.75, 7.75), which overlap A's (2, 7): the two share [2, 7.75] in
    proportion to their durations 5 and 2 (Kaldi's post-processing)."""
    lat = clat(
        [(0, 1, 0, 0.0, 2), (1, 2, A, -math.log(0.75), 5), (2, 4, B, 0.0, 2),
         (1, 3, B, -math.log(0.25), 2)],
        {4: 0.0, 3: 0.0}, 5,
    )  # fmt: skip
    out = minimum_bayes_risk(lat)
    assert out.words == [A, B]
    assert out.confidences == pytest.approx([0.75, 1.0], rel=1e-9)
    mid = 2.0 + (7.75 - 2.0) * 5.0 / (5.0 + 2.0)
    assert np.allclose(out.times, [(2.0, mid), (mid, 7.75)], rtol=1e-9)
    assert out.bayes_risk == pytest.approx(0.25, rel=1e-9)


def test_one_path_is_certain():
    lat = clat([(0, 1, A, 3.0, 4), (1, 2, B, 1.0, 6)], {2: 0.5}, 3)
    out = minimum_bayes_risk(lat)
    assert out.words == [A, B] and out.confidences == pytest.approx([1.0, 1.0])
    assert out.times == [(0.0, 4.0), (4.0, 10.0)] and out.bayes_risk == pytest.approx(0.0)
