"""BMUF: reduces to averaging at bm = 0, η_b = 1; classic and Nesterov blocks by hand."""

import json
from dataclasses import asdict

import pytest
import torch

from paravg.io import save_torch_atomic
from paravg.nnet.model_file import load_model_file, model_to_file_dict
from paravg.sync.average import average_jobs
from paravg.sync.bmuf import bmuf_node, bmuf_start, bmuf_update
from paravg.sync.bmuf_params import BmufParams, default_block_momentum, job_learning_rate_scale
from tests.unit.dummies import seeded, tdnn_config, write_jobs

CFG = tdnn_config((8, [0]), input_splice=[-1, 0, 1])


def bmuf_sync(paths, stats, g_in, d_in, s_in, it, threshold, cfg, model_out, g_out, d_out, summary):
    """The ``bmuf`` node on these files, its block momentum resolved from ``sync.bmuf`` for
    N = len(paths) as the plan resolves it (paravg.plan.ExperimentPlan.sync_params)."""
    bmuf = asdict(BmufParams.from_config(cfg, len(paths)))
    files = {"models": paths, "stats": stats, "global": [g_in], "delta": [d_in] if d_in else []}
    outputs = {"model": model_out, "global_model": g_out, "delta": d_out, "summary": summary}
    sync = {"objf_threshold": threshold, "bmuf": bmuf}
    return bmuf_node({**files, "start": [s_in]}, sync, it, outputs)


def model(seed):
    return seeded(CFG, seed, feat=4, ivec=0, targets=5)


def write_iteration(d, seeds, objfs):
    d.mkdir(parents=True, exist_ok=True)
    return write_jobs(d, [model(s) for s in seeds], objfs)


def sd(x):
    return {"w": torch.tensor(x, dtype=torch.float64)}


def test_defaults_and_learning_rate_scale():
    assert default_block_momentum(4) == pytest.approx(0.75)
    assert default_block_momentum(1) == 0.0
    p = BmufParams.from_config({"block_momentum": None, "block_lr": 1.0, "nesterov": True}, 4)
    assert p.block_momentum == pytest.approx(0.75)
    # default: Kaldi's N·ε times 1/N -> the per-job rate is the effective rate ε
    assert job_learning_rate_scale(p) == pytest.approx(1 / 4)
    assert job_learning_rate_scale(BmufParams(0.0, 1.0)) == 1.0  # plain averaging: Kaldi's N·ε
    assert job_learning_rate_scale(BmufParams(0.5, 2.0)) == pytest.approx(0.25)
    with pytest.raises(ValueError, match="block_momentum"):
        BmufParams(1.0)
    with pytest.raises(ValueError, match="block_lr"):
        BmufParams(0.5, 0.0)


def test_two_blocks_classic_and_nesterov_by_hand():
    """g0 = s0 = 1, a1 = 3, a2 = 2, bm = 0.5, η_b = 2 (scalars, hand-computed)."""
    p = BmufParams(0.5, 2.0, nesterov=False)
    pn = BmufParams(0.5, 2.0, nesterov=True)
    g, delta = sd([1.0]), sd([0.0])
    # block 1 (both: the jobs started from the initial model): Δ = 0.5·0 + 2·(3 − 1) = 4, g = 5
    g, delta = bmuf_update(g, delta, sd([3.0]), sd([1.0]), p)
    assert delta["w"].item() == 4.0 and g["w"].item() == 5.0
    assert bmuf_start(g, delta, p)["w"].item() == 5.0  # classic: start from g
    assert bmuf_start(g, delta, pn)["w"].item() == 7.0  # Nesterov: g + bm·Δ
    # classic block 2 (jobs started from 5): Δ = 0.5·4 + 2·(2 − 5) = −4, g = 1, start 1
    g2, d2 = bmuf_update(g, delta, sd([2.0]), sd([5.0]), p)
    assert d2["w"].item() == -4.0 and g2["w"].item() == 1.0
    assert bmuf_start(g2, d2, p)["w"].item() == 1.0
    # Nesterov block 2 (jobs started from 7): Δ = 0.5·4 + 2·(2 − 7) = −8, g = −3, start −7
    g2n, d2n = bmuf_update(g, delta, sd([2.0]), sd([7.0]), pn)
    assert d2n["w"].item() == -8.0 and g2n["w"].item() == -3.0
    assert bmuf_start(g2n, d2n, pn)["w"].item() == -7.0


def test_nesterov_block_gradient_is_taken_from_the_start_model():
    """Jobs that do not move (a = s) leave a decaying Δ, never a growing one."""
    pn = BmufParams(0.75, 1.0, nesterov=True)
    g, delta = sd([0.0]), sd([1.0])
    for _ in range(20):
        s = bmuf_start(g, delta, pn)
        g, delta = bmuf_update(g, delta, s, s, pn)
    assert abs(delta["w"].item()) == pytest.approx(0.75**20)


def test_bm_zero_lr_one_is_average_bit_for_bit(tmp_path):
    g_in, delta_in = tmp_path / "0.pt", None
    start_in = g_in
    save_torch_atomic(g_in, model_to_file_dict(model(99)))
    cfg = {"block_momentum": 0.0, "block_lr": 1.0, "nesterov": True}
    for it, (seeds, objfs) in enumerate(
        [
            ([1, 2, 3], [-2.0, -1.0, -1.5]),
            ([4, 5, 6], [-1.0, -1.2, -3.0]),
            ([7, 8, 9], [-1.1, -1.0, -1.05]),
        ]
    ):
        paths, stats = write_iteration(tmp_path / str(it + 1), seeds, objfs)
        out, new_g = tmp_path / f"{it + 1}.pt", tmp_path / "bmuf" / f"{it + 1}.pt"
        new_delta = tmp_path / "bmuf" / f"{it + 1}.delta.pt"
        summary = bmuf_sync(
            paths,
            stats,
            g_in,
            delta_in,
            start_in,
            it,
            1.0,
            cfg,
            out,
            new_g,
            new_delta,
            tmp_path / "sync" / f"{it + 1}.json",
        )
        expected, avg_summary = average_jobs(paths, stats, it, 1.0)
        got = load_model_file(out)["state_dict"]
        for k, v in expected["state_dict"].items():
            assert torch.equal(got[k], v), (it, k)
            assert got[k].dtype == v.dtype
        assert summary["accepted"] == avg_summary["accepted"]
        assert summary["selection"] == ("best" if it == 0 else "average")
        g = load_model_file(new_g)
        assert all(torch.equal(g["state_dict"][k], v) for k, v in expected["state_dict"].items())
        g_in, delta_in, start_in = new_g, new_delta, out


def test_bmuf_sync_state_files_carry_g_and_delta(tmp_path):
    init = model_to_file_dict(model(0))
    save_torch_atomic(tmp_path / "0.pt", init)
    paths, stats = write_iteration(tmp_path / "1", [1, 2], [-1.0, -1.1])
    cfg = {"block_momentum": None, "block_lr": 1.0, "nesterov": True}
    bmuf_sync(
        paths,
        stats,
        tmp_path / "0.pt",
        None,
        tmp_path / "0.pt",
        3,
        1.0,
        cfg,
        tmp_path / "1.pt",
        tmp_path / "bmuf/1.pt",
        tmp_path / "bmuf/1.delta.pt",
        tmp_path / "sync/1.json",
    )
    g1 = load_model_file(tmp_path / "bmuf/1.pt")["state_dict"]
    d1 = load_model_file(tmp_path / "bmuf/1.delta.pt")["state_dict"]
    start = load_model_file(tmp_path / "1.pt")["state_dict"]
    a = (
        model(1).state_dict()["hidden.0.weight"].double()
        + model(2).state_dict()["hidden.0.weight"].double()
    ) / 2
    g0 = init["state_dict"]["hidden.0.weight"].double()
    bm = 0.5  # 1 − 1/2
    delta = a - g0
    assert torch.allclose(d1["hidden.0.weight"].double(), delta, atol=1e-6)
    assert torch.allclose(g1["hidden.0.weight"].double(), a, atol=1e-6)
    assert torch.allclose(start["hidden.0.weight"].double(), a + bm * delta, atol=1e-6)
    assert start["hidden.0.weight"].dtype == torch.float32
    summary = json.loads((tmp_path / "sync/1.json").read_text())
    assert summary["method"] == "bmuf" and summary["block_momentum"] == 0.5


@pytest.mark.parametrize("nesterov", [True, False])
def test_two_blocks_through_files_carry_g_and_delta(tmp_path, nesterov):
    save_torch_atomic(tmp_path / "0.pt", model_to_file_dict(model(0)))
    cfg = {"block_momentum": 0.6, "block_lr": 1.5, "nesterov": nesterov}
    k = "hidden.0.weight"
    g = model(0).state_dict()[k].double()
    delta = torch.zeros_like(g)
    g_in, d_in, s_in = tmp_path / "0.pt", None, tmp_path / "0.pt"
    s = g  # the jobs of the first block start from the initial model
    for it, seeds in enumerate([(1, 2), (3, 4)]):
        paths, stats = write_iteration(tmp_path / f"{it + 1}", seeds, [-1.0, -1.0])
        outs = [tmp_path / f"{it + 1}.pt", tmp_path / f"bmuf/{it + 1}.pt"]
        outs.append(tmp_path / f"bmuf/{it + 1}.delta.pt")
        bmuf_sync(paths, stats, g_in, d_in, s_in, it, 1.0, cfg, *outs, tmp_path / f"s{it}.json")
        # iteration 0 takes the best job (tie: the first), as average does
        a = model(seeds[0]).state_dict()[k].double()
        if it > 0:
            a = (a + model(seeds[1]).state_dict()[k].double()) / 2
        delta = 0.6 * delta + 1.5 * (a - s)
        g = g + delta
        s = g + 0.6 * delta if nesterov else g
        got = load_model_file(outs[0])["state_dict"][k].double()
        assert torch.allclose(got, s, atol=1e-5), it
        g_in, d_in, s_in = outs[1], outs[2], outs[0]
