"""Building the egs of utterances (``src/nnet3bin/nnet3-get-egs.cc``, ``ProcessFile``).

For each chunk (first labelled frame f, F frames) of an utterance of T frames:

* input: rows f − lc … f + F − 1 + rc of the features; rows before 0 repeat row 0 and
  rows after T − 1 repeat row T − 1 (``ExtractRowRangeWithPadding``);
* labels: the targets of frames f … f + F − 1; weights: the chunk's output weights
  (:mod:`paravg.egs.chunking`), times 0 where a target was missing (length tolerance);
* i-vector (Kaldi's current rule, replicated): r ~ UniformInt[s, s + T − 1] with
  s = f − lc and T the *whole utterance* length, row = clamp(⌊r / period⌋, 0, rows − 1).
  Kaldi's comment says "a random frame in the chunk"; the draw in fact reaches past the
  chunk (clamped), which favours later, better-converged online i-vectors. r is drawn by
  :meth:`paravg.egs.chunking.UtteranceSplitter.split` from the utterance's generator;
* key: ``<utt>-<f>``.

Chunk egs (``info.chunk_widths``; ``nnet3-get-egs --num-frames=40,30,20
--left-context-initial --right-context-final``): each chunk has its width w and contexts
(l, r) (:meth:`paravg.egs.chunking.UtteranceSplitter.split_chunks`) and is stored in the
archive's widest window (lc = max(left, left_initial), W = max width, rc likewise;
:mod:`paravg.egs.archive`): rows f − lc … f + W − 1 + rc of the utterance, edge-padded,
of which the chunk's input is rows lc − l … lc + w + r − 1; labels / weights of frames
f … f + w − 1, then 0; its i-vector frame drawn with its own l.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

import numpy as np

from paravg.egs.archive import ArchiveMeta, EgsBatch
from paravg.egs.chunking import UtteranceChunks, UtteranceSplitter, utterance_rng
from paravg.egs.info import EgsInfo
from paravg.egs.inputs import EgsSources, Utterance


def meta_for(info: EgsInfo, num_egs: int) -> ArchiveMeta:
    """The archive geometry of ``info`` with ``num_egs`` egs."""
    if info.chunked:
        return ArchiveMeta(
            num_egs=num_egs,
            frames_per_eg=max(info.chunk_widths),
            left_context=max(info.left_context, info.left_context_initial),
            right_context=max(info.right_context, info.right_context_final),
            feat_dim=info.feat_dim,
            ivector_dim=info.ivector_dim,
            feats_dtype="float16" if info.compress else "float32",
            chunked=True,
        )
    return ArchiveMeta(
        num_egs=num_egs,
        frames_per_eg=info.frames_per_eg,
        left_context=info.left_context,
        right_context=info.right_context,
        feat_dim=info.feat_dim,
        ivector_dim=info.ivector_dim,
        feats_dtype="float16" if info.compress else "float32",
    )


def padded_windows(feats: np.ndarray, starts: np.ndarray, width: int) -> np.ndarray:
    """Rows ``start .. start + width - 1`` of ``feats`` per start, edge rows repeated.

    Frames before 0 take row 0 and frames after T − 1 take row T − 1
    (Kaldi's ``ExtractRowRangeWithPadding``). Returns (len(starts), width, D).
    """
    rows = np.asarray(starts, dtype=np.int64)[:, None] + np.arange(width)[None, :]
    np.clip(rows, 0, feats.shape[0] - 1, out=rows)
    return feats[rows]


def ivector_rows(ivector_frames: np.ndarray, period: int, num_rows: int) -> np.ndarray:
    """Row of the online i-vector matrix for each drawn frame r: clamp(⌊r/period⌋)."""
    rows = np.floor_divide(np.asarray(ivector_frames, dtype=np.int64), period)
    return np.clip(rows, 0, num_rows - 1)


def utterance_egs(
    utt: Utterance,
    chunks: UtteranceChunks,
    meta: ArchiveMeta,
    ivector_period: int = 0,
) -> EgsBatch:
    """Build the egs of one utterance from its chunks (``nnet3-get-egs`` ``ProcessFile``)."""
    F = meta.frames_per_eg
    if utt.feats.shape[1] != meta.feat_dim:
        raise ValueError(
            f"utterance {utt.utt}: feature dim {utt.feats.shape[1]}, expected {meta.feat_dim}"
        )
    first = chunks.first_frames
    feats = padded_windows(utt.feats, first - meta.left_context, meta.window)
    frames = first[:, None] + np.arange(F)[None, :]
    structure = None
    if meta.chunked:  # frames beyond a chunk's width: label 0, weight 0 (chunks.weights)
        np.minimum(frames, len(utt.labels) - 1, out=frames)
        structure = np.stack(
            [chunks.sizes, chunks.left_contexts, chunks.right_contexts], axis=1
        ).astype(np.int32)
    labels = utt.labels[frames].astype(np.int32)
    weights = (chunks.weights * utt.label_mask[frames]).astype(np.float32)
    if meta.chunked:
        labels[np.arange(F)[None, :] >= chunks.sizes[:, None]] = 0
    ivectors = None
    if meta.ivector_dim:
        if utt.ivectors is None or utt.ivectors.shape[1] != meta.ivector_dim:
            got = None if utt.ivectors is None else utt.ivectors.shape[1]
            raise ValueError(
                f"utterance {utt.utt}: i-vector dim {got}, expected {meta.ivector_dim}"
            )
        rows = ivector_rows(chunks.ivector_frames, ivector_period, utt.ivectors.shape[0])
        ivectors = utt.ivectors[rows].astype(np.float32)
    keys = [f"{utt.utt}-{int(f)}" for f in first]
    return EgsBatch(feats.astype(meta.feats_dtype), labels, weights, ivectors, keys, structure)


def utterance_chunker(info: EgsInfo) -> Callable[[str, int], UtteranceChunks]:
    """``chunker(utt, num_frames)``: the chunks of one utterance, from its own seeded
    generator (the splitter's tables are built once)."""
    if info.chunked:
        splitter = UtteranceSplitter(info.chunk_widths[0], tuple(info.chunk_widths[1:]))
        contexts = (
            info.left_context,
            info.right_context,
            info.left_context_initial,
            info.right_context_final,
        )
        return lambda u, T: splitter.split_chunks(T, utterance_rng(info.srand, u), contexts)
    splitter = UtteranceSplitter(info.frames_per_eg)
    return lambda u, T: splitter.split(T, utterance_rng(info.srand, u), info.left_context)


def chunk_utterances(utts: list[tuple[str, int]], info: EgsInfo) -> list[UtteranceChunks]:
    """Chunks of every ``(utt, num_frames)``, each from its own seeded generator."""
    chunker = utterance_chunker(info)
    return [chunker(u, T) for u, T in utts]


def count_utterance_egs(utts: Iterable[tuple[str, int]], info: EgsInfo) -> tuple[int, int]:
    """(number of egs, longest key in UTF-8 bytes) of ``utts``, streamed: the chunk sizes
    are the first draw of each utterance's generator (the same draw as the writer's)."""
    widths = info.chunk_widths or [info.frames_per_eg]
    splitter = UtteranceSplitter(widths[0], tuple(widths[1:]))
    num_egs = longest = 0
    for u, T in utts:
        n = len(splitter.chunk_sizes(T, utterance_rng(info.srand, u)))
        if n:
            num_egs += n
            longest = max(longest, len(u.encode("utf-8")) + 1 + len(str(max(T - 1, 0))))
    return num_egs, longest


def iter_egs(
    utts: Iterable[tuple[str, int]],
    chunks: Iterable[UtteranceChunks] | None,
    sources: EgsSources,
    info: EgsInfo,
) -> Iterator[EgsBatch]:
    """The egs of each utterance with at least one chunk, in list order (``chunks``
    None: each utterance chunked as it comes, nothing held for the whole list)."""
    meta = meta_for(info, 0)
    if chunks is None:
        chunker = utterance_chunker(info)
        pairs = (((u, T), chunker(u, T)) for u, T in utts)
    else:
        pairs = zip(utts, chunks, strict=True)
    for (utt, T), ch in pairs:
        if ch.num_chunks == 0:
            continue
        yield utterance_egs(sources.load(utt, expected_frames=T), ch, meta, info.ivector_period)
