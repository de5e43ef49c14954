"""The i-vector model and the posterior of the i-vector of one utterance.

Mirrors ``IvectorExtractor`` and ``IvectorExtractorUtteranceStats`` in
``src/ivector/ivector-extractor.{h,cc}`` with ``use_weights = false`` (no i-vector
dependent mixture weights, as online extraction needs).

Model: features ``x_t in R^D``, Gaussians ``i = 1..I``, i-vector ``w in R^S``::

    x_t | (i, w) ~ N(M_i w, Sigma_i),      w ~ N(w0, I),  w0 = [p, 0, ..., 0]

``p`` is the prior offset; column 0 of ``M_i`` times ``p`` acts as the mean.

Utterance statistics from (scaled) posteriors ``gamma_ti``: ``gamma_i = sum_t gamma_ti``,
``X_i = sum_t gamma_ti x_t`` (not centred), optionally ``S_i = sum_t gamma_ti x_t x_t^T``.

Posterior of ``w`` (``GetIvectorDistribution``)::

    Lambda = I + sum_i gamma_i U_i,        U_i = M_i^T Sigma_i^{-1} M_i
    b      = p e0 + sum_i (Sigma_i^{-1} M_i)^T X_i
    E[w] = Lambda^{-1} b,  Cov[w] = Lambda^{-1}

The reported i-vector is ``E[w]`` with ``p`` subtracted from element 0.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from paravg.errors import DataError
from paravg.ivector.npz import load_npz, save_npz
from paravg.ivector.posteriors import SparsePosteriors
from paravg.ivector.ubm import LOG_2PI, DiagGmm


def _logdet_pd(a: np.ndarray) -> np.ndarray:
    sign, logdet = np.linalg.slogdet(a)
    if np.any(sign <= 0):
        raise DataError("matrix is not positive definite")
    return logdet


@dataclass
class UtteranceStats:
    """Zeroth, first and (optionally) second-order statistics of one utterance."""

    gamma: np.ndarray  # (I,)
    X: np.ndarray  # (I, D)
    S: np.ndarray | None = None  # (I, D, D)

    @classmethod
    def from_posteriors(
        cls,
        feats: np.ndarray,
        post: SparsePosteriors | np.ndarray,
        num_gauss: int,
        second_order: bool = False,
    ) -> UtteranceStats:
        """``IvectorExtractorUtteranceStats::AccStats`` (dense or sparse posteriors)."""
        x = np.asarray(feats, dtype=np.float64)
        dense = (
            post.to_dense(num_gauss)
            if isinstance(post, SparsePosteriors)
            else np.asarray(post, dtype=np.float64)
        )
        if dense.shape != (x.shape[0], num_gauss):
            raise DataError(
                f"posteriors have shape {dense.shape}, expected ({x.shape[0]}, {num_gauss}) for "
                f"{x.shape[0]} frames"
            )
        gamma = dense.sum(axis=0)
        X = dense.T @ x
        S = None
        if second_order:
            S = np.zeros((num_gauss, x.shape[1], x.shape[1]))
            for i in np.nonzero(gamma != 0)[0]:
                rows = np.nonzero(dense[:, i])[0]
                xr = x[rows]
                S[i] = (xr * dense[rows, i, None]).T @ xr
        return cls(gamma, X, S)


@dataclass
class IvectorExtractor:
    """``IvectorExtractor`` with ``use_weights = false``; derived variables are cached."""

    M: np.ndarray  # (I, D, S)
    Sigma_inv: np.ndarray  # (I, D, D)
    w_vec: np.ndarray  # (I,) UBM weights
    prior_offset: float

    def __post_init__(self) -> None:
        self.M = np.asarray(self.M, dtype=np.float64)
        self.Sigma_inv = np.asarray(self.Sigma_inv, dtype=np.float64)
        self.w_vec = np.asarray(self.w_vec, dtype=np.float64)
        self.prior_offset = float(self.prior_offset)
        I, D, _ = self.M.shape
        if self.Sigma_inv.shape != (I, D, D) or self.w_vec.shape != (I,):
            raise DataError(
                f"inconsistent extractor shapes: M {self.M.shape}, Sigma_inv "
                f"{self.Sigma_inv.shape}, w_vec {self.w_vec.shape}"
            )
        self.compute_derived_vars()

    @property
    def num_gauss(self) -> int:
        return self.M.shape[0]

    @property
    def feat_dim(self) -> int:
        return self.M.shape[1]

    @property
    def ivector_dim(self) -> int:
        return self.M.shape[2]

    def compute_derived_vars(self) -> None:
        """``ComputeDerivedVars``: gconsts (no weight term), ``U_i`` and ``Sigma_i^{-1} M_i``."""
        self.gconsts = -0.5 * (-_logdet_pd(self.Sigma_inv) + self.feat_dim * LOG_2PI)
        self.Sigma_inv_M = self.Sigma_inv @ self.M
        U = np.einsum("ids,idt->ist", self.M, self.Sigma_inv_M)
        self.U = 0.5 * (U + U.transpose(0, 2, 1))

    @classmethod
    def from_ubm(cls, ubm: DiagGmm, ivector_dim: int, rng: np.random.Generator) -> IvectorExtractor:
        """``ivector-extractor-init`` on the UBM converted to full covariance.

        ``p = 100``; ``M_i`` is N(0, 1) noise except column 0, which is ``mu_i / p``, so that
        the default i-vector ``w0`` reproduces the UBM means.
        """
        if ivector_dim < 1:
            raise DataError(f"ivector_dim must be positive, got {ivector_dim}")
        prior_offset = 100.0
        I, D = ubm.means.shape
        M = rng.standard_normal((I, D, ivector_dim))
        M[:, :, 0] = ubm.means / prior_offset
        Sigma_inv = np.zeros((I, D, D))
        Sigma_inv[:, np.arange(D), np.arange(D)] = 1.0 / ubm.vars
        return cls(M, Sigma_inv, ubm.weights.copy(), prior_offset)

    def check_feats(self, feats: np.ndarray, what: str = "features") -> None:
        if feats.ndim != 2 or feats.shape[1] != self.feat_dim:
            raise DataError(
                f"{what} have shape {feats.shape}; the i-vector extractor expects dimension "
                f"{self.feat_dim}"
            )

    # ------------------------------------------------------------ posterior of w
    def linear_and_quadratic(
        self, gamma: np.ndarray, X: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """``GetIvectorDistMean`` + ``GetIvectorDistPrior``: the terms ``b`` and ``Lambda``."""
        linear = np.einsum("ids,id->s", self.Sigma_inv_M, X)
        linear[0] += self.prior_offset
        quadratic = np.tensordot(gamma, self.U, axes=1) + np.eye(self.ivector_dim)
        return linear, quadratic

    def ivector_distribution(self, stats: UtteranceStats) -> tuple[np.ndarray, np.ndarray]:
        """Mean (raw: element 0 near ``p``) and covariance of the posterior of ``w``."""
        linear, quadratic = self.linear_and_quadratic(stats.gamma, stats.X)
        var = np.linalg.inv(quadratic)
        var = 0.5 * (var + var.T)
        return var @ linear, var

    # ------------------------------------------------------------ auxiliary function
    def prior_auxf(self, mean: np.ndarray, var: np.ndarray | None = None) -> float:
        """``GetPriorAuxf``: ``-0.5 (|w - w0|^2 + S log 2pi)`` for a point; with ``var``,
        ``-0.5 (|mean - w0|^2 + tr(var) - S - logdet(var))``."""
        offset = np.array(mean, dtype=np.float64)
        offset[0] -= self.prior_offset
        if var is None:
            return float(-0.5 * (offset @ offset + self.ivector_dim * LOG_2PI))
        return float(-0.5 * (offset @ offset + np.trace(var) - self.ivector_dim - _logdet_pd(var)))

    def acoustic_auxf(
        self, stats: UtteranceStats, mean: np.ndarray, var: np.ndarray | None = None
    ) -> float:
        """``GetAcousticAuxf``: weight + gconst + mean + variance terms.

        mean term ``K + w^T a - 0.5 w^T B w [- 0.5 tr(var B)]`` with
        ``K = -0.5 sum_i X_i^T Sigma_i^{-1} X_i / gamma_i``, ``a = sum_i M_i^T Sigma_i^{-1} X_i``,
        ``B = sum_i gamma_i U_i``; variance term ``-0.5 sum_i gamma_i tr(Sigma_i^{-1} C_i)``
        with the centred scatter ``C_i`` (or ``-0.5 gamma D`` without second-order stats).
        """
        gamma, X = stats.gamma, stats.X
        nz = gamma != 0
        with np.errstate(divide="ignore"):
            log_w = np.log(self.w_vec)
        weight_auxf = float(np.where(nz, log_w, 0.0) @ gamma)
        gconst_auxf = float(gamma @ self.gconsts)
        SinvX = np.einsum("ide,ie->id", self.Sigma_inv[nz], X[nz])
        K = -0.5 * float((np.einsum("id,id->i", X[nz], SinvX) / gamma[nz]).sum())
        a = np.einsum("ids,id->s", self.M[nz], SinvX)
        B = np.tensordot(gamma, self.U, axes=1)
        mean_auxf = K + float(mean @ a) - 0.5 * float(mean @ B @ mean)
        if var is not None:
            mean_auxf -= 0.5 * float(np.sum(var * B))
        if stats.S is None:
            var_auxf = -0.5 * float(gamma.sum()) * self.feat_dim
        else:
            m = X[nz] / gamma[nz, None]
            C = stats.S[nz] / gamma[nz, None, None] - m[:, :, None] * m[:, None, :]
            var_auxf = -0.5 * float(
                (gamma[nz] * np.einsum("ide,ide->i", C, self.Sigma_inv[nz])).sum()
            )
        return weight_auxf + gconst_auxf + mean_auxf + var_auxf

    def auxf(self, stats: UtteranceStats, mean: np.ndarray, var: np.ndarray | None = None) -> float:
        """``GetAuxf`` = acoustic + prior auxiliary function."""
        return self.acoustic_auxf(stats, mean, var) + self.prior_auxf(mean, var)

    # ------------------------------------------------------------ io
    def save(self, path: str | os.PathLike) -> None:
        save_npz(
            path,
            kind="ivector_extractor",
            M=self.M,
            Sigma_inv=self.Sigma_inv,
            w_vec=self.w_vec,
            prior_offset=self.prior_offset,
        )

    @classmethod
    def load(cls, path: str | os.PathLike) -> IvectorExtractor:
        z = load_npz(path, "ivector_extractor", "an i-vector extractor", DataError)
        return cls(z["M"], z["Sigma_inv"], z["w_vec"], float(z["prior_offset"]))

    def copy(self) -> IvectorExtractor:
        return IvectorExtractor(
            self.M.copy(), self.Sigma_inv.copy(), self.w_vec.copy(), self.prior_offset
        )
