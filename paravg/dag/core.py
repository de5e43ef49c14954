"""The run a DAG is built for: config, layout, experiments, plans, resume frontiers.

:class:`RunCore` is what every stage of :mod:`paravg.dag` asks: the validated config and
each experiment's resolved config (:func:`paravg.config.resolved_experiments`), the file
contract (:class:`paravg.layout.Layout`), the plans (:mod:`paravg.plan`), read from the egs
``info.json`` when it exists at parse time or from the egs checkpoint after it ran, and
the resume frontiers (:mod:`paravg.resume`: indices at or below a frontier are finished
inputs, not DAG jobs). It answers no rule by itself; the stages do.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from pathlib import Path

from paravg import resources
from paravg.config import resolved_experiments
from paravg.devices import training_gpus
from paravg.io import read_json
from paravg.layout import Layout
from paravg.nnet.context import model_context
from paravg.plan import ExperimentPlan, experiment_plans
from paravg.resume import (
    Frontiers,
    frontier_regex,
    restart_iterations,
    resume_frontiers_of_run,
)
from paravg.scale_check import scale_warnings, warn_once
from paravg.sync.registry import get_method, methods_with


def egs_context(experiments: dict[str, dict]) -> tuple[int, int]:
    """Egs carry the widest context any experiment's model needs."""
    contexts = [model_context(e["model"]) for e in experiments.values()]
    return max(c[0] for c in contexts), max(c[1] for c in contexts)


class RunCore:
    """Config, layout, experiments, plans and frontiers of one run (the module docstring).

    ``checkpoint_egs_info()`` returns the egs ``info.json`` dict after the ``egs``
    checkpoint (raising Snakemake's incomplete-checkpoint exception before). ``target_jobs``:
    the wildcards of the jobs named by ``--target-jobs`` (what a cluster job's own snakemake
    runs). ``fingerprint_dir``: where the plans memoise their fingerprint chains
    (:mod:`paravg.fingerprint_memo`; None: they compute them).
    """

    def __init__(
        self,
        config: dict,
        *,
        checkpoint_egs_info: Callable[[], dict] | None = None,
        target_jobs: Iterable[dict] = (),
        fingerprint_dir: str | None = None,
    ) -> None:
        self.config = config
        self.fingerprint_dir = fingerprint_dir
        self.layout = Layout(config["results"])
        self.experiments = resolved_experiments(config)
        self._checkpoint_egs_info = checkpoint_egs_info
        self.target_jobs = list(target_jobs)
        info_path = Path(self.layout.egs_info())
        # Plans from the egs info.json when it exists at parse time (thousands of jobs then
        # need no edge to the checkpoint; a job checks at run time that the egs are still
        # those it was planned for: paravg.train_job); else after the egs checkpoint, as
        # when the config asks for other egs than those (the checkpoint reruns).
        info = read_json(info_path) if info_path.exists() else None
        self.stale_egs = self._stale_egs_fields(info) if info is not None else []
        if info is not None and not self.stale_egs:
            self._plans, self.frontiers = self._resumed_plans(info)
        else:  # before the egs exist nothing is finished
            self._plans = None
            self.frontiers = {
                exp: Frontiers(train=0, node=0, ema=0, diag=-1) for exp in self.experiments
            }

    # ------------------------------------------------------------ plans and frontiers
    def _stale_egs_fields(self, info: dict) -> list[str]:
        """The fields of the existing egs ``info.json`` that the config would not write
        (e.g. chunk egs asked for where frame egs are): those egs are rebuilt, and the
        plans wait for them."""
        from paravg.dag.gmm_paths import egs_of_other_targets
        from paravg.egs.plan import EgsOptions

        left, right = egs_context(self.experiments)
        options = EgsOptions.from_config(self.config["egs"], left, right)
        return options.stale_fields(info) + egs_of_other_targets(self.config, info)

    def _make_plans(self, info: dict, restart_at: dict | None = None) -> dict[str, ExperimentPlan]:
        plans = experiment_plans(
            self.config,
            info,
            self.experiments,
            fingerprint_dir=self.fingerprint_dir,  # the chain's memo (O(T·N) to compute)
            restart_at=restart_at,
        )
        if not self.target_jobs:  # the main snakemake: settings that do not scale
            warn_once(scale_warnings({n: p.num_iters for n, p in plans.items()}, info))
        return plans

    def _resumed_plans(self, info: dict) -> tuple[dict[str, ExperimentPlan], dict]:
        """The plans and frontiers of a run whose egs exist: the frontiers from plans
        without a restart, then, where a rewound run's first jobs must start from the
        synced model (:func:`paravg.resume.restart_iterations`), the plans that say so."""
        plans = self._make_plans(info)
        frontiers = resume_frontiers_of_run(
            plans, self.config["run"]["on_plan_change"], self.target_jobs
        )
        restarts = restart_iterations(plans, frontiers)
        if any(k is not None for k in restarts.values()):
            plans = self._make_plans(info, restarts)
        return plans, frontiers

    def plan(self, exp: str) -> ExperimentPlan:
        """The :class:`~paravg.plan.ExperimentPlan` of ``exp``."""
        if self._plans is None:  # a fresh run: the egs checkpoint has just been written
            if self._checkpoint_egs_info is None:
                raise RuntimeError("the egs info.json does not exist yet: no plan")
            self._plans = self._make_plans(self._checkpoint_egs_info())
        return self._plans[exp]

    def mem_mb(self, rule: str) -> int:
        """Rule ``rule``'s declared ``mem_mb``, from its formula in :mod:`paravg.resources`
        (the egs' window from the experiments' widest context, as the egs plan's)."""
        from paravg.egs.info import EgsInfo
        from paravg.egs.plan import EgsOptions

        iv, egs = self.config["ivector"], self.config["egs"]
        if rule == "egs_split":
            return resources.egs_split_mem_mb()
        if rule == "egs_archive":
            left, right = egs_context(self.experiments)
            fields = EgsOptions.from_config(egs, left, right).info_fields()
            shape = dict(num_archives=1, egs_per_archive=0, num_frames=0, feat_dim=0)
            window = EgsInfo(**fields, **shape, ivector_dim=0, ivector_period=0, num_targets=0)
            ivector_dim = iv["dim"] if iv["enabled"] else 0
            return resources.egs_archive_mem_mb(
                egs["samples_per_iter"],
                window.window,
                self.config["features"]["num_ceps"],
                ivector_dim,
                egs["compress"],
            )
        return resources.IVECTOR_MEM_MB[rule](iv)

    def index_after_frontier(self, kind: str) -> str:
        """Wildcard regex of ``t`` for the per-iteration rule ``kind`` (train, node, ema,
        diag): for each experiment only the indices above its frontier."""
        return frontier_regex(self.layout, self.frontiers, kind)

    def egs_info(self) -> dict:
        """The egs ``info.json`` (from the checkpoint: the only data-dependent shape)."""
        if self._checkpoint_egs_info is not None:
            return self._checkpoint_egs_info()
        return read_json(self.layout.egs_info())

    # ------------------------------------------------------------ experiments
    @staticmethod
    def experiments_pattern(names: Iterable[str]) -> str:
        """A wildcard regex matching exactly the experiments ``names`` (or nothing)."""
        names = list(names)
        return "|".join(re.escape(n) for n in names) if names else "(?!)"

    def experiments_with(self, **properties) -> list[str]:
        """Experiments whose sync method has these registry properties (node="bmuf")."""
        methods = set(methods_with(**properties))
        return [e for e, cfg in self.experiments.items() if cfg["sync"]["method"] in methods]

    def experiments_with_node(self, kind: str) -> list[str]:
        """Experiments whose sync method runs the node kind ``kind`` (paravg.sync.nodes)."""
        return [
            e
            for e, cfg in self.experiments.items()
            if kind in get_method(cfg["sync"]["method"]).nodes
        ]

    def experiments_with_ema(self) -> list[str]:
        return [e for e, cfg in self.experiments.items() if cfg["sync"]["ema"]["enabled"]]

    def model_config(self, exp: str) -> dict:
        return self.experiments[exp]["model"]

    def uses_ivectors(self, exp: str) -> bool:
        return self.experiments[exp]["ivector_enabled"]

    def srand(self, exp: str) -> int:
        return self.experiments[exp]["trainer"]["srand"]

    def train_gpus(self, exp: str) -> int:
        return training_gpus(self.experiments[exp]["trainer"]["device"])

    def job_device(self, exp: str) -> str:
        """``trainer.device`` (where the job runs: a resource, never a param)."""
        return self.experiments[exp]["trainer"]["device"]

    # ------------------------------------------------------------ sets
    @property
    def train_set(self) -> str:
        return self.config["data"]["train_set"]

    @property
    def eval_sets(self) -> list[str]:
        return list(self.config["eval_sets"])

    def all_sets(self) -> list[str]:
        """The sets that need features: the training set and every eval set."""
        return list(dict.fromkeys([self.train_set, *self.eval_sets]))
