"""Natural-gradient SGD (NG-SGD), faithful to Kaldi's online natural gradient.

Mirrors ``src/nnet3/natural-gradient-online.{h,cc}`` (class ``OnlineNaturalGradient``) and
``NaturalGradientAffineComponent`` in ``src/nnet3/nnet-simple-component.cc`` (Povey, Zhang &
Khudanpur, arXiv 1410.7455, section 3 and appendix).

The idea
--------
For an affine layer with inputs x_n (a 1 appended for the bias) and output derivatives
g_n, the Fisher matrix is approximated as a Kronecker product A ⊗ B, A estimated from the
x_n and B from the g_n, so the natural-gradient step is Σ_n (B⁻¹ g_n)(A⁻¹ x_n)ᵀ. Each side
is one :class:`OnlineNaturalGradient` working on an N×D matrix X whose rows are the
vectors. It keeps a low-rank-plus-identity Fisher estimate

    F_t = R_tᵀ diag(d_t) R_t + ρ_t I,      R_t (R×D) with orthonormal rows,

smoothed towards the identity for inversion, G_t = F_t + (α/D)·tr(F_t)·I
= R_tᵀ diag(d_t) R_t + β_t I with β_t = ρ_t(1+α) + (α/D)·Σd_t. With
e_i = 1/(β_t/d_i + 1) and W_t = diag(√e) R_t (the stored state), Woodbury gives

    X̂_t = β_t X_t G_t⁻¹ = X_t − (X_t W_tᵀ) W_t,

and the returned scale γ_t = √(tr(X_tX_tᵀ)/tr(X̂_tX̂_tᵀ)) (1 if X_t = 0) restores the
norm: NG changes directions, not magnitudes. The caller multiplies γ into the learning
rate; X̂ is *not* scaled.

The online update (only on "updating" calls: t ≤ 10 or (t−10) % update_period == 0)
is one step of a power method on T_t = η S_t + (1−η) F_t, S_t = X_tᵀX_t/N, with the
forgetting factor η = min(1 − exp(−N/num_samples_history), 0.9) (or 1/num_minibatches_history):

    Y_t = R_t T_t,   Z_t = Y_t Y_tᵀ = U_t diag(c_t) U_tᵀ   (eigenvalues sorted descending),
    R_{t+1} = diag(c_t)^{-1/2} U_tᵀ Y_t,
    ρ_{t+1} = [ (η/N) tr(X_tᵀX_t) + (1−η)(D ρ_t + Σd_t) − Σ√c_t ] / (D − R)
              (so that tr(F_{t+1}) = tr(T_t)),
    d_{t+1} = √c_t − ρ_{t+1},

with floors c ≥ ((1−η)ρ_t)², ρ, d ≥ max(ε, δ·max √c_t). Z_t is formed from the R×R
products K_t = J_t J_tᵀ, L_t = H_tᵀH_t (H_t = X_t W_tᵀ, J_t = H_tᵀ X_t) as

    Z_t = (η/N)² E^{-½} K E^{-½} + (η/N)(1−η)[E^{-½} L E^{-½} Q + Q E^{-½} L E^{-½}] + (1−η)² Q²,

Q = diag(d_t + ρ_t), and W_{t+1} = A_t B_t with B_t = J_t + ((1−η)/(η/N)) Q W_t and
A_t = (η/N) E_{t+1}^{½} C_t^{-½} U_tᵀ E_t^{-½}. If C_t is badly conditioned (c_0 > 10⁶ c_{R−1})
or floored, R_{t+1} is re-orthonormalised (Cholesky, Gram–Schmidt as fallback).

Devices: the N×D×R products (H, X̂, J, K, L, B, W) stay on X's device and dtype; only the
R×R algebra (Z_t, its eigendecomposition, floors, A_t) runs on the CPU in float64, after
one small device-to-host copy per updating call. A non-updating call is two GEMMs. On a
CPU the small products run fastest with few intra-op threads: give torch the cores the job
was allotted (``torch.set_num_threads``), no more.

Kaldi never saves this state with the model: every training job starts fresh and
initialises from its first minibatch (``Init``: three warm-up updates on copies of it, or
one if N ≤ R). :meth:`paravg.nnet.ng_affine.NaturalGradientAffine.reset_state` does the
same.

The layer that applies it to an affine component's two sides (Kaldi's
``NaturalGradientAffineComponent``, ``nnet-simple-component.cc``) is
:mod:`paravg.nnet.ng_affine`: this module is the preconditioner only, as Kaldi keeps
``natural-gradient-online.cc`` apart from the components that use it; its options, with
their defaults and bounds, are :mod:`paravg.optim.options` (torch-free, checked at start-up).
"""

from __future__ import annotations

import dataclasses
import logging
import math
import numbers
from dataclasses import dataclass

import numpy as np
import torch

from paravg.errors import ConfigError
from paravg.optim.options import NgsgdOptions

log = logging.getLogger(__name__)

__all__ = ["NgsgdOptions", "OnlineNaturalGradient", "UpdateInfo"]

# Kaldi's literals (natural-gradient-online.cc).
KALDI_RANK = 40  # OnlineNaturalGradient's rank_ (not a config key: layers use rank_in/out)
_CONDITION_THRESHOLD = 1.0e6  # must_reorthogonalize when c_0 > this * c_{R-1}
_MAX_ETA = 0.9  # Eta(): eta is capped so that an all-zero input cannot produce NaN
_REORTH_UNIT_TOL = 1.0e-3  # ReorthogonalizeRt1: O within this of I -> nothing to do
_MAX_CHOLESKY_INVERSE = 100.0  # ... and max(C^-1) >= this -> Gram-Schmidt instead


@dataclass
class UpdateInfo:
    """What happened in the last updating call (for diagnostics and tests).

    ``trace_T`` is tr(T_t) = (η/N)·tr(XᵀX) + (1−η)·tr(F_t); without any floor it equals
    tr(F_{t+1}) = D·ρ_{t+1} + Σd_{t+1}. ``floor`` = max(ε, δ·max √c_t), the floor of ρ and d.
    """

    t: int
    eta: float
    trace_T: float  # noqa: N815 (the paper's T_t)
    num_c_floored: int
    floor: float
    rho_floored: bool
    num_d_floored: int
    must_reorthogonalize: bool
    gram_schmidt: bool


def _orthonormal_special(rank: int, dim: int) -> np.ndarray:
    """Kaldi's ``InitOrthonormalSpecial``: row r has entries at columns r, r+R, r+2R, …,
    the first 1.1 and the rest 1, normalised. The 1.1 breaks the symmetry so that no
    combination of rows is the all-ones vector (which would be bad for the bias column)."""
    out = np.zeros((rank, dim))
    for r in range(rank):
        cols = np.arange(r, dim, rank)
        vals = np.ones(len(cols))
        vals[0] = 1.1
        out[r, cols] = vals / math.sqrt(1.1 * 1.1 + len(cols) - 1)
    return out


def _compute_e(d: np.ndarray, beta: float) -> tuple[np.ndarray, np.ndarray]:
    """Kaldi's ``ComputeEt``: e_i = 1/(β/d_i + 1); returns (√e, 1/√e)."""
    e = 1.0 / (beta / d + 1.0)
    sqrt_e = np.sqrt(e)
    return sqrt_e, 1.0 / sqrt_e


# The R×R LAPACK calls go through torch, not numpy: numpy's OpenBLAS starts its own
# thread pool, which beside torch's threads (or other jobs on the node) made an 80×80
# eigh take 3-80 ms instead of 0.3 ms. torch follows torch.set_num_threads.


def _eigh_descending(Z: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Symmetric eigendecomposition Z = U diag(c) Uᵀ with c sorted descending
    (Kaldi's ``Eig`` + ``SortSvd``)."""
    c, U = torch.linalg.eigh(torch.from_numpy(Z))
    return c.numpy()[::-1].copy(), U.numpy()[:, ::-1].copy()


def _cholesky_inverse(O: np.ndarray) -> np.ndarray | None:
    """C⁻¹ for O = C Cᵀ (C lower triangular), or None if O is not positive definite."""
    O_t = torch.from_numpy(O)
    C, info = torch.linalg.cholesky_ex(O_t)
    if int(info) != 0:
        return None
    eye = torch.eye(O.shape[0], dtype=O_t.dtype)
    return torch.linalg.solve_triangular(C, eye, upper=False).numpy()


def _orthogonalize_rows(M: np.ndarray, seed: int) -> np.ndarray:
    """Kaldi's ``MatrixBase::OrthogonalizeRows`` (Gram–Schmidt, re-done when a row lost
    more than 99% of its power, randomised deterministically when it vanished)."""
    M = M.copy()
    rng = np.random.default_rng(seed)
    for i in range(M.shape[0]):
        for _ in range(100):
            start = float(M[i] @ M[i])
            if not math.isfinite(start) or start == 0.0:
                M[i] = rng.standard_normal(M.shape[1])
                continue
            for j in range(i):
                M[i] -= (M[i] @ M[j]) * M[j]
            end = float(M[i] @ M[i])
            if end > 0.01 * start:
                M[i] /= math.sqrt(end)
                break
            if end == 0.0:
                M[i] = rng.standard_normal(M.shape[1])
        else:
            raise FloatingPointError("loop detected while orthogonalising rows (Gram-Schmidt)")
    return M


def _subtract_projection(
    X: torch.Tensor, H: torch.Tensor, W: torch.Tensor, inplace: bool
) -> torch.Tensor:
    """X − H W (one GEMM), written into X when ``inplace``."""
    return X.addmm_(H, W, alpha=-1.0) if inplace else torch.addmm(X, H, W, alpha=-1.0)


class OnlineNaturalGradient:
    """Kaldi's ``OnlineNaturalGradient``: an online low-rank Fisher-inverse preconditioner.

    ``rank`` defaults to Kaldi's class default (40); the other options (Kaldi's names)
    are an :class:`~paravg.optim.options.NgsgdOptions` (``options``, default: the
    schema's defaults) with ``overrides`` replaced, validated there
    (``update_period`` defaults to 4 as in every Kaldi component that uses it; the bare
    C++ class default is 1). The rank is clamped to D−1 at the first call (Kaldi's
    ``InitDefault``); with D == 1 the call is a no-op with scale 1.

    State (after the first call): ``W`` (R×D, on the device/dtype of the inputs), ``rho``
    (float), ``d`` (float64 numpy array of R), ``t`` (number of calls so far).
    """

    def __init__(
        self, rank: int = KALDI_RANK, options: NgsgdOptions | None = None, **overrides
    ) -> None:
        integral = isinstance(rank, numbers.Integral) and not isinstance(rank, bool)
        if not (integral and rank >= 1):
            raise ConfigError(f"OnlineNaturalGradient: rank = {rank!r}: expected an integer >= 1")
        options = options or NgsgdOptions()
        if overrides:
            options = dataclasses.replace(options, **overrides)  # validated again
        self.options = options
        self.rank = int(rank)
        self.alpha = float(options.alpha)
        self.num_samples_history = float(options.num_samples_history)
        self.num_minibatches_history = float(options.num_minibatches_history)
        self.update_period = int(options.update_period)
        self.epsilon = float(options.epsilon)
        self.delta = float(options.delta)
        self.frozen = False  # Kaldi's Freeze(): keep preconditioning, stop updating
        self.reset()

    def reset(self) -> None:
        """Forget the Fisher estimate; the next call initialises from its minibatch."""
        self.t = 0
        self.dim: int | None = None
        self.W: torch.Tensor | None = None
        self.rho: float | None = None
        self.d: np.ndarray | None = None
        self.num_reorthogonalizations = 0
        self.num_gram_schmidt = 0
        self.num_nonfinite_skipped = 0
        self.last_update: UpdateInfo | None = None

    def eta(self, N: int) -> float:
        """Kaldi's ``Eta(N)``: 1/num_minibatches_history if set, else
        min(1 − exp(−N/num_samples_history), 0.9)."""
        if self.num_minibatches_history > 0.0:
            return 1.0 / self.num_minibatches_history
        return min(1.0 - math.exp(-N / self.num_samples_history), _MAX_ETA)

    def updating(self) -> bool:
        """Kaldi's ``Updating()`` for the next call: t ≤ 10 or (t − 10) % update_period == 0."""
        return not self.frozen and (self.t <= 10 or (self.t - 10) % self.update_period == 0)

    # ------------------------------------------------------------------ public call

    def precondition_directions(
        self, X: torch.Tensor, inplace: bool = False
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Kaldi's ``PreconditionDirections``: return (X̂, γ) for the N×D matrix ``X``.

        X̂ = X − X Wᵀ W with the estimate from *before* this call (the update, when this
        call updates, uses X but only affects later calls; the very first call
        initialises from X). γ = √(‖X‖²_F / ‖X̂‖²_F), exactly 1 when X = 0, returned as a
        0-dim tensor on X's device (a Python float would force a device sync); X̂ is not
        multiplied by γ. float32 and float64 are supported. ``X`` is left alone unless
        ``inplace`` (Kaldi's behaviour: X̂ is written into X and X is returned; saves a
        copy when the caller owns X).
        """
        if X.dim() != 2:
            raise ValueError(
                f"precondition_directions expects an N x D matrix, got {tuple(X.shape)}"
            )
        if X.dtype not in (torch.float32, torch.float64):
            raise TypeError(f"precondition_directions supports float32/float64, got {X.dtype}")
        N, D = X.shape
        if self.dim is not None and self.dim != D:
            raise ValueError(f"preconditioner was initialised with dimension {self.dim}, got {D}")
        if D == 1 or N == 0:
            # D == 1: rank would be 0 and the rescaled step is unchanged (Kaldi's special
            # case). N == 0: nothing to estimate from; leave the state alone.
            return (X if inplace else X.clone()), X.new_ones(())
        if self.t == 0:
            self._init(X)
        elif self.W.device != X.device or self.W.dtype != X.dtype:
            self.W = self.W.to(device=X.device, dtype=X.dtype)
        Xhat, scale = self._precondition(X, self.updating(), inplace)
        self.t += 1
        return Xhat, scale

    # ------------------------------------------------------------------ initialisation

    def _init_default(self, D: int, device: torch.device, dtype: torch.dtype) -> None:
        """Kaldi's ``InitDefault``: ρ = d_i = ε, W = √(1/(2 + (D+R)α/D)) · R_special."""
        R = min(self.rank, D - 1)
        e_ii = 1.0 / (2.0 + (D + R) * self.alpha / D)
        W = math.sqrt(e_ii) * _orthonormal_special(R, D)
        self.W = torch.from_numpy(W).to(device=device, dtype=dtype)
        self.rho = self.epsilon
        self.d = np.full(R, self.epsilon)
        self.dim = D
        self.t = 0

    def _init(self, X0: torch.Tensor) -> None:
        """Kaldi's ``Init``: on a temporary copy with t = 1, run the full update on copies
        of the first minibatch 3 times (once if N ≤ R) from the default start, then keep
        only W, ρ, d. The caller then processes X0 again as call 0 (an updating call)."""
        work = OnlineNaturalGradient(self.rank, self.options)
        work._init_default(X0.shape[1], X0.device, X0.dtype)
        work.t = 1
        num_iters = 1 if X0.shape[0] <= work.W.shape[0] else 3
        for _ in range(num_iters):
            work._precondition(X0, updating=True, inplace=False)
            work.t += 1
        self.W, self.rho, self.d, self.dim = work.W, work.rho, work.d, work.dim
        self.num_reorthogonalizations += work.num_reorthogonalizations
        self.num_gram_schmidt += work.num_gram_schmidt

    # ------------------------------------------------------------------ the algorithm

    @staticmethod
    def _scale(tr_XX: torch.Tensor, Xhat: torch.Tensor) -> torch.Tensor:
        flat = Xhat.reshape(-1)
        tr_hat = torch.dot(flat, flat)
        return torch.where(tr_XX > 0, torch.sqrt(tr_XX / tr_hat), 1.0)

    def _precondition(
        self, X: torch.Tensor, updating: bool, inplace: bool
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Kaldi's ``PreconditionDirectionsInternal`` (+ the scale of the caller)."""
        W = self.W
        R, D = W.shape
        N = X.shape[0]
        flat = X.reshape(-1)
        tr_XX = torch.dot(flat, flat)
        H = torch.mm(X, W.t())  # H_t = X_t W_tᵀ (N×R)
        if not updating:
            Xhat = _subtract_projection(X, H, W, inplace)  # X̂_t = X_t − H_t W_t
            return Xhat, self._scale(tr_XX, Xhat)

        J = torch.mm(H.t(), X)  # J_t = H_tᵀ X_t (R×D)
        K = torch.mm(J, J.t())  # K_t = J_t J_tᵀ
        # L_t = H_tᵀ H_t = W_t J_tᵀ; Kaldi takes the cheaper form when N > D.
        L = torch.mm(W, J.t()) if N > D else torch.mm(H.t(), H)
        host = torch.cat((K.reshape(-1), L.reshape(-1), tr_XX.reshape(1)))
        host = host.to(device="cpu", dtype=torch.float64).numpy()
        if not np.all(np.isfinite(host)):
            # Not in Kaldi (its eigensolver would fail): keep the estimate, so one bad
            # minibatch (which max-change then skips) does not poison every later step.
            self.num_nonfinite_skipped += 1
            log.warning("natural gradient: non-finite input at call %d; not updating", self.t)
            Xhat = _subtract_projection(X, H, W, inplace)
            return Xhat, self._scale(tr_XX, Xhat)
        K64 = host[: R * R].reshape(R, R)
        L64 = host[R * R : 2 * R * R].reshape(R, R)
        tr_xx = float(host[-1])

        A, coeff, W_info = self._small_update(N, D, R, K64, L64, tr_xx)

        Xhat = _subtract_projection(X, H, W, inplace)
        small = torch.from_numpy(np.concatenate((A.reshape(-1), coeff)))
        small = small.to(device=X.device, dtype=X.dtype)
        A_t, coeff_t = small[: R * R].view(R, R), small[R * R :]
        B = torch.addcmul(J, coeff_t.unsqueeze(1), W)  # B_t = J_t + ((1−η)/(η/N)) Q W_t
        W1 = torch.mm(A_t, B)  # W_{t+1} = A_t B_t
        rho1, d1, must_reorth = W_info
        gram_schmidt = False
        if must_reorth:
            W1, gram_schmidt = self._reorthogonalize(W1, rho1, d1)
        if not self.frozen:
            self.W, self.rho, self.d = W1, rho1, d1
        self.last_update.gram_schmidt = gram_schmidt
        return Xhat, self._scale(tr_XX, Xhat)

    def _small_update(
        self, N: int, D: int, R: int, K: np.ndarray, L: np.ndarray, tr_xx: float
    ) -> tuple[np.ndarray, np.ndarray, tuple[float, np.ndarray, bool]]:
        """The R×R part on the CPU in float64: Z_t, eigh, floors, ρ/d, A_t (Kaldi's
        ``ComputeZt``, the body of ``PreconditionDirectionsInternal``, ``ComputeWt1``)."""
        rho, d, alpha = self.rho, self.d, self.alpha
        eta = self.eta(N)
        etaN, eta1 = eta / N, 1.0 - eta
        beta = rho * (1.0 + alpha) + alpha * d.sum() / D
        _, inv_sqrt_e = _compute_e(d, beta)
        q = d + rho  # diag(D_t + ρ_t I)

        # Z_t (ComputeZt), from the symmetrised K_t and L_t.
        vv = np.outer(inv_sqrt_e, inv_sqrt_e)
        K_s = 0.5 * (K + K.T) * vv
        L_s = 0.5 * (L + L.T) * vv
        Z = etaN * etaN * K_s + etaN * eta1 * (L_s * q[None, :] + q[:, None] * L_s)
        Z[np.diag_indices(R)] += eta1 * eta1 * q * q

        z_scale = max(1.0, float(np.trace(Z)))
        c, U = _eigh_descending(Z / z_scale)
        c = c * z_scale

        must_reorth = bool(c[0] > _CONDITION_THRESHOLD * c[R - 1])
        c_floor = (rho * eta1) ** 2
        num_c_floored = int(np.count_nonzero(c < c_floor))
        if num_c_floored:
            c = np.maximum(c, c_floor)
            must_reorth = True
        s = np.sqrt(c)

        # ρ_{t+1} so that tr(F_{t+1}) = tr(T_t); d_{t+1} = √c − ρ_{t+1}; then the floors.
        trace_T = etaN * tr_xx + eta1 * (D * rho + d.sum())
        rho1 = (trace_T - s.sum()) / (D - R)
        d1 = s - rho1
        floor = max(self.epsilon, self.delta * float(s.max()))
        rho_floored = rho1 < floor
        rho1 = max(float(rho1), floor)
        num_d_floored = int(np.count_nonzero(d1 < floor))
        d1 = np.maximum(d1, floor)

        # ComputeWt1: A_t = (η/N) E_{t+1}^{½} C_t^{-½} U_tᵀ E_t^{-½}.
        beta1 = rho1 * (1.0 + alpha) + alpha * d1.sum() / D
        if not beta1 > 0:
            raise FloatingPointError(f"natural gradient: beta_t1 = {beta1} is not positive")
        sqrt_e1, _ = _compute_e(d1, beta1)
        A = etaN * (sqrt_e1 / s)[:, None] * U.T * inv_sqrt_e[None, :]
        coeff = (eta1 / etaN) * q

        self.last_update = UpdateInfo(
            t=self.t,
            eta=eta,
            trace_T=float(trace_T),
            num_c_floored=num_c_floored,
            floor=floor,
            rho_floored=bool(rho_floored),
            num_d_floored=num_d_floored,
            must_reorthogonalize=must_reorth,
            gram_schmidt=False,
        )
        return np.ascontiguousarray(A), coeff, (rho1, d1, must_reorth)

    def _reorthogonalize(
        self, W1: torch.Tensor, rho1: float, d1: np.ndarray
    ) -> tuple[torch.Tensor, bool]:
        """Kaldi's ``ReorthogonalizeRt1``: make R_{t+1} = E_{t+1}^{-½} W_{t+1} orthonormal.

        O = R Rᵀ; if O ≈ I (1e-3) nothing changes. Else O = C Cᵀ (Cholesky) and
        W ← E^{½} C⁻¹ E^{-½} W (lower-triangular C⁻¹ keeps the leading rows). If the
        Cholesky fails or max(C⁻¹) ≥ 100, Gram–Schmidt the rows on the CPU and scale by E^{½}.
        Returns (W, used_gram_schmidt).
        """
        self.num_reorthogonalizations += 1
        R, D = W1.shape
        beta1 = rho1 * (1.0 + self.alpha) + self.alpha * d1.sum() / D
        sqrt_e1, inv_sqrt_e1 = _compute_e(d1, beta1)
        O = torch.mm(W1, W1.t()).to(device="cpu", dtype=torch.float64).numpy()
        O = 0.5 * (O + O.T) * np.outer(inv_sqrt_e1, inv_sqrt_e1)
        if np.max(np.abs(O - np.eye(R))) <= _REORTH_UNIT_TOL:
            return W1, False
        C_inv = _cholesky_inverse(O)
        if C_inv is None or not np.all(np.isfinite(C_inv)) or C_inv.max() >= _MAX_CHOLESKY_INVERSE:
            self.num_gram_schmidt += 1
            W_cpu = W1.to(device="cpu", dtype=torch.float64).numpy()
            ortho = _orthogonalize_rows(W_cpu, seed=self.t)
            W_new = torch.from_numpy(sqrt_e1[:, None] * ortho)
            return W_new.to(device=W1.device, dtype=W1.dtype), True
        M = sqrt_e1[:, None] * C_inv * inv_sqrt_e1[None, :]
        M_t = torch.from_numpy(np.ascontiguousarray(M)).to(device=W1.device, dtype=W1.dtype)
        return torch.mm(M_t, W1), False

    # ------------------------------------------------------------------ diagnostics

    def self_test(self, unit_tol: float = 1.0e-2) -> None:
        """Kaldi's ``SelfTest``: ρ ≥ ε, min d ≥ ε, min d > 0.9δ·max d, ρ > 0.9δ·max d, and
        E^{-½} W Wᵀ E^{-½} = I within ``unit_tol`` (Kaldi warns above 1e-2). Raises
        AssertionError naming the failed check; does nothing before the first call."""
        if self.W is None:
            return
        d, rho = self.d, self.rho
        R, D = self.W.shape
        dmax = float(d.max())
        checks = {
            "rho >= epsilon": rho >= self.epsilon,
            "min(d) >= epsilon": float(d.min()) >= self.epsilon,
            "min(d) > 0.9*delta*max(d)": float(d.min()) > 0.9 * self.delta * dmax,
            "rho > 0.9*delta*max(d)": rho > 0.9 * self.delta * dmax,
        }
        beta = rho * (1.0 + self.alpha) + self.alpha * d.sum() / D
        _, inv_sqrt_e = _compute_e(d, beta)
        O = (self.W.double().cpu() @ self.W.double().cpu().t()).numpy()
        O = O * np.outer(inv_sqrt_e, inv_sqrt_e)
        err = float(np.max(np.abs(O - np.eye(R))))
        checks[f"R R^T = I within {unit_tol} (max error {err:.3g})"] = err <= unit_tol
        failed = [name for name, ok in checks.items() if not ok]
        if failed:
            raise AssertionError(f"OnlineNaturalGradient self-test failed at t={self.t}: {failed}")
