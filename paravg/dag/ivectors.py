"""The i-vector stage's answers: training data, EM fan-ins, per-set extraction (torch-free).

Rules of ``rules/ivector.smk`` (Kaldi's ``steps/online/nnet2/train_diag_ubm.sh``,
``train_ivector_extractor.sh`` and ``extract_ivectors_online.sh``; package
:mod:`paravg.ivector`) ask these. The models are trained on ``data.train_set``; jobs are
numbered 1..``ivector.nj``.
"""

from __future__ import annotations

from paravg.dag.core import RunCore


class IvectorDag:
    """I-vector files of one run: ``PARAVG.ivector`` (``from_dag("ivector.pieces")``)."""

    def __init__(self, run: RunCore) -> None:
        self.run = run
        self.config, self.layout = run.config, run.layout
        self.enabled = bool(run.config["ivector"]["enabled"])

    def jobs(self) -> range:
        return range(1, self.config["ivector"]["nj"] + 1)

    def train_data(self) -> dict[str, str]:
        """Features and speakers of the set the PCA, UBM and extractor are trained on."""
        train = self.run.train_set
        return {
            "feats": self.layout.feats_scp(train),
            "spk2utt": self.layout.data_file(train, "spk2utt"),
        }

    def ubm_data(self) -> dict[str, str]:
        """Features and speakers the PCA and UBM are trained on: the training set, or with
        ``ivector.ubm_subset_utts`` its subset (rule ubm_subset, as Kaldi's recipes run
        ``train_diag_ubm.sh`` on ``subset_data_dir.sh``'s quarter of the data)."""
        if not self.config["ivector"]["ubm_subset_utts"]:
            return self.train_data()
        return {
            "feats": self.layout.ubm_subset("feats.scp"),
            "spk2utt": self.layout.ubm_subset("spk2utt"),
        }

    def pca_cmvn(self) -> str:
        """The CMVN statistics the PCA sums (its global CMN): the subset's speakers' with
        ``ivector.ubm_subset_utts`` (``subset_data_dir.sh`` filters ``cmvn.scp``)."""
        if self.config["ivector"]["ubm_subset_utts"]:
            return self.layout.ubm_subset("cmvn.scp")
        return self.layout.feats_file(self.run.train_set, "cmvn.scp")

    def final_ubm(self) -> str:
        return self.layout.ubm(self.config["ivector"]["ubm_num_iters"])

    def final_extractor(self) -> str:
        return self.layout.extractor(self.config["ivector"]["extractor_num_iters"])

    def ubm_est_inputs(self, it: int) -> dict:
        """The UBM of iteration it − 1 and its per-job accumulators (the fan-in)."""
        L = self.layout
        return {"ubm": L.ubm(it - 1), "accs": [L.ubm_acc(it - 1, j) for j in self.jobs()]}

    def ubm_removes_low_count(self, it: int) -> bool:
        """The last UBM iteration drops Gaussians of low count (Kaldi's --remove-low-count)."""
        return it == self.config["ivector"]["ubm_num_iters"]

    def extractor_est_inputs(self, it: int) -> dict:
        """The extractor of iteration it − 1 and its per-job accumulators (the fan-in)."""
        L = self.layout
        return {
            "extractor": L.extractor(it - 1),
            "accs": [L.extractor_acc(it - 1, j) for j in self.jobs()],
        }

    def set_inputs(self, set_: str) -> dict:
        return {
            "feats": self.layout.feats_scp(set_),
            "spk2utt": self.layout.data_file(set_, "spk2utt"),
        }

    def utts_per_spk_max(self, set_: str) -> int:
        """Training data: pseudo-speakers of at most utts_per_spk_max utterances; eval sets:
        the real speakers (0), or every utterance alone (1) with ivector.eval_per_utt."""
        iv = self.config["ivector"]
        if set_ == self.run.train_set:
            return iv["utts_per_spk_max"]
        return 1 if iv["eval_per_utt"] else 0

    def pieces(self, set_: str) -> list[str]:
        return [self.layout.ivector_split(set_, j, "scp") for j in self.jobs()]

    @staticmethod
    def job_index(j: int) -> int:
        """The 0-based job index a 1-based i-vector job ``j`` hands its script."""
        return j - 1

    def online_options(self) -> dict:
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

    def model_files(self) -> list[str]:
        """The trained i-vector system: PCA, the last UBM and the last extractor."""
        return [self.layout.ivector_pca(), self.final_ubm(), self.final_extractor()]
