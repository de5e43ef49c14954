"""Frame splicing and the PCA transform of the i-vector features.

Mirrors ``splice-feats`` (``SpliceFrames`` in ``src/feat/feature-functions.cc``),
``transform-feats`` with an affine matrix, and ``est-pca`` (``src/bin/est-pca.cc``) with
``--normalize-mean=true --normalize-variance=true``, as used by
``steps/online/nnet2/get_pca_transform.sh``.

Splicing with context ``c`` stacks frames ``t - c, ..., t + c`` (indices clamped to the
utterance, so edge frames repeat) into a ``(2c + 1) D`` vector, oldest first.

PCA: with the mean ``mu`` and centred covariance ``C = P diag(s) P^T`` of the spliced
frames (eigenvalues sorted decreasing), the transform keeps the top ``dim`` rows of
``A = diag(s)^{-1/2} P^T`` (whitening; a non-positive eigenvalue is replaced by 1) and
appends the offset column ``-A mu`` (centring): ``y = A x + b`` is zero-mean, unit-variance
and decorrelated on the estimation data.
"""

from __future__ import annotations

import logging

import numpy as np

from paravg.errors import DataError

log = logging.getLogger(__name__)


def splice(feats: np.ndarray, context: int) -> np.ndarray:
    """Splice ``+-context`` frames around every frame (``splice-feats``)."""
    x = np.asarray(feats)
    if x.ndim != 2:
        raise DataError(f"features must be a T x D matrix, got shape {x.shape}")
    num_frames = x.shape[0]
    if context == 0 or num_frames == 0:
        return x.copy()
    t = np.arange(num_frames)
    cols = [x[np.clip(t + k, 0, num_frames - 1)] for k in range(-context, context + 1)]
    return np.concatenate(cols, axis=1)


def apply_affine(transform: np.ndarray, feats: np.ndarray) -> np.ndarray:
    """``transform-feats``: ``y = A x`` (square/linear) or ``y = A x + b`` (affine)."""
    x = np.asarray(feats, dtype=np.float64)
    in_dim = x.shape[1]
    if transform.shape[1] == in_dim:
        return x @ transform.T
    if transform.shape[1] == in_dim + 1:
        return x @ transform[:, :in_dim].T + transform[:, in_dim]
    raise DataError(
        f"transform has {transform.shape[1]} columns, which fits neither a linear nor an "
        f"affine transform of {in_dim}-dimensional features"
    )


class PcaStats:
    """Additive first and second moments of frames (the accumulation of ``est-pca``)."""

    def __init__(self, dim: int):
        self.count = 0.0
        self.sum = np.zeros(dim)
        self.sumsq = np.zeros((dim, dim))

    def add(self, frames: np.ndarray) -> None:
        x = np.asarray(frames, dtype=np.float64)
        if x.shape[1] != self.sum.shape[0]:
            raise DataError(f"frames have dimension {x.shape[1]}, expected {self.sum.shape[0]}")
        self.count += x.shape[0]
        self.sum += x.sum(axis=0)
        self.sumsq += x.T @ x

    def estimate(
        self, dim: int, normalize_mean: bool = True, normalize_variance: bool = True
    ) -> np.ndarray:
        """The PCA transform, ``dim x (D + 1)`` with ``normalize_mean`` else ``dim x D``."""
        if self.count < 2:
            raise DataError(f"PCA needs at least 2 frames, got {self.count:g}")
        full_dim = self.sum.shape[0]
        dim = min(dim if dim > 0 else full_dim, full_dim)
        mean = self.sum / self.count
        covar = self.sumsq / self.count - np.outer(mean, mean)
        covar = 0.5 * (covar + covar.T)
        s, P = np.linalg.eigh(covar)
        order = np.argsort(-s, kind="stable")
        s, P = s[order], P[:, order]
        log.info(
            "PCA eigenvalues sum to %.4g; the kept %d sum to %.4g",
            s.sum(),
            dim,
            s[:dim].sum(),
        )
        transform = P[:, :dim].T.copy()
        if normalize_variance:
            var = s[:dim].copy()
            bad = var <= 0.0
            if bad.any():
                log.warning("%d non-positive PCA eigenvalues; using 1.0", int(bad.sum()))
                var[bad] = 1.0
            transform /= np.sqrt(var)[:, None]
        if normalize_mean:
            offset = -transform @ mean
            transform = np.concatenate([transform, offset[:, None]], axis=1)
        return transform
