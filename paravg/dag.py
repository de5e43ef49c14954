"""The DAG of a run, once: every input, param and resource of every rule (torch-free).

The rule files are a table of the stages; what each job reads and how it is configured
is answered here, for concrete values (experiment, t, j, set …), by one :class:`Dag`
built from

* the validated config, and each experiment's resolved config
  (:func:`paravg.config.resolved_experiments`, once per config);
* the file contract (:class:`paravg.layout.Layout`);
* the plans (:mod:`paravg.plan`: schedule, each job's archive, seed, learning rate, start
  inputs, synced model, fingerprint chain), read from the egs ``info.json`` when it exists
  at parse time, or from the egs checkpoint after it ran (``checkpoint_egs_info``);
* the resume frontiers (:mod:`paravg.resume`): indices at or below a frontier are
  finished inputs, not DAG jobs.

Snakemake stays outside: ``rules/common.smk`` gives the Dag two callables for its
checkpoints (the egs ``info.json`` once the ``egs`` checkpoint ran, and "wait until block b
of experiment e is trained") and the jobs named by ``--target-jobs``, and adapts each
answer to a rule (``temp``, ``report``, wildcards → arguments). So every answer here is
unit-tested without Snakemake (``tests/unit/test_dag.py``), with a fake checkpoint.

Numbering is Kaldi's (:mod:`paravg.layout`): ``<t>.pt`` is the model after t
iterations; the jobs of iteration t − 1 write ``<t>/job<j>.pt``. Methods that take ``t``
of a per-iteration file take that layout index.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Iterable
from functools import cached_property
from pathlib import Path

from paravg.config import data_set_sources, demo_set_names, resolved_experiments, uses_demo
from paravg.devices import training_gpus
from paravg.errors import ConfigError, DataError
from paravg.io import read_json
from paravg.layout import Layout
from paravg.nnet.context import model_context
from paravg.plan import ExperimentPlan, experiment_plans
from paravg.resume import Frontiers, frontier_regex, resume_frontiers_of_run
from paravg.sync.registry import methods_with

#: The off-path files of index t (diagnostics, EMA) join the DAG with the block of t but
#: are waited for by the block checkpoint only this many indices later, so the DAG grows
#: past a block as soon as its last jobs end (never waiting for the last diagnostics).
OFF_PATH_LAG = 2

#: The egs subsets (``valid_diag``, ``train_diag``: diagnostics; ``combine``: combination).
EGS_SUBSETS = ("valid_diag", "train_diag", "combine")


class Dag:
    """Every rule's inputs, params and resources for one run (see the module docstring).

    ``checkpoint_egs_info()`` returns the egs ``info.json`` dict after the ``egs``
    checkpoint (raising Snakemake's incomplete-checkpoint exception before);
    ``wait_for_block(exp, b)`` returns once block ``b`` of ``exp`` is trained (raising
    before). ``target_jobs``: the wildcards of the jobs named by ``--target-jobs`` (what a
    cluster job's own snakemake runs). ``fingerprint_dir``: where the plans memoise their
    fingerprint chains (:mod:`paravg.fingerprint_memo`; None: they compute them).
    """

    def __init__(
        self,
        config: dict,
        *,
        checkpoint_egs_info: Callable[[], dict] | None = None,
        wait_for_block: Callable[[str, int], None] | None = None,
        target_jobs: Iterable[dict] = (),
        fingerprint_dir: str | None = None,
    ) -> None:
        self.config = config
        self.fingerprint_dir = fingerprint_dir
        self.layout = Layout(config["results"])
        self.experiments = resolved_experiments(config)
        self.ivectors = bool(config["ivector"]["enabled"])
        self._checkpoint_egs_info = checkpoint_egs_info
        self._wait_for_block = wait_for_block or (lambda exp, b: None)
        self.target_jobs = list(target_jobs)
        info_path = Path(self.layout.egs_info())
        # Plans from the egs info.json when it exists at parse time (thousands of jobs then
        # need no edge to the checkpoint; a job checks at run time that the egs are still
        # those it was planned for: paravg.train_job); else after the egs checkpoint, as
        # when the config asks for other egs than those (the checkpoint reruns).
        info = read_json(info_path) if info_path.exists() else None
        self.stale_egs = self._stale_egs_fields(info) if info is not None else []
        self._plans = self._make_plans(info) if info is not None and not self.stale_egs else None
        self.frontiers = self._parse_time_frontiers()
        self.check_data_dirs()

    # ------------------------------------------------------------ plans and frontiers
    def _stale_egs_fields(self, info: dict) -> list[str]:
        """The fields of the existing egs ``info.json`` that the config would not write
        (e.g. chunk egs asked for where frame egs are): those egs are rebuilt, and the
        plans wait for them."""
        from paravg.egs.plan import EgsOptions

        left, right = self.egs_context()
        options = EgsOptions.from_config(self.config["egs"], left, right)
        return options.stale_fields(info)

    def _make_plans(self, info: dict) -> dict[str, ExperimentPlan]:
        plans = experiment_plans(self.config, info, self.experiments)
        for p in plans.values():
            p.fingerprint_dir = self.fingerprint_dir  # the chain's memo (O(T·N) to compute)
        return plans

    def plan(self, exp: str) -> ExperimentPlan:
        """The :class:`~paravg.plan.ExperimentPlan` of ``exp``."""
        if self._plans is None:  # a fresh run: the egs checkpoint has just been written
            if self._checkpoint_egs_info is None:
                raise RuntimeError("the egs info.json does not exist yet: no plan")
            self._plans = self._make_plans(self._checkpoint_egs_info())
        return self._plans[exp]

    def _parse_time_frontiers(self) -> dict[str, Frontiers]:
        if self._plans is None:  # before the egs exist nothing is finished
            return {exp: Frontiers(train=0, node=0, ema=0, diag=-1) for exp in self.experiments}
        return resume_frontiers_of_run(
            self._plans, self.config["run"]["on_plan_change"], self.target_jobs
        )

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

    # ------------------------------------------------------------ data sets
    @property
    def train_set(self) -> str:
        return self.config["data"]["train_set"]

    @property
    def eval_sets(self) -> list[str]:
        return list(self.config["eval_sets"])

    def uses_demo(self) -> bool:
        """The run trains on the demo corpus (paravg.config.uses_demo)."""
        return uses_demo(self.config)

    def data_sets(self) -> dict[str, str]:
        """Set name -> source Kaldi data dir: the demo corpus's sets when the run trains
        on it, and every set of data.sets (paravg.config.data_set_sources)."""
        return data_set_sources(self.config, self.layout.demo_file)

    def all_sets(self) -> list[str]:
        """The sets that need features: the training set and every eval set."""
        return list(dict.fromkeys([self.train_set, *self.eval_sets]))

    def demo_wav_scps(self) -> dict[str, str]:
        """Set -> wav.scp of the demo corpus (the outputs of its rule)."""
        return {s: self.layout.demo_file(f"{s}/wav.scp") for s in demo_set_names(self.config)}

    def source_dir(self, set_: str) -> str:
        sets = self.data_sets()
        if set_ not in sets:
            raise ConfigError(f"data set {set_!r} is not configured; data.sets has {sorted(sets)}")
        return sets[set_]

    def check_data_dirs(self) -> None:
        """Every set the run uses (the training set and each eval set) has its data.sets
        directory: checked when the DAG is built, so a wrong path stops the run before any
        job (a path missing from an input function would come wrapped in Snakemake's
        InputFunctionException)."""
        for set_ in self.all_sets():
            if set_ not in self.config["data"]["sets"]:  # a set of the demo corpus
                continue
            src = self.source_dir(set_)
            if not Path(src).is_dir():
                raise DataError(f"data.sets.{set_} = {src}: the data directory does not exist")

    def source_inputs(self, set_: str) -> list[str]:
        """Every file of the source dir that prepare_data reads (paravg.data.source_files),
        so an edit of any of them reruns that set's preparation only. The demo corpus is
        made by a rule: its wav.scp and done file stand for it."""
        from paravg.data import source_files

        if set_ not in self.config["data"]["sets"]:  # a set of the demo corpus
            return [self.layout.demo_file(f"{set_}/wav.scp"), self.layout.demo_file("done")]
        return [str(f) for f in source_files(self.source_dir(set_))]

    def prepared_reports(self) -> dict[str, str]:
        """report.json of every set that needs features (check_data_sets' inputs)."""
        return {s: self.layout.data_file(s, "report.json") for s in self.all_sets()}

    # ------------------------------------------------------------ egs
    def egs_context(self) -> tuple[int, int]:
        """Egs carry the widest context any experiment's model needs."""
        contexts = [model_context(e["model"]) for e in self.experiments.values()]
        return max(c[0] for c in contexts), max(c[1] for c in contexts)

    def egs_source_files(self, without: str | None = None) -> dict[str, str]:
        """The egs stage's inputs (the file contract); i-vectors only when enabled;
        ``without`` one of them (the split and subset jobs need no utt2num_frames)."""
        L, train = self.layout, self.train_set
        files = {
            "feats_scp": L.feats_scp(train),
            "utt2num_frames": L.utt2num_frames(train),
            "targets_scp": L.data_file(train, "targets.scp"),
            "utt2spk": L.data_file(train, "utt2spk"),
        }
        if self.ivectors:
            files["ivector_scp"] = L.ivector_scp(train)
            files["ivector_period"] = L.ivector_period(train)
        files.pop(without, None)
        return files

    def egs_fields(self, prefix: str) -> dict[str, str]:
        """Field -> file of the egs archive ``prefix`` (paravg.egs.archive.archive_files)."""
        from paravg.egs.archive import archive_files

        chunked = self.config["egs"].get("chunk_width") is not None  # chunk egs: +chunks
        return archive_files(prefix, self.ivectors, chunked)

    def egs_archive_files(self, a: int) -> list[str]:
        """Files of training archive ``a`` (0-based)."""
        return list(self.egs_fields(self.layout.egs_prefix(a)).values())

    def egs_subset_files(self, name: str) -> list[str]:
        """Files of the ``valid_diag``, ``train_diag`` or ``combine`` egs."""
        return list(self.egs_fields(self.layout.egs_subset_prefix(name)).values())

    def egs_split_files(self, j) -> dict[str, str]:
        """Field -> file of split job ``j``: its egs grouped by archive, the row range of
        each archive's piece (paravg.egs.pieces.piece_files)."""
        from paravg.egs.pieces import piece_files

        chunked = self.config["egs"].get("chunk_width") is not None  # as egs_fields
        return piece_files(self.layout.egs_split_prefix(j), self.ivectors, chunked)

    def egs_split_jobs_files(self) -> list[str]:
        """Every split job's files (what each archive is gathered from)."""
        return [
            f for j in range(self.config["egs"]["nj"]) for f in self.egs_split_files(j).values()
        ]

    def egs_split_prefixes(self) -> list[str]:
        return [self.layout.egs_split_prefix(j) for j in range(self.config["egs"]["nj"])]

    def egs_subset_prefixes(self) -> dict[str, str]:
        return {name: self.layout.egs_subset_prefix(name) for name in EGS_SUBSETS}

    def egs_all_files(self) -> list[str]:
        """Every archive and subset file (after the egs checkpoint)."""
        n = self.egs_info()["num_archives"]
        archives = [f for a in range(n) for f in self.egs_archive_files(a)]
        return archives + [f for name in EGS_SUBSETS for f in self.egs_subset_files(name)]

    def egs_archive_mark(self, a: int) -> str:
        """The completion mark of archive ``a`` (written last): the one DAG edge to it."""
        return self.egs_fields(self.layout.egs_prefix(a))["meta"]

    def egs_subset_mark(self, name: str) -> str:
        """The completion mark of a subset's egs (written last): the one DAG edge to it."""
        return self.egs_fields(self.layout.egs_subset_prefix(name))["meta"]

    # ------------------------------------------------------------ init, training jobs
    def lda_archives(self, exp: str) -> list[str]:
        """Prefixes of the archives the LDA-like transform and the priors are estimated on."""
        return [self.layout.egs_prefix(a) for a in self.plan(exp).lda_archives()]

    def lda_egs(self, exp: str) -> list[str]:
        return [f for a in self.plan(exp).lda_archives() for f in self.egs_archive_files(a)]

    def init_params(self, exp: str) -> dict:
        return {"archives": self.lda_archives(exp), "fingerprint": self.plan(exp).fingerprint(0)}

    @staticmethod
    def _dag_edges(files: dict[str, list[str]]) -> dict[str, list[str]]:
        """The DAG inputs among a job's role -> files: all but the ``stats`` JSONs, which
        the same jobs write beside their models (one edge per model is enough, and a
        Kaldi-size iteration has N² of them)."""
        return {role: paths for role, paths in files.items() if role != "stats"}

    def job_inputs(self, exp: str, t: int, j: int) -> dict:
        """Train job ``<t>/job<j>``: its archive and exactly the models its start model is
        formed from (the sync method's start inputs: the DAG edges are the communication
        pattern)."""
        p, it = self.plan(exp), t - 1
        return {
            "egs": self.egs_archive_mark(p.job_archive(it, j)),
            **self._dag_edges(p.start_inputs(it, j)),
        }

    def mix_inputs(self, exp: str, t: int, j: int) -> dict:
        """The mix node writing ``<t>/job<j>.start.pt`` (s_j^{t−1}, delay-by-one): the
        neighbours' starts of t − 2 and the learner's own job of t − 3 (no job of t − 2:
        it runs while its learner's job of t − 2 trains)."""
        return self._dag_edges(self.plan(exp).mix_inputs(t - 1, j))

    def mix_params(self, exp: str, t: int, j: int) -> dict:
        return self.plan(exp).mix_rule_params(t - 1, j)

    def job_params(self, exp: str, t: int, j: int) -> dict:
        """Train job ``<t>/job<j>``'s params (``ExperimentPlan.job_rule_params``)."""
        return self.plan(exp).job_rule_params(t - 1, j)

    def job_device(self, exp: str) -> str:
        """``trainer.device`` (where the job runs: a resource, never a param)."""
        return self.experiments[exp]["trainer"]["device"]

    def job_straggler_factor(self, exp: str, t: int, j: int) -> str:
        """``simulate.straggler``'s slow-down of this job (timing only: a resource, never a
        param; a string, as Snakemake's resources are integers or strings)."""
        return repr(self.plan(exp).straggler_factor(t - 1, j))

    # ------------------------------------------------------------ blocks
    def first_block(self, exp: str) -> int:
        """The first block with an index still to train (the frontier's block)."""
        p = self.plan(exp)
        return p.block_of(min(self.frontiers[exp].train + 1, p.num_iters))

    def wait_for_block(self, exp: str, b: int) -> None:
        """Return once block ``b`` of ``exp`` is trained (the checkpoint raises before), so
        nothing past it enters the DAG earlier; blocks before the frontier are done."""
        if b >= self.first_block(exp):
            self._wait_for_block(exp, b)

    def trained(self, exp: str) -> None:
        """Return once every block of ``exp`` is trained."""
        self.wait_for_block(exp, self.plan(exp).num_blocks - 1)

    def off_path_files(self, exp: str, first: int, last: int) -> list[str]:
        """Diagnostics and EMA models of indices first..last (off the critical path)."""
        files = [self.layout.diag(exp, t) for t in range(max(first, 0), last + 1)]
        if exp in self.experiments_with_ema():
            files += [self.layout.ema_model(exp, t) for t in range(max(first, 1), last + 1)]
        return files

    def block_inputs(self, exp: str, b: int) -> list[str]:
        """Block b is trained when the jobs of its last index are; it also waits for the
        off-path files up to OFF_PATH_LAG indices before its end (and so puts those of its
        own iterations into the DAG). Block b − 1 must be done first (a checkpoint chain):
        until then the DAG stops here. The files do not depend on where the run resumed."""
        p = self.plan(exp)
        if b > self.first_block(exp):
            self.wait_for_block(exp, b - 1)
        start = 0 if b == 0 else p.block_end(b - 1) - OFF_PATH_LAG + 1
        end = p.block_end(b)
        last_off_path = end if b == p.num_blocks - 1 else end - OFF_PATH_LAG
        return p.job_outputs(end) + self.off_path_files(exp, start, last_off_path)

    def block_params(self, exp: str, b: int) -> dict:
        p = self.plan(exp)
        end = p.block_end(b)
        return {
            "block": b,
            "end": end,
            "fingerprint": p.fingerprint(end),
            "delete": self.spent_job_files(exp, b),
        }

    def spent_job_files(self, exp: str, b: int) -> list[str]:
        """The temporary job files (models, kept starts) that nothing reads once block b is
        trained, which its checkpoint deletes (``run.keep_job_models: false``).

        Snakemake deletes no temporary file while a checkpoint is pending, and a run of
        blocks always has one until its last block: without this, a 128 × 1,000 run would
        keep every job model to the end. Once block b (indices up to E) is trained, the
        files of indices ≤ E − max(OFF_PATH_LAG, history) are spent: their sync nodes ran
        (the checkpoint waits for the diagnostics of E − OFF_PATH_LAG, which read them),
        and the next jobs and mix nodes read only the last ``history`` indices.
        """
        if self.config["run"]["keep_job_models"]:
            return []
        p = self.plan(exp)
        lag = max(OFF_PATH_LAG, p.sync.history)
        first = 1 if b == 0 else p.block_end(b - 1) - lag + 1
        last = p.block_end(b) - lag
        kinds = ["job_model"]
        if p.sync.writes_start or p.sync.mix_node:
            kinds.append("job_start")
        return [
            getattr(self.layout, kind)(exp, index, j)
            for index in range(max(first, 1), last + 1)
            for j in range(p.num_jobs(index - 1))
            for kind in kinds
        ]

    # ------------------------------------------------------------ sync nodes, diagnostics, EMA
    def node_inputs(self, exp: str, t: int) -> dict[str, list[str]]:
        """The off-path sync node of index t reads what the jobs of iteration t form their
        start from (the same inputs give the same bits): the jobs of iteration t − 1 (and,
        for BMUF, the block state after t − 1 blocks)."""
        return self.plan(exp).node_inputs(t)  # N stats edges: cheap here

    def node_outputs(self, kind: str) -> dict[str, str]:
        """Role -> file pattern of the sync node ``kind`` (its per-index outputs)."""
        from paravg.sync.nodes import NODE_KINDS

        return {
            role: getattr(self.layout, k)("{exp}", "{t}") for role, k in NODE_KINDS[kind].outputs
        }

    def node_params(self, exp: str, t: int) -> dict:
        return self.plan(exp).node_rule_params(t)

    def diag_inputs(self, exp: str, t: int) -> dict:
        p = self.plan(exp)
        inputs = {
            "model": p.synced_model(t),
            "egs": [self.egs_subset_mark("valid_diag"), self.egs_subset_mark("train_diag")],
        }
        if t > 0:
            inputs["prev"] = p.synced_model(t - 1)
        return inputs

    def all_diagnostics(self, exp: str) -> list[str]:
        """diag/<t>.json of every model of ``exp``: off the critical path, read by the report."""
        return [self.layout.diag(exp, t) for t in range(self.plan(exp).num_iters + 1)]

    def ema_inputs(self, exp: str, t: int) -> dict:
        """e_t from e_{t−1} and the synced model m_t (e_1 = m_1)."""
        inputs = {"model": self.plan(exp).synced_model(t)}
        if t > 1:
            inputs["prev"] = self.layout.ema_model(exp, t - 1)
        return inputs

    def ema_decay(self, exp: str, t: int) -> float:
        return self.plan(exp).ema_decay(t)

    def final_ema_model(self, exp: str) -> str:
        return self.layout.ema_model(exp, self.plan(exp).num_iters)

    # ------------------------------------------------------------ the end
    def combine_inputs(self, exp: str) -> dict:
        """Kaldi's candidates (synced models of the last iterations, newest last), the
        combine egs, and the last EMA model when it is enabled and combine.ema is not none
        (scored as one separate candidate: paravg.combine)."""
        self.trained(exp)
        inputs = {
            "models": self.plan(exp).combine_models(),
            "egs": self.egs_subset_files("combine"),
        }
        if exp in self.experiments_with_ema() and self.config["combine"]["ema"] != "none":
            inputs["ema"] = self.final_ema_model(exp)
        return inputs

    def eval_inputs(self, exp: str, set_: str) -> dict:
        L = self.layout
        inputs = {
            "model": L.final_model(exp),
            "feats": L.feats_scp(set_),
            "targets": L.targets_scp(set_),
        }
        if self.uses_ivectors(exp):
            inputs["ivectors"] = L.ivector_scp(set_)
            inputs["period"] = L.ivector_period(set_)
        return inputs

    def eval_ema_inputs(self, exp: str, set_: str) -> dict:
        """As the final model's evaluation, with the last EMA model."""
        self.trained(exp)
        return {**self.eval_inputs(exp, set_), "model": self.final_ema_model(exp)}

    def ema_eval_targets(self) -> list[str]:
        return [
            self.layout.eval_ema_result(e, s)
            for e in self.experiments_with_ema()
            for s in self.eval_sets
        ]

    def results_inputs(self) -> list[str]:
        for e in self.experiments:
            self.trained(e)
        L = self.layout
        files = [L.eval_result(e, s) for e in self.experiments for s in self.eval_sets]
        files += [L.final_summary(e) for e in self.experiments]
        files += [f for e in self.experiments for f in self.all_diagnostics(e)]
        return files + self.ema_eval_targets()

    def results_params(self) -> dict:
        """What the results table needs beyond its inputs."""
        decode = self.recognition
        return {
            "enabled": decode.enabled,
            "options": decode.search_options(),
            "tune_set": decode.settings["tune_set"],
        }

    def final_targets(self) -> list[str]:
        """The results table, its per-stage digests, the report, and (when the run decodes,
        so a word graph exists) every experiment's model in Kaldi's formats. A finished
        export that lost a file or changed size stops the run here, naming it and the
        command that rebuilds it (not in a cluster job's own snakemake: it runs one job)."""
        from paravg.export.manifest import check_finished_export

        L = self.layout
        targets = [L.results_table("md"), L.digests("md"), *self.report_targets()]
        targets += self.product_targets()
        if self.recognition.enabled:
            targets += [L.kaldi_dir(e) for e in self.experiments]
            if not self.target_jobs:
                for e in self.experiments:
                    check_finished_export(L.kaldi_dir(e))
        return targets

    def product_targets(self) -> list[str]:
        """What a finished run holds for its user beside the table, the report and the
        export, each one a target of ``all`` itself: every experiment's final.pt and
        per-set evaluation, the graphs, and each decode's lattices and scoring outputs.
        Snakemake rebuilds a missing file only where a target needs it: as inputs of the
        table alone, a deleted final.pt, HCLG.fst or decode dir stayed missing after an
        rc-0 run ("Nothing to be done", the probe's W2). The iteration models are not
        products (deleting those of a finished run saves space and costs nothing; ask
        for one by name to get it back: docs/reproducibility.md)."""
        L, rec = self.layout, self.recognition
        files = [L.final_model(e) for e in self.experiments]
        files += [L.eval_result(e, s) for e in self.experiments for s in self.eval_sets]
        if not rec.enabled:
            return files
        for kind in rec.graph_dirs():
            files += rec.graph_outputs(kind)
        for e in self.experiments:
            for s in self.eval_sets:
                files += [L.decode_scores(e, s), L.decode_hyps(e, s), L.decode_ctm(e, s)]
                files += [L.decode_details(e, s, "wer"), L.decode_details(e, s, "per")]
                for j in range(rec.settings["nj"]):
                    files.append(L.decode_split(e, s, j))
                    files += [L.decode_lattices(e, s, k, j) for k in rec.graph_dirs()]
        return files

    def digest_stages(self) -> dict[str, list[str]]:
        """Stage name -> the files and directories of its digest (paravg.digests)."""
        L = self.layout
        stages = {"corpus (demo)": [L.demo_dir()]} if self.uses_demo() else {}
        for s in self.all_sets():
            stages[f"data/{s}"] = [L.data_dir(s)]
        for s in self.all_sets():
            stages[f"features/{s}"] = [L.feats_dir(s)]
        if self.ivectors:
            stages["i-vector models"] = [L.ivector_pca(), self.final_ubm(), self.final_extractor()]
            for s in self.all_sets():
                stages[f"i-vectors/{s}"] = [L.ivector_set_dir(s)]
        stages["egs"] = [L.egs_dir()]
        for e in self.experiments:
            stages[f"{e}: final.pt"] = [L.final_model(e)]
            scores = [L.eval_result(e, s) for s in self.eval_sets]
            if self.recognition.enabled:
                scores += [L.decode_scores(e, s) for s in self.eval_sets]
            stages[f"{e}: scores"] = scores
        return stages

    # ------------------------------------------------------------ report
    def report_targets(self) -> list[str]:
        """Figures and config of every experiment, and the comparison."""
        from paravg.plots import FIGURES

        L = self.layout
        per_exp = [L.report_figure(e, n) for e in self.experiments for n in FIGURES]
        per_exp += [L.report_config(e, "html") for e in self.experiments]
        return [*per_exp, L.report_file("comparison.png"), L.report_file("results.html")]

    def schedule_params(self, exp: str) -> dict:
        """``exp``'s planned schedule as the jobs get it, sync factor included (plain
        values: a rule param, a rerun trigger)."""
        return dataclasses.asdict(self.plan(exp).planned())

    def report_figure_inputs(self, exp: str) -> dict:
        """What the figures of one experiment wait for: every diagnostic (each requests its
        synced model, so every sync node has run), the last iteration's jobs (the chain
        before them is done) and the combination. The figures then read every
        per-iteration JSON through the layout: listing 12 × 2,500 job files here would make
        a Kaldi-size DAG spend seconds matching inputs that are already there."""
        self.trained(exp)
        p = self.plan(exp)
        return {
            "diags": self.all_diagnostics(exp),
            "last_jobs": p.job_outputs(p.num_iters),
            "combine": self.layout.combine_summary(exp),
        }

    def report_comparison_inputs(self) -> list[str]:
        """What the comparison reads of every experiment: diagnostics (their synced models'
        nodes wrote the sync summaries), combination, final model, results."""
        L, files = self.layout, []
        for exp in self.experiments:
            self.trained(exp)
            files += self.all_diagnostics(exp)
            files += [L.combine_summary(exp), L.final_summary(exp)]
            files += [L.eval_result(exp, s) for s in self.eval_sets]
        return files

    def experiment_config_param(self, name: str, exp: str) -> dict:
        """The report's configuration page: the ``resolved`` config, the user's
        ``overrides`` or the planned ``schedule``."""
        if name == "resolved":
            return self.experiments[exp]
        if name == "overrides":
            return self.config["experiments"][exp] or {}
        return self.schedule_params(exp)

    def exp_dir(self, exp: str) -> str:
        return self.layout.exp_dir(exp)

    def exp_dirs(self) -> dict[str, str]:
        return {name: self.layout.exp_dir(name) for name in self.experiments}

    def egs_info_file(self) -> str:
        """The egs ``info.json``, as an input that waits for the egs checkpoint."""
        self.egs_info()
        return self.layout.egs_info()

    # ------------------------------------------------------------ i-vectors
    # The i-vector models are trained on data.train_set; jobs are numbered 1..ivector.nj.
    def ivector_jobs(self) -> range:
        return range(1, self.config["ivector"]["nj"] + 1)

    def ivector_train_data(self) -> dict[str, str]:
        """Features and speakers of the set the PCA, UBM and extractor are trained on."""
        return {
            "feats": self.layout.feats_scp(self.train_set),
            "spk2utt": self.layout.data_file(self.train_set, "spk2utt"),
        }

    def final_ubm(self) -> str:
        return self.layout.ubm(self.config["ivector"]["ubm_num_iters"])

    def final_extractor(self) -> str:
        return self.layout.extractor(self.config["ivector"]["extractor_num_iters"])

    def ubm_est_inputs(self, it: int) -> dict:
        """The UBM of iteration it − 1 and its per-job accumulators (the fan-in)."""
        L = self.layout
        return {"ubm": L.ubm(it - 1), "accs": [L.ubm_acc(it - 1, j) for j in self.ivector_jobs()]}

    def ubm_removes_low_count(self, it: int) -> bool:
        """The last UBM iteration drops Gaussians of low count (Kaldi's --remove-low-count)."""
        return it == self.config["ivector"]["ubm_num_iters"]

    def extractor_est_inputs(self, it: int) -> dict:
        """The extractor of iteration it − 1 and its per-job accumulators (the fan-in)."""
        L = self.layout
        return {
            "extractor": L.extractor(it - 1),
            "accs": [L.extractor_acc(it - 1, j) for j in self.ivector_jobs()],
        }

    def ivector_set_inputs(self, set_: str) -> dict:
        return {
            "feats": self.layout.feats_scp(set_),
            "spk2utt": self.layout.data_file(set_, "spk2utt"),
        }

    def ivector_utts_per_spk_max(self, set_: str) -> int:
        """Training data: pseudo-speakers of at most utts_per_spk_max utterances; eval sets:
        the real speakers (0), or every utterance alone (1) with ivector.eval_per_utt."""
        iv = self.config["ivector"]
        if set_ == self.train_set:
            return iv["utts_per_spk_max"]
        return 1 if iv["eval_per_utt"] else 0

    def ivector_pieces(self, set_: str) -> list[str]:
        return [self.layout.ivector_split(set_, j, "scp") for j in self.ivector_jobs()]

    @staticmethod
    def ivector_job_index(j: int) -> int:
        """The 0-based job index a 1-based i-vector job ``j`` hands its script."""
        return j - 1

    # ------------------------------------------------------------ recognition
    @cached_property
    def recognition(self) -> Recognition:
        return Recognition(self.config, self.layout, list(self.experiments))

    def decode_inputs(self, exp: str, set_: str) -> dict:
        """The network's inputs (as evaluation, without targets) and each graph's HCLG and
        transition model."""
        inputs = self.eval_inputs(exp, set_)
        inputs.pop("targets")
        for kind in self.recognition.graph_dirs():
            inputs[f"graph_{kind}"] = self.layout.graph_file(kind, "HCLG.fst")
            inputs[f"transitions_{kind}"] = self.layout.graph_file(kind, "transition.mdl")
        return inputs

    def score_inputs(self, exp: str, set_: str) -> dict:
        """Every split's summary and lattices, the graphs' symbol tables, transition models
        and word boundaries (the CTM), and the tuning set's scores."""
        L, rec = self.layout, self.recognition
        nj = rec.settings["nj"]
        inputs = {"splits": [L.decode_split(exp, set_, j) for j in range(nj)]}
        for kind in rec.graph_dirs():
            inputs[f"lattices_{kind}"] = [L.decode_lattices(exp, set_, kind, j) for j in range(nj)]
            inputs[f"words_{kind}"] = L.graph_file(kind, "words.txt")
            inputs[f"transitions_{kind}"] = L.graph_file(kind, "transition.mdl")
        tune = rec.settings["tune_set"]
        if tune and tune != set_:
            inputs["tuned"] = L.decode_scores(exp, tune)
        return inputs

    def text(self, set_: str) -> str:
        """The set's transcripts (may be absent: no WER)."""
        return self.layout.text(set_)

    def targets_scp(self, set_: str) -> str:
        return self.layout.targets_scp(set_)

    def decode_dir(self, exp: str, set_: str) -> str:
        return self.layout.decode_dir(exp, set_)

    def data_dir(self, set_: str) -> str:
        """The set's prepared data dir (its segments: the CTM in recording time)."""
        return self.layout.data_dir(set_)

    def decode_scores(self) -> list[str]:
        """scores.json of every experiment x eval set (results table), when decoding is on."""
        if not self.recognition.enabled:
            return []
        return [self.layout.decode_scores(e, s) for e in self.experiments for s in self.eval_sets]

    def export_inputs(self, exp: str) -> dict:
        """final.pt, the word graph (HCLG.fst, words.txt, transition.mdl, graph.json), and
        the i-vector system when the experiment's model takes i-vectors."""
        L = self.layout
        inputs = {"model": L.final_model(exp)}
        inputs.update(
            zip(
                ("hclg", "words", "transition", "graph_json"),
                self.recognition.graph_outputs("words"),
                strict=True,
            )
        )
        if self.uses_ivectors(exp):
            inputs.update(
                pca=L.ivector_pca(), ubm=self.final_ubm(), extractor=self.final_extractor()
            )
        return inputs

    def online_ivector_options(self) -> dict:
        """The online i-vector options the eval sets are extracted with, and the export
        writes to conf/ivector_extractor.conf (Kaldi's names)."""
        iv = self.config["ivector"]
        return {
            "period": iv["period"],
            "num_cg_iters": iv["num_cg_iters"],
            "num_gselect": iv["num_gselect_post"],
            "min_post": iv["min_post"],
            "posterior_scale": iv["posterior_scale"],
            "max_remembered_frames": iv["max_remembered_frames"],
        }

    def export_decoder_options(self) -> dict:
        """The export section's search options, for vosk's conf/model.conf (deployment:
        narrower than decode.sh's beams that paravg's own decoding uses)."""
        return {
            k: self.config["export"][k]
            for k in ("beam", "lattice_beam", "max_active", "min_active")
        }


@dataclasses.dataclass
class Recognition:
    """The graph, decoding and scoring settings of a run (``graph``, ``decode``)."""

    config: dict
    layout: Layout
    experiments: list[str]

    def __post_init__(self) -> None:
        from paravg.graph.settings import decoding_enabled

        self.settings = self.config["decode"]
        self.graph_source = self.config["graph"]["source"]
        self.enabled, self.why_not = decoding_enabled(self.config)
        self.per_enabled = bool(self.settings["per"]) and self.graph_source == "demo"
        self._num_frames: dict[tuple[str, int], dict[str, int]] = {}  # decode_mem_mb's

    def graph_outputs(self, kind: str) -> list[str]:
        """Files of results/graph/<kind>/ the decoder and the export read."""
        names = ("HCLG.fst", "words.txt", "transition.mdl", "graph.json")
        return [self.layout.graph_file(kind, n) for n in names]

    def graph_options(self) -> dict:
        g = self.config["graph"]
        return {"transition_scale": g["transition_scale"], "self_loop_scale": g["self_loop_scale"]}

    def demo_train_file(self, name: str) -> str:
        """A file of the demo corpus's training set (text, phone_ctm: the demo graph)."""
        return self.layout.demo_file(f"{self.config['data']['train_set']}/{name}")

    def user_graph_inputs(self) -> dict:
        """A user's files for graph.source lang/hclg (inputs, so their edits rebuild)."""
        g = self.config["graph"]
        if self.graph_source == "hclg":
            hclg_dir = Path(g["hclg_dir"])
            return {
                "hclg": str(hclg_dir / "HCLG.fst"),
                "words": str(hclg_dir / "words.txt"),
                "final_mdl": g["final_mdl"],
            }
        inputs = {
            "lm": g["lm"],
            "final_mdl": g["final_mdl"],
            "lang": str(Path(g["lang_dir"]) / "phones.txt"),
        }
        if g["tree"]:
            inputs["tree"] = g["tree"]
        return inputs

    def graph_dirs(self) -> dict[str, str]:
        kinds = ["words"] + (["phones"] if self.per_enabled else [])
        return {k: self.layout.graph_dir(k) for k in kinds}

    def grids(self) -> dict[str, dict]:
        """Each decoded graph's scoring grid: the word graph's (score.sh: LMWT 7-17, WIP
        0, 0.5, 1) and the phone graph's (TIMIT: LMWT 1-10)."""
        d = self.settings
        grids = {
            "words": (d["lmwt_min"], d["lmwt_max"], d["word_ins_penalties"]),
            "phones": (d["per_lmwt_min"], d["per_lmwt_max"], d["per_word_ins_penalties"]),
        }
        return {
            kind: {"lmwts": list(range(lo, hi + 1)), "wips": list(wips)}
            for kind, (lo, hi, wips) in grids.items()
            if kind in self.graph_dirs()
        }

    def decode_mem_mb(self, set_: str, j: int) -> int:
        """Rule decode_split's ``mem_mb``: split j's longest utterance (the set's
        ``utt2num_frames``; one minute until the features exist, as in a dry run of a new
        set: Snakemake asks again before the job runs). paravg.decode.split."""
        from paravg.decode.split import FRAMES_PER_MINUTE, read_num_frames, split_mem_mb

        path = Path(self.layout.utt2num_frames(set_))
        per_minute = self.settings["mem_mb_per_minute"]
        if not path.is_file():
            return split_mem_mb({"?": FRAMES_PER_MINUTE}, 1, 0, per_minute)
        key = (str(path), path.stat().st_mtime_ns)  # read once per set, not once per split
        if key not in self._num_frames:
            self._num_frames[key] = read_num_frames(path)
        return split_mem_mb(self._num_frames[key], self.settings["nj"], j, per_minute)

    def search_options(self) -> dict:
        keys = ("acoustic_scale", "beam", "lattice_beam", "max_active", "min_active")
        return {k: self.settings[k] for k in keys}

    def split_outputs(self, j) -> dict[str, str]:
        """The split's summary JSON and each graph's lattices (paravg.decode.decoder)."""
        outputs = {"summary": self.layout.decode_split("{exp}", "{set}", j)}
        for kind in self.graph_dirs():
            outputs[f"lattices_{kind}"] = self.layout.decode_lattices("{exp}", "{set}", kind, j)
        return outputs
