"""Every start-model rule pinned to a hand-worked example (issue 37, item 6).

Four scalar learners on the fixed ring 0-1-2-3 (neighbourhoods {0,1,3}, {0,1,2}, {1,2,3},
{0,2,3}), all starting from 0.pt = 0. A "job" moves its start by a displacement fixed in
advance, d^t_j below, so w^t_j = s^t_j + d^t_j; job objectives: job 0 best (−1.0), then
3 (−1.1), 2 (−1.2), 1 (−1.3), all within ``objf_threshold`` 1.0 of the best. The
expected start models s^t were worked out by hand from the definitions (comments); each
run forms them through the same files and functions the DAG uses, so a change to any rule
(best job at iteration 0, the mixing weights, which models are mixed, the delay) fails.
BMUF's forms and warm-up are pinned in test_bmuf.py.
"""

import json

import pytest
import torch

from paravg.layout import Layout
from paravg.sync.registry import get_method, neighbourhoods
from tests.unit.sync.test_delay_by_one import form_start, save

N = 4
D = [[3.0, 6.0, 9.0, 12.0], [3.0, 0.0, -3.0, 6.0], [0.0, 3.0, 3.0, -3.0]]  # d^t_j


def objf(t, j):
    return -1.0 - 0.1 * ((3 * j) % 4)


def run(tmp_path, method, displacements, objective=objf, srand=0):
    """s^0 .. s^T (T = len(displacements)) as the DAG forms them, one float per learner."""
    m, layout = get_method(method), Layout(str(tmp_path))
    (tmp_path / "exp" / "e").mkdir(parents=True)
    save(tmp_path / "exp" / "e" / "0.pt", {"w": torch.zeros(1, dtype=torch.float64)})
    iters = len(displacements) + 1
    starts = []
    for t in range(iters):
        d = tmp_path / "exp" / "e" / str(t + 1)
        d.mkdir(parents=True, exist_ok=True)
        row = []
        for j in range(N):
            start, _ = form_start(
                method, t, j, (N,) * iters, srand, layout, {"objf_threshold": 1.0}
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


def test_ring_mixes_the_neighbours_end_models(tmp_path):
    """s^1_j = the neighbourhood's best w^0 (Kaldi's rule after iteration 0): w^0 =
    (3, 6, 9, 12), best 0 in {0,1,3}, {0,1,2}, {0,2,3} and 3 in {1,2,3}: (3, 3, 12, 3).
    w^1 = (6, 3, 9, 9); s^2_j = its neighbourhood's mean: 18/3, 18/3, 21/3, 24/3."""
    starts = run(tmp_path, "ring", D[:2])
    close(starts[1], [3.0, 3.0, 12.0, 3.0])
    close(starts[2], [6.0, 6.0, 7.0, 8.0])


def test_random_ring_mixes_on_the_seeded_ring_of_each_iteration(tmp_path):
    """srand 3: the rings drawn for s^1 and s^2 (pinned: the seeding is part of the rule),
    then as the ring: s^1 = (3, 3, 3, 12); w^1 = (6, 3, 0, 18); s^2 = (27, 9, 21, 24)/3."""
    assert neighbourhoods("random-ring", 1, N, 3) == [(0, 1, 2), (0, 1, 3), (0, 2, 3), (1, 2, 3)]
    assert neighbourhoods("random-ring", 2, N, 3) == [(0, 1, 3), (0, 1, 2), (1, 2, 3), (0, 2, 3)]
    starts = run(tmp_path, "random-ring", D[:2], srand=3)
    close(starts[1], [3.0, 3.0, 3.0, 12.0])
    close(starts[2], [9.0, 3.0, 7.0, 8.0])


def test_d_psgd_mixes_the_starts_and_adds_the_own_displacement(tmp_path):
    """s^{t+1} = M(s^t) + d^t. s^1 = 0 + (3, 6, 9, 12). M(s^1) = (21, 18, 27, 24)/3 =
    (7, 6, 9, 8), s^2 = (10, 6, 6, 14). M(s^2) = (30, 22, 26, 30)/3, s^3 = (10, 31/3, 35/3, 7)."""
    starts = run(tmp_path, "d-psgd", D)
    close(starts[1], [3.0, 6.0, 9.0, 12.0])
    close(starts[2], [10.0, 6.0, 6.0, 14.0])
    close(starts[3], [10.0, 31 / 3, 35 / 3, 7.0])


def test_delay_by_one_adds_the_displacement_of_the_job_before(tmp_path):
    """s^{t+1} = M(s^t) + d^{t−1}, s^1 = s^0 = 0: s^2 = 0 + d^0 = (3, 6, 9, 12) (iterations
    0 and 1 both train from 0.pt); s^3 = M(s^2) + d^1 = (7, 6, 9, 8) + (3, 0, −3, 6)."""
    starts = run(tmp_path, "delay-by-one", D)
    close(starts[1], [0.0] * N)
    close(starts[2], [3.0, 6.0, 9.0, 12.0])
    close(starts[3], [10.0, 6.0, 6.0, 14.0])
