"""Delay-by-one: the start-model formula, its edges, and a multi-iteration simulation
through the same files and functions the DAG uses, against the definition."""

import json

import pytest
import torch

from paravg.io import save_torch_atomic
from paravg.nnet.tdnn import load_model_file
from paravg.sync.decentralized import start_model
from paravg.sync.delay_by_one import delay_by_one_start
from paravg.sync.registry import get_method
from paravg.sync.ring import fixed_ring_order, ring_mix, ring_neighbourhoods


def test_formula_and_float64_arithmetic():
    mixed = {"w": torch.tensor([1.0, 2.0])}
    end = {"w": torch.tensor([5.0, 5.0])}
    start = {"w": torch.tensor([4.0, 6.0])}
    out = delay_by_one_start(mixed, end, start)
    assert out["w"].tolist() == [2.0, 1.0] and out["w"].dtype == torch.float32
    # exact when the mixture is the own start (first iteration): s + (w − s) = w
    w = {"w": torch.randn(100)}
    s = {"w": torch.randn(100) * 1e3}
    assert torch.equal(delay_by_one_start(s, w, s)["w"], w["w"])


def test_edges_are_own_job_of_t_and_ring_of_t_minus_one():
    m = get_method("delay-by-one")
    n = 5
    nb = ring_neighbourhoods(fixed_ring_order(n))
    assert m.start_recipe(0, 3, n, 0).synced == 0
    r1 = m.start_recipe(1, 3, n, 0)
    assert r1.job_outputs(3) == [(0, 3)] and r1.own_iteration is None
    for t in range(2, 6):
        for j in range(n):
            r = m.start_recipe(t, j, n, 0)
            assert sorted(r.job_outputs(j)) == sorted([(t - 2, k) for k in nb[j]] + [(t - 1, j)])
            assert r.own_iteration == t - 1 and r.mix_iteration == t - 2


def fake_train(start, t, j):
    """A deterministic 'job': w = s + d(t, j) with d pulled towards a target."""
    g = torch.Generator().manual_seed(1000 * t + j)
    return {
        k: v - 0.3 * v + 0.1 * torch.randn(v.shape, generator=g, dtype=v.dtype)
        for k, v in start.items()
    }


def save(path, sd):
    save_torch_atomic(path, {"format": "paravg.tdnn.v1", "state_dict": sd, "meta": {}})


@pytest.mark.parametrize("method", ["delay-by-one", "ring", "random-ring"])
def test_simulation_through_files_matches_the_definition(tmp_path, method):
    n, iters, srand = 4, 6, 3
    m = get_method(method)
    init = {"w": torch.randn(3, 2, generator=torch.Generator().manual_seed(0), dtype=torch.float64)}
    save(tmp_path / "0.pt", init)
    # reference, in memory, straight from DESIGN.md's definitions
    s_ref = [[init] * n]
    w_ref = []
    for t in range(iters):
        w_ref.append([fake_train(s_ref[t][j], t, j) for j in range(n)])
        if method == "delay-by-one":
            if t == 0:
                nxt = list(w_ref[0])
            else:
                mixed = ring_mix(w_ref[t - 1], ring_neighbourhoods(fixed_ring_order(n)))
                nxt = [
                    {k: mixed[j][k] + w_ref[t][j][k] - s_ref[t][j][k] for k in init}
                    for j in range(n)
                ]
        else:
            from paravg.sync.registry import neighbourhoods

            nxt = ring_mix(w_ref[t], neighbourhoods(method, t + 1, n, srand))
        s_ref.append(nxt)
    # the DAG's way: each job reads only the files its recipe names
    for t in range(iters):
        for j in range(n):
            r = m.start_recipe(t, j, n, srand)
            if r.synced is not None:
                start = load_model_file(tmp_path / f"{r.synced}.pt")
            else:
                mix = [tmp_path / str(r.mix_iteration + 1) / f"job{k}.pt" for k in r.mix_jobs]
                own = (None, None)
                if r.own_iteration is not None:
                    d = tmp_path / str(r.own_iteration + 1)
                    own = (d / f"job{j}.pt", d / f"job{j}.start.pt")
                start, _ = start_model(
                    mix, [p.with_suffix(".json") for p in mix], r.mix_iteration, 1.0, *own
                )
            d = tmp_path / str(t + 1)
            save(d / f"job{j}.start.pt", start["state_dict"])
            assert torch.allclose(start["state_dict"]["w"], s_ref[t][j]["w"], atol=1e-12), (t, j)
            save(d / f"job{j}.pt", fake_train(start["state_dict"], t, j))
            (d / f"job{j}.json").write_text(json.dumps({"objf": -1.0}))


def test_missing_half_of_the_own_progress_is_refused(tmp_path):
    save(tmp_path / "a.pt", {"w": torch.zeros(2)})
    (tmp_path / "a.json").write_text('{"objf": -1}')
    with pytest.raises(ValueError, match="both"):
        start_model([tmp_path / "a.pt"], [tmp_path / "a.json"], 3, 1.0, own_end=tmp_path / "a.pt")
