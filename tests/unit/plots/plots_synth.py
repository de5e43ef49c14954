"""Synthetic experiment directories (the JSON contract of the training DAG) for the plot tests.

``write_run`` writes what a run of the pipeline writes under ``results/exp/<exp>/``:
``<t+1>/job<j>.json`` for the jobs of iteration t, ``sync/<t+1>.json``, ``diag/<t>.json``,
``init.json``, ``combine.json``, ``final.json`` and ``eval/<set>.json``, with smooth curves,
one rejected job and one diverged job. ``stop_at=(t, k)`` leaves the run half finished:
iterations before t synced, k jobs of iteration t finished, diagnostics lagging one model.
"""

from __future__ import annotations

import json
import math
import random
from collections.abc import Sequence
from pathlib import Path

import yaml

COMPONENTS = ["tdnn1.affine", "tdnn2.affine", "output.affine"]
REJECTED_AT = (5, 1)  # (iteration, job) with a far-too-low objective
DIVERGED_AT = (7, 0)  # (iteration, job) with a NaN objective


def _dump(path: Path, obj) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(obj, indent=2, sort_keys=True))


def effective_lr(t: int, n: int) -> float:
    return 0.0015 * math.exp(t / max(n - 1, 1) * math.log(0.1))


def write_run(
    exp_dir: Path,
    jobs_per_iter: list[int],
    stop_at: tuple[int, int] | None = None,
    seed: int = 0,
    quality: float = 0.0,
    eval_sets: tuple[str, ...] = ("test",),
    learning_rates: Sequence[float] | None = None,
) -> Path:
    """Write a synthetic experiment directory; ``quality`` shifts its curves upward.

    ``learning_rates``: the per-job rate each iteration's jobs record (a plan's
    ``learning_rates``); by default N · ε of a made-up ramp."""
    rng = random.Random(seed)
    n_iters = len(jobs_per_iter)
    last_t = n_iters if stop_at is None else stop_at[0]
    _dump(exp_dir / "init.json", {"lda_dim": 40, "num_targets": 30})

    def logprob(t: float) -> float:
        return -3.4 + quality + 2.0 * (1 - math.exp(-t / 6))

    for t in range(min(last_t + 1, n_iters)):
        n = jobs_per_iter[t]
        finished = n if t < last_t else stop_at[1]
        objfs = []
        for j in range(finished):
            objf = logprob(t + 0.5) - 0.1 + rng.gauss(0, 0.04)
            if (t, j) == REJECTED_AT and n > 1:
                objf -= 1.7
            if (t, j) == DIVERGED_AT:
                objf = math.nan
            objfs.append(None if math.isnan(objf) else objf)
            _dump(
                exp_dir / str(t + 1) / f"job{j}.json",
                {
                    "iteration": t,
                    "job": j,
                    "objf": objf,
                    "accuracy": 0.2 + 0.05 * t,
                    "frames": 4096,
                    "lr": learning_rates[t] if learning_rates else n * effective_lr(t, n_iters),
                    "minibatch_size": 256,
                    "frame": (t + j) % 8,
                    "num_minibatches": 16,
                    "max_change_per_component": {
                        c: round(min(1.0, max(0.0, 0.8 - 0.15 * t + 0.1 * k + 0.05 * j)), 4)
                        for k, c in enumerate(COMPONENTS)
                    },
                    "max_change_global": round(max(0.0, 0.5 - 0.1 * t), 4),
                    "skipped_updates": 1 if (t, j) == DIVERGED_AT else 0,
                    "model_in": str(exp_dir / f"{t}.pt"),
                    "archive": f"results/egs/egs.{(t + j) % 4}",
                    "an_extra_key_from_a_later_issue": [1, 2],
                },
            )
        if t >= last_t:
            continue
        finite = [j for j, o in enumerate(objfs) if o is not None]
        best = max(finite, key=lambda j: objfs[j])
        accepted = [best] if t == 0 else [j for j in finite if objfs[best] - objfs[j] <= 1.0]
        _dump(
            exp_dir / "sync" / f"{t + 1}.json",
            {
                "iteration": t,
                "objfs": objfs,
                "accepted": accepted,
                "rejected": [j for j in range(n) if j not in accepted],
                "problems": [f"job {j}: diverged" for j in range(n) if objfs[j] is None],
                "method": "best" if t == 0 else "average",
            },
        )
    last_diag = last_t if stop_at is None else last_t - 1
    for t in range(last_diag + 1):
        diag = {
            "iteration": t,
            "valid": {
                "logprob": logprob(t) - 0.15,
                "accuracy": 0.1 + 0.4 * (1 - math.exp(-t / 6)),
                "frames": 400,
            },
            "train": {
                "logprob": logprob(t),
                "accuracy": 0.12 + 0.45 * (1 - math.exp(-t / 6)),
                "frames": 400,
            },
        }
        if t > 0:
            diag["progress"] = {
                c: {
                    "change": 2.0 * math.exp(-t / 5) * (k + 1),
                    "relative_change": None
                    if (t == 1 and c == "output.affine")
                    else 0.3 * math.exp(-t / 5) / (k + 1),
                }
                for k, c in enumerate(COMPONENTS)
            }
        _dump(exp_dir / "diag" / f"{t}.json", diag)
    if stop_at is None:
        _dump(
            exp_dir / "combine.json",
            {
                "objective_by_num_models": {"1": logprob(n_iters), "3": logprob(n_iters) + 0.02},
                "num_models": 3,
                "objective": logprob(n_iters) + 0.02,
                "newest_alone": logprob(n_iters),
            },
        )
        _dump(exp_dir / "final.json", {"combined_from": 3, "prior_egs": 500})
        for k, s in enumerate(eval_sets):
            _dump(
                exp_dir / "eval" / f"{s}.json",
                {
                    "frame_accuracy": 0.45 + quality / 10 - 0.01 * k,
                    "cross_entropy": 1.9 - quality - 0.01 * k,
                    "frames": 1234,
                    "utterances": 17,
                },
            )
    return exp_dir


JOBS = [1, 1, 2, 2, 2, 3, 3, 3, 4, 4, 4, 4]  # a 12-iteration run, jobs ramping 1 -> 4


#: The egs geometry and trainer settings of the plots tests' planned schedule: 4 archives
#: of 8 frames, 1.5 epochs, jobs ramping 1 -> 4 (48 archive-passes, 19 iterations).
EGS_INFO = {"num_archives": 4, "frames_per_eg": 8}
TRAINER = {
    "num_epochs": 1.5,
    "num_jobs_initial": 1,
    "num_jobs_final": 4,
    "initial_effective_lrate": 0.0015,
    "final_effective_lrate": 0.00015,
}


def experiment_plan(
    trainer: dict | None = None, sync: dict | None = None, egs_info: dict | None = None
):
    """The :class:`~paravg.plan.ExperimentPlan` of experiment ``x``: the repository's
    config with ``trainer`` (default :data:`TRAINER`) and ``sync`` overrides, on egs of
    ``egs_info`` (default :data:`EGS_INFO`); the plan's own numbers, no second copy."""
    from paravg.config import REPO_CONFIG, deep_merge, validate_config
    from paravg.plan import experiment_plans

    overrides = {"experiments": {"x": {"trainer": trainer or TRAINER, "sync": sync or {}}}}
    config = validate_config(deep_merge(yaml.safe_load(REPO_CONFIG.read_text()), overrides))
    return experiment_plans(config, egs_info or EGS_INFO)["x"]


def planned_schedule(trainer: dict | None = None, sync: dict | None = None, egs_info=None):
    """The :class:`~paravg.plan.PlannedSchedule` of :func:`experiment_plan` (what the
    report and progress view draw: the plan's ``planned()``)."""
    return experiment_plan(trainer, sync, egs_info).planned()
