"""EM training of the i-vector extractor: additive statistics and the update.

Mirrors ``IvectorExtractorStats`` (``src/ivector/ivector-extractor.cc``), used by
``ivector-extractor-acc-stats``, ``ivector-extractor-sum-accs`` and
``ivector-extractor-est`` in ``steps/online/nnet2/train_ivector_extractor.sh``.

Accumulation, per utterance with posterior mean ``w`` and covariance ``C_w``
(``CommitStatsForUtterance``)::

    gamma_i += gamma_i(utt)          Y_i += X_i w^T            R_i += gamma_i(utt) (C_w + w w^T)
    S_i     += S_i(utt)              n += 1;  sum_w += w;      scatter_w += C_w + w w^T
    tot_auxf += GetAuxf(utt)

Update (``IvectorExtractorStats::Update``; ``gaussian_min_count``, ``variance_floor_factor
= 0.1``, ``diagonalize = true``), in this order:

1. projections: ``M_i`` maximises
   ``tr(M_i^T Sigma_i^{-1} Y_i) - 0.5 tr(Sigma_i^{-1} M_i R_i M_i^T)``,
   i.e. ``M_i = Y_i R_i^{-1}``, solved robustly (``SolveQuadraticMatrixProblem``);
2. variances: ``Sigma_i = (S_i - Y_i M_i^T - M_i Y_i^T + M_i R_i M_i^T) / gamma_i`` with the new
   ``M_i``, eigen-floored against ``F = 0.1 * sum_i gamma_i Sigma_i / sum_i gamma_i``;
3. prior: with ``mu = sum_w / n`` and ``C = scatter_w / n - mu mu^T = P diag(s) P^T``, the
   transform ``V = rot * H * diag(s)^{-1/2} P^T`` (``H`` a Householder reflection sending the
   whitened ``mu`` to ``+|.| e0``; ``rot`` rotates dims ``1..S-1`` to diagonalise the average
   quadratic term) maps the i-vectors to zero-mean unit covariance around ``p' e0``:
   ``M_i <- M_i V^{-1}``, ``p' = (V mu)_0``.

Gaussians with ``gamma_i < gaussian_min_count`` keep their projection and variance.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field

import numpy as np

from paravg.errors import DataError
from paravg.ivector.extractor import IvectorExtractor, UtteranceStats, _logdet_pd
from paravg.ivector.npz import load_npz, save_npz
from paravg.ivector.posteriors import SparsePosteriors

log = logging.getLogger(__name__)


@dataclass
class IvectorExtractorStats:
    """Additive EM statistics of the extractor (``IvectorExtractorStats``, variances updated)."""

    gamma: np.ndarray  # (I,)
    Y: np.ndarray  # (I, D, S)
    R: np.ndarray  # (I, S, S)
    S: np.ndarray  # (I, D, D)
    num_ivectors: float = 0.0
    ivector_sum: np.ndarray = field(default_factory=lambda: np.zeros(0))
    ivector_scatter: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)))
    tot_auxf: float = 0.0

    @classmethod
    def zeros(cls, extractor: IvectorExtractor) -> IvectorExtractorStats:
        I, D, S = extractor.num_gauss, extractor.feat_dim, extractor.ivector_dim
        return cls(
            np.zeros(I),
            np.zeros((I, D, S)),
            np.zeros((I, S, S)),
            np.zeros((I, D, D)),
            0.0,
            np.zeros(S),
            np.zeros((S, S)),
            0.0,
        )

    def check(self, extractor: IvectorExtractor) -> None:
        I, D, S = extractor.num_gauss, extractor.feat_dim, extractor.ivector_dim
        if self.Y.shape != (I, D, S) or self.S.shape != (I, D, D):
            raise DataError(
                f"extractor stats have Y {self.Y.shape} and S {self.S.shape}; the model needs "
                f"Y ({I}, {D}, {S}) and S ({I}, {D}, {D})"
            )

    def commit_utterance(self, extractor: IvectorExtractor, utt: UtteranceStats) -> float:
        """``CommitStatsForUtterance``; returns the utterance's auxiliary function."""
        mean, var = extractor.ivector_distribution(utt)
        auxf = extractor.auxf(utt, mean, var)
        scatter = var + np.outer(mean, mean)
        self.tot_auxf += auxf
        self.gamma += utt.gamma
        self.Y += utt.X[:, :, None] * mean[None, None, :]
        self.R += utt.gamma[:, None, None] * scatter[None]
        if utt.S is None:
            raise DataError("variance update needs second-order utterance statistics")
        self.S += utt.S
        self.num_ivectors += 1.0
        self.ivector_sum += mean
        self.ivector_scatter += scatter
        return auxf

    def accumulate(
        self, extractor: IvectorExtractor, feats: np.ndarray, post: SparsePosteriors | np.ndarray
    ) -> float:
        """``AccStatsForUtterance``: one utterance's features and posteriors."""
        extractor.check_feats(feats)
        utt = UtteranceStats.from_posteriors(feats, post, extractor.num_gauss, second_order=True)
        return self.commit_utterance(extractor, utt)

    def add(self, other: IvectorExtractorStats) -> None:
        if other.Y.shape != self.Y.shape or other.S.shape != self.S.shape:
            raise DataError(
                f"cannot add extractor stats of shape {other.Y.shape} to {self.Y.shape}"
            )
        self.gamma += other.gamma
        self.Y += other.Y
        self.R += other.R
        self.S += other.S
        self.num_ivectors += other.num_ivectors
        self.ivector_sum += other.ivector_sum
        self.ivector_scatter += other.ivector_scatter
        self.tot_auxf += other.tot_auxf

    def save(self, path: str | os.PathLike) -> None:
        save_npz(
            path,
            kind="ivector_extractor_stats",
            gamma=self.gamma,
            Y=self.Y,
            R=self.R,
            S=self.S,
            num_ivectors=self.num_ivectors,
            ivector_sum=self.ivector_sum,
            ivector_scatter=self.ivector_scatter,
            tot_auxf=self.tot_auxf,
        )

    @classmethod
    def load(cls, path: str | os.PathLike) -> IvectorExtractorStats:
        z = load_npz(path, "ivector_extractor_stats", "i-vector extractor stats", DataError)
        return cls(
            z["gamma"],
            z["Y"],
            z["R"],
            z["S"],
            float(z["num_ivectors"]),
            z["ivector_sum"],
            z["ivector_scatter"],
            float(z["tot_auxf"]),
        )


def sum_stats(stats: list[IvectorExtractorStats]) -> IvectorExtractorStats:
    """Sum of per-job statistics (``ivector-extractor-sum-accs``)."""
    if not stats:
        raise DataError("no extractor statistics to sum")
    total = IvectorExtractorStats(
        stats[0].gamma.copy(),
        stats[0].Y.copy(),
        stats[0].R.copy(),
        stats[0].S.copy(),
        stats[0].num_ivectors,
        stats[0].ivector_sum.copy(),
        stats[0].ivector_scatter.copy(),
        stats[0].tot_auxf,
    )
    for s in stats[1:]:
        total.add(s)
    return total


# ---------------------------------------------------------------- linear algebra helpers
def solve_quadratic_matrix_problem(
    Q: np.ndarray,
    Y: np.ndarray,
    SigmaInv: np.ndarray,
    M: np.ndarray,
    K: float = 1.0e4,
    eps: float = 1.0e-40,
) -> tuple[np.ndarray, float]:
    """Maximise ``f(M) = tr(M^T P Y) - 0.5 tr(P M Q M^T)`` (``P = SigmaInv``) robustly.

    ``SolveQuadraticMatrixProblem`` in ``src/matrix/sp-matrix.cc`` with diagonal
    preconditioning: ``Q`` is scaled to unit diagonal, its eigenvalues are floored at
    ``max(eps, max_eig / K)``, and the step ``(Y - M Q) Q^{-1}`` is taken from ``M``. If the
    auxiliary function would decrease, ``M`` is kept. Returns the new ``M`` and the gain.
    """
    if not np.any(Q):
        log.warning("zero quadratic term in matrix problem: leaving it unchanged")
        return M.copy(), 0.0
    d = np.maximum(np.diag(Q), np.finfo(np.float64).tiny * 1.0e3)
    sq = np.sqrt(d)
    Qs = Q / np.outer(sq, sq)
    Ys = Y / sq
    Ms = M * sq
    l, U = np.linalg.eigh(0.5 * (Qs + Qs.T))
    floor = max(eps, l.max() / K)
    if (l < floor).any():
        log.info("matrix problem: floored %d eigenvalues", int((l < floor).sum()))
    l = np.maximum(l, floor)
    delta = ((Ys - Ms @ Qs) @ U / l) @ U.T
    Mhat = Ms + delta

    def auxf(m: np.ndarray) -> float:
        return float(np.sum(m * (SigmaInv @ Ys)) - 0.5 * np.sum(SigmaInv * (m @ Qs @ m.T)))

    before, after = auxf(Ms), auxf(Mhat)
    if after < before:
        if after < before - 1.0e-10:
            log.warning("matrix problem: auxf would decrease %g -> %g; not updating", before, after)
        return M.copy(), 0.0
    return Mhat / sq, after - before


def floor_psd(A: np.ndarray, floor: np.ndarray) -> tuple[np.ndarray, int]:
    """Eigenvalue-floor symmetric ``A`` against positive definite ``floor``
    (``SpMatrix::ApplyFloor(C)``): the result ``B`` satisfies ``x^T B x >= x^T floor x``.

    With ``floor = L L^T``, floor the eigenvalues of ``L^{-1} A L^{-T}`` at 1 and map back.
    Returns the floored matrix and the number of eigenvalues floored.
    """
    L = np.linalg.cholesky(floor)
    Linv = np.linalg.inv(L)
    D = Linv @ A @ Linv.T
    l, U = np.linalg.eigh(0.5 * (D + D.T))
    n = int((l < 1.0).sum())
    l = np.maximum(l, 1.0)
    B = L @ (U * l) @ U.T @ L.T
    return 0.5 * (B + B.T), n


def _sym_inv(A: np.ndarray) -> np.ndarray:
    inv = np.linalg.inv(A)
    return 0.5 * (inv + inv.T)


# ---------------------------------------------------------------- update steps
@dataclass(frozen=True)
class ExtractorUpdateOptions:
    """``IvectorExtractorEstimationOptions``."""

    gaussian_min_count: float = 100.0
    variance_floor_factor: float = 0.1
    diagonalize: bool = True


def update_projections(
    stats: IvectorExtractorStats, extractor: IvectorExtractor, opts: ExtractorUpdateOptions
) -> float:
    """``UpdateProjections`` in place; returns the auxf gain per frame."""
    tot_impr = 0.0
    skipped = 0
    for i in range(extractor.num_gauss):
        if stats.gamma[i] < opts.gaussian_min_count:
            skipped += 1
            continue
        M, impr = solve_quadratic_matrix_problem(
            stats.R[i], stats.Y[i], extractor.Sigma_inv[i], extractor.M[i]
        )
        extractor.M[i] = M
        tot_impr += impr
    if skipped:
        log.warning(
            "skipped %d of %d Gaussians with count below gaussian_min_count=%g",
            skipped,
            extractor.num_gauss,
            opts.gaussian_min_count,
        )
    count = float(stats.gamma.sum())
    log.info("auxf improvement for M: %.6g per frame over %.6g frames", tot_impr / count, count)
    return tot_impr / count


def update_variances(
    stats: IvectorExtractorStats, extractor: IvectorExtractor, opts: ExtractorUpdateOptions
) -> float:
    """``UpdateVariances`` in place (uses the new ``M``); returns the auxf gain per frame."""
    I, D = extractor.num_gauss, extractor.feat_dim
    raw: dict[int, np.ndarray] = {}
    var_floor = np.zeros((D, D))
    floor_count = 0.0
    for i in range(I):
        if stats.gamma[i] < opts.gaussian_min_count:
            continue
        M = extractor.M[i]
        YM = stats.Y[i] @ M.T
        S = stats.S[i] - (YM + YM.T) + M @ stats.R[i] @ M.T
        var_floor += S
        floor_count += stats.gamma[i]
        raw[i] = 0.5 * (S + S.T) / stats.gamma[i]
    if floor_count <= 0.0:
        log.warning("no Gaussian has enough count to update its variance")
        return 0.0
    var_floor *= opts.variance_floor_factor / floor_count
    var_floor = 0.5 * (var_floor + var_floor.T)
    # Floor the floor's own eigenvalues (linearly dependent features would make it singular).
    s, P = np.linalg.eigh(var_floor)
    min_eig = np.abs(s).max() * 1.0e-4
    if (s < min_eig).any():
        log.warning("floored %d eigenvalues of the variance floor", int((s < min_eig).sum()))
        var_floor = (P * np.maximum(s, min_eig)) @ P.T
    tot_impr = 0.0
    tot_floored = 0
    for i, S in raw.items():
        floored, n = floor_psd(S, var_floor)
        tot_floored += n
        old_inv = extractor.Sigma_inv[i]
        new_inv = _sym_inv(floored)
        old_objf = -0.5 * (np.sum(S * old_inv) - _logdet_pd(old_inv))
        new_objf = -0.5 * (np.sum(S * new_inv) - _logdet_pd(new_inv))
        tot_impr += stats.gamma[i] * (new_objf - old_objf)
        extractor.Sigma_inv[i] = new_inv
    count = float(stats.gamma.sum())
    log.info(
        "floored %.2f%% of Gaussian eigenvalues; auxf improvement for variances %.6g per frame",
        100.0 * tot_floored / (I * D),
        tot_impr / count,
    )
    return tot_impr / count


def prior_transform(
    stats: IvectorExtractorStats, extractor: IvectorExtractor, diagonalize: bool = True
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The i-vector space transform ``V`` of ``UpdatePrior``; also returns ``mu`` and ``C``.

    ``diagonalize`` rotates dims ``1..S-1`` so that the UBM-weighted average of ``U_i`` in
    the new space, restricted to those dims, is diagonal with decreasing entries. (Kaldi's
    ``GetOrthogonalIvectorTransform`` approximates that block from the old-space block; any
    rotation of dims ``1..S-1`` leaves the prior, and the model's predictions, unchanged.)
    """
    if stats.num_ivectors <= 0:
        raise DataError("prior update needs at least one i-vector in the stats")
    S = extractor.ivector_dim
    mu = stats.ivector_sum / stats.num_ivectors
    covar = stats.ivector_scatter / stats.num_ivectors - np.outer(mu, mu)
    covar = 0.5 * (covar + covar.T)
    s, P = np.linalg.eigh(covar)
    log.info("eigenvalues of the i-vector covariance range from %.4g to %.4g", s.min(), s.max())
    if (s < 1.0e-7).any():
        log.warning("floored %d eigenvalues of the i-vector covariance", int((s < 1.0e-7).sum()))
    s = np.maximum(s, 1.0e-7)
    T = P.T / np.sqrt(s)[:, None]
    x = T @ mu
    norm = np.linalg.norm(x)
    if norm == 0.0:
        raise DataError("the mean i-vector is zero; cannot place the prior offset")
    x /= norm
    U = np.eye(S)
    if x[0] < 1.0 - 1e-15:
        alpha = 1.0 / (np.sqrt(2.0) * np.sqrt(1.0 - x[0]))
        a = alpha * x
        a[0] -= alpha
        U -= 2.0 * np.outer(a, a)
    V = U @ T
    if diagonalize and S > 1:
        Vinv = np.linalg.inv(V)
        Uavg = np.tensordot(extractor.w_vec, extractor.U, axes=1)
        Unew = Vinv.T @ Uavg @ Vinv
        sub = 0.5 * (Unew[1:, 1:] + Unew[1:, 1:].T)
        ev, Q = np.linalg.eigh(sub)
        Q = Q[:, np.argsort(-ev, kind="stable")]
        V[1:] = Q.T @ V[1:]
    return V, mu, covar


def update_prior(
    stats: IvectorExtractorStats, extractor: IvectorExtractor, opts: ExtractorUpdateOptions
) -> float:
    """``UpdatePrior`` in place: transform the i-vector space; returns the gain per frame
    (``PriorDiagnostics``: ``n (-0.5 (S + logdet C) + 0.5 tr(C + d d^T)) / sum gamma`` with
    ``d = mu - p e0``)."""
    V, mu, covar = prior_transform(stats, extractor, opts.diagonalize)
    d = mu.copy()
    d[0] -= extractor.prior_offset
    old_like = -0.5 * (np.trace(covar) + d @ d)
    new_like = -0.5 * (extractor.ivector_dim + _logdet_pd(covar))
    impr = (new_like - old_like) * stats.num_ivectors / float(stats.gamma.sum())
    new_mu = V @ mu
    Vinv = np.linalg.inv(V)
    extractor.M = extractor.M @ Vinv
    extractor.prior_offset = float(new_mu[0])
    log.info(
        "prior offset is now %.6g; auxf improvement from the prior %.6g per frame", new_mu[0], impr
    )
    return impr


def update(
    extractor: IvectorExtractor,
    stats: IvectorExtractorStats,
    opts: ExtractorUpdateOptions = ExtractorUpdateOptions(),
) -> tuple[IvectorExtractor, dict]:
    """``IvectorExtractorStats::Update`` on a copy: projections, variances, prior."""
    stats.check(extractor)
    new = extractor.copy()
    count = float(stats.gamma.sum())
    info = {
        "auxf_per_frame": stats.tot_auxf / count if count else 0.0,
        "count": count,
        "num_ivectors": stats.num_ivectors,
    }
    log.info("auxf per frame on training data %.6g over %.6g frames", info["auxf_per_frame"], count)
    info["impr_projections"] = update_projections(stats, new, opts)
    info["impr_variances"] = update_variances(stats, new, opts)
    new.compute_derived_vars()
    info["impr_prior"] = update_prior(stats, new, opts)
    new.compute_derived_vars()
    info["impr_total"] = info["impr_projections"] + info["impr_variances"] + info["impr_prior"]
    info["prior_offset"] = new.prior_offset
    info["gaussians_updated"] = int((stats.gamma >= opts.gaussian_min_count).sum())
    return new, info
