"""The egs stage's answers: inputs, archive and subset files, completion marks (torch-free).

Rules ``egs``, ``egs_split``, ``egs_archive``, ``egs_subsets`` and ``egs_all``
(``rules/egs.smk``, Kaldi's ``steps/nnet3/get_egs.sh``; package :mod:`paravg.egs`) and the
training rules that read archives ask these. The number of archives is known only after
the ``egs`` checkpoint (:meth:`paravg.dag.core.RunCore.egs_info`).
"""

from __future__ import annotations

from paravg.dag.core import RunCore, egs_context
from paravg.dag.gmm_paths import num_pdfs_file, uses_gmm

#: The egs subsets (``valid_diag``, ``train_diag``: diagnostics; ``combine``: combination).
EGS_SUBSETS = ("valid_diag", "train_diag", "combine")


class EgsDag:
    """Egs files of one run: ``PARAVG.egs`` (``from_dag("egs.all_files")``)."""

    def __init__(self, run: RunCore) -> None:
        self.run = run
        self.config, self.layout = run.config, run.layout
        self.ivectors = bool(run.config["ivector"]["enabled"])

    def context(self) -> tuple[int, int]:
        """Egs carry the widest context any experiment's model needs."""
        return egs_context(self.run.experiments)

    def source_files(self, without: str | None = None) -> dict[str, str]:
        """The egs stage's inputs (the file contract); i-vectors only when enabled;
        ``without`` one of them (the split and subset jobs need no utt2num_frames)."""
        L, train = self.layout, self.run.train_set
        files = {
            "feats_scp": L.feats_scp(train),
            "utt2num_frames": L.utt2num_frames(train),
            "targets_scp": L.data_file(train, "targets.scp"),
            "utt2spk": L.data_file(train, "utt2spk"),
        }
        if self.ivectors:
            files["ivector_scp"] = L.ivector_scp(train)
            files["ivector_period"] = L.ivector_period(train)
        if uses_gmm(self.config):  # the tree's number of pdfs: the network's outputs
            files["num_pdfs"] = num_pdfs_file(L.results)
        files.pop(without, None)
        return files

    def fields(self, prefix: str) -> dict[str, str]:
        """Field -> file of the egs archive ``prefix`` (paravg.egs.archive.archive_files)."""
        from paravg.egs.archive import archive_files

        chunked = self.config["egs"].get("chunk_width") is not None  # chunk egs: +chunks
        return archive_files(prefix, self.ivectors, chunked)

    def archive_files(self, a: int) -> list[str]:
        """Files of training archive ``a`` (0-based)."""
        return list(self.fields(self.layout.egs_prefix(a)).values())

    def subset_files(self, name: str) -> list[str]:
        """Files of the ``valid_diag``, ``train_diag`` or ``combine`` egs."""
        return list(self.fields(self.layout.egs_subset_prefix(name)).values())

    def split_files(self, j) -> dict[str, str]:
        """Field -> file of split job ``j``: its egs grouped by archive, the row range of
        each archive's piece (paravg.egs.pieces.piece_files)."""
        from paravg.egs.pieces import piece_files

        chunked = self.config["egs"].get("chunk_width") is not None  # as fields
        return piece_files(self.layout.egs_split_prefix(j), self.ivectors, chunked)

    def split_jobs_files(self) -> list[str]:
        """Every split job's files (what each archive is gathered from)."""
        return [f for j in range(self.config["egs"]["nj"]) for f in self.split_files(j).values()]

    def split_prefixes(self) -> list[str]:
        return [self.layout.egs_split_prefix(j) for j in range(self.config["egs"]["nj"])]

    def subset_prefixes(self) -> dict[str, str]:
        return {name: self.layout.egs_subset_prefix(name) for name in EGS_SUBSETS}

    def all_files(self) -> list[str]:
        """Every archive and subset file (after the egs checkpoint)."""
        n = self.run.egs_info()["num_archives"]
        archives = [f for a in range(n) for f in self.archive_files(a)]
        return archives + [f for name in EGS_SUBSETS for f in self.subset_files(name)]

    def archive_mark(self, a: int) -> str:
        """The completion mark of archive ``a`` (written last): the one DAG edge to it."""
        return self.fields(self.layout.egs_prefix(a))["meta"]

    def subset_mark(self, name: str) -> str:
        """The completion mark of a subset's egs (written last): the one DAG edge to it."""
        return self.fields(self.layout.egs_subset_prefix(name))["meta"]

    def info_file(self) -> str:
        """The egs ``info.json``, as an input that waits for the egs checkpoint."""
        self.run.egs_info()
        return self.layout.egs_info()
