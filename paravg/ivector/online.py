"""Online i-vector extraction, as Kaldi's ``ivector-extract-online2``.

Mirrors ``OnlineIvectorEstimationStats`` (``src/ivector/ivector-extractor.cc``),
``OnlineIvectorFeature`` and ``OnlineIvectorExtractorAdaptationState``
(``src/online2/online-ivector-feature.cc``) and the per-speaker loop of
``src/online2bin/ivector-extract-online2.cc``.

Running statistics (a fresh speaker starts from the prior alone)::

    linear    = p e0 + sum_t sum_i gamma_ti (Sigma_i^{-1} M_i)^T x_t
    quadratic = I    + sum_t sum_i gamma_ti U_i,        count = sum_t sum_i gamma_ti

with ``gamma_ti`` the UBM posteriors of the posterior stream (top ``num_gselect``,
``min_post``), times ``posterior_scale``, and ``x_t`` the stats stream. Frames are
accumulated in batches: frame 0 alone, then 1..P, P+1..2P, ... (``P`` = period); after
each batch the i-vector is re-estimated by ``num_cg_iters`` conjugate-gradient iterations
on ``quadratic w = linear`` warm-started from the previous estimate (or solved exactly).
Row ``k`` of an utterance's output is the estimate after frames ``0..kP`` inclusive, as
float32 with ``p`` subtracted from element 0: ``ceil(T / P)`` rows. Frames after
``(ceil(T/P) - 1) P`` are never accumulated.

Between the utterances of a speaker the state is carried over: the CMVN speaker
statistics (all frames of the utterance) and the i-vector statistics, each limited to
``max_remembered_frames`` (``LimitFrames``; for the i-vector statistics the target count is
``max_remembered_frames * posterior_scale``, and ``Scale(s)`` adds the removed prior mass
back: ``linear[0] += (1 - s) p``, ``quadratic += (1 - s) I``).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

import numpy as np

from paravg.errors import DataError
from paravg.ivector import cmvn
from paravg.ivector.extractor import IvectorExtractor
from paravg.ivector.features import IvectorFeaturePipeline
from paravg.ivector.posteriors import SparsePosteriors, posteriors_from_loglikes
from paravg.ivector.ubm import DiagGmm

log = logging.getLogger(__name__)


def linear_cg(
    A: np.ndarray,
    b: np.ndarray,
    x0: np.ndarray,
    max_iters: int,
    recompute_residual_factor: float = 0.01,
) -> np.ndarray:
    """Minimise ``0.5 x^T A x - b^T x`` (A symmetric positive definite) by linear CG.

    As Kaldi's ``LinearCgd``: at most ``min(max_iters, dim + 5)`` iterations, step size
    ``-p^T r / p^T A p``, the residual recomputed from scratch when its norm changes by more
    than ``recompute_residual_factor^2``; if the residual ends larger than it started and the
    objective got worse, fall back to an exact solve.
    """
    dim = b.shape[0]
    x = np.array(x0, dtype=np.float64)
    p = b - A @ x
    r = -p
    r_cur = float(r @ r)
    r_initial = r_recompute = r_cur
    tiny = np.finfo(np.float64).tiny
    if r_cur <= tiny:
        return x
    factor = recompute_residual_factor**2
    k = 0
    while k < dim + 5 and k != max_iters:
        Ap = A @ p
        alpha = -float(p @ r) / float(p @ Ap)
        x += alpha * p
        r += alpha * Ap
        r_next = float(r @ r)
        if r_next < factor * r_recompute or r_next > r_recompute / factor:
            r = A @ x - b
            r_next = float(r @ r)
            r_recompute = r_next
        if r_next <= tiny:
            r_cur = r_next
            break
        beta = r_next / r_cur
        p = beta * p - r
        r_cur = r_next
        k += 1

    def objf(v: np.ndarray) -> float:
        return float(b @ v - 0.5 * v @ A @ v)

    if r_cur > r_initial and objf(x) < objf(x0):
        log.warning("linear CG made the residual worse; solving exactly")
        x = np.linalg.solve(A, b)
    return x


class OnlineIvectorStats:
    """``OnlineIvectorEstimationStats``: running linear/quadratic terms and count.

    Kaldi holds the prior offset as a float32 (its constructor takes a ``BaseFloat``);
    so does this class, to reproduce Kaldi's numbers.
    """

    def __init__(self, ivector_dim: int, prior_offset: float, max_count: float = 0.0):
        self.prior_offset = float(np.float32(prior_offset))
        self.max_count = float(max_count)
        self.count = 0.0
        self.linear = np.zeros(ivector_dim)
        self.linear[0] = self.prior_offset
        self.quadratic = np.eye(ivector_dim)

    @property
    def ivector_dim(self) -> int:
        return self.linear.shape[0]

    def copy(self) -> OnlineIvectorStats:
        new = OnlineIvectorStats.__new__(OnlineIvectorStats)
        new.prior_offset, new.max_count, new.count = self.prior_offset, self.max_count, self.count
        new.linear, new.quadratic = self.linear.copy(), self.quadratic.copy()
        return new

    def add(self, linear: np.ndarray, quadratic: np.ndarray, count: float) -> None:
        """Add data terms; with ``max_count > 0`` the prior weight grows with the count."""
        self.linear += linear
        self.quadratic += quadratic
        if self.max_count > 0.0:
            old_scale = max(self.count, self.max_count) / self.max_count
            new_scale = max(self.count + count, self.max_count) / self.max_count
            change = new_scale - old_scale
            if change != 0.0:
                self.linear[0] += self.prior_offset * change
                self.quadratic[np.diag_indices(self.ivector_dim)] += change
        self.count += count

    def accumulate(self, extractor: IvectorExtractor, feats: np.ndarray, post: np.ndarray) -> None:
        """``AccStats`` for a batch: ``feats`` (stats stream) and dense scaled posteriors."""
        gamma = post.sum(axis=0)
        X = post.T @ np.asarray(feats, dtype=np.float64)
        self.add(
            np.einsum("ids,id->s", extractor.Sigma_inv_M, X),
            np.tensordot(gamma, extractor.U, axes=1),
            float(gamma.sum()),
        )

    def get_ivector(self, num_cg_iters: int, current: np.ndarray) -> np.ndarray:
        """``GetIvector``: CG warm-started from ``current`` (``num_cg_iters == 0``: exact)."""
        if self.count <= 0.0:
            w = np.zeros(self.ivector_dim)
            w[0] = self.prior_offset
            return w
        start = np.array(current, dtype=np.float64)
        if start[0] == 0.0:
            start[0] = self.prior_offset
        if num_cg_iters <= 0:
            return np.linalg.solve(self.quadratic, self.linear)
        return linear_cg(self.quadratic, self.linear, start, num_cg_iters)

    def objf(self, w: np.ndarray) -> float:
        if self.count == 0.0:
            return 0.0
        return float((-0.5 * w @ self.quadratic @ w + w @ self.linear) / self.count)

    def objf_change(self, w: np.ndarray) -> float:
        """``ObjfChange``: objective at ``w`` minus at the default ``[p, 0, ...]`` (per frame)."""
        if self.count == 0.0:
            return 0.0
        p = self.prior_offset
        default = (-0.5 * self.quadratic[0, 0] * p * p + p * self.linear[0]) / self.count
        return self.objf(w) - default

    def scale(self, s: float) -> None:
        """``Scale``: shrink the data part by ``s`` and give the prior its weight back."""
        if not 0.0 <= s <= 1.0:
            raise ValueError(f"scale must be in [0, 1], got {s}")
        old_count = self.count
        self.count *= s
        self.linear *= s
        self.quadratic *= s
        if self.max_count == 0.0:
            add = 1.0 - s
        else:
            old_prior = s * max(old_count, self.max_count) / self.max_count
            add = max(self.count, self.max_count) / self.max_count - old_prior
        self.linear[0] += self.prior_offset * add
        self.quadratic[np.diag_indices(self.ivector_dim)] += add


@dataclass
class OnlineIvectorOptions:
    """``OnlineIvectorExtractionConfig`` as ``extract_ivectors_online.sh`` sets it."""

    period: int = 10
    num_cg_iters: int = 15  # 0: exact solve
    num_gselect: int = 5
    min_post: float = 0.025
    posterior_scale: float = 0.1
    max_remembered_frames: int = 1000
    max_count: float = 0.0


@dataclass
class AdaptationState:
    """``OnlineIvectorExtractorAdaptationState``: what is carried between utterances."""

    ivector_stats: OnlineIvectorStats
    cmvn_speaker_stats: np.ndarray | None = None

    @classmethod
    def fresh(cls, extractor: IvectorExtractor, max_count: float = 0.0) -> AdaptationState:
        return cls(OnlineIvectorStats(extractor.ivector_dim, extractor.prior_offset, max_count))

    def limit_frames(self, max_remembered_frames: float, posterior_scale: float) -> float:
        """``LimitFrames``; returns the scale applied to the i-vector statistics."""
        self.cmvn_speaker_stats = cmvn.limit_frames(self.cmvn_speaker_stats, max_remembered_frames)
        target = float(np.float32(max_remembered_frames) * np.float32(posterior_scale))
        if self.ivector_stats.count > target:
            s = target / self.ivector_stats.count
            self.ivector_stats.scale(s)
            return s
        return 1.0


@dataclass
class UtteranceIvectors:
    """Result for one utterance: output rows, raw estimates and counts after each batch."""

    ivectors: np.ndarray  # (ceil(T/P), S) float32, element 0 minus p
    raw: np.ndarray = field(repr=False)  # (ceil(T/P), S) float64, element 0 near p
    counts: np.ndarray = field(repr=False)


def batch_starts(num_frames: int, period: int) -> np.ndarray:
    """Start frames of the update batches: 0, 1, 1 + P, 1 + 2P, ... (``ceil(T/P)`` batches)."""
    n = math.ceil(num_frames / period)
    return np.concatenate([[0], 1 + period * np.arange(n - 1)]).astype(np.int64)


def extract_from_posteriors(
    extractor: IvectorExtractor,
    feats: np.ndarray,
    post: SparsePosteriors | np.ndarray,
    stats: OnlineIvectorStats,
    period: int = 10,
    num_cg_iters: int = 15,
    utt: str = "utterance",
) -> UtteranceIvectors:
    """Online i-vectors of one utterance from its stats-stream features and scaled
    posteriors; ``stats`` (the speaker's carried-in state) is updated in place."""
    feats = np.asarray(feats, dtype=np.float64)
    extractor.check_feats(feats, f"{utt}: stats-stream features")
    num_frames = feats.shape[0]
    if num_frames < 1:
        raise DataError(f"{utt}: has 0 frames; an online i-vector needs at least 1")
    if period < 1:
        raise ValueError(f"period must be >= 1, got {period}")
    dense = (
        post.to_dense(extractor.num_gauss)
        if isinstance(post, SparsePosteriors)
        else np.asarray(post, np.float64)
    )
    if dense.shape != (num_frames, extractor.num_gauss):
        raise DataError(
            f"{utt}: posteriors have shape {dense.shape}, expected "
            f"({num_frames}, {extractor.num_gauss})"
        )
    starts = batch_starts(num_frames, period)
    n = starts.shape[0]
    ends = np.append(starts[1:], (n - 1) * period + 1)
    # Per-batch zeroth/first-order stats, then the linear and quadratic terms of all batches.
    gamma_b = np.add.reduceat(dense[: ends[-1]], starts, axis=0)
    X_b = np.stack([dense[s:e].T @ feats[s:e] for s, e in zip(starts, ends, strict=True)])
    I, D, S = extractor.M.shape
    lin_b = X_b.reshape(n, I * D) @ extractor.Sigma_inv_M.reshape(I * D, S)
    quad_b = (gamma_b @ extractor.U.reshape(I, S * S)).reshape(n, S, S)
    count_b = gamma_b.sum(axis=1)
    raw = np.zeros((n, S))
    counts = np.zeros(n)
    w = np.zeros(S)
    w[0] = extractor.prior_offset
    for k in range(n):
        stats.add(lin_b[k], quad_b[k], float(count_b[k]))
        w = stats.get_ivector(num_cg_iters, w)
        raw[k] = w
        counts[k] = stats.count
    out = raw.astype(np.float32)
    out[:, 0] = (out[:, 0].astype(np.float64) - extractor.prior_offset).astype(np.float32)
    return UtteranceIvectors(out, raw, counts)


def utterance_posteriors(
    ubm: DiagGmm, post_feats: np.ndarray, opts: OnlineIvectorOptions
) -> SparsePosteriors:
    """Scaled, pruned UBM posteriors of the posterior-stream features."""
    ll = ubm.log_likelihoods(post_feats)
    post, _ = posteriors_from_loglikes(ll, opts.num_gselect, opts.min_post, opts.posterior_scale)
    return post


def extract_speaker(
    extractor: IvectorExtractor,
    ubm: DiagGmm,
    pipeline: IvectorFeaturePipeline,
    utterances: Iterable[tuple[str, np.ndarray]],
    opts: OnlineIvectorOptions | None = None,
) -> Iterator[tuple[str, UtteranceIvectors]]:
    """Online i-vectors of one speaker's utterances (raw base features), in order, with
    the adaptation state carried from each utterance to the next."""
    if pipeline.output_dim != extractor.feat_dim or ubm.dim != extractor.feat_dim:
        raise DataError(
            f"the PCA gives {pipeline.output_dim} dims, the UBM has {ubm.dim} and the extractor "
            f"{extractor.feat_dim}: they are not one i-vector system"
        )
    opts = opts or OnlineIvectorOptions()
    state = AdaptationState.fresh(extractor, opts.max_count)
    for utt, feats in utterances:
        pipeline.check(feats, utt)
        if feats.shape[0] < 1:
            raise DataError(f"{utt}: has 0 frames; an online i-vector needs at least 1")
        post_feats = pipeline.posterior_stream(feats, state.cmvn_speaker_stats)
        post = utterance_posteriors(ubm, post_feats, opts)
        result = extract_from_posteriors(
            extractor,
            pipeline.stats_stream(feats),
            post,
            state.ivector_stats,
            opts.period,
            opts.num_cg_iters,
            utt,
        )
        state.cmvn_speaker_stats = cmvn.add_utterance(state.cmvn_speaker_stats, feats)
        state.limit_frames(opts.max_remembered_frames, opts.posterior_scale)
        yield utt, result
