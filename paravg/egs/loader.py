"""Reading egs archives for training, diagnostics, combination and priors.

:func:`frame_minibatches` is Kaldi's per-job pipeline (kaldi-recipe.md §3.7)

    nnet3-copy-egs --frame=k ark:egs.A.ark ark:- |
    nnet3-shuffle-egs --buffer-size=B --srand=seed ark:- ark:- |
    nnet3-merge-egs --minibatch-size=M ark:- ark:-

keep only output frame k of every eg (the model's input window [k − lc, k + rc] is cut
out of the stored, possibly wider, window), buffer-shuffle
(:func:`paravg.egs.shuffle.buffer_shuffle_order`), merge into minibatches of M egs and
discard the final partial minibatch (or, for a Kaldi rule string such as ``"256,128"``,
what :mod:`paravg.egs.minibatch` says). :func:`all_frame_minibatches` reads every frame of
every eg in file order with the last minibatch kept (``nnet3-compute-prob`` /
``nnet3-combine`` / priors with ``--minibatch-size=1:M``).

Chunk egs (:mod:`paravg.egs.archive`: several structures (width w, left l, right r) in
one archive) are read by :func:`chunk_minibatches` (a training job: ``nnet3-shuffle-egs |
nnet3-merge-egs --minibatch-size=<num-chunk-per-minibatch>``, no ``--frame``) and
:func:`all_chunk_minibatches` (diagnostics, combination, priors): a minibatch holds egs
of one structure only, as ``nnet3-merge-egs`` merges only egs of identical structure;
its ``feats`` are the l + w + r input rows of each eg, ``labels`` / ``weights`` (B, w),
and ``chunk`` = (w, l, r).

Speed: the emission order depends only on (seed, n_eg), so it is computed once; every
minibatch is then one vectorised gather of the selected window rows from the memory-map
(a contiguous block of each eg's row), one dtype conversion, and slices of the labels
and weights of frame k that were read once per pass.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import torch

from paravg.egs.archive import ArchiveMeta, open_arrays, read_keys
from paravg.egs.minibatch import MinibatchRule
from paravg.egs.shuffle import buffer_shuffle_order
from paravg.errors import ConfigError


@dataclass
class Minibatch:
    """A merged minibatch.

    ``feats`` (B, T_in, D) float32; ``ivectors`` (B, ivector_dim) float32 or None;
    ``labels`` int64 and ``weights`` float32: (B,) for one frame per eg, (B, F) for all.
    """

    feats: torch.Tensor
    ivectors: torch.Tensor | None
    labels: torch.Tensor
    weights: torch.Tensor
    chunk: tuple[int, int, int] | None = None  # chunk egs: (width, left, right)

    @property
    def size(self) -> int:
        return self.feats.shape[0]


class EgsArchive:
    """A memory-mapped archive (``<prefix>.feats.npy`` etc., see :mod:`paravg.egs.archive`)."""

    def __init__(self, prefix: str | os.PathLike) -> None:
        self.prefix = str(prefix)
        self.meta = ArchiveMeta.load(f"{self.prefix}.meta.json")
        arrays = open_arrays(self.prefix)
        self.feats: np.ndarray = arrays["feats"]
        self.labels: np.ndarray = arrays["labels"]
        self.weights: np.ndarray = arrays["weights"]
        self.ivectors: np.ndarray | None = arrays.get("ivectors")
        self.chunks: np.ndarray | None = arrays.get("chunks")

    @property
    def num_egs(self) -> int:
        return self.meta.num_egs

    @property
    def frames_per_eg(self) -> int:
        return self.meta.frames_per_eg

    @property
    def left_context(self) -> int:
        return self.meta.left_context

    @property
    def right_context(self) -> int:
        return self.meta.right_context

    @property
    def feat_dim(self) -> int:
        return self.meta.feat_dim

    @property
    def ivector_dim(self) -> int:
        return self.meta.ivector_dim

    def read_keys(self) -> list[str]:
        """The eg keys (``<utt>-<first_frame>``), read from ``<prefix>.keys.txt``."""
        return read_keys(self.prefix)

    def __len__(self) -> int:
        return self.num_egs

    def __repr__(self) -> str:
        return (
            f"EgsArchive({self.prefix!r}, num_egs={self.num_egs}, "
            f"context=({self.left_context}, {self.right_context}), F={self.frames_per_eg})"
        )


def _check_context(archive: EgsArchive, left_context: int, right_context: int) -> None:
    if not (
        0 <= left_context <= archive.left_context and 0 <= right_context <= archive.right_context
    ):
        raise ConfigError(
            f"{archive.prefix}: the model's context ({left_context}, {right_context}) (from "
            "model.input_splice and model.hidden[].splice or model.tdnnf.time_strides, or "
            f"an experiment's model override) exceeds the stored context ({archive.left_context}, "
            f"{archive.right_context}) the egs were cut with: the egs must be rebuilt for "
            "this model config"
        )


def _tensor(array: np.ndarray) -> torch.Tensor:
    """A tensor sharing a (read-only) memory-mapped array; the loader never writes to it."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="The given NumPy array is not writable")
        return torch.from_numpy(np.asarray(array))


def _window_view(archive: EgsArchive, start: int, width: int) -> torch.Tensor:
    """(n_eg, width * D) view of stored rows start .. start + width - 1 of every eg."""
    D = archive.feat_dim
    flat = _tensor(archive.feats).reshape(archive.num_egs, archive.meta.window * D)
    return flat.narrow(1, start * D, width * D)


def frame_minibatches(
    archive: EgsArchive,
    frame: int,
    left_context: int,
    right_context: int,
    minibatch_size: int | str | MinibatchRule,
    buffer_size: int,
    seed: int,
) -> Iterator[Minibatch]:
    """Minibatches of output frame ``frame`` of every eg, buffer-shuffled (see module doc).

    ``minibatch_size`` is an integer B (``num_egs // B`` minibatches of B) or a Kaldi rule
    (:class:`paravg.egs.minibatch.MinibatchRule`, e.g. ``"256,128"``), applied to egs of
    the archive's stored window size as ``nnet3-merge-egs`` does. Yields feats
    (B, lc + 1 + rc, D) and labels / weights (B,).
    """
    F = archive.frames_per_eg
    if not 0 <= frame < F:
        raise ValueError(f"frame {frame} out of range 0..{F - 1} for {archive.prefix}")
    if isinstance(minibatch_size, int) and minibatch_size < 1:
        raise ValueError(f"minibatch_size must be >= 1, got {minibatch_size}")
    rule = (
        minibatch_size
        if isinstance(minibatch_size, MinibatchRule)
        else MinibatchRule.parse(minibatch_size)
    )
    _check_context(archive, left_context, right_context)
    n, D = archive.num_egs, archive.feat_dim
    sizes = rule.sizes(archive.meta.window, n)
    if not sizes:
        return
    order = torch.from_numpy(buffer_shuffle_order(n, buffer_size, seed)[: sum(sizes)])
    width = left_context + 1 + right_context
    window = _window_view(archive, archive.left_context + frame - left_context, width)
    labels = torch.from_numpy(np.array(archive.labels[:, frame], dtype=np.int64))
    weights = torch.from_numpy(np.array(archive.weights[:, frame], dtype=np.float32))
    ivectors = None if archive.ivectors is None else _tensor(archive.ivectors)
    start = 0
    for B in sizes:
        index = order[start : start + B]
        start += B
        yield Minibatch(
            feats=window.index_select(0, index).view(B, width, D).to(torch.float32),
            ivectors=None if ivectors is None else ivectors.index_select(0, index),
            labels=labels.index_select(0, index),
            weights=weights.index_select(0, index),
        )


def all_frame_minibatches(
    archive: EgsArchive,
    left_context: int,
    right_context: int,
    minibatch_size: int,
    indices: np.ndarray | None = None,
) -> Iterator[Minibatch]:
    """Every frame of every eg (or of ``indices``), in order, last partial minibatch kept.

    feats (B, lc + F + rc, D); labels / weights (B, F).
    """
    if minibatch_size < 1:
        raise ValueError(f"minibatch_size must be >= 1, got {minibatch_size}")
    _check_context(archive, left_context, right_context)
    D, F = archive.feat_dim, archive.frames_per_eg
    width = left_context + F + right_context
    window = _window_view(archive, archive.left_context - left_context, width)
    labels, weights = _tensor(archive.labels), _tensor(archive.weights)
    ivectors = None if archive.ivectors is None else _tensor(archive.ivectors)
    if indices is None:
        index_all = None
        total = archive.num_egs
    else:
        index_all = torch.from_numpy(np.asarray(indices, dtype=np.int64))
        total = len(index_all)
    for b in range(0, total, minibatch_size):
        size = min(minibatch_size, total - b)
        if index_all is None:  # contiguous rows: slices, no gather

            def take(t: torch.Tensor, b: int = b, size: int = size) -> torch.Tensor:
                return t.narrow(0, b, size)

        else:
            index = index_all[b : b + size]

            def take(t: torch.Tensor, index: torch.Tensor = index) -> torch.Tensor:
                return t.index_select(0, index)

        yield Minibatch(
            feats=take(window).reshape(size, width, D).to(torch.float32, copy=True),
            ivectors=None if ivectors is None else take(ivectors).clone(),
            labels=take(labels).to(torch.int64, copy=True),
            weights=take(weights).clone(),
        )


# ============================================================================ chunk egs


def _structures(archive: EgsArchive) -> np.ndarray:
    if archive.chunks is None:
        raise ConfigError(
            f"{archive.prefix}: frame egs, but a recurrent model trains on chunk egs "
            "(egs.chunk_width): the egs must be rebuilt for this config"
        )
    return np.asarray(archive.chunks, dtype=np.int64)


def _chunk_minibatch(
    archive: EgsArchive, index: np.ndarray, structure: tuple[int, int, int]
) -> Minibatch:
    """The egs ``index`` (all of one structure (w, l, r)): rows lc − l … lc + w + r − 1."""
    w, left, right = structure
    lc, D = archive.left_context, archive.feat_dim
    width = left + w + right
    rows = torch.from_numpy(np.asarray(index, dtype=np.int64))
    window = _window_view(archive, lc - left, width)
    ivectors = None if archive.ivectors is None else _tensor(archive.ivectors)
    return Minibatch(
        feats=window.index_select(0, rows).view(len(rows), width, D).to(torch.float32),
        ivectors=None if ivectors is None else ivectors.index_select(0, rows).clone(),
        labels=torch.from_numpy(np.array(archive.labels[index, :w], dtype=np.int64)),
        weights=torch.from_numpy(np.array(archive.weights[index, :w], dtype=np.float32)),
        chunk=(int(w), int(left), int(right)),
    )


def _check_chunk_context(archive: EgsArchive, structures: np.ndarray, left: int, right: int):
    if len(structures) and (structures[:, 1].min() < left or structures[:, 2].min() < right):
        raise ConfigError(
            f"{archive.prefix}: the model's context ({left}, {right}) exceeds a chunk's "
            f"stored context ({int(structures[:, 1].min())}, {int(structures[:, 2].min())}): "
            "the egs must be rebuilt for this model config"
        )


def chunk_minibatches(
    archive: EgsArchive,
    left_context: int,
    right_context: int,
    minibatch_size: int | str | MinibatchRule,
    buffer_size: int,
    seed: int,
) -> Iterator[Minibatch]:
    """Minibatches of whole chunks (``nnet3-shuffle-egs | nnet3-merge-egs``; module doc).

    The egs are buffer-shuffled as :func:`frame_minibatches` shuffles them; then, as
    ``ExampleMerger`` does, each structure (w, l, r) fills its own bucket in that order
    and a bucket is emitted when it holds the largest size of the rule (for its eg size
    l + w + r); at the end each bucket's rest is emitted in the smaller sizes the rule
    allows (:meth:`MinibatchRule.sizes`), the remainder discarded. Minibatches come in the
    order their last eg arrived (the rests at the end, buckets in first-seen order).
    ``left_context`` / ``right_context`` are the model's (checked against the stored
    ones)."""
    rule = (
        minibatch_size
        if isinstance(minibatch_size, MinibatchRule)
        else MinibatchRule.parse(minibatch_size)
    )
    structures = _structures(archive)
    _check_chunk_context(archive, structures, left_context, right_context)
    order = buffer_shuffle_order(archive.num_egs, buffer_size, seed)
    groups: dict[tuple[int, int, int], list[int]] = {}
    for i in order.tolist():
        groups.setdefault(tuple(structures[i].tolist()), []).append(i)
    position = np.empty(archive.num_egs, dtype=np.int64)
    position[order] = np.arange(len(order))
    emitted = []  # (arrival of the last eg, is a rest, bucket rank, index, structure)
    for rank, (structure, members) in enumerate(groups.items()):
        sizes = rule.sizes(sum(structure), len(members))
        largest = max(hi for _, hi in rule.ranges_for(sum(structure)))
        full = len(members) // largest  # buckets filled while reading
        start = 0
        for k, B in enumerate(sizes):
            index = np.asarray(members[start : start + B], dtype=np.int64)
            start += B
            emitted.append((int(position[index[-1]]), k >= full, rank, index, structure))
    emitted.sort(key=lambda e: (e[1], e[2] if e[1] else 0, e[0]))
    for _, _, _, index, structure in emitted:
        yield _chunk_minibatch(archive, index, structure)


def all_chunk_minibatches(
    archive: EgsArchive,
    left_context: int,
    right_context: int,
    minibatch_size: int,
    indices: np.ndarray | None = None,
) -> Iterator[Minibatch]:
    """Every chunk eg (or of ``indices``) once: the egs of each structure (in first-seen
    order) in file (or ``indices``) order, in minibatches of ≤ ``minibatch_size``, the
    last partial one kept (``nnet3-compute-prob`` / ``nnet3-combine`` / priors with
    ``--minibatch-size=1:M``)."""
    if minibatch_size < 1:
        raise ValueError(f"minibatch_size must be >= 1, got {minibatch_size}")
    structures = _structures(archive)
    _check_chunk_context(archive, structures, left_context, right_context)
    groups: dict[tuple[int, int, int], list[int]] = {}
    order = range(archive.num_egs) if indices is None else np.asarray(indices).tolist()
    for i in order:
        groups.setdefault(tuple(structures[i].tolist()), []).append(i)
    for structure, members in groups.items():
        for b in range(0, len(members), minibatch_size):
            index = np.asarray(members[b : b + minibatch_size], dtype=np.int64)
            yield _chunk_minibatch(archive, index, structure)


def all_minibatches(
    archive: EgsArchive,
    left_context: int,
    right_context: int,
    minibatch_size: int,
    indices: np.ndarray | None = None,
) -> Iterator[Minibatch]:
    """Every frame of every eg: :func:`all_chunk_minibatches` for a chunked archive,
    else :func:`all_frame_minibatches` (diagnostics, combination, priors, LDA)."""
    if archive.chunks is not None:
        return all_chunk_minibatches(archive, left_context, right_context, minibatch_size, indices)
    return all_frame_minibatches(archive, left_context, right_context, minibatch_size, indices)
