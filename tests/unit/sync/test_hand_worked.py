"""Every start-model rule pinned to a hand-worked example (issue 37, items 1 and 6).

Four scalar learners on the fixed ring 0-1-2-3 (neighbourhoods {0,1,3}, {0,1,2}, {1,2,3},
{0,2,3}; pairwise, the matchings {(0,1), (2,3)} at odd t and {(1,2), (3,0)} at even t),
all starting from 0.pt = 0. A "job" moves its start by a displacement fixed in
advance, d^t_j below, so w^t_j = s^t_j + d^t_j; job objectives: job 0 best (−1.0), then
3 (−1.1), 2 (−1.2), 1 (−1.3), all within ``objf_threshold`` 1.0 of the best. The
expected start models s^t were worked out by hand from the definitions (comments); each
run forms them through the same files and functions the DAG uses, so a change to any rule
(best job at iteration 0, the mixing weights, the pairing schedules, which models are
mixed, combine-then-adapt against adapt-then-combine, the edge rule, the delay) fails.
BMUF's forms and warm-up are pinned in test_bmuf.py.
"""

import json

import pytest
import torch

from paravg.layout import Layout
from paravg.sync.registry import get_method, neighbourhoods
from paravg.sync.ring import mixing_groups
from tests.unit.sync.test_delay_by_one import form_start, save

N = 4
D = [[3.0, 6.0, 9.0, 12.0], [3.0, 0.0, -3.0, 6.0], [0.0, 3.0, 3.0, -3.0]]  # d^t_j


def objf(t, j):
    return -1.0 - 0.1 * ((3 * j) % 4)


def run(tmp_path, method, displacements, objective=objf, srand=0, mixing=None):
    """s^0 .. s^T (T = len(displacements)) as the DAG forms them, one float per learner."""
    n = len(displacements[0])
    m, layout = get_method(method), Layout(str(tmp_path))
    (tmp_path / "exp" / "e").mkdir(parents=True)
    save(tmp_path / "exp" / "e" / "0.pt", {"w": torch.zeros(1, dtype=torch.float64)})
    iters = len(displacements) + 1
    starts = []
    for t in range(iters):
        d = tmp_path / "exp" / "e" / str(t + 1)
        d.mkdir(parents=True, exist_ok=True)
        row = []
        for j in range(n):
            start, _ = form_start(
                method, t, j, (n,) * iters, srand, layout, {"objf_threshold": 1.0}, mixing
            )
            s = start["state_dict"]["w"]
            row.append(s.item())
            if t == iters - 1:
                continue
            if not m.mix_node:
                save(d / f"job{j}.start.pt", start["state_dict"])
            save(d / f"job{j}.pt", {"w": s + displacements[t][j]})
            (d / f"job{j}.json").write_text(json.dumps({"objf": objective(t, j)}))
        starts.append(row)
    return starts


def close(got, want):
    assert got == pytest.approx(want, abs=1e-12), got


def test_average_best_job_then_the_mean_of_the_accepted(tmp_path):
    """s^1 = w^0 of the best job (0): 3. w^1 = 3 + (3, 0, −3, 6) = (6, 3, 0, 9): mean 4.5.
    w^2 = 4.5 + (0, 3, 3, −3) = (4.5, 7.5, 7.5, 1.5), job 1 at −2.5 is more than 1.0 below
    the best and dropped: (4.5 + 7.5 + 1.5)/3 = 4.5."""

    def objective(t, j):
        return -2.5 if (t, j) == (2, 1) else objf(t, j)

    starts = run(tmp_path, "average", D, objective)
    for t, want in enumerate([0.0, 3.0, 4.5, 4.5]):
        close(starts[t], [want] * N)


def test_gossip_average_mixes_the_neighbours_end_models(tmp_path):
    """``ring`` before issue 37 (adapt-then-combine). s^1_j = the neighbourhood's best w^0
    (Kaldi's rule after iteration 0): w^0 = (3, 6, 9, 12), best 0 in {0,1,3}, {0,1,2},
    {0,2,3} and 3 in {1,2,3}: (3, 3, 12, 3). w^1 = (6, 3, 9, 9); s^2_j = its
    neighbourhood's mean: 18/3, 18/3, 21/3, 24/3."""
    starts = run(tmp_path, "gossip-average", D[:2])
    close(starts[1], [3.0, 3.0, 12.0, 3.0])
    close(starts[2], [6.0, 6.0, 7.0, 8.0])


def test_random_gossip_average_mixes_on_the_seeded_ring_of_each_iteration(tmp_path):
    """``random-ring`` before issue 37. srand 3: the rings drawn for s^1 and s^2 (pinned:
    the seeding is part of the rule), then as gossip-average: s^1 = (3, 3, 3, 12);
    w^1 = (6, 3, 0, 18); s^2 = (27, 9, 21, 24)/3."""
    method = "random-gossip-average"
    assert neighbourhoods(method, 1, N, 3) == [(0, 1, 2), (0, 1, 3), (0, 2, 3), (1, 2, 3)]
    assert neighbourhoods(method, 2, N, 3) == [(0, 1, 3), (0, 1, 2), (1, 2, 3), (0, 2, 3)]
    starts = run(tmp_path, method, D[:2], srand=3)
    close(starts[1], [3.0, 3.0, 3.0, 12.0])
    close(starts[2], [9.0, 3.0, 7.0, 8.0])


def test_fixed_ring_pairs_alternate_right_and_left_neighbours():
    """Even N: the matchings {(0,1), (2,3)} and {(1,2), (3,0)} alternate. Odd N = 5: the
    offset moves by one per iteration, pairs (o, o+1), (o+2, o+3) and o − 1 left out (so
    each learner sits out once in 5 iterations). N = 2: always the one pair; N = 1: alone."""
    ring4 = {1: [(0, 1), (0, 1), (2, 3), (2, 3)], 2: [(0, 3), (1, 2), (1, 2), (0, 3)]}
    for t in range(1, 7):
        assert neighbourhoods("ring", t, 4, 0) == ring4[2 - t % 2]
    assert [neighbourhoods("ring", t, 5, 0) for t in (1, 2, 3)] == [
        [(0, 1), (0, 1), (2, 3), (2, 3), (4,)],
        [(0,), (1, 2), (1, 2), (3, 4), (3, 4)],
        [(0, 4), (1,), (2, 3), (2, 3), (0, 4)],
    ]
    alone = [[j for j, g in enumerate(neighbourhoods("ring", t, 5, 0)) if g == (j,)] for t in
             range(1, 6)]  # fmt: skip
    assert sorted(x for [x] in alone) == [0, 1, 2, 3, 4]
    assert all(neighbourhoods("ring", t, 2, 0) == [(0, 1), (0, 1)] for t in (1, 2, 3))
    assert neighbourhoods("ring", 1, 1, 0) == [(0,)]
    # the same methods mix on the neighbourhood when sync.mixing says so
    assert neighbourhoods("ring", 2, 4, 0, "neighbourhood") == [
        (0, 1, 3), (0, 1, 2), (1, 2, 3), (0, 2, 3)
    ]  # fmt: skip
    assert neighbourhoods("delay-by-one", 3, 4, 0) == ring4[1]
    with pytest.raises(ValueError, match="unknown mixing"):
        mixing_groups((0, 1, 2), "three-way", 1)


def test_random_ring_pairs_are_a_seeded_matching_per_iteration():
    """srand 3: the ring of iteration t (pinned) cut into pairs at offset t − 1: a random
    perfect matching re-drawn per iteration, a function of (srand, t) only; odd N leaves
    one learner out."""
    assert [neighbourhoods("random-ring", t, 4, 3) for t in (1, 2, 3)] == [
        [(0, 1), (0, 1), (2, 3), (2, 3)],  # ring 2-3-1-0
        [(0, 1), (0, 1), (2, 3), (2, 3)],  # ring 1-2-3-0, offset 1
        [(0, 2), (1, 3), (0, 2), (1, 3)],  # ring 1-3-0-2, offset 2
    ]
    assert [neighbourhoods("random-ring", t, 5, 3) for t in (1, 2, 3)] == [
        [(0, 3), (1, 2), (1, 2), (0, 3), (4,)],
        [(0, 4), (1, 2), (1, 2), (3,), (0, 4)],
        [(0, 2), (1,), (0, 2), (3, 4), (3, 4)],
    ]
    assert neighbourhoods("random-ring", 7, 8, 3) == neighbourhoods("random-ring", 7, 8, 3)
    for t in range(1, 20):
        groups = neighbourhoods("random-ring", t, 8, 3)
        assert all(len(g) == 2 and j in g for j, g in enumerate(groups))  # perfect matching
    assert len({tuple(neighbourhoods("random-ring", t, 8, 3)) for t in range(1, 20)}) > 10


def test_ring_mixes_the_starts_pairwise_and_adds_the_own_displacement(tmp_path):
    """ADPSGD: s^{t+1} = W(s^t) + d^t, pairwise. s^1 = ½(0 + 0) + d^0 = (3, 6, 9, 12).
    Pairs (1,2), (3,0): W(s^1) = (7.5, 7.5, 7.5, 7.5), s^2 = (10.5, 7.5, 4.5, 13.5).
    Pairs (0,1), (2,3): W(s^2) = (9, 9, 9, 9), s^3 = 9 + d^2 = (9, 12, 12, 6).
    (gossip-average's s^2 above is (6, 6, 7, 8): another update.)"""
    starts = run(tmp_path, "ring", D)
    close(starts[1], [3.0, 6.0, 9.0, 12.0])
    close(starts[2], [10.5, 7.5, 4.5, 13.5])
    close(starts[3], [9.0, 12.0, 12.0, 6.0])


def test_ring_with_an_odd_number_of_learners_leaves_one_out(tmp_path):
    """N = 3: pairs (0,1) then (1,2): s^1 = d^0 = (3, 6, 9); learner 0 alone at t = 2:
    s^2 = (3, 7.5, 7.5) + (3, 0, −3) = (6, 7.5, 4.5)."""
    starts = run(tmp_path, "ring", [[3.0, 6.0, 9.0], [3.0, 0.0, -3.0]])
    close(starts[1], [3.0, 6.0, 9.0])
    close(starts[2], [6.0, 7.5, 4.5])


def test_ring_three_way_is_d_psgd_without_a_cut(tmp_path):
    """sync.mixing: neighbourhood gives D-PSGD's numbers (below) while no edge is cut."""
    starts = run(tmp_path, "ring", D, mixing="neighbourhood")
    close(starts[2], [10.0, 6.0, 6.0, 14.0])
    close(starts[3], [10.0, 31 / 3, 35 / 3, 7.0])


def test_random_ring_mixes_the_starts_on_each_iterations_matching(tmp_path):
    """srand 3, pairs (0,1) (2,3) at t = 2 and (0,2) (1,3) at t = 3: s^1 = (3, 6, 9, 12);
    s^2 = (4.5, 4.5, 10.5, 10.5) + d^1 = (7.5, 4.5, 7.5, 16.5);
    s^3 = (7.5, 10.5, 7.5, 10.5) + d^2 = (7.5, 13.5, 10.5, 7.5)."""
    starts = run(tmp_path, "random-ring", D, srand=3)
    close(starts[1], [3.0, 6.0, 9.0, 12.0])
    close(starts[2], [7.5, 4.5, 7.5, 16.5])
    close(starts[3], [7.5, 13.5, 10.5, 7.5])


def worse_job(t0, j0):
    """Job (t0, j0) 1.5 below job 0 (and 1.3 / 1.4 below jobs 2 / 3): its edges are cut."""

    def objective(t, j):
        return -2.5 if (t, j) == (t0, j0) else objf(t, j)

    return objective


def test_ring_cuts_an_edge_symmetrically_and_keeps_the_mean(tmp_path):
    """Job (1, 1) is 1.3 below its partner 2 at t = 2: the pair (1,2) does not mix, both
    keep their own start (weight 1): s^2 = (7.5 + 3, 6 + 0, 9 − 3, 7.5 + 6) =
    (10.5, 6, 6, 13.5). Mean 9 = mean s^1 + mean d^1 = 7.5 + 1.5: preserved (Kaldi's
    rule would give learner 1 its partner's model, 9, and move the mean)."""
    starts = run(tmp_path, "ring", D[:2], worse_job(1, 1))
    close(starts[2], [10.5, 6.0, 6.0, 13.5])
    assert sum(starts[2]) / N == pytest.approx(sum(starts[1]) / N + sum(D[1]) / N)


def test_three_way_cut_edges_give_their_weight_to_both_ends(tmp_path):
    """Neighbourhood mixing, job (1, 1) more than 1.0 below jobs 0 and 2 (iteration 1's
    objectives −1.0, −2.5, −1.2, −1.1): edges (0,1) and (1,2) are cut. Rows: learner 0
    (2/3 own, 1/3 of 3): (6 + 12)/3 = 6; learner 1 alone: 6; learner 2 (2/3, 1/3 of 3):
    (18 + 12)/3 = 10; learner 3 intact: (3 + 9 + 12)/3 = 8. s^2 = (6, 6, 10, 8) + d^1 =
    (9, 6, 7, 14): mean 9, as without the cut (the mixing stays doubly stochastic)."""
    starts = run(tmp_path, "ring", D[:2], worse_job(1, 1), mixing="neighbourhood")
    close(starts[2], [9.0, 6.0, 7.0, 14.0])


def test_d_psgd_mixes_the_starts_and_adds_the_own_displacement(tmp_path):
    """s^{t+1} = M(s^t) + d^t. s^1 = 0 + (3, 6, 9, 12). M(s^1) = (21, 18, 27, 24)/3 =
    (7, 6, 9, 8), s^2 = (10, 6, 6, 14). M(s^2) = (30, 22, 26, 30)/3, s^3 = (10, 31/3, 35/3, 7)."""
    starts = run(tmp_path, "d-psgd", D)
    close(starts[1], [3.0, 6.0, 9.0, 12.0])
    close(starts[2], [10.0, 6.0, 6.0, 14.0])
    close(starts[3], [10.0, 31 / 3, 35 / 3, 7.0])


def test_delay_by_one_adds_the_displacement_of_the_job_before(tmp_path):
    """s^{t+1} = W(s^t) + d^{t−1}, s^1 = s^0 = 0: s^2 = 0 + d^0 = (3, 6, 9, 12) (iterations
    0 and 1 both train from 0.pt); pairs (0,1), (2,3) at t = 3: s^3 = W(s^2) + d^1 =
    (4.5, 4.5, 10.5, 10.5) + (3, 0, −3, 6). Three-way (before issue 37's default):
    s^3 = M(s^2) + d^1 = (7, 6, 9, 8) + (3, 0, −3, 6)."""
    starts = run(tmp_path, "delay-by-one", D)
    close(starts[1], [0.0] * N)
    close(starts[2], [3.0, 6.0, 9.0, 12.0])
    close(starts[3], [7.5, 4.5, 7.5, 16.5])
    three_way = run(tmp_path / "three", "delay-by-one", D, mixing="neighbourhood")
    close(three_way[3], [10.0, 6.0, 6.0, 14.0])


def test_delay_by_one_cuts_by_the_objectives_of_the_jobs_the_starts_hold(tmp_path):
    """s^3 mixes s^2 = w^0 (the progress of iteration 0's jobs): job (0, 3) 1.3 below its
    partner 2 cuts the pair (2,3): s^3 = (4.5 + 3, 4.5 + 0, 9 − 3, 12 + 6). The same
    objective on a job of iteration 1 cuts nothing at s^3."""
    starts = run(tmp_path, "delay-by-one", D, worse_job(0, 3))
    close(starts[3], [7.5, 4.5, 6.0, 18.0])
    later = run(tmp_path / "later", "delay-by-one", D, worse_job(1, 3))
    close(later[3], [7.5, 4.5, 7.5, 16.5])


def test_the_record_names_the_mix_its_weights_and_the_cut_edges(tmp_path):
    """adpsgd.mixed_start on files: own start 2, partner 6 (objective 1.5 below: cut),
    then within the threshold; own job 2 -> 5. Cut: 2 + 3 = 5; mixed: 4 + 3 = 7."""
    from paravg.sync.adpsgd import mixed_start

    for name, value in (("own", 2.0), ("partner", 6.0), ("end", 5.0)):
        save(tmp_path / f"{name}.pt", {"w": torch.full((1,), value, dtype=torch.float64)})
    models = [tmp_path / "own.pt", tmp_path / "partner.pt"]
    for partner_objf, want, weights in ((-2.5, 5.0, [1.0]), (-1.5, 7.0, [0.5, 0.5])):
        stats = []
        for name, o in (("own", -1.0), ("partner", partner_objf)):
            (tmp_path / f"{name}.json").write_text(json.dumps({"objf": o}))
            stats.append(tmp_path / f"{name}.json")
        start, record = mixed_start(models, stats, 1, 1.0, tmp_path / "end.pt", models[0])
        close(start["state_dict"]["w"].tolist(), [want])
        assert record["weights"] == weights
        assert record["cut"] == ([str(models[1])] if len(weights) == 1 else [])
        assert record["own_progress"] == [str(tmp_path / "end.pt"), str(models[0])]
