"""Delay-by-one, d-psgd and the other ring methods: the start-model formula, the edges,
contraction without progress, and a multi-iteration simulation through the same files and
functions the DAG uses, against the definitions (s_j^{t+1} = M(s^t)_j + Δ_j^{t−1}, resp.
+ Δ_j^t; gossip-average M(w^t)_j)."""

import itertools
import json

import pytest
import torch

from paravg.io import save_torch_atomic
from paravg.layout import Layout
from paravg.sync.decentralized import mixed_start
from paravg.sync.delay_by_one import mix_plus_displacement
from paravg.sync.registry import get_method, neighbourhoods
from paravg.sync.ring import fixed_ring_order, ring_neighbourhoods
from paravg.sync.tensors import mean


def ring_mix(models: list[dict], neighbourhoods) -> list[dict]:
    """M(w)_j of every job at once (DESIGN.md): the mean of its neighbourhood's models, by
    the mean the mix nodes use (paravg.sync.tensors.mean)."""
    return [mean([models[k] for k in nb]) for nb in neighbourhoods]


def test_formula_and_float64_arithmetic():
    mixed = {"w": torch.tensor([1.0, 2.0])}
    end = {"w": torch.tensor([5.0, 5.0])}
    start = {"w": torch.tensor([4.0, 6.0])}
    out = mix_plus_displacement(mixed, end, start)
    assert out["w"].tolist() == [2.0, 1.0] and out["w"].dtype == torch.float32
    # exact when the mixture is the own start (first iteration): s + (w − s) = w
    w = {"w": torch.randn(100)}
    s = {"w": torch.randn(100) * 1e3}
    assert torch.equal(mix_plus_displacement(s, w, s)["w"], w["w"])


def test_d_psgd_job_reads_the_neighbours_starts_and_its_own_displacement():
    m, L = get_method("d-psgd"), Layout("r")
    n = 5
    nb = ring_neighbourhoods(fixed_ring_order(n))
    per_iter = (n,) * 8

    def inputs(t, j):
        refs = m.start_inputs(t, j, per_iter, 0)
        return {role: [r.path(L, "e") for r in rs] for role, rs in refs.items()}

    assert inputs(0, 3) == {"initial": ["r/exp/e/0.pt"]}
    for t in range(1, 6):
        for j in range(n):
            got = inputs(t, j)
            assert got["models"] == [f"r/exp/e/{t}/job{k}.start.pt" for k in nb[j]]
            assert got["own_end"] == [f"r/exp/e/{t}/job{j}.pt"]  # Δ^{t−1}
            assert got["own_start"] == [f"r/exp/e/{t}/job{j}.start.pt"]


@pytest.mark.parametrize("mixing", ["pairwise", "neighbourhood"])
def test_delay_by_one_mix_node_reads_no_job_of_the_iteration_before(mixing):
    """Job (t, j) reads the start its mix node wrote and, for order, its own job of
    t − 1; the mix node reads the neighbours' starts of t − 1 (0.pt for t = 1), the own
    job of t − 2 and the objectives of the jobs whose progress those starts hold (t − 3):
    no neighbour's job of t − 1, so a slow neighbour never holds up job (t, j)."""
    m, L = get_method("delay-by-one"), Layout("r")
    n = 5
    per_iter = (n,) * 8

    def paths(refs):
        return {role: [r.path(L, "e") for r in rs] for role, rs in refs.items()}

    assert m.mix_node and not get_method("d-psgd").mix_node
    assert paths(m.start_inputs(0, 3, per_iter, 0)) == {"initial": ["r/exp/e/0.pt"]}
    with pytest.raises(ValueError, match="no mix node"):
        m.mix_inputs(0, 3, per_iter, 0)
    e = "r/exp/e"
    for t in range(1, 7):
        group = neighbourhoods("delay-by-one", t, n, 0, mixing)
        nb = [[j, *(k for k in group[j] if k != j)] for j in range(n)]  # own first
        for j in range(n):
            assert paths(m.start_inputs(t, j, per_iter, 0)) == {
                "mixed_start": [f"{e}/{t + 1}/job{j}.start.pt"],
                "previous": [f"{e}/{t}/job{j}.json"],
            }
            got = paths(m.mix_inputs(t, j, per_iter, 0, mixing))
            starts = [f"{e}/{t}/job{k}.start.pt" if t > 1 else f"{e}/0.pt" for k in nb[j]]
            assert got["models"] == starts
            assert got.get("stats", []) == (
                [f"{e}/{t - 2}/job{k}.json" for k in nb[j]] if t >= 3 else []
            )
            if t == 1:  # Δ^{−1} = 0
                assert "own_end" not in got and "own_start" not in got
                continue
            assert got["own_end"] == [f"{e}/{t - 1}/job{j}.pt"]
            assert got["own_start"] == [f"{e}/{t - 1}/job{j}.start.pt" if t > 2 else f"{e}/0.pt"]
            # nothing the neighbours' (or the own) job of t − 1 writes (index t)
            assert not [
                p
                for ps in got.values()
                for p in ps
                if p.startswith(f"{e}/{t}/job") and not p.endswith(".start.pt")
            ]


def form_start(method, t, j, per_iter, srand, layout, sync_cfg, mixing=None):
    """s_j^t as the DAG forms it: in the job, or (delay-by-one) in the mix node of (t, j),
    whose file the job then reads (``mixing``: ``sync.mixing``, None: the method's)."""
    from paravg.sync.adpsgd import mix_node
    from paravg.sync.start import form_start_model

    m = get_method(method)

    def paths(refs):
        return {role: [r.path(layout, "e") for r in rs] for role, rs in refs.items()}

    if m.mix_node and t >= 1:
        outputs = {
            "model": layout.job_start("e", t + 1, j),
            "record": layout.job_start_record("e", t + 1, j),
        }
        plan = {"fingerprint": None}  # the fake stats carry no plan
        files = paths(m.mix_inputs(t, j, per_iter, srand, mixing))
        mix_node(files, sync_cfg, t, outputs, plan)
    files = paths(m.start_inputs(t, j, per_iter, srand, mixing))
    return form_start_model(method, files, t, sync_cfg)


def spread(models):
    mean = sum(m["w"] for m in models) / len(models)
    return max(float((m["w"] - mean).abs().max()) for m in models)


@pytest.mark.parametrize("method", ["delay-by-one", "d-psgd", "ring"])
def test_without_progress_the_learners_contract_at_every_iteration(tmp_path, method):
    """Zero learning rate (w = s): s^{t+1} = M(s^t) (three-way mixing here), so the
    spread around the mean shrinks at every iteration (the earlier s^{t+1} = M(w^{t−1}) +
    Δ^t mixed each chain only every other iteration and let the spread of s^{t−1} come
    back)."""
    n, iters = 5, 8
    m, layout = get_method(method), Layout(str(tmp_path))
    g = torch.Generator().manual_seed(1)
    starts = {  # distinct learners at indices 1..3, the older ones 10x further apart
        1: [{"w": 100 * torch.randn(4, generator=g, dtype=torch.float64)} for _ in range(n)],
        2: [{"w": 10 * torch.randn(4, generator=g, dtype=torch.float64)} for _ in range(n)],
        3: [{"w": torch.randn(4, generator=g, dtype=torch.float64)} for _ in range(n)],
    }
    for index, models in starts.items():
        for j, sd in enumerate(models):
            d = tmp_path / "exp" / "e" / str(index)
            d.mkdir(parents=True, exist_ok=True)
            save(d / f"job{j}.start.pt", sd)
            save(d / f"job{j}.pt", sd)  # no progress
            (d / f"job{j}.json").write_text(json.dumps({"objf": -1.0}))
    spreads = [spread(starts[3])]
    for t in range(3, iters):
        new = []
        for j in range(n):
            sync_cfg = {"objf_threshold": 1.0}
            start, _ = form_start(method, t, j, (n,) * iters, 0, layout, sync_cfg, "neighbourhood")
            mixed = sum(starts[t][k]["w"] for k in ring_neighbourhoods(fixed_ring_order(n))[j])
            assert torch.allclose(start["state_dict"]["w"], mixed / 3, atol=1e-12)
            new.append(start["state_dict"])
        starts[t + 1] = new
        d = tmp_path / "exp" / "e" / str(t + 1)
        d.mkdir(parents=True, exist_ok=True)
        for j, sd in enumerate(new):
            if not m.mix_node:  # written by the mix node otherwise
                save(d / f"job{j}.start.pt", sd)
            save(d / f"job{j}.pt", sd)
            (d / f"job{j}.json").write_text(json.dumps({"objf": -1.0}))
        spreads.append(spread(new))
    assert all(b < a for a, b in itertools.pairwise(spreads)), spreads


def fake_train(start, t, j):
    """A deterministic 'job': w = s + d(t, j) with d pulled towards a target."""
    g = torch.Generator().manual_seed(1000 * t + j)
    return {
        k: v - 0.3 * v + 0.1 * torch.randn(v.shape, generator=g, dtype=v.dtype)
        for k, v in start.items()
    }


def save(path, sd):
    save_torch_atomic(path, {"format": "paravg.tdnn.v1", "state_dict": sd, "meta": {}})


METHODS = ["delay-by-one", "d-psgd", "ring", "random-ring", "gossip-average"]


@pytest.mark.parametrize("method", [*METHODS, "random-gossip-average"])
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
        nb = neighbourhoods(method, t + 1, n, srand)
        if not method.endswith("gossip-average"):
            # s^{t+1} = M(s^t) + Δ^{t−1} (delay-by-one, Δ^{−1} = 0) or + Δ^t (the others);
            # the objectives are within the threshold: no edge is cut, no neighbour dropped
            mixed = ring_mix(s_ref[t], nb)
            own = t - 1 if method == "delay-by-one" else t
            nxt = [
                {
                    k: mixed[j][k] + (w_ref[own][j][k] - s_ref[own][j][k] if own >= 0 else 0)
                    for k in init
                }
                for j in range(n)
            ]
        else:
            if t == 0:  # Kaldi's best job after iteration 0: the neighbourhood's best
                nxt = [w_ref[0][max(nb[j], key=objf_of)] for j in range(n)]
            else:
                nxt = ring_mix(w_ref[t], nb)
        s_ref.append(nxt)
    # the DAG's way: each job (and mix node) reads only the files its inputs name
    layout = Layout(str(tmp_path))
    sync_cfg = {"objf_threshold": 1.0}
    for t in range(iters):
        for j in range(n):
            d = tmp_path / "exp" / "e" / str(t + 1)
            d.mkdir(parents=True, exist_ok=True)
            start, _ = form_start(method, t, j, (n,) * iters, srand, layout, sync_cfg)
            if not m.mix_node:
                save(d / f"job{j}.start.pt", start["state_dict"])
            assert torch.allclose(start["state_dict"]["w"], s_ref[t][j]["w"], atol=1e-12), (t, j)
            save(d / f"job{j}.pt", fake_train(start["state_dict"], t, j))
            (d / f"job{j}.json").write_text(json.dumps({"objf": objf_of(j)}))


def objf_of(j):
    return -1.0 - 0.1 * ((3 * j) % 4)  # distinct per job: job 0 best, then 3, 2, 1


def test_missing_half_of_the_own_progress_is_refused(tmp_path):
    save(tmp_path / "a.pt", {"w": torch.zeros(2)})
    (tmp_path / "a.json").write_text('{"objf": -1}')
    with pytest.raises(ValueError, match="both"):
        mixed_start([tmp_path / "a.pt"], [tmp_path / "a.json"], 3, 1.0, own_end=tmp_path / "a.pt")


def test_without_objectives_every_model_is_mixed_even_after_iteration_0(tmp_path):
    # delay-by-one's mix nodes before t = 3 have no job behind their models: none is
    # chosen as "the best", not even at mix iteration 0 (Kaldi's best-job rule)
    paths = []
    for k, value in enumerate([1.0, 2.0, 6.0]):
        save(tmp_path / f"{k}.pt", {"w": torch.full((2,), value)})
        paths.append(tmp_path / f"{k}.pt")
    for mix_iteration in (0, 1):
        start, record = mixed_start(paths, None, mix_iteration, 1.0)
        assert start["state_dict"]["w"].tolist() == [3.0, 3.0]
        assert record["mixed"] == [str(p) for p in paths] and record["rejected"] == []


def restoring_job(start: dict, gamma: float) -> dict:
    """A job that pulls its model a fraction γ of the way to the common optimum 0."""
    return {k: (1.0 - gamma) * v for k, v in start.items()}


def flipping_mode(models) -> float:
    """|component of the learners along +, −, +, − around a ring of 4| (M's eigenvalue −1/3)."""
    return float(sum((-1) ** j * m["w"] for j, m in enumerate(models)).abs().max()) / 4


@pytest.mark.parametrize(
    ("method", "gamma", "factor"),
    [
        ("d-psgd", 0.5, 0.5 + 1 / 3),  # |λ − γ| with λ = −1/3: contracts
        ("d-psgd", 0.8, 0.8 + 1 / 3),  # γ > 1 + λ = 2/3: the learners fly apart
        ("gossip-average", 0.8, (1 - 0.8) / 3),  # the displacement is mixed: |λ (1 − γ)|
        ("delay-by-one", 0.8, 0.8**0.5),  # z² − λ z + γ = 0: complex roots, |z| = √γ
    ],
)
def test_own_progress_overshoots_the_flipping_mode_when_jobs_restore_strongly(
    method, gamma, factor
):
    """What the learners table of docs/sync-methods.md (d-psgd's flipping mode) measures
    on the demo: a learner's deviation from the mean along M's eigenvector of eigenvalue
    λ = −1/3 (ring of 4) is flipped by the mixing and pulled back by its own job (a
    fraction γ); d-psgd adds the two, so beyond γ = 2/3 the deviation grows by γ − λ per
    iteration while the mean still converges."""
    n, iters = 4, 24
    nb = ring_neighbourhoods(fixed_ring_order(n))
    g = torch.Generator().manual_seed(7)
    starts = [{"w": torch.randn(6, generator=g, dtype=torch.float64)} for _ in range(n)]
    starts = [{"w": s["w"] + (-1) ** j} for j, s in enumerate(starts)]  # a flipping part
    prev_starts, prev_ends = None, None
    sizes = []
    for _ in range(iters):
        ends = [restoring_job(s, gamma) for s in starts]
        if method == "gossip-average":
            new = ring_mix(ends, nb)
        else:
            mixed = ring_mix(starts, nb)
            own = (ends, starts) if method == "d-psgd" else (prev_ends, prev_starts)
            new = (
                mixed  # delay-by-one's first step: Δ^{−1} = 0
                if own[0] is None
                else [mix_plus_displacement(mixed[j], own[0][j], own[1][j]) for j in range(n)]
            )
        prev_starts, prev_ends, starts = starts, ends, new
        sizes.append(flipping_mode(starts))
    # per-iteration rate between two windows of 4 (delay-by-one's complex roots oscillate)
    rate = (max(sizes[-4:]) / max(sizes[-12:-8])) ** (1 / 8)
    assert rate == pytest.approx(factor, rel=0.05), sizes
    mean = sum(s["w"] for s in starts) / n
    assert float(mean.abs().max()) < 0.2  # the mean converges in every case
