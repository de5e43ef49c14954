"""Delay-by-one: the start-model formula, its edges, and a multi-iteration simulation
through the same files and functions the DAG uses, against the definition."""

import json

import pytest
import torch

from paravg.io import save_torch_atomic
from paravg.layout import Layout
from paravg.sync.decentralized import mixed_start
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
    m, L = get_method("delay-by-one"), Layout("r")
    n = 5
    nb = ring_neighbourhoods(fixed_ring_order(n))
    per_iter = (n,) * 8

    def inputs(t, j):
        refs = m.start_inputs(t, j, per_iter, 0)
        return {role: [r.path(L, "e") for r in rs] for role, rs in refs.items()}

    assert inputs(0, 3) == {"initial": ["r/exp/e/0.pt"]}
    assert inputs(1, 3)["models"] == ["r/exp/e/1/job3.pt"] and "own_end" not in inputs(1, 3)
    for t in range(2, 6):
        for j in range(n):
            got = inputs(t, j)
            assert got["models"] == [f"r/exp/e/{t - 1}/job{k}.pt" for k in nb[j]]
            assert got["own_end"] == [f"r/exp/e/{t}/job{j}.pt"]
            assert got["own_start"] == [f"r/exp/e/{t}/job{j}.start.pt"]


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
    (tmp_path / "exp" / "e").mkdir(parents=True)
    save(tmp_path / "exp" / "e" / "0.pt", init)
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
    # the DAG's way: each job reads only the files its start inputs name
    from paravg.sync.start import form_start_model

    layout = Layout(str(tmp_path))
    sync_cfg = {"objf_threshold": 1.0}
    for t in range(iters):
        for j in range(n):
            refs = m.start_inputs(t, j, (n,) * iters, srand)
            files = {role: [r.path(layout, "e") for r in rs] for role, rs in refs.items()}
            start, _ = form_start_model(method, files, t, sync_cfg)
            d = tmp_path / "exp" / "e" / str(t + 1)
            d.mkdir(parents=True, exist_ok=True)
            save(d / f"job{j}.start.pt", start["state_dict"])
            assert torch.allclose(start["state_dict"]["w"], s_ref[t][j]["w"], atol=1e-12), (t, j)
            save(d / f"job{j}.pt", fake_train(start["state_dict"], t, j))
            (d / f"job{j}.json").write_text(json.dumps({"objf": -1.0}))


def test_missing_half_of_the_own_progress_is_refused(tmp_path):
    save(tmp_path / "a.pt", {"w": torch.zeros(2)})
    (tmp_path / "a.json").write_text('{"objf": -1}')
    with pytest.raises(ValueError, match="both"):
        mixed_start([tmp_path / "a.pt"], [tmp_path / "a.json"], 3, 1.0, own_end=tmp_path / "a.pt")
