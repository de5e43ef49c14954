"""EM for a GMM-HMM: ``gmm-acc-stats-ali`` (per job), ``gmm-sum-accs``, ``gmm-est``.

**E-step** (``src/gmmbin/gmm-acc-stats-ali.cc``, ``AccumAmDiagGmm::AccumulateForGmm``).
Frame ``t`` aligned to transition-id ``a_t`` belongs to pdf ``j = pdf(a_t)``; with the
component log-likelihoods of that pdf's diagonal GMM

    l_m(x) = log w_m - ½ Σ_d [log 2π σ²_md + (x_d - μ_md)² / σ²_md]

its posteriors ``γ_m = exp(l_m - logsumexp(l))`` add ``γ_m``, ``γ_m x`` and ``γ_m x²``
to component ``m``'s occupancy, mean and variance accumulators, ``logsumexp(l)`` to the
total log-likelihood, and 1 to the count of transition-id ``a_t`` (``TransitionModel::
Accumulate``). Frames are processed per pdf in numpy, a chunk of at most
:data:`CHUNK_FRAMES` frames at a time: the job's sorted ``feats`` and ``ali`` tables are
read one utterance at a time and merge-joined (:func:`aligned_utterances`), as
gmm-acc-stats-ali's sequential readers read them, so a job's memory is bounded by the
chunk and the model, not by its share of the corpus. :class:`GmmAccs` is one job's
result, saved as ``.npz`` (paravg's ``JOB.acc``); :func:`sum_accs` adds jobs (``gmm-sum-accs``).

**M-step** (``gmm-est.cc``): ``TransitionModel::MleUpdate`` on the transition counts
(``a_ij = c_ij / Σ_j c_ij`` per transition-state, floor 0.01, min-count 5), then
``MleAmDiagGmmUpdate`` (``gmm/mle-diag-gmm.cc``): per pdf, ``w_m = γ_m / Σγ``,
``μ_m = (Σγx)_m / γ_m``, ``σ²_m = (Σγx²)_m / γ_m - μ_m²`` floored at ``--min-variance``;
components with ``γ_m < --min-gaussian-occupancy`` (10; train_mono.sh's first update: 3)
keep their mean and variance, and with ``--remove-low-count-gaussians`` (default) those
below the occupancy or ``--min-gaussian-weight`` are removed (:func:`update_diag_gmm`;
tested against kaldi-hmm-gmm's ``mle_am_diag_gmm_update`` on Kaldi's own accumulators).
Then ``--mix-up`` (``SplitByCount``, :func:`paravg.gmm.model.mixup`).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from paravg.errors import DataError
from paravg.gmm.job_tables import join_sorted
from paravg.gmm.model import GmmModel, make_diag_gmm, mixup

LOG_2PI = float(np.log(2.0 * np.pi))


@dataclass
class GmmAccs:
    """One job's statistics: per component (all pdfs' components in pdf order)
    occupancy, Σγx, Σγx²; per transition-id counts (index 0 unused); totals."""

    num_gauss: np.ndarray  # (P,) components per pdf, the model's at accumulation
    occ: np.ndarray  # (G,)
    x: np.ndarray  # (G, D)
    x2: np.ndarray  # (G, D)
    trans_counts: np.ndarray  # (num_transition_ids + 1,)
    tot_like: float
    frames: int

    def pdf_occs(self) -> np.ndarray:
        """Occupancy per pdf (``--write-occs``)."""
        bounds = np.concatenate([[0], np.cumsum(self.num_gauss)])
        return np.add.reduceat(self.occ, bounds[:-1]) if len(self.occ) else np.zeros(0)

    def save(self, path: str | Path) -> None:
        path = Path(path)
        tmp = path.with_name(path.name + ".tmp.npz")
        np.savez(
            tmp,
            num_gauss=self.num_gauss,
            occ=self.occ,
            x=self.x,
            x2=self.x2,
            trans_counts=self.trans_counts,
            tot_like=self.tot_like,
            frames=self.frames,
        )
        tmp.replace(path)

    @classmethod
    def load(cls, path: str | Path) -> GmmAccs:
        with np.load(path) as z:
            return cls(z["num_gauss"], z["occ"], z["x"], z["x2"], z["trans_counts"],
                       float(z["tot_like"]), int(z["frames"]))  # fmt: skip


def component_loglikes(model: GmmModel, pdf: int, feats: np.ndarray) -> np.ndarray:
    """``l_m(x_t)`` for the frames ``feats [T, D]`` under pdf ``pdf``: ``[T, M]``."""
    weights, means, variances = model.pdf_params(pdf)
    inv = 1.0 / variances
    const = np.log(weights) - 0.5 * (np.sum(np.log(variances), 1) + means.shape[1] * LOG_2PI
                                     + np.sum(means * means * inv, 1))  # fmt: skip
    return const + feats @ (means * inv).T - 0.5 * (feats * feats) @ inv.T


#: Frames of one E-step chunk: a job's utterances are gathered, in table order, into
#: chunks of at most this many frames (an utterance longer than that is a chunk of its
#: own), and the vectorised per-pdf E-step runs once per chunk, its sums added to the
#: job's. A chunk's float64 copies (the frames, each pdf's rows, their squares: ~100 MB
#: at 39 dims) bound a job's memory, not its share of the corpus. The demo's default
#: jobs (20 minutes of audio at ``gmm.nj`` 2: about 42,000 frames a job) and every
#: test's job fit in one chunk, so their statistics are those of one pass over the job,
#: bit for bit; a larger job's differ from one pass by float rounding only (the order
#: of the sums).
CHUNK_FRAMES = 100_000

#: One utterance of a job: (utt, features [T, D], per-frame keys [T]).
Utterance = tuple[str, np.ndarray, np.ndarray]


def aligned_utterances(
    feats: Mapping[str, np.ndarray] | Iterable[tuple[str, np.ndarray]],
    alignments: Mapping[str, np.ndarray] | Iterable[tuple[str, np.ndarray]],
    names: tuple[str, str] = ("features", "alignments"),
) -> Iterator[Utterance]:
    """The utterances with both features and an alignment, ``(utt, x, ali)``. Two
    mappings: ``feats``' utterances in its order (any order). Otherwise ``(utt, value)``
    streams in ``LC_ALL=C`` key order (a mapping is read as its items), merge-joined
    (:func:`paravg.gmm.job_tables.join_sorted`: one utterance of each held; a table out
    of order is a :class:`~paravg.errors.DataError` naming it, from ``names``). An
    alignment whose length is not the features' is a :class:`~paravg.errors.DataError`
    naming both tables and the utterance."""
    if isinstance(feats, Mapping) and isinstance(alignments, Mapping):
        pairs: Iterable[Utterance] = (
            (u, feats[u], alignments[u]) for u in feats if u in alignments
        )
    else:
        pairs = join_sorted(
            (names[0], feats.items() if isinstance(feats, Mapping) else feats),
            (names[1], alignments.items() if isinstance(alignments, Mapping) else alignments),
        )
    for utt, x, ali in pairs:
        if len(ali) != len(x):
            raise DataError(
                f"{names[1]}: utterance {utt}: alignment of {len(ali)} frames, features "
                f"({names[0]}) of {len(x)}"
            )
        yield utt, x, ali


def frame_chunks(utterances: Iterable[Utterance], max_frames: int) -> Iterator[list[Utterance]]:
    """``utterances`` in order, gathered into lists of at most ``max_frames`` frames
    (``len(x)``; an utterance longer than that alone). Only the current chunk is held."""
    chunk: list[Utterance] = []
    frames = 0
    for utt in utterances:
        n = len(utt[1])
        if chunk and frames + n > max_frames:
            yield chunk
            chunk, frames = [], 0
        chunk.append(utt)
        frames += n
    if chunk:
        yield chunk


def accumulate(
    model: GmmModel,
    feats: Mapping[str, np.ndarray] | Iterable[tuple[str, np.ndarray]],
    alignments: Mapping[str, np.ndarray] | Iterable[tuple[str, np.ndarray]],
    tid_to_pdf: np.ndarray,
    names: tuple[str, str] = ("features", "alignments"),
) -> GmmAccs:
    """``gmm-acc-stats-ali`` over the utterances of one job (those in both tables, as
    :func:`aligned_utterances` joins them: two mappings, or sorted ``(utt, value)`` streams
    read one utterance at a time, as Kaldi's sequential readers read ``ark,s,cs:``
    tables). The E-step runs per chunk of :data:`CHUNK_FRAMES` frames and the chunks'
    sums are added: Σ_chunks Σ_{t ∈ chunk} γ_m(t)·(1, x_t, x_t²).
    ``tid_to_pdf``: pdf of each transition-id (index 0 unused)."""
    num_gauss = np.array([model.am.num_gauss_in_pdf(p) for p in range(model.num_pdfs)], np.int64)
    offsets = np.concatenate([[0], np.cumsum(num_gauss)])
    dim = model.dim
    occ = np.zeros(offsets[-1])
    xs = np.zeros((offsets[-1], dim))
    x2s = np.zeros((offsets[-1], dim))
    counts = np.zeros(model.trans.num_transition_ids + 1)
    tot_like = 0.0
    frames_done = 0
    for chunk in frame_chunks(aligned_utterances(feats, alignments, names), CHUNK_FRAMES):
        x = np.concatenate([np.asarray(f, np.float64) for _u, f, _a in chunk])
        ali = np.concatenate([np.asarray(a, np.int64) for _u, _f, a in chunk])
        frames_done += len(x)
        counts += np.bincount(ali, minlength=len(counts))
        pdfs = tid_to_pdf[ali]
        order = np.argsort(pdfs, kind="stable")
        bounds = np.searchsorted(pdfs[order], np.arange(model.num_pdfs + 1))
        for pdf in range(model.num_pdfs):
            rows = order[bounds[pdf] : bounds[pdf + 1]]
            if len(rows) == 0:
                continue
            frames = x[rows]
            like = component_loglikes(model, pdf, frames)
            top = like.max(1, keepdims=True)
            total = top[:, 0] + np.log(np.exp(like - top).sum(1))
            post = np.exp(like - total[:, None])
            tot_like += float(total.sum())
            a, b = offsets[pdf], offsets[pdf + 1]
            occ[a:b] += post.sum(0)
            xs[a:b] += post.T @ frames
            x2s[a:b] += post.T @ (frames * frames)
    return GmmAccs(num_gauss, occ, xs, x2s, counts, tot_like, frames_done)


def sum_accs(parts: Sequence[GmmAccs]) -> GmmAccs:
    """``gmm-sum-accs``: several jobs' statistics of the same model added."""
    if not parts:
        raise ValueError("no accumulators to sum")
    first = parts[0]
    for p in parts[1:]:
        if not np.array_equal(p.num_gauss, first.num_gauss) or len(p.trans_counts) != len(
            first.trans_counts
        ):
            raise ValueError("accumulators of different models cannot be summed")
    return GmmAccs(
        first.num_gauss.copy(), sum(p.occ for p in parts), sum(p.x for p in parts),
        sum(p.x2 for p in parts), sum(p.trans_counts for p in parts),
        float(sum(p.tot_like for p in parts)), int(sum(p.frames for p in parts)),
    )  # fmt: skip


@dataclass
class EstOptions:
    """gmm-est's options (Kaldi's names, ``--`` and dashes dropped)."""

    min_gaussian_occupancy: float = 10.0
    min_gaussian_weight: float = 1e-5
    min_variance: float = 0.001
    remove_low_count_gaussians: bool = True
    mix_up: int = 0
    power: float = 0.2
    perturb_factor: float = 0.01
    min_count: float = 20.0
    transition_floor: float = 0.01
    transition_min_count: float = 5.0
    update_flags: str = "mvwt"
    srand: int = 0  # seeds mixup's perturbations (the drivers pass the iteration)


def update_diag_gmm(weights, means, variances, occ, x, x2, opts: EstOptions):
    """``MleDiagGmmUpdate`` of one pdf (flags ``mvw``): returns the new (weights, means,
    variances), components below the occupancy or weight threshold kept as they were
    (or removed, the weights renormalised, with ``remove_low_count_gaussians``; never
    the last one)."""
    weights, means, variances = (np.array(a, np.float64) for a in (weights, means, variances))
    total = float(np.sum(occ))
    num = len(weights)
    keep = np.ones(num, bool)
    removed = 0
    for m in range(num):
        prob = occ[m] / total if total > 0.0 else 1.0 / num
        if occ[m] > opts.min_gaussian_occupancy and prob > opts.min_gaussian_weight:
            weights[m] = prob
            means[m] = x[m] / occ[m]
            variances[m] = np.maximum(x2[m] / occ[m] - means[m] ** 2, opts.min_variance)
        elif opts.remove_low_count_gaussians and removed < num - 1:
            keep[m] = False
            removed += 1
    if removed:
        weights, means, variances = weights[keep], means[keep], variances[keep]
        weights = weights / weights.sum()
    return weights, means, variances


def estimate(model: GmmModel, accs: GmmAccs, opts: EstOptions | None = None) -> dict:
    """``gmm-est``: update ``model`` in place from summed ``accs``; returns the log
    (average log-likelihood per frame, objective improvements, Gaussians)."""
    import kaldi_hmm_gmm

    opts = opts or EstOptions()
    if not np.array_equal(
        accs.num_gauss, [model.am.num_gauss_in_pdf(p) for p in range(model.num_pdfs)]
    ):
        raise ValueError("accumulators are not of this model (different Gaussians per pdf)")
    info = {"avg_like": accs.tot_like / max(accs.frames, 1), "frames": accs.frames}
    if "t" in opts.update_flags:
        cfg = kaldi_hmm_gmm.MleTransitionUpdateConfig()
        cfg.floor, cfg.mincount = opts.transition_floor, opts.transition_min_count
        impr, count = model.trans.mle_update(accs.trans_counts.astype(np.float64), cfg)
        info["transition_impr_per_frame"] = impr / count if count else 0.0
    bounds = np.concatenate([[0], np.cumsum(accs.num_gauss)])
    pdfs = []
    for pdf in range(model.num_pdfs):
        a, b = bounds[pdf], bounds[pdf + 1]
        params = update_diag_gmm(
            *model.pdf_params(pdf), accs.occ[a:b], accs.x[a:b], accs.x2[a:b], opts
        )
        pdfs.append(make_diag_gmm(*params))
    model.set_pdfs(pdfs)
    if opts.mix_up:
        mixup(
            model, accs.pdf_occs(), opts.mix_up, opts.perturb_factor, opts.power,
            opts.min_count, opts.srand,
        )  # fmt: skip
    info["num_gauss"] = model.num_gauss
    return info
