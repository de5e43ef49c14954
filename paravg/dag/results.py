"""The results stage's answers: the table, digests, report, and the run's final targets
(torch-free).

Rules ``results_config``, ``results_table`` and ``digests`` (``rules/final.smk``), the
report's (``rules/report.smk``) and the ``all`` target (``Snakefile``) ask these: what
each reads of every experiment once it is trained, and what a finished run holds.
"""

from __future__ import annotations

from paravg.dag.core import RunCore
from paravg.dag.data import DataDag
from paravg.dag.ivectors import IvectorDag
from paravg.dag.recognition import Recognition
from paravg.dag.training import TrainDag


class ResultsDag:
    """Results, report and final targets of one run: ``PARAVG.results``
    (``from_dag("results.report_figure_inputs")``)."""

    def __init__(
        self,
        run: RunCore,
        data: DataDag,
        ivector: IvectorDag,
        train: TrainDag,
        recognition: Recognition,
    ) -> None:
        self.run, self.data, self.ivector = run, data, ivector
        self.train, self.recognition = train, recognition
        self.config, self.layout = run.config, run.layout
        self.experiments, self.eval_sets = run.experiments, run.eval_sets

    # ------------------------------------------------------------ the results table
    def results_inputs(self) -> list[str]:
        for e in self.experiments:
            self.train.trained(e)
        L = self.layout
        files = [L.eval_result(e, s) for e in self.experiments for s in self.eval_sets]
        files += [L.final_summary(e) for e in self.experiments]
        files += [f for e in self.experiments for f in self.train.all_diagnostics(e)]
        return files + self.train.ema_eval_targets()

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
            if not self.run.target_jobs:
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
        for name in rec.graph_names():
            files += rec.graph_outputs(name)
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
        L, all_sets = self.layout, self.run.all_sets()
        stages = {"corpus (demo)": [L.demo_dir()]} if self.data.uses_demo() else {}
        for s in dict.fromkeys([*self.run.prepared_sets(), *all_sets]):  # + perturbed
            stages[f"data/{s}"] = [L.data_dir(s)]
        for s in all_sets:
            stages[f"features/{s}"] = [L.feats_dir(s)]
        if self.ivector.enabled:
            stages["i-vector models"] = self.ivector.model_files()
            for s in all_sets:
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

    def report_figure_inputs(self, exp: str) -> dict:
        """What the figures of one experiment wait for: every diagnostic (each requests its
        synced model, so every sync node has run), the last iteration's jobs (the chain
        before them is done) and the combination. The figures then read every
        per-iteration JSON through the layout: listing 12 × 2,500 job files here would make
        a Kaldi-size DAG spend seconds matching inputs that are already there."""
        self.train.trained(exp)
        p = self.run.plan(exp)
        return {
            "diags": self.train.all_diagnostics(exp),
            "last_jobs": p.job_outputs(p.num_iters),
            "combine": self.layout.combine_summary(exp),
        }

    def report_comparison_inputs(self) -> list[str]:
        """What the comparison reads of every experiment: diagnostics (their synced models'
        nodes wrote the sync summaries), combination, final model, results."""
        L, files = self.layout, []
        for exp in self.experiments:
            self.train.trained(exp)
            files += self.train.all_diagnostics(exp)
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
        return self.train.schedule_params(exp)

    def exp_dirs(self) -> dict[str, str]:
        return {name: self.layout.exp_dir(name) for name in self.experiments}
