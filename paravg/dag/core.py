"""The run a DAG is built for: config, layout, experiments, plans, resume frontiers.

:class:`RunCore` is what every stage of :mod:`paravg.dag` asks: the validated config and
each experiment's resolved config (:func:`paravg.config.resolved_experiments`), the file
contract (:class:`paravg.layout.Layout`), the plans (:mod:`paravg.plan`), read from the egs
``info.json`` when it exists at parse time or from the egs checkpoint after it ran, and
the resume frontiers (:mod:`paravg.resume`: indices at or below a frontier are finished
inputs, not DAG jobs). It answers no rule by itself; the stages do.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable
from pathlib import Path

from paravg import resources
from paravg.config import perturbed_train_set, resolved_experiments
from paravg.devices import training_gpus
from paravg.io import read_json
from paravg.layout import Layout
from paravg.nnet.context import egs_context_of
from paravg.plan import ExperimentPlan, experiment_plans
from paravg.resume import (
    Frontiers,
    frontier_regex,
    restart_iterations,
    resume_frontiers_of_run,
)
from paravg.scale_check import archive_egs, eg_window, job_size_warning, scale_warnings, warn_once
from paravg.sync.registry import get_method, methods_with


def egs_context(experiments: dict[str, dict]) -> tuple[int, int]:
    """Egs carry the widest context any experiment's model needs (a chain model's with
    its frame-shift margin: :func:`paravg.nnet.context.egs_context_of`)."""
    contexts = [egs_context_of(e["model"]) for e in experiments.values()]
    return max(c[0] for c in contexts), max(c[1] for c in contexts)


def job_size_warnings(plans: dict[str, ExperimentPlan], info: dict) -> list[str]:
    """:func:`paravg.scale_check.job_size_warning` of every experiment, for a job of
    iteration 1 (iteration 0 halves the minibatch: more, smaller minibatches)."""
    found = []
    for name, p in plans.items():
        job = p.job(min(1, p.num_iters - 1), 0)
        w = job_size_warning(name, job.minibatch_rule(), eg_window(info), archive_egs(info))
        found += [w] if w else []
    return found


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
        self._set_sizes: dict[tuple[str, int], tuple[int, float]] = {}  # job_data's
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
            warn_once(job_size_warnings(plans, info))
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

    # ------------------------------------------------------------ resources
    #: Seconds an utterance is taken for before its set's audio has been measured (the
    #: source's utterance count is all prepare_data knows; generous, as Kaldi's 3-10 s).
    ASSUMED_UTT_S = 10.0

    def mem_mb(self, rule: str, set_: str | None = None) -> int:
        """Rule ``rule``'s declared ``mem_mb`` (of the job of ``set_``, where the rule has
        a ``set`` wildcard), from its formula in :mod:`paravg.resources`."""
        return resources.rule_mem_mb(rule, self.config, self.job_data(rule, set_))

    def runtime(self, rule: str, set_: str | None = None) -> int:
        """Rule ``rule``'s declared ``runtime`` (minutes), from :mod:`paravg.resources`."""
        return resources.rule_runtime(rule, self.config, self.job_data(rule, set_))

    def job_data(self, rule: str, set_: str | None = None) -> resources.JobData:
        """What one job of ``rule`` reads (:class:`paravg.resources.JobData`): its share
        (:data:`paravg.resources.JOB_SHARE`) of the set's utterances and hours, from the
        prepared set's ``report.json``, or before it exists from the source's ``utt2spk``
        (prepare_data; at :data:`ASSUMED_UTT_S` an utterance), else nothing (a dry run of a new set:
        Snakemake asks again when the job's inputs exist, before it runs it). The egs'
        window is the experiments' widest context, as the egs plan's."""
        which, nj_section = resources.JOB_SHARE[rule]
        window = self._egs_window() if rule.startswith("egs") else 0
        if which is None:
            return resources.JobData(window=window)
        sets = {"train": self.train_set, "source": self.source_train_set}
        utts, hours = self._set_size(sets.get(which, set_))
        subset = self.config["ivector"]["ubm_subset_utts"]
        if rule in resources.UBM_SUBSET_RULES and 0 < subset < utts:
            utts, hours = subset, hours * subset / utts
        nj = self.config[nj_section]["nj"] if nj_section else 1
        return resources.JobData(math.ceil(utts / nj), hours / nj, window)

    def _set_size(self, set_: str | None) -> tuple[int, float]:
        """(utterances, hours) of ``set_``: its report.json, else its source's utt2spk."""
        if set_ is None:
            return 0, 0.0
        report = Path(self.layout.data_file(set_, "report.json"))
        if report.is_file():
            key = (str(report), report.stat().st_mtime_ns)
            if key not in self._set_sizes:
                r = read_json(report)
                self._set_sizes[key] = (r["num_utterances_kept"], r["duration_s_checked"] / 3600)
            return self._set_sizes[key]
        sets = self.config["data"]["sets"]
        src = Path(sets[set_]) if set_ in sets else Path(self.layout.demo_file(set_))
        utt2spk = src / "utt2spk"
        if not utt2spk.is_file():
            return 0, 0.0
        with open(utt2spk, "rb") as f:
            utts = sum(chunk.count(b"\n") for chunk in iter(lambda: f.read(1 << 20), b""))
        return utts, utts * self.ASSUMED_UTT_S / 3600

    def _egs_window(self) -> int:
        """Input frames per eg (left context + frames per eg + right context)."""
        from paravg.egs.info import EgsInfo
        from paravg.egs.plan import EgsOptions

        left, right = egs_context(self.experiments)
        fields = EgsOptions.from_config(self.config["egs"], left, right).info_fields()
        shape = dict(num_archives=1, egs_per_archive=0, num_frames=0, feat_dim=0)
        return EgsInfo(**fields, **shape, ivector_dim=0, ivector_period=0, num_targets=0).window

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
    def source_train_set(self) -> str:
        """``data.train_set``: the prepared set the training data comes from."""
        return self.config["data"]["train_set"]

    @property
    def train_set(self) -> str:
        """The set the features, i-vector models and egs are made of: the perturbed
        copies of ``data.train_set`` when ``data.perturb`` asks for them
        (:func:`paravg.config.perturbed_train_set`), else ``data.train_set`` itself."""
        return perturbed_train_set(self.config) or self.source_train_set

    def prepared_sets(self) -> list[str]:
        """The sets rule prepare_data checks and writes: ``data.train_set`` and every
        eval set (the perturbed copies are rule perturb_data's)."""
        return list(dict.fromkeys([self.source_train_set, *self.eval_sets]))

    @property
    def eval_sets(self) -> list[str]:
        return list(self.config["eval_sets"])

    def all_sets(self) -> list[str]:
        """The sets that need features: the training set and every eval set."""
        return list(dict.fromkeys([self.train_set, *self.eval_sets]))
