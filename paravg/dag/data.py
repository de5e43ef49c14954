"""The data stage's answers: source dirs, the demo corpus, prepared sets (torch-free).

Rules ``demo_corpus``, ``prepare_data`` and ``check_data_sets`` (``rules/data.smk``) read
these: each set the run uses comes from ``data.sets`` (a Kaldi data dir, Kaldi's
``utils/copy_data_dir.sh`` + ``validate_data_dir.sh`` in :mod:`paravg.prepare_data`) or
from the demo corpus (:mod:`paravg.corpus`), made by its own rule.
"""

from __future__ import annotations

import re
from pathlib import Path

from paravg.config import data_set_sources, demo_set_names, perturbed_train_set, uses_demo
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
        """The Kaldi data dir prepare_data reads: data.sets' (or the demo's), for a set
        given as lhotse manifests the Kaldi dir rule lhotse_to_kaldi made of them, and with
        ``data.targets: gmm`` the GMM stage's copy of it with the alignment's targets
        (paravg.dag.gmm)."""
        sets = self.data_sets()
        if set_ not in sets:
            raise ConfigError(f"data set {set_!r} is not configured; data.sets has {sorted(sets)}")
        if uses_gmm(self.config):
            return targets_dir(self.layout.results, set_)
        return self.converted_dir(set_) if set_ in self.lhotse_sets() else sets[set_]

    # ------------------------------------------------------------ lhotse manifests
    def lhotse_sets(self) -> dict[str, str]:
        """Sets of data.sets given as a directory of lhotse manifests (paravg.lhotse)."""
        from paravg.lhotse import is_manifest_dir

        return {s: p for s, p in self.config["data"]["sets"].items() if is_manifest_dir(p)}

    def converted_dir(self, set_: str) -> str:
        """Where rule lhotse_to_kaldi writes the Kaldi dir of a manifest set."""
        return f"{self.layout.results}/lhotse/{set_}"

    def converted_files(self, set_: str) -> list[str]:
        from paravg.lhotse import CONVERTED_FILES

        return [f"{self.converted_dir(set_)}/{name}" for name in CONVERTED_FILES]

    def manifest_inputs(self, set_: str) -> list[str]:
        """The manifests, targets file and its archives of a manifest set."""
        from paravg.lhotse import manifest_source_files

        return [str(f) for f in manifest_source_files(self.config["data"]["sets"][set_])]

    def lhotse_set_pattern(self) -> str:
        """lhotse_to_kaldi's ``{set}`` wildcard: exactly the manifest sets."""
        return "|".join(re.escape(s) for s in self.lhotse_sets()) or "(?!)"

    def check_data_dirs(self) -> None:
        """Every set the run uses (the training set and each eval set) has its data.sets
        directory: checked when the DAG is built, so a wrong path stops the run before any
        job (a path missing from an input function would come wrapped in Snakemake's
        InputFunctionException)."""
        for set_ in self.run.prepared_sets():
            if set_ not in self.config["data"]["sets"]:  # a set of the demo corpus
                continue
            src = self.data_sets()[set_]  # the configured dir (lhotse manifests too)
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
        if set_ in self.lhotse_sets():  # the Kaldi dir its manifests become
            return self.converted_files(set_)
        return [str(f) for f in source_files(self.data_sets()[set_])]

    def prepared_reports(self) -> dict[str, str]:
        """report.json of every set prepare_data checks (check_data_sets' inputs; the
        perturbed copies are checked by their own rule, after the gate)."""
        return {s: self.layout.data_file(s, "report.json") for s in self.run.prepared_sets()}

    # ------------------------------------------------------------ perturbation
    def perturbed_set(self) -> str | None:
        """The perturbed training set rule perturb_data writes (None: data.perturb off)."""
        return perturbed_train_set(self.config)

    def prepared_set_pattern(self) -> str:
        """prepare_data's ``{set}`` wildcard: any set name but the perturbed set's, which
        rule perturb_data writes (no two rules for one file)."""
        name = self.perturbed_set()
        any_set = r"[A-Za-z0-9_.-]+"
        return any_set if name is None else rf"(?!{re.escape(name)}$){any_set}"

    def perturb_inputs(self) -> dict[str, str]:
        """The prepared training set the copies are made of (every file they read)."""
        L, train = self.layout, self.run.source_train_set
        names = ("wav.scp", "utt2spk", "spk2utt", "utt2uniq", "targets.scp", "targets.ark")
        files = {n.replace(".", "_"): L.data_file(train, n) for n in names}
        files["origin"] = L.data_file(train, "origin")
        files["report"] = L.data_file(train, "report.json")
        return files

    def perturb_outputs(self) -> dict[str, str]:
        """The files rule perturb_data writes (a prepared dir's, plus the audio archive
        and, with volume, reco2vol)."""
        L, name = self.layout, self.perturbed_set()
        names = ["wav.scp", "wav.ark", "utt2spk", "spk2utt", "utt2uniq", "targets.ark"]
        names += ["targets.scp", "origin", "report.json"]
        if self.config["data"]["perturb"]["volume"]:
            names.append("reco2vol")
        return {n.replace(".", "_"): L.data_file(name, n) for n in names}
