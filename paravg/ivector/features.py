"""The two feature streams of the i-vector system (``steps/online/nnet2``).

* posterior stream: online CMN -> splice -> PCA transform; used only to compute UBM
  posteriors (``apply-cmvn-online | splice-feats | transform-feats``);
* stats stream: splice -> PCA transform, no CMN; the extractor's zeroth/first-order
  statistics, so that the extractor itself learns the offset the network needs
  (header of ``train_ivector_extractor.sh``).

:class:`IvectorFeaturePipeline` bundles what both need (Kaldi's ``final.mat``,
``splice_opts``, ``global_cmvn.stats`` and ``online_cmvn.conf``) in one ``pca.npz``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import numpy as np

from paravg.errors import DataError
from paravg.ivector import cmvn
from paravg.ivector.npz import load_npz, save_npz
from paravg.ivector.pca import apply_affine, splice


@dataclass
class IvectorFeaturePipeline:
    """Splice context, affine PCA transform and global CMVN statistics."""

    transform: np.ndarray  # (out_dim, in_dim * (2 context + 1) + 1)
    context: int
    global_cmvn: np.ndarray  # (2, in_dim + 1)
    cmvn_opts: cmvn.OnlineCmvnOptions = field(default_factory=cmvn.OnlineCmvnOptions)

    def __post_init__(self) -> None:
        self.transform = np.asarray(self.transform, dtype=np.float64)
        self.global_cmvn = np.asarray(self.global_cmvn, dtype=np.float64)
        spliced = self.input_dim * (2 * self.context + 1)
        if self.transform.shape[1] not in (spliced, spliced + 1):
            raise DataError(
                f"transform has {self.transform.shape[1]} columns; {self.input_dim}-dim features "
                f"spliced +-{self.context} need {spliced} (+1 for the offset)"
            )

    @property
    def input_dim(self) -> int:
        return self.global_cmvn.shape[1] - 1

    @property
    def output_dim(self) -> int:
        return self.transform.shape[0]

    def check(self, feats: np.ndarray, where: str) -> None:
        """Clear error for features of the wrong shape (before any expensive work)."""
        if feats.ndim != 2 or feats.shape[1] != self.input_dim:
            raise DataError(
                f"{where}: features have shape {tuple(feats.shape)}; the i-vector system was "
                f"trained on {self.input_dim}-dimensional features"
            )

    def stats_stream(self, feats: np.ndarray) -> np.ndarray:
        """Splice and transform, no CMN."""
        return apply_affine(self.transform, splice(np.asarray(feats, np.float64), self.context))

    def posterior_stream(
        self, feats: np.ndarray, speaker_stats: np.ndarray | None = None
    ) -> np.ndarray:
        """Online CMN (with the speaker's earlier statistics), splice and transform."""
        normalised = cmvn.apply_online_cmn(feats, self.global_cmvn, speaker_stats, self.cmvn_opts)
        return apply_affine(self.transform, splice(normalised, self.context))

    def save(self, path: str | os.PathLike) -> None:
        o = self.cmvn_opts
        save_npz(
            path,
            kind="ivector_feature_pipeline",
            transform=self.transform,
            context=self.context,
            global_cmvn=self.global_cmvn,
            cmvn_opts=np.array([o.cmn_window, o.speaker_frames, o.global_frames]),
        )

    @classmethod
    def load(cls, path: str | os.PathLike) -> IvectorFeaturePipeline:
        z = load_npz(path, "ivector_feature_pipeline", "an i-vector feature pipeline", DataError)
        window, speaker, global_ = (int(v) for v in z["cmvn_opts"])
        opts = cmvn.OnlineCmvnOptions(window, speaker, global_)
        return cls(z["transform"], int(z["context"]), z["global_cmvn"], opts)


def subsample(feats: np.ndarray, n: int) -> np.ndarray:
    """Every ``n``-th frame starting at frame 0 (``subsample-feats --n``)."""
    return feats[::n] if n > 1 else feats
