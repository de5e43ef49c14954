"""Sync methods in the real DAG: the edges each method implies, and a short end-to-end run.

One tiny workspace (``tests/pipeline/tiny.yaml`` + seven experiments, one per sync method,
three jobs each) is built up to the egs once; then

* the DAG tests read ``snakemake --dry-run --forcerun init_model``'s job list (every job's input and
  output files) and check that EMA and consensus files never feed a train job, that a
  gossip-average job reads only its neighbours' outputs, a ring, random-ring or d-psgd job
  exactly its partners' (neighbours') start models and its own job before, a delay-by-one
  job its mix node's start and its own job before, and its mix node its partner's start
  and its own job of two iterations before (no job of the iteration before), and that the
  fan-in methods' jobs read only ``<t>.pt``;
* the end-to-end test runs the whole tiny pipeline for all seven methods at once and checks
  each method's own files (BMUF state, consensus, EMA, EMA evaluation) and, from the kept
  job models, that every decentralized start model is what its definition says. With
  N = 3 the pairwise methods leave one learner out of each iteration's matching.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import torch

from paravg.nnet.model_file import build_model, load_model_file
from paravg.sync.registry import get_method, neighbourhoods

from .conftest import WARM, check_ok, run_snakemake

pytestmark = pytest.mark.pipeline

N = 3
METHODS = ["average", "bmuf", "ring", "random-ring", "delay-by-one", "d-psgd", "gossip-average"]
EMA = {"average", "ring"}  # EMA is independent of the method: two are enough
BMUF_WARMUP = 1  # one block of plain averaging, then three CNTK blocks (default form)
# 0.25 epochs of the tiny egs (6 archives x 8 frames) at 3 jobs = 4 iterations
OVERLAY = {
    "trainer": {"num_epochs": 0.25},
    "experiments": {
        m: {
            "trainer": {"num_jobs_initial": N, "num_jobs_final": N},
            "sync": {"method": m, "ema": {"enabled": m in EMA}}
            | ({"bmuf": {"warmup_blocks": BMUF_WARMUP}} if m == "bmuf" else {}),
        }
        for m in METHODS
    },
}
TARGETS = [f"results/exp/{m}/eval/test.json" for m in METHODS] + [
    f"results/exp/{m}/eval/ema/test.json" for m in sorted(EMA)
]


@pytest.fixture(scope="module")
def workdir(clone_upstream) -> Path:
    """A clone of the tiny workspace (egs built), where the six methods train."""
    return clone_upstream("sync")


def dry_run_jobs(workdir: Path) -> list[dict]:
    """Every job of the whole DAG: rule, wildcards, input and output files."""
    proc = run_snakemake(
        workdir,
        "--dry-run",
        "--forcerun",
        "init_model",
        "--cores",
        "2",
        *TARGETS,
        overlay=OVERLAY,
    )
    check_ok(proc, "dry-run")
    jobs, cur = [], None
    for line in proc.stdout.splitlines():
        m = re.match(r"^(?:local)?(?:rule|checkpoint) (\S+):$", line.strip())
        if m:
            cur = {"rule": m.group(1), "input": [], "output": [], "wildcards": {}}
            jobs.append(cur)
            continue
        if cur is None:
            continue
        key, _, value = line.strip().partition(": ")
        if key in ("input", "output"):
            cur[key] = [v.strip() for v in value.split(",") if v.strip()]
        elif key == "wildcards":
            cur["wildcards"] = dict(kv.split("=", 1) for kv in value.split(", "))
    return jobs


@pytest.fixture(scope="module")
def jobs(workdir) -> list[dict]:
    jobs = dry_run_jobs(workdir)
    # a clone of the shared upstream stages: six new experiments rebuild none of them
    shared = {"demo_corpus", "prepare_data", "compute_features", "egs", "egs_archive"}
    assert not {j["rule"] for j in jobs} & shared
    return jobs


def train_jobs(jobs, exp):
    return {
        (int(j["wildcards"]["t"]) - 1, int(j["wildcards"]["j"])): j
        for j in jobs
        if j["rule"].startswith("train_job") and j["wildcards"].get("exp") == exp
    }


def exp_prefix(exp):
    return f"results/exp/{exp}/"


def model_inputs(job, exp):
    """The model files a train job reads (everything under its experiment directory)."""
    return sorted(p for p in job["input"] if p.startswith(exp_prefix(exp)))


def test_ema_and_consensus_never_feed_a_train_job(jobs):
    assert any(j["rule"] == "ema" for j in jobs) and any(j["rule"] == "consensus" for j in jobs)
    for j in jobs:
        if j["rule"].startswith("train_job"):
            bad = [p for p in j["input"] if "/ema/" in p or "/consensus/" in p or "/diag/" in p]
            assert not bad, (j["wildcards"], bad)


def test_each_method_uses_its_own_rules(jobs):
    rules = {m: {j["rule"] for j in jobs if j["wildcards"].get("exp") == m} for m in METHODS}
    assert "average" in rules["average"] and "bmuf" not in rules["average"]
    assert "bmuf" in rules["bmuf"] and "average" not in rules["bmuf"]
    assert {"train_job", "consensus"} <= rules["gossip-average"]
    assert not rules["gossip-average"] & {"train_job_keep_start", "average", "bmuf"}
    # ring, random-ring and d-psgd keep every job's start model: the same job, one more output
    for m in ("ring", "random-ring", "d-psgd"):
        assert {"train_job_keep_start", "consensus"} <= rules[m]
        assert not rules[m] & {"train_job", "average", "bmuf", "mix_node"}, rules[m]
    # delay-by-one's starts come from a mix node per (t, j)
    assert {"train_job", "mix_node", "consensus"} <= rules["delay-by-one"]
    assert not rules["delay-by-one"] & {"train_job_keep_start", "average", "bmuf"}
    assert "ema" in rules["average"] and "ema" not in rules["bmuf"]
    assert "evaluate_ema" in rules["ring"]


@pytest.mark.parametrize("exp", ["average", "bmuf"])
def test_global_methods_jobs_read_the_jobs_before_them_not_the_sync_node(jobs, exp):
    """One node per job on the critical path: a job of iteration t averages the jobs of
    t − 1 itself (BMUF: with the block state after t − 1 blocks, written beside t − 1)."""
    tj = train_jobs(jobs, exp)
    assert tj
    d = exp_prefix(exp)
    for (t, _), job in tj.items():
        if t == 0:
            expected = [f"{d}0.pt"]
        else:
            expected = [f"{d}{t}/job{k}.pt" for k in range(N)]
            if exp == "bmuf":
                expected += [f"{d}0.pt"] if t == 1 else [
                    f"{d}bmuf/{t - 1}.pt", f"{d}bmuf/{t - 1}.delta.pt", f"{d}{t - 1}.pt"
                ]  # fmt: skip
        assert sorted(set(model_inputs(job, exp))) == sorted(set(expected)), (t, job["input"])


@pytest.mark.parametrize("exp", ["ring", "random-ring", "delay-by-one", "d-psgd", "gossip-average"])
def test_decentralized_jobs_read_exactly_their_definition(jobs, exp):
    tj = train_jobs(jobs, exp)
    srand = 0
    iters = max(t for t, _ in tj) + 1
    assert iters >= 3, "the tiny schedule needs 3+ iterations to exercise delay-by-one"
    d = exp_prefix(exp)
    ring = [tuple(sorted({(j - 1) % N, j, (j + 1) % N})) for j in range(N)]
    seen_random = set()
    for (t, j), job in tj.items():
        if t == 0:
            expected = [f"{d}0.pt"]
        elif exp == "delay-by-one":  # its mix node's start, and its own job before it
            expected = [f"{d}{t + 1}/job{j}.start.pt", f"{d}{t}/job{j}.json"]
        elif exp in ("d-psgd", "ring", "random-ring"):  # M(s^{t−1}) + Δ^{t−1}
            nb = neighbourhoods(exp, t, N, srand)[j]
            if exp == "d-psgd":
                assert nb == ring[j]
            else:  # pairwise: j and its partner, or j alone (N = 3 is odd)
                assert j in nb and len(nb) in (1, 2)
            expected = [f"{d}{t}/job{k}.start.pt" for k in nb]
            expected += [f"{d}{t}/job{j}.pt", f"{d}{t}/job{j}.start.pt"]
        else:
            nb = neighbourhoods(exp, t, N, srand)[j]
            assert nb == ring[j]
            seen_random.add((t, nb))
            expected = [f"{d}{t}/job{k}.pt" for k in nb]
        assert model_inputs(job, exp) == sorted(expected), (t, j)


def test_delay_by_one_mix_nodes_wait_for_no_neighbours_job(jobs):
    """Cui et al.'s overlap: the mix node writing s_j^t reads the neighbours' starts of
    t − 1 (their mix nodes' files; 0.pt for t = 1) and the learner's own job of t − 2
    (Δ^{t−2}), never a job of t − 1, so it runs while the learner's job of t − 1 trains."""
    d = exp_prefix("delay-by-one")
    mixes = {
        (int(x["wildcards"]["t"]) - 1, int(x["wildcards"]["j"])): x
        for x in jobs
        if x["rule"] == "mix_node" and x["wildcards"].get("exp") == "delay-by-one"
    }
    iters = max(t for t, _ in train_jobs(jobs, "delay-by-one")) + 1
    assert set(mixes) == {(t, j) for t in range(1, iters) for j in range(N)}
    for (t, j), mix in mixes.items():
        nb = neighbourhoods("delay-by-one", t, N, 0)[j]  # j and its partner, or j alone
        assert mix["output"] == [f"{d}{t + 1}/job{j}.start.pt", f"{d}{t + 1}/job{j}.start.json"]
        expected = [f"{d}{t}/job{k}.start.pt" if t > 1 else f"{d}0.pt" for k in nb]
        if t >= 2:  # Δ_j^{t−2}
            expected += [f"{d}{t - 1}/job{j}.pt"]
            expected += [f"{d}{t - 1}/job{j}.start.pt" if t > 2 else f"{d}0.pt"]
        assert sorted(set(model_inputs(mix, "delay-by-one"))) == sorted(set(expected)), (t, j)


def test_end_to_end_all_methods(workdir):
    proc = run_snakemake(workdir, "--cores", "2", *WARM, *TARGETS, overlay=OVERLAY)
    check_ok(proc, "the tiny pipeline with six sync methods")
    root = workdir / "results" / "exp"
    for m in METHODS:
        e = root / m
        assert (e / "final.pt").exists() and (e / "eval" / "test.json").exists(), m
        iters = num_iters(e)
        if m == "bmuf":
            assert (e / "bmuf" / f"{iters}.pt").exists() and (e / f"{iters}.pt").exists()
        if get_method(m).decentralized:
            assert (e / "consensus" / f"{iters}.pt").exists()
            assert not (e / f"{iters}.pt").exists()  # no global model on the critical path
        if m in EMA:
            assert (e / "ema" / f"{iters}.pt").exists()
            assert (e / "eval" / "ema" / "test.json").exists()
    for m in ("ring", "random-ring", "delay-by-one", "d-psgd", "gossip-average"):
        check_start_models(root / m, m)
    check_bmuf_blocks(root / "bmuf")


def num_iters(e: Path) -> int:
    """T: the jobs of the last iteration wrote ``<T>/job0.json``."""
    return max(int(p.parent.name) for p in e.glob("*/job0.json"))


def mean(sds):
    return {k: sum(sd[k].double() for sd in sds) / len(sds) for k in sds[0]}


def check_start_models(e: Path, method: str) -> None:
    """From the kept job models: every start is the definition's function of the files."""

    def sd(path):
        return load_model_file(path)["state_dict"]

    def start_of(index: int, k: int):
        """The start model of job (index, k); delay-by-one's jobs of index 1 start from
        ``0.pt`` itself (its mix nodes write starts from index 2 on)."""
        if method == "delay-by-one" and index == 1:
            return sd(e / "0.pt")
        return sd(e / f"{index}/job{k}.start.pt")

    def objf(index: int, k: int) -> float:
        return json.loads((e / f"{index}/job{k}.json").read_text())["objf"]

    ring = [tuple(sorted({(j - 1) % N, j, (j + 1) % N})) for j in range(N)]
    for t in range(1, num_iters(e)):
        groups = neighbourhoods(method, t, N, 0)
        for j in range(N):
            if method == "gossip-average":  # formed in memory: its record names the mix
                record = json.loads((e / f"{t + 1}/job{j}.json").read_text())["start"]
                if t == 1:  # Kaldi's best job after iteration 0: the neighbourhood's best
                    best = max(ring[j], key=lambda k: (objf(1, k), -k))
                    mixed = [p.split(f"/{e.name}/")[-1] for p in record["mixed"]]
                    assert mixed == [f"1/job{best}.pt"], (t, j, record)
                    continue
                assert sorted(Path(p).name for p in record["mixed"]) == sorted(
                    f"job{k}.pt" for k in ring[j]
                ) and all(f"/{t}/job" in p for p in record["mixed"]), (t, j, record)
                continue
            start = sd(e / f"{t + 1}/job{j}.start.pt")
            if method == "d-psgd":  # M(s^{t−1}), Kaldi's rule (no job far below here)
                expected = mean([start_of(t, k) for k in ring[j]])
            else:  # W(s^{t−1}): 1/|G| per standing edge, the rest on the own start
                # the objectives of the jobs whose progress the mixed starts hold
                index = t - 2 if method == "delay-by-one" else t
                cut = index >= 1  # delay-by-one: none before s^3 (every s^{t−1} is 0.pt)
                weights = {
                    k: 1 / len(groups[j])
                    for k in groups[j]
                    if k != j and not (cut and abs(objf(index, j) - objf(index, k)) > 1.0)
                }
                weights[j] = 1 - sum(weights.values())
                expected = {
                    name: sum(c * start_of(t, k)[name].double() for k, c in weights.items())
                    for name in start
                }
            own = t - 1 if method == "delay-by-one" else t  # whose displacement is added
            if own >= 1:
                end, own_start = sd(e / f"{own}/job{j}.pt"), start_of(own, j)
                expected = {k: expected[k] + end[k].double() - own_start[k].double() for k in end}
            for k, v in start.items():
                if v.is_floating_point():
                    assert torch.allclose(v.double(), expected[k], atol=1e-5), (method, t, j, k)


def check_bmuf_blocks(e: Path) -> None:
    """From the files, CNTK's form (the default) after BMUF_WARMUP blocks of plain
    averaging (g = s = a, Δ = 0): Δ_t = bm·Δ_{t−1} + (1 − bm)·N·(a_t − s_{t−1}),
    g_t = s_{t−1} + Δ_t and the NBM start s_t = g_t + bm·Δ_t on learnable parameters,
    buffers g = s = a_t, with a_t the mean of the accepted jobs."""

    def sd(path):
        return {k: v.double() for k, v in load_model_file(path)["state_dict"].items()}

    bm = 1 - 1 / N
    gain = (1 - bm) * N
    learnable = {n for n, _ in build_model(load_model_file(e / "0.pt")).named_parameters()}
    g, s = sd(e / "0.pt"), sd(e / "0.pt")
    delta = {k: torch.zeros_like(v) for k, v in g.items()}
    for t in range(1, num_iters(e) + 1):
        accepted = json.loads((e / "sync" / f"{t}.json").read_text())["accepted"]
        a = mean([load_model_file(e / str(t) / f"job{j}.pt")["state_dict"] for j in accepted])
        if t <= BMUF_WARMUP:
            g, s, delta = dict(a), dict(a), {k: torch.zeros_like(v) for k, v in a.items()}
        else:
            delta = {k: bm * delta[k] + gain * (a[k] - s[k]) for k in g}
            delta = {k: v if k in learnable else torch.zeros_like(v) for k, v in delta.items()}
            g = {k: s[k] + delta[k] if k in learnable else a[k] for k in g}
            s = {k: g[k] + bm * delta[k] for k in g}
        for name, want in ((f"bmuf/{t}.pt", g), (f"{t}.pt", s), (f"bmuf/{t}.delta.pt", delta)):
            got = sd(e / name)
            for k, v in want.items():
                assert torch.allclose(got[k], v, atol=1e-4), (name, k)
        g, s = sd(e / "bmuf" / f"{t}.pt"), sd(e / f"{t}.pt")  # continue from the stored floats
        delta = sd(e / "bmuf" / f"{t}.delta.pt")
