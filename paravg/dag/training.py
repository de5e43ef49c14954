"""The training stage's answers: init, jobs, mix nodes, blocks, sync nodes, diagnostics,
EMA and evaluation inputs (torch-free).

Rules of ``rules/train.smk``, ``rules/sync.smk`` and ``rules/final.smk`` ask these (Kaldi's
``steps/nnet3/train_dnn.py`` / ``train_rnn.py`` loop, one job per (iteration, learner)).
Numbering is Kaldi's (:mod:`paravg.layout`): ``<t>.pt`` is the model after t iterations;
the jobs of iteration t − 1 write ``<t>/job<j>.pt``. Methods that take ``t`` of a
per-iteration file take that layout index; the plan (:class:`paravg.plan.ExperimentPlan`)
takes the iteration t − 1.

Blocks: the DAG grows block by block (the ``train_block`` checkpoint), so a
Kaldi-size run never holds all of its jobs at once (docs/kaldi-scale.md).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from paravg.dag.chain import ChainDag
from paravg.dag.core import RunCore
from paravg.dag.egs import EgsDag

#: The off-path files of index t (diagnostics, EMA) join the DAG with the block of t but
#: are waited for by the block checkpoint only this many indices later, so the DAG grows
#: past a block as soon as its last jobs end (never waiting for the last diagnostics).
OFF_PATH_LAG = 2


def dag_edges(files: dict[str, list[str]]) -> dict[str, list[str]]:
    """The DAG inputs among a job's role -> files: all but the ``stats`` JSONs, which
    the same jobs write beside their models (one edge per model is enough, and a
    Kaldi-size iteration has N² of them)."""
    return {role: paths for role, paths in files.items() if role != "stats"}


class TrainDag:
    """Training files of one run: ``PARAVG.train`` (``from_dag("train.job_inputs")``).

    ``wait_for_block(exp, b)`` returns once block ``b`` of ``exp`` is trained (the
    ``train_block`` checkpoint; raising before)."""

    def __init__(
        self, run: RunCore, egs: EgsDag, wait_for_block: Callable[[str, int], None] | None
    ) -> None:
        self.run, self.egs = run, egs
        self.config, self.layout, self.plan = run.config, run.layout, run.plan
        self.chain = ChainDag(run, egs)  # model.objective: chain (rules/chain.smk)
        self._wait_for_block = wait_for_block or (lambda exp, b: None)

    # ------------------------------------------------------------ init, training jobs
    def lda_archives(self, exp: str) -> list[str]:
        """Prefixes of the archives the LDA-like transform and the priors are estimated on."""
        return [self.layout.egs_prefix(a) for a in self.plan(exp).lda_archives()]

    def lda_egs(self, exp: str) -> list[str]:
        return [f for a in self.plan(exp).lda_archives() for f in self.egs.archive_files(a)]

    def init_params(self, exp: str) -> dict:
        return {"archives": self.lda_archives(exp), "fingerprint": self.plan(exp).fingerprint(0)}

    def job_inputs(self, exp: str, t: int, j: int) -> dict:
        """Train job ``<t>/job<j>``: its archive and exactly the models its start model is
        formed from (the sync method's start inputs: the DAG edges are the communication
        pattern)."""
        p, it = self.plan(exp), t - 1
        return {
            "egs": self.egs.archive_mark(p.job_archive(it, j)),
            **dag_edges(p.start_inputs(it, j)),
            **self.chain.job_inputs(exp, p.job_archive(it, j)),
        }

    def job_params(self, exp: str, t: int, j: int) -> dict:
        """Train job ``<t>/job<j>``'s params (:class:`paravg.contracts.JobRule`)."""
        return self.plan(exp).job_rule(t - 1, j).params()

    def job_straggler_factor(self, exp: str, t: int, j: int) -> str:
        """``simulate.straggler``'s slow-down of this job (timing only: a resource, never a
        param; a string, as Snakemake's resources are integers or strings)."""
        return repr(self.plan(exp).straggler_factor(t - 1, j))

    # ------------------------------------------------------------ blocks
    def first_block(self, exp: str) -> int:
        """The first block with an index still to train (the frontier's block)."""
        p = self.plan(exp)
        return p.block_of(min(self.run.frontiers[exp].train + 1, p.num_iters))

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
        if exp in self.run.experiments_with_ema():
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
    def node_inputs(self, kind: str, exp: str, t: int, j: int | None = None) -> dict:
        """The sync node ``kind`` of index t (and job j on the per-job axis). Per index: it
        reads what the jobs of iteration t form their start from (the same inputs give the
        same bits): the jobs of iteration t − 1 (and, for BMUF, the block state after t − 1
        blocks). Per job: delay-by-one's mix node writing ``<t>/job<j>.start.pt``
        (s_j^{t−1}) reads the neighbours' starts of t − 2 and the learner's own job of
        t − 3 (no job of t − 2: it runs while its learner's job of t − 2 trains)."""
        from paravg.sync.nodes import NODE_KINDS

        p = self.plan(exp)
        if NODE_KINDS[kind].per_job:  # N² statistics per iteration: no DAG edges
            return dag_edges(p.mix_inputs(t - 1, j))
        return p.node_inputs(t)  # N stats edges: cheap here

    def node_outputs(self, kind: str) -> dict[str, str]:
        """Role -> file pattern of the sync node ``kind`` (its per-index or per-job
        outputs)."""
        from paravg.sync.nodes import NODE_KINDS

        node = NODE_KINDS[kind]
        wildcards = [f"{{{w}}}" for w in node.wildcards]
        return {role: getattr(self.layout, k)(*wildcards) for role, k in node.outputs}

    def node_params(self, kind: str, exp: str, t: int, j: int | None = None) -> dict:
        """The sync node's params: its rule contract (:mod:`paravg.contracts`), a
        :class:`~paravg.contracts.NodeRule` per index, a
        :class:`~paravg.contracts.MixRule` per job."""
        from paravg.sync.nodes import NODE_KINDS

        p = self.plan(exp)
        rule = p.mix_rule(t - 1, j) if NODE_KINDS[kind].per_job else p.node_rule(t)
        return rule.params()

    def diag_inputs(self, exp: str, t: int) -> dict:
        p = self.plan(exp)
        inputs = {
            "model": p.synced_model(t),
            "egs": [self.egs.subset_mark("valid_diag"), self.egs.subset_mark("train_diag")],
        }
        if t > 0:
            inputs["prev"] = p.synced_model(t - 1)
        return {**inputs, **self.chain.subset_inputs(exp, ("valid_diag", "train_diag"))}

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

    def schedule_params(self, exp: str) -> dict:
        """``exp``'s planned schedule as the jobs get it, sync factor included (plain
        values: a rule param, a rerun trigger)."""
        return dataclasses.asdict(self.plan(exp).planned())

    # ------------------------------------------------------------ the end
    def combine_inputs(self, exp: str) -> dict:
        """Kaldi's candidates (synced models of the last iterations, newest last), the
        combine egs, and the last EMA model when it is enabled and combine.ema is not none
        (scored as one separate candidate: paravg.combine)."""
        self.trained(exp)
        inputs = {
            "models": self.plan(exp).combine_models(),
            "egs": self.egs.subset_files("combine"),
            **self.chain.subset_inputs(exp, ("combine",)),
        }
        if exp in self.run.experiments_with_ema() and self.config["combine"]["ema"] != "none":
            inputs["ema"] = self.final_ema_model(exp)
        return inputs

    def eval_inputs(self, exp: str, set_: str) -> dict:
        """What the final model is evaluated on for a set: its features and targets, the
        set's i-vectors when the experiment's model takes them, and a chain experiment's
        den and normalisation FSTs (its chain objective, :mod:`paravg.chain.evaluate`)."""
        L = self.layout
        inputs = {
            "model": L.final_model(exp),
            "feats": L.feats_scp(set_),
            "targets": L.targets_scp(set_),
        }
        if self.run.uses_ivectors(exp):
            inputs["ivectors"] = L.ivector_scp(set_)
            inputs["period"] = L.ivector_period(set_)
        return {**inputs, **self.chain.eval_inputs(exp, set_)}

    def eval_ema_inputs(self, exp: str, set_: str) -> dict:
        """As the final model's evaluation, with the last EMA model."""
        self.trained(exp)
        return {**self.eval_inputs(exp, set_), "model": self.final_ema_model(exp)}

    def ema_eval_targets(self) -> list[str]:
        return [
            self.layout.eval_ema_result(e, s)
            for e in self.run.experiments_with_ema()
            for s in self.run.eval_sets
        ]
