"""The start model a train job forms in memory is bit for bit the synced file the off-path
node writes from the same inputs (average and BMUF): the node is off the critical path.

Both sides run the real rule scripts with the files and settings the plan gives their
rules: ``scripts/train_job.py`` (``run_planned_job`` forms the start from
``ExperimentPlan.start_inputs`` and keeps it in ``<t+1>/job<j>.start.pt``; the job itself
only sleeps, ``simulate.train_seconds``) and ``scripts/sync_node.py`` as rule ``average`` /
``bmuf`` (``<t>.pt`` from ``ExperimentPlan.node_inputs``). The params are the plan's
``job_rule`` and ``node_rule`` (their params: what ``paravg.dag.Dag`` gives the rules)."""

import json
import runpy
from pathlib import Path

import pytest
import torch
import yaml

from paravg.config import REPO_CONFIG, deep_merge, validate_config
from paravg.io import save_torch_atomic
from paravg.nnet.model_file import load_model_file, model_to_file_dict
from paravg.plan import experiment_plans
from tests.unit.dummies import seeded, tdnn_config

SCRIPTS = REPO_CONFIG.parents[1] / "scripts"
INFO = {"num_archives": 12, "frames_per_eg": 8, "num_frames": 123456}
CFG = tdnn_config((8, [0]), input_splice=[-1, 0, 1])
# threshold 2: job 2 (1.5 below the best) is averaged only if both sides read the config's
# threshold (Kaldi's default 1.0 would drop it); job 3 (2.5 below) is rejected
OBJFS = [-1.0, -1.3, -2.5, -3.5]
THRESHOLD = 2.0


class Snake(dict):
    """The ``snakemake`` object a rule script sees: attributes, and ``output.get``."""

    __getattr__ = dict.__getitem__


@pytest.fixture(autouse=True)
def no_log_files(monkeypatch):
    """The scripts log to their rule's log file; here the test's output suffices."""
    monkeypatch.setattr("paravg.logs.setup_logging", lambda *a, **k: None)


def plan_of(tmp_path, method):
    cfg = yaml.safe_load(REPO_CONFIG.read_text())
    overrides = {
        "results": str(tmp_path),
        "trainer": {"num_jobs_initial": 4, "num_jobs_final": 4},
        "sync": {"method": method, "objf_threshold": THRESHOLD},
        "simulate": {"train_seconds": 0.001},
    }
    p = experiment_plans(validate_config(deep_merge(cfg, overrides)), INFO)["default"]
    Path(p.layout.egs_info()).parent.mkdir(parents=True)
    Path(p.layout.egs_info()).write_text(json.dumps(INFO))  # the egs the plan was made for
    return p


def write_job_outputs(p, index, seed):
    """What the jobs of iteration index − 1 leave: models, and stats with their plan's
    fingerprint (which the next jobs check) and objective."""
    for j in range(p.num_jobs(index - 1)):
        m = seeded(CFG, seed * 10 + j, feat=4, ivec=0, targets=5)
        save_torch_atomic(p.layout.job_model(p.name, index, j), model_to_file_dict(m, {}))
        stats = {"objf": OBJFS[j], "plan": {"fingerprint": p.fingerprint(index)}}
        Path(p.layout.job_stats(p.name, index, j)).write_text(json.dumps(stats))


def run_script(name, **snakemake):
    runpy.run_path(str(SCRIPTS / name), init_globals={"snakemake": Snake(snakemake)})


def job_start(p, t, j):
    """Job j of iteration t through ``scripts/train_job.py``: the start model it formed."""
    L, e = p.layout, p.name
    plan = p.job_rule(t, j).params()
    start = L.job_start(e, t + 1, j)
    run_script(
        "train_job.py",
        params=Snake(plan=plan),
        resources=Snake(train_device="cpu", straggler_factor="1.0"),
        output=Snake(model=L.job_model(e, t + 1, j), stats=L.job_stats(e, t + 1, j), start=start),
        log=[None],
        threads=torch.get_num_threads(),
    )
    stats = json.loads(Path(L.job_stats(e, t + 1, j)).read_text())
    assert stats["simulated"] and stats["plan"]["fingerprint"] == p.fingerprint(t + 1)
    return load_model_file(start)["state_dict"], stats["start"]


def node(p, t):
    """The sync node of index t through its rule script: ``<t>.pt`` and its summary."""
    L, e = p.layout, p.name
    params = Snake(node=p.node_rule(t).params())
    out = Snake({role: getattr(L, kind)(e, t) for role, kind in p.sync.node_kind.outputs})
    run_script("sync_node.py", rule=p.sync.node, params=params, output=out, log=[None])
    summary = json.loads(Path(L.sync_summary(e, t)).read_text())
    return load_model_file(L.model(e, t))["state_dict"], summary


def same(a, b):
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


@pytest.mark.parametrize("method", ["average", "bmuf"])
def test_every_jobs_start_is_the_nodes_model(tmp_path, method):
    """Iteration 1 (from iteration 0's jobs: Kaldi takes the best job; BMUF's first block
    starts from ``0.pt``) and iteration 2 (the accepted jobs averaged; BMUF with the block
    state the node of index 1 wrote): every job's start is the node's ``<t>.pt``."""
    p = plan_of(tmp_path, method)
    assert p.sync.node == method and p.num_jobs(0) == p.num_jobs(1) == 4
    m0 = seeded(CFG, 0, feat=4, ivec=0, targets=5)
    save_torch_atomic(p.layout.init_model(p.name), model_to_file_dict(m0, {}))
    for t in (1, 2):
        write_job_outputs(p, t, seed=t)
        synced, summary = node(p, t)
        # the setup exercises the threshold: job 3 rejected, job 2 kept (not at t − 1 = 0,
        # where Kaldi takes the best job alone)
        assert summary["accepted"] == ([0] if t == 1 else [0, 1, 2])
        jobs = [load_model_file(p.layout.job_model(p.name, t, j))["state_dict"] for j in range(4)]
        assert not any(same(synced, w) for w in jobs[1:])
        for j in range(p.num_jobs(t)):
            start, how = job_start(p, t, j)
            assert same(start, synced), f"job {j} of iteration {t} did not start from {t}.pt"
            assert how["accepted"] == summary["accepted"]
