"""A run's files as its jobs leave them, without running it: the default experiment's plan
for a fixed egs summary, and the records of every iteration up to a given one (what
``paravg.resume`` scans to find where a run resumes). Shared by the resume, DAG and
fingerprint tests."""

import json
import os
import time

import yaml

from paravg.config import REPO_CONFIG, deep_merge, validate_config
from paravg.plan import experiment_plans

INFO = {"num_archives": 12, "frames_per_eg": 8, "num_frames": 1}


def plan_in(tmp_path, overrides=None, **built_with):
    """The plan of experiment ``default`` (``built_with``: experiment_plans' keywords)."""
    cfg = yaml.safe_load(REPO_CONFIG.read_text())
    cfg = validate_config(
        deep_merge(cfg, {"results": str(tmp_path / "results"), **(overrides or {})})
    )
    return experiment_plans(cfg, INFO, **built_with)["default"]


def fabricate(p, done: int, diag_done: int | None = None):
    """Files of a run finished up to layout index ``done`` (as the jobs write them)."""
    L, e = p.layout, p.name
    os.makedirs(L.egs_dir(), exist_ok=True)
    with open(L.egs_info(), "w") as f:
        json.dump(INFO, f)
    time.sleep(0.01)
    os.makedirs(L.exp_dir(e), exist_ok=True)
    open(L.init_model(e), "wb").close()
    with open(L.init_stats(e), "w") as f:
        json.dump({"plan": {"fingerprint": p.fingerprint(0)}}, f)
    for t in range(1, done + 1):
        os.makedirs(L.job_dir(e, t), exist_ok=True)
        for j in range(p.num_jobs(t - 1)):
            rec = {"fingerprint": p.fingerprint(t), "params": p.job_params(t - 1, j),
                   "sync": p.sync_fingerprint_part()}  # fmt: skip
            with open(L.job_stats(e, t, j), "w") as f:
                json.dump({"plan": rec}, f)
        for path in (L.model(e, t), L.sync_summary(e, t)):
            os.makedirs(os.path.dirname(path), exist_ok=True)
            open(path, "w").close()
    for t in range(0, (done if diag_done is None else diag_done) + 1):
        os.makedirs(os.path.dirname(L.diag(e, t)), exist_ok=True)
        open(L.diag(e, t), "w").close()
