"""BMUF: reduces to averaging at bm = 0, η_b = 1; classic and Nesterov blocks by hand."""

import json
from dataclasses import asdict

import pytest
import torch

from paravg.io import save_torch_atomic
from paravg.nnet.model_file import load_model_file, model_to_file_dict
from paravg.sync.average import average_jobs
from paravg.sync.bmuf import bmuf_block, bmuf_node, bmuf_start, bmuf_update
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
    cfg = {"block_momentum": 0.0, "block_lr": 1.0, "nesterov": True, "form": "textbook"}
    cfg["warmup_blocks"] = 0
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
    cfg = {"block_momentum": None, "block_lr": 1.0, "nesterov": True, "form": "textbook"}
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
    cfg = {"block_momentum": 0.6, "block_lr": 1.5, "nesterov": nesterov, "form": "textbook"}
    cfg["warmup_blocks"] = 0
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


# ---------------------------------------------------------------- CNTK form, warm-up (issue 37)


def sd2(w, b):
    """A scalar learnable parameter w and a scalar buffer b."""
    return {
        "w": torch.tensor([w], dtype=torch.float64),
        "b": torch.tensor([b], dtype=torch.float64),
    }


def block(state, a, params, it):
    """One block from state (g, Δ, s) with averaged model a: the new (g, Δ, s)."""
    g, delta, s = state
    return bmuf_block(g, delta, a, s, params, it, learnable={"w"})


def vals(state):
    return [(x["w"].item(), x["b"].item()) for x in state]


def test_cntk_blocks_by_hand_nesterov_classic_and_buffers():
    """N = 2, bm = 0.5, η_b = 1: gain (1 − bm)·η_b·N = 1 on a − s. w learnable, b a buffer.
    g0 = s0 = (1, 1), Δ0 = 0; a1 = (3, 5), a2 = (2, 7)."""
    nbm = BmufParams(0.5, 1.0, nesterov=True, form="cntk", warmup_blocks=0, num_jobs=2)
    cls = BmufParams(0.5, 1.0, nesterov=False, form="cntk", warmup_blocks=0, num_jobs=2)
    init = (sd2(1.0, 1.0), sd2(0.0, 0.0), sd2(1.0, 1.0))
    # block 1: Δ = 1·(3 − 1) = 2, g = s + Δ = 3, NBM start 3 + 0.5·2 = 4; b: g = s = 5, Δ = 0
    s1 = block(init, sd2(3.0, 5.0), nbm, 0)
    assert vals(s1) == [(3.0, 5.0), (2.0, 0.0), (4.0, 5.0)]
    # block 2 (jobs from 4): Δ = 0.5·2 + (2 − 4) = −1, g = 4 − 1 = 3 (the base is the
    # look-ahead 4, not g = 3: textbook would give 2), start 3 − 0.5 = 2.5; b = 7
    assert vals(block(s1, sd2(2.0, 7.0), nbm, 1)) == [(3.0, 7.0), (-1.0, 0.0), (2.5, 7.0)]
    # classic: block 1 start = g = 3; block 2 Δ = 0.5·2 + (2 − 3) = 0, g = s = 3
    c1 = block(init, sd2(3.0, 5.0), cls, 0)
    assert vals(c1) == [(3.0, 5.0), (2.0, 0.0), (3.0, 5.0)]
    assert vals(block(c1, sd2(2.0, 7.0), cls, 1)) == [(3.0, 7.0), (0.0, 0.0), (3.0, 7.0)]


def test_cntk_gain_is_on_the_summed_displacement():
    """N = 4, bm = 0.5, η_b = 1: Δ = (1 − 0.5)·1·4·(a − s) = 2·(a − s), not 0.5 or 1."""
    p = BmufParams(0.5, 1.0, nesterov=False, form="cntk", warmup_blocks=0, num_jobs=4)
    out = block((sd2(0.0, 0.0), sd2(0.0, 0.0), sd2(0.0, 0.0)), sd2(1.0, 1.0), p, 0)
    assert vals(out) == [(2.0, 1.0), (2.0, 0.0), (2.0, 1.0)]


def test_textbook_filters_buffers_too():
    """Today's form kept: Δ = bm·Δ + η_b·(a − s) on every tensor, g ← g + Δ."""
    p = BmufParams(0.5, 1.0, nesterov=True, form="textbook", warmup_blocks=0, num_jobs=2)
    init = (sd2(1.0, 1.0), sd2(0.0, 0.0), sd2(1.0, 1.0))
    s1 = bmuf_block(*init[:2], sd2(3.0, 5.0), init[2], p, 0)
    # w: Δ = 2, g = 3, start 4; b: Δ = 4, g = 5, start 7
    assert vals(s1) == [(3.0, 5.0), (2.0, 4.0), (4.0, 7.0)]
    # block 2 (a = 2, jobs from 4): Δ = 1 + (2 − 4) = −1, g = g + Δ = 2 (cntk: 3), start 1.5
    s2 = bmuf_block(*s1[:2], sd2(2.0, 7.0), s1[2], p, 1)
    assert s2[0]["w"].item() == 2.0 and s2[1]["w"].item() == -1.0 and s2[2]["w"].item() == 1.5


def test_warmup_blocks_are_plain_averaging_then_the_filter_starts_from_zero():
    """warmup_blocks = 2, N = 2, bm = 0.5, η_b = 1 (gain 1), NBM. a1 = 3, a2 = 5, a3 = 4."""
    p = BmufParams(0.5, 1.0, nesterov=True, form="cntk", warmup_blocks=2, num_jobs=2)
    st = (sd2(1.0, 1.0), sd2(0.0, 0.0), sd2(1.0, 1.0))
    st = block(st, sd2(3.0, 3.0), p, 0)  # warm-up: g = s = a = 3, Δ = 0
    assert vals(st) == [(3.0, 3.0), (0.0, 0.0), (3.0, 3.0)]
    st = block(st, sd2(5.0, 5.0), p, 1)  # warm-up: g = s = 5
    assert vals(st) == [(5.0, 5.0), (0.0, 0.0), (5.0, 5.0)]
    # block 3, the first filtered: Δ = 0.5·0 + (4 − 5) = −1, g = 4, start 4 − 0.5 = 3.5
    st = block(st, sd2(4.0, 4.0), p, 2)
    assert vals(st) == [(4.0, 4.0), (-1.0, 0.0), (3.5, 4.0)]
    assert p.in_warmup(1) and not p.in_warmup(2)


def test_cntk_nbm_equals_classic_with_block_lr_times_one_plus_bm():
    """The identity of docs/sync-methods.md: cntk NBM (bm, η_b) moves the start models as
    classic (bm, N·η_b·(1 − bm)·(1 + bm)) on the mean; at bm = 1 − 1/N, classic (bm, η_b·(1+bm)),
    in both forms' classic variant (they coincide without NBM)."""
    torch.manual_seed(0)
    n, bm = 4, 0.75
    nbm = BmufParams(bm, 1.0, nesterov=True, form="cntk", warmup_blocks=0, num_jobs=n)
    for form in ("cntk", "textbook"):
        lr = 1.75 if form == "textbook" else 1.75 / (n * (1 - bm))  # = 1.75 either way
        cls = BmufParams(bm, lr, nesterov=False, form=form, warmup_blocks=0, num_jobs=n)
        x = {"w": torch.zeros(3, dtype=torch.float64)}
        a_st, b_st = (x, x, x), (x, x, x)
        for it in range(12):
            d = {"w": torch.randn(3, dtype=torch.float64)}  # the jobs' mean displacement
            a_st = bmuf_block(*a_st[:2], {"w": a_st[2]["w"] + d["w"]}, a_st[2], nbm, it)
            b_st = bmuf_block(*b_st[:2], {"w": b_st[2]["w"] + d["w"]}, b_st[2], cls, it)
            assert torch.allclose(a_st[2]["w"], b_st[2]["w"], atol=1e-12), (form, it)


def test_cntk_learning_rate_scale_and_default_warmup():
    p = BmufParams.from_config({"block_momentum": None}, 4)
    assert (p.form, p.warmup_blocks, p.num_jobs) == ("cntk", 4, 4)  # one time constant, N
    assert job_learning_rate_scale(p) == 0.25
    q = BmufParams.from_config({"block_momentum": 0.5, "block_lr": 3.0}, 8)
    assert q.warmup_blocks == 2 and job_learning_rate_scale(q) == 1 / 8  # ε per job
    assert BmufParams.from_config({"block_momentum": 0.0}, 4).warmup_blocks == 1
    assert BmufParams.from_config({"warmup_blocks": 0}, 3).warmup_blocks == 0
    with pytest.raises(ValueError, match="form"):
        BmufParams(0.5, form="fairseq")
    with pytest.raises(ValueError, match="warmup_blocks"):
        BmufParams(0.5, warmup_blocks=-1)


def test_cntk_node_averages_buffers_and_filters_parameters(tmp_path):
    """Through the files: the model's buffers (LDA, priors) are the jobs' average, its
    parameters follow the cntk rule; a warm-up block is ``average`` bit for bit."""
    save_torch_atomic(tmp_path / "0.pt", model_to_file_dict(model(0)))
    cfg = {"block_momentum": 0.5, "block_lr": 1.0, "nesterov": True, "warmup_blocks": 1}
    k = "hidden.0.weight"
    g_in, d_in, s_in = tmp_path / "0.pt", None, tmp_path / "0.pt"
    s = None
    for it, seeds in enumerate([(1, 2), (3, 4)]):
        paths, stats = write_iteration(tmp_path / f"{it + 1}", seeds, [-1.0, -1.0])
        outs = [tmp_path / f"{it + 1}.pt", tmp_path / f"bmuf/{it + 1}.pt"]
        outs.append(tmp_path / f"bmuf/{it + 1}.delta.pt")
        summary = bmuf_sync(
            paths, stats, g_in, d_in, s_in, it, 1.0, cfg, *outs, tmp_path / "s.json"
        )
        expected, _ = average_jobs(paths, stats, it, 1.0)
        got = load_model_file(outs[0])["state_dict"]
        if it == 0:  # warm-up: average bit for bit
            assert summary["warmup"] and summary["form"] == "cntk"
            assert all(torch.equal(got[n], v) for n, v in expected["state_dict"].items())
        else:  # gain (1 − 0.5)·1·2 = 1: Δ = a − s, g = s + Δ = a, start a + 0.5·(a − s)
            assert not summary["warmup"]
            a = expected["state_dict"][k].double()
            assert torch.allclose(got[k].double(), a + 0.5 * (a - s), atol=1e-6)
            buffers = [
                n for n in expected["state_dict"] if n not in dict(model(0).named_parameters())
            ]
            assert "lda_weight" in buffers
            for n in buffers:
                assert torch.equal(got[n], expected["state_dict"][n]), n
        s = got[k].double()
        g_in, d_in, s_in = outs[1], outs[2], outs[0]
