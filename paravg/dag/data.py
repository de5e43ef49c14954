"""The data stage's answers: source dirs, the demo corpus, prepared sets (torch-free).

Rules ``demo_corpus``, ``prepare_data`` and ``check_data_sets`` (``rules/data.smk``) read
these: each set the run uses comes from ``data.sets`` (a Kaldi data dir, Kaldi's
``utils/copy_data_dir.sh`` + ``validate_data_dir.sh`` in :mod:`paravg.prepare_data`) or
from the demo corpus (:mod:`paravg.corpus`), made by its own rule.
"""

from __future__ import annotations

from pathlib import Path

from paravg.config import data_set_sources, demo_set_names, uses_demo
from paravg.dag.core import RunCore
from paravg.dag.gmm_paths import targets_dir, targets_dir_files, uses_gmm
from paravg.errors import ConfigError, DataError


class DataDag:
    """Data sets of one run: ``PARAVG.data`` (``from_dag("data.source_inputs")``)."""

    def __init__(self, run: RunCore) -> None:
        self.run = run
        self.config, self.layout = run.config, run.layout

    def uses_demo(self) -> bool:
        """The run trains on the demo corpus (paravg.config.uses_demo)."""
        return uses_demo(self.config)

    def data_sets(self) -> dict[str, str]:
        """Set name -> source Kaldi data dir: the demo corpus's sets when the run trains
        on it, and every set of data.sets (paravg.config.data_set_sources)."""
        return data_set_sources(self.config, self.layout.demo_file)

    def demo_wav_scps(self) -> dict[str, str]:
        """Set -> wav.scp of the demo corpus (the outputs of its rule)."""
        return {s: self.layout.demo_file(f"{s}/wav.scp") for s in demo_set_names(self.config)}

    def source_dir(self, set_: str) -> str:
        """The data dir ``prepare_data`` reads: the configured one, or with ``data.targets:
        gmm`` the GMM stage's copy of it with the alignment's targets (paravg.dag.gmm)."""
        sets = self.data_sets()
        if set_ not in sets:
            raise ConfigError(f"data set {set_!r} is not configured; data.sets has {sorted(sets)}")
        return targets_dir(self.layout.results, set_) if uses_gmm(self.config) else sets[set_]

    def check_data_dirs(self) -> None:
        """Every set the run uses (the training set and each eval set) has its data.sets
        directory: checked when the DAG is built, so a wrong path stops the run before any
        job (a path missing from an input function would come wrapped in Snakemake's
        InputFunctionException)."""
        for set_ in self.run.all_sets():
            if set_ not in self.config["data"]["sets"]:  # a set of the demo corpus
                continue
            src = self.data_sets()[set_]
            if not Path(src).is_dir():
                raise DataError(f"data.sets.{set_} = {src}: the data directory does not exist")

    def source_inputs(self, set_: str) -> list[str]:
        """Every file of the source dir that prepare_data reads (paravg.data.source_files),
        so an edit of any of them reruns that set's preparation only. The demo corpus is
        made by a rule: its wav.scp and done file stand for it. With ``data.targets: gmm``:
        what the set's ``gmm_targets`` rule writes."""
        if uses_gmm(self.config):
            return targets_dir_files(self.layout.results, set_)
        return self.original_inputs(set_)

    def original_inputs(self, set_: str) -> list[str]:
        """The configured (or demo) source dir's files of ``set_`` (see source_inputs)."""
        from paravg.data import source_files

        if set_ not in self.config["data"]["sets"]:  # a set of the demo corpus
            return [self.layout.demo_file(f"{set_}/wav.scp"), self.layout.demo_file("done")]
        return [str(f) for f in source_files(self.data_sets()[set_])]

    def prepared_reports(self) -> dict[str, str]:
        """report.json of every set that needs features (check_data_sets' inputs)."""
        return {s: self.layout.data_file(s, "report.json") for s in self.run.all_sets()}
