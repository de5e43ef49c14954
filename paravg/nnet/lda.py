"""The fixed LDA-like input transform (Appendix C.6 of arXiv 1410.7455).

Mirrors ``nnet3-acc-lda-stats`` (with ``--rand-prune``) and ``nnet-get-feature-transform``
(``src/nnet2/get-feature-transform.{h,cc}``, options ``within_class_factor=0.001``,
``max_singular_value=5.0``, ``remove_offset=true``, full dimension):

1. With the global mean m, total covariance Σ_T and between-class covariance
   Σ_B = Σ_c (n_c/N)(m_c − m)(m_c − m)ᵀ, the within-class covariance is Σ_W = Σ_T − Σ_B.
2. LDA rotation: with Σ_W = L Lᵀ and L⁻¹ Σ_B L⁻ᵀ = U diag(λ) Uᵀ, T₀ = Uᵀ L⁻¹ maps the
   within-class covariance to I and the between-class covariance to diag(λ). Only when
   the Cholesky factorisation fails (Σ_W not positive definite, e.g. a constant input
   dimension) is Σ_W smoothed, by adding 10⁻³·tr(Σ_W)/dim to its diagonal, and factorised
   again (``FeatureTransformEstimate::EstimateInternal``); otherwise it is used as is.
3. Row i is scaled by √((w + λ_i)/(1 + λ_i)), w = within_class_factor, so directions that
   carry no class information end up with variance ≈ w and informative ones ≈ 1.
4. The offset −T m is appended (remove_offset), then the singular values of T are
   floored from above at max_singular_value.

Rand-prune (``nnet3-acc-lda-stats --rand-prune=4``): a frame of weight w < p is kept with
probability w/p at weight p, an unbiased subsampling that makes accumulation cheaper.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np

from paravg.errors import DataError

log = logging.getLogger(__name__)

CHOLESKY_SMOOTHING = 1.0e-3  # Kaldi: smooth = 1e-3 * trace(W) / dim, only on failure


@dataclass
class LdaStats:
    """Additive class statistics of the LDA input vectors (float64)."""

    dim: int
    num_classes: int

    def __post_init__(self) -> None:
        self.count = np.zeros(self.num_classes)
        self.class_sum = np.zeros((self.num_classes, self.dim))
        self.scatter = np.zeros((self.dim, self.dim))

    def accumulate(
        self,
        x: np.ndarray,
        labels: np.ndarray,
        weights: np.ndarray,
        rand_prune: float,
        rng: np.random.Generator,
    ) -> None:
        """Add rows ``x`` (n, dim) with class ``labels`` (n,) and ``weights`` (n,)."""
        x = np.asarray(x, dtype=np.float64)
        w = np.asarray(weights, dtype=np.float64)
        if rand_prune > 0:
            small = w < rand_prune
            keep = ~small | (rng.random(w.shape[0]) < w / rand_prune)
            w = np.where(small, rand_prune, w)[keep]
            x, labels = x[keep], np.asarray(labels)[keep]
        if x.shape[0] == 0:
            return
        np.add.at(self.count, labels, w)
        np.add.at(self.class_sum, labels, x * w[:, None])
        self.scatter += (x * w[:, None]).T @ x

    def add(self, other: LdaStats) -> None:
        self.count += other.count
        self.class_sum += other.class_sum
        self.scatter += other.scatter


def within_class_cholesky(within: np.ndarray) -> np.ndarray:
    """L with Σ_W = L Lᵀ; if Σ_W is not positive definite, Kaldi's one retry with
    10⁻³·tr(Σ_W)/dim added to the diagonal."""
    try:
        return np.linalg.cholesky(within)
    except np.linalg.LinAlgError:
        pass
    smooth = CHOLESKY_SMOOTHING * float(np.trace(within)) / within.shape[0]
    log.info(
        "LDA: Cholesky of the within-class covariance failed (not positive definite); "
        "adding %.4g to its diagonal and trying again",
        smooth,
    )
    try:
        return np.linalg.cholesky(within + smooth * np.eye(within.shape[0]))
    except np.linalg.LinAlgError as exc:
        raise DataError(
            "LDA statistics: the within-class covariance is not positive definite even "
            f"after smoothing by {smooth:.4g} (are the egs features all constant?)"
        ) from exc


def estimate_transform(
    stats: LdaStats, within_class_factor: float = 0.001, max_singular_value: float = 5.0
) -> tuple[np.ndarray, np.ndarray]:
    """Return ``(A, b)`` with y = A x + b (A: dim × dim), as ``nnet-get-feature-transform``."""
    total = stats.count.sum()
    if total <= 0:
        raise ValueError("LDA statistics are empty: no labelled frames in the egs")
    mean = stats.class_sum.sum(axis=0) / total
    total_covar = stats.scatter / total - np.outer(mean, mean)
    present = stats.count > 0
    class_means = stats.class_sum[present] / stats.count[present, None]
    centred = class_means - mean
    between = (centred * (stats.count[present] / total)[:, None]).T @ centred
    within = total_covar - between
    within = 0.5 * (within + within.T)
    chol = within_class_cholesky(within)
    chol_inv = np.linalg.inv(chol)
    bc = chol_inv @ between @ chol_inv.T
    lam, u = np.linalg.eigh(0.5 * (bc + bc.T))
    order = np.argsort(lam)[::-1]
    lam, u = np.maximum(lam[order], 0.0), u[:, order]
    transform = u.T @ chol_inv
    transform *= np.sqrt((within_class_factor + lam) / (1.0 + lam))[:, None]
    if max_singular_value > 0:
        uu, s, vt = np.linalg.svd(transform)
        transform = (uu * np.minimum(s, max_singular_value)) @ vt
    offset = -transform @ mean
    return transform, offset
