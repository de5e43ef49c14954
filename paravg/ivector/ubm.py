"""Diagonal-covariance GMM (the UBM) and its EM training.

Mirrors Kaldi's ``DiagGmm`` (``src/gmm/diag-gmm.cc``), ``MleDiagGmmUpdate``
(``src/gmm/mle-diag-gmm.cc``), ``gmm-global-init-from-feats``, ``gmm-gselect``,
``gmm-global-acc-stats`` and ``gmm-global-est`` as driven by
``steps/online/nnet2/train_diag_ubm.sh``.

Log-likelihood of frame ``x`` under Gaussian ``i`` (``DiagGmm::LogLikelihoods``)::

    l_i(x) = g_i + sum_d mu_id x_d / v_id - 0.5 sum_d x_d^2 / v_id
    g_i    = log w_i - 0.5 sum_d (log(2 pi) + log v_id + mu_id^2 / v_id)     (gconsts)

EM statistics per Gaussian are additive (occupancy ``n_i``, ``sum_t p_ti x_t``,
``sum_t p_ti x_t^2``), where ``p_ti`` is the posterior over the frame's pre-selected
Gaussians (gselect); the update is ``w_i = n_i / n``, ``mu_i = m_i / n_i``,
``v_i = s_i / n_i - mu_i^2`` floored at ``min_variance``.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass

import numpy as np

from paravg.errors import DataError
from paravg.ivector.npz import load_npz, save_npz

log = logging.getLogger(__name__)

LOG_2PI = float(np.log(2.0 * np.pi))

#: Bytes of frames x Gaussians float64 temporaries that one E-step block of
#: :func:`train_in_memory` may hold (``UbmStats.accumulate`` keeps 3 such arrays alive:
#: measured 12.3 KB per frame at 512 Gaussians): 256 MiB is 20k frames at Kaldi's 512
#: Gaussians, 123k at the demo's 64, instead of all the ``num_frames`` (500k: 6 GB at 512).
BLOCK_BYTES = 256 * 2**20


def block_frames(num_gauss: int, dim: int, max_bytes: int = BLOCK_BYTES) -> int:
    """Frames per E-step block whose temporaries fit ``max_bytes``: each frame costs 3
    float64 values per Gaussian (log-likelihoods, exp temporary, posteriors) and 2 per
    dimension (the frame squared, its float64 copy)."""
    return max(1, max_bytes // (8 * (3 * num_gauss + 2 * dim)))


@dataclass
class DiagGmm:
    """Diagonal GMM in the "normal" parameterisation (weights, means, variances)."""

    weights: np.ndarray  # (I,)
    means: np.ndarray  # (I, D)
    vars: np.ndarray  # (I, D)

    def __post_init__(self) -> None:
        self.weights = np.asarray(self.weights, dtype=np.float64)
        self.means = np.asarray(self.means, dtype=np.float64)
        self.vars = np.asarray(self.vars, dtype=np.float64)
        if self.means.shape != self.vars.shape or self.weights.shape != (self.means.shape[0],):
            raise DataError(
                f"inconsistent GMM shapes: weights {self.weights.shape}, means "
                f"{self.means.shape}, vars {self.vars.shape}"
            )
        self.compute_gconsts()

    @property
    def num_gauss(self) -> int:
        return self.means.shape[0]

    @property
    def dim(self) -> int:
        return self.means.shape[1]

    def compute_gconsts(self) -> None:
        """Cache ``g_i``, ``mu/v`` and ``1/v`` (``DiagGmm::ComputeGconsts``)."""
        self.inv_vars = 1.0 / self.vars
        self.means_invvars = self.means * self.inv_vars
        with np.errstate(divide="ignore"):
            log_w = np.log(self.weights)
        self.gconsts = log_w - 0.5 * (
            self.dim * LOG_2PI
            + np.log(self.vars).sum(axis=1)
            + (self.means * self.means_invvars).sum(axis=1)
        )

    def check_dim(self, feats: np.ndarray, what: str = "features") -> None:
        if feats.ndim != 2 or feats.shape[1] != self.dim:
            raise DataError(
                f"{what} have shape {feats.shape}; the UBM expects dimension {self.dim}"
            )

    def log_likelihoods(self, feats: np.ndarray) -> np.ndarray:
        """``T x I`` per-Gaussian log-likelihoods including log-weights."""
        x = np.asarray(feats, dtype=np.float64)
        self.check_dim(x)
        return self.gconsts + x @ self.means_invvars.T - 0.5 * (x * x) @ self.inv_vars.T

    def gaussian_selection(self, feats: np.ndarray, num_gselect: int) -> np.ndarray:
        """Indices of the ``num_gselect`` best Gaussians per frame, best first (``gmm-gselect``)."""
        ll = self.log_likelihoods(feats)
        n = min(num_gselect, self.num_gauss)
        return np.argsort(-ll, axis=1, kind="stable")[:, :n].astype(np.int32)

    def split(self, target: int, perturb_factor: float, rng: np.random.Generator) -> None:
        """Split the heaviest Gaussian until there are ``target`` (``DiagGmm::Split``).

        The new Gaussian copies the heaviest one; both take half its weight and their means
        move apart by ``+-perturb_factor * n * sqrt(v)`` with ``n ~ N(0, I)``.
        """
        if target < self.num_gauss:
            raise DataError(f"cannot split {self.num_gauss} Gaussians down to {target}")
        weights, means, vars_ = list(self.weights), list(self.means), list(self.vars)
        while len(weights) < target:
            k = int(np.argmax(weights))
            weights[k] /= 2.0
            delta = perturb_factor * rng.standard_normal(self.dim) * np.sqrt(vars_[k])
            weights.append(weights[k])
            vars_.append(vars_[k].copy())
            means.append(means[k] + delta)
            means[k] = means[k] - delta
        self.weights, self.means, self.vars = np.array(weights), np.array(means), np.array(vars_)
        self.compute_gconsts()

    def remove(self, gaussians: list[int]) -> None:
        """Drop Gaussians and renormalise the weights (``DiagGmm::RemoveComponents``)."""
        keep = np.setdiff1d(np.arange(self.num_gauss), gaussians)
        self.weights = self.weights[keep] / self.weights[keep].sum()
        self.means, self.vars = self.means[keep], self.vars[keep]
        self.compute_gconsts()

    def save(self, path: str | os.PathLike) -> None:
        save_npz(path, kind="diag_gmm", weights=self.weights, means=self.means, vars=self.vars)

    @classmethod
    def load(cls, path: str | os.PathLike) -> DiagGmm:
        z = load_npz(path, "diag_gmm", "a diagonal GMM", DataError)
        return cls(z["weights"], z["means"], z["vars"])

    def copy(self) -> DiagGmm:
        return DiagGmm(self.weights.copy(), self.means.copy(), self.vars.copy())


@dataclass
class UbmStats:
    """Additive EM statistics of a diagonal GMM (``AccumDiagGmm``, ``kGmmAll``)."""

    occupancy: np.ndarray  # (I,)
    mean_acc: np.ndarray  # (I, D)
    var_acc: np.ndarray  # (I, D)
    tot_loglike: float = 0.0
    num_frames: float = 0.0

    @classmethod
    def zeros(cls, num_gauss: int, dim: int) -> UbmStats:
        return cls(np.zeros(num_gauss), np.zeros((num_gauss, dim)), np.zeros((num_gauss, dim)))

    def add(self, other: UbmStats) -> None:
        if other.mean_acc.shape != self.mean_acc.shape:
            raise DataError(
                f"cannot add UBM stats of shape {other.mean_acc.shape} to {self.mean_acc.shape}"
            )
        self.occupancy += other.occupancy
        self.mean_acc += other.mean_acc
        self.var_acc += other.var_acc
        self.tot_loglike += other.tot_loglike
        self.num_frames += other.num_frames

    def accumulate(
        self, gmm: DiagGmm, feats: np.ndarray, gselect: np.ndarray | None = None
    ) -> float:
        """Add the statistics of ``feats``; posteriors over ``gselect`` (``T x n``) if given.

        Returns the total log-likelihood of the frames (over the selected Gaussians).
        """
        x = np.asarray(feats, dtype=np.float64)
        ll = gmm.log_likelihoods(x)
        if gselect is not None:
            if gselect.shape[0] != x.shape[0]:
                raise DataError(
                    f"gselect has {gselect.shape[0]} frames, features have {x.shape[0]}"
                )
            sel = np.take_along_axis(ll, gselect, axis=1)
            best = sel.max(axis=1, keepdims=True)
            p_sel = np.exp(sel - best)
            tot = p_sel.sum(axis=1, keepdims=True)
            post = np.zeros_like(ll)
            np.put_along_axis(post, gselect, p_sel / tot, axis=1)
        else:
            best = ll.max(axis=1, keepdims=True)
            post = np.exp(ll - best)
            tot = post.sum(axis=1, keepdims=True)
            post /= tot
        loglike = float((best + np.log(tot)).sum())
        self.occupancy += post.sum(axis=0)
        self.mean_acc += post.T @ x
        self.var_acc += post.T @ (x * x)
        self.tot_loglike += loglike
        self.num_frames += x.shape[0]
        return loglike

    def accumulate_blocks(
        self, gmm: DiagGmm, feats: np.ndarray, max_bytes: int = BLOCK_BYTES
    ) -> float:
        """:meth:`accumulate` (no gselect) over blocks of :func:`block_frames` frames, so the
        frames x Gaussians temporaries stay within ``max_bytes`` whatever the frame count
        (Kaldi's ``gmm-global-init-from-feats`` accumulates frame by frame). One block when
        all frames fit: then exactly :meth:`accumulate`; with several, the statistics are
        summed block by block (equal up to float rounding, about 1e-15 relative)."""
        n = block_frames(gmm.num_gauss, gmm.dim, max_bytes)
        if feats.shape[0] <= n:
            return self.accumulate(gmm, feats)
        return sum(
            self.accumulate(gmm, feats[start : start + n]) for start in range(0, feats.shape[0], n)
        )

    def save(self, path: str | os.PathLike) -> None:
        save_npz(
            path,
            kind="ubm_stats",
            occupancy=self.occupancy,
            mean_acc=self.mean_acc,
            var_acc=self.var_acc,
            tot_loglike=self.tot_loglike,
            num_frames=self.num_frames,
        )

    @classmethod
    def load(cls, path: str | os.PathLike) -> UbmStats:
        z = load_npz(path, "ubm_stats", "UBM statistics", DataError)
        return cls(
            z["occupancy"],
            z["mean_acc"],
            z["var_acc"],
            float(z["tot_loglike"]),
            float(z["num_frames"]),
        )


def sum_stats(stats: list[UbmStats]) -> UbmStats:
    """Sum of per-job statistics (``gmm-global-sum-accs``)."""
    if not stats:
        raise DataError("no UBM statistics to sum")
    total = UbmStats.zeros(*stats[0].mean_acc.shape)
    for s in stats:
        total.add(s)
    return total


def ml_objective(gmm: DiagGmm, stats: UbmStats) -> float:
    """EM auxiliary function of ``gmm`` on ``stats`` (Kaldi's ``MlObjective``)."""
    return float(
        stats.occupancy @ np.where(stats.occupancy > 0, gmm.gconsts, 0.0)
        + (stats.mean_acc * gmm.means_invvars).sum()
        - 0.5 * (stats.var_acc * gmm.inv_vars).sum()
    )


@dataclass(frozen=True)
class UbmUpdateOptions:
    """``MleDiagGmmOptions`` (``min_gaussian_weight`` as train_diag_ubm.sh passes it)."""

    min_gaussian_weight: float = 1.0e-4
    min_gaussian_occupancy: float = 10.0
    min_variance: float = 1.0e-3
    remove_low_count_gaussians: bool = True


def update(
    gmm: DiagGmm, stats: UbmStats, opts: UbmUpdateOptions = UbmUpdateOptions()
) -> tuple[DiagGmm, dict]:
    """ML re-estimation of a diagonal GMM (``MleDiagGmmUpdate``); returns the new GMM and info.

    A Gaussian whose occupancy is at most ``min_gaussian_occupancy`` or whose weight is at
    most ``min_gaussian_weight`` keeps its parameters and is removed when
    ``remove_low_count_gaussians`` (never the last one); otherwise its weight is floored.
    """
    if stats.mean_acc.shape != gmm.means.shape:
        raise DataError(
            f"UBM stats are for {stats.mean_acc.shape} Gaussians x dims, the model has "
            f"{gmm.means.shape}"
        )
    obj_old = ml_objective(gmm, stats)
    new = gmm.copy()
    occ = stats.occupancy
    occ_sum = float(occ.sum())
    num_gauss = gmm.num_gauss
    to_remove: list[int] = []
    floored = 0
    for i in range(num_gauss):
        prob = occ[i] / occ_sum if occ_sum > 0 else 1.0 / num_gauss
        if occ[i] > opts.min_gaussian_occupancy and prob > opts.min_gaussian_weight:
            new.weights[i] = prob
            mean = stats.mean_acc[i] / occ[i]
            var = stats.var_acc[i] / occ[i] - mean * mean
            floored += int((var < opts.min_variance).sum())
            new.means[i] = mean
            new.vars[i] = np.maximum(var, opts.min_variance)
        elif opts.remove_low_count_gaussians and len(to_remove) < num_gauss - 1:
            log.warning("removing Gaussian %d (weight %.3g, count %.3g)", i, prob, occ[i])
            to_remove.append(i)
        else:
            new.weights[i] = max(prob, opts.min_gaussian_weight)
    new.compute_gconsts()
    obj_new = ml_objective(new, stats)
    if to_remove:
        new.remove(to_remove)
    info = {
        "objf_change_per_frame": (obj_new - obj_old) / occ_sum if occ_sum > 0 else 0.0,
        "count": occ_sum,
        "loglike_per_frame": stats.tot_loglike / stats.num_frames if stats.num_frames else 0.0,
        "num_frames": stats.num_frames,
        "floored_variances": floored,
        "removed_gaussians": len(to_remove),
        "num_gauss": new.num_gauss,
    }
    return new, info


def init_from_frames(frames: np.ndarray, num_gauss: int, rng: np.random.Generator) -> DiagGmm:
    """Means = distinct random frames, variances = the global variance, uniform weights
    (``InitGmmFromRandomFrames`` in ``gmm-global-init-from-feats.cc``)."""
    x = np.asarray(frames, dtype=np.float64)
    num_frames = x.shape[0]
    if num_frames < 10 * num_gauss:
        raise DataError(
            f"too few frames to initialise the UBM: {num_frames} frames for {num_gauss} "
            f"Gaussians (Kaldi requires at least 10 per Gaussian)"
        )
    mean = x.mean(axis=0)
    var = (x * x).mean(axis=0) - mean * mean
    if var.max() <= 0.0:
        raise DataError("features do not have positive variance")
    chosen = rng.choice(num_frames, size=num_gauss, replace=False)
    return DiagGmm(
        np.full(num_gauss, 1.0 / num_gauss), x[np.sort(chosen)], np.tile(var, (num_gauss, 1))
    )


def train_in_memory(
    frames: np.ndarray,
    num_gauss: int,
    num_iters: int,
    rng: np.random.Generator,
    initial_gauss_proportion: float = 0.5,
    perturb_factor: float = 0.1,
    opts: UbmUpdateOptions = UbmUpdateOptions(),
    block_bytes: int = BLOCK_BYTES,
) -> tuple[DiagGmm, list[dict]]:
    """``gmm-global-init-from-feats``: init with ``num_gauss_init`` Gaussians, then
    ``num_iters`` EM iterations on the in-memory frames, splitting after each by
    ``(num_gauss - num_gauss_init) // (num_iters // 2)`` until ``num_gauss`` is reached.
    Each E-step runs in blocks of at most ``block_bytes`` of temporaries
    (:meth:`UbmStats.accumulate_blocks`)."""
    num_gauss_init = max(1, int(num_gauss * initial_gauss_proportion))
    gmm = init_from_frames(frames, num_gauss_init, rng)
    gauss_inc = (num_gauss - num_gauss_init) // max(1, num_iters // 2)
    cur = num_gauss_init
    history = []
    for it in range(num_iters):
        stats = UbmStats.zeros(gmm.num_gauss, gmm.dim)
        stats.accumulate_blocks(gmm, frames, block_bytes)
        gmm, info = update(gmm, stats, opts)
        info["iteration"] = it
        history.append(info)
        log.info(
            "init iteration %d: loglike/frame %.4f, objf change %.4f, %d Gaussians",
            it,
            info["loglike_per_frame"],
            info["objf_change_per_frame"],
            gmm.num_gauss,
        )
        target = min(num_gauss, cur + gauss_inc)
        if it == num_iters - 1 and target < num_gauss:
            target = num_gauss  # gauss_inc == 0 (few iterations): reach the target anyway
        if target > gmm.num_gauss:
            gmm.split(target, perturb_factor, rng)
            cur = target
    return gmm, history


class Reservoir:
    """Uniform sample of at most ``capacity`` frames from a stream (Kaldi's reservoir
    sampling in ``gmm-global-init-from-feats``: frame ``n >= capacity`` replaces a random
    slot with probability ``capacity / n``)."""

    def __init__(self, capacity: int, rng: np.random.Generator):
        self.capacity = capacity
        self.rng = rng
        self.frames: np.ndarray | None = None
        self.num_seen = 0

    def add(self, frames: np.ndarray) -> None:
        x = np.asarray(frames, dtype=np.float64)
        if self.frames is None:
            self.frames = np.zeros((self.capacity, x.shape[1]))
        n0 = self.num_seen
        fill = max(0, min(self.capacity - n0, x.shape[0]))
        self.frames[n0 : n0 + fill] = x[:fill]
        rest = x[fill:]
        if rest.shape[0]:
            seen = n0 + fill + np.arange(rest.shape[0])
            accept = self.rng.random(rest.shape[0]) < self.capacity / seen
            slots = self.rng.integers(0, self.capacity, size=rest.shape[0])
            for k in np.nonzero(accept)[0]:
                self.frames[slots[k]] = rest[k]
        self.num_seen += x.shape[0]

    def sample(self) -> np.ndarray:
        if self.frames is None:
            raise DataError("no frames were seen")
        return self.frames[: min(self.num_seen, self.capacity)]
