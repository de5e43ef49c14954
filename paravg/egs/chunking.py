"""Cutting an utterance into fixed-size chunks: Kaldi's ``UtteranceSplitter``.

Mirrors ``src/nnet3/nnet-example-utils.cc`` (``UtteranceSplitter``) for a single
``--num-frames=F`` (the DNN case) and for a list of chunk widths ``--num-frames=40,30,20``
(the RNN case, ``train_rnn.py --egs.chunk-width``; :class:`UtteranceSplitter` with
``alternatives``, and the chunk contexts of :meth:`UtteranceSplitter.split_chunks`); no
``--num-frames-overlap``, frame subsampling factor 1.

Several widths (Kaldi's ``InitSplits``). P = the principal (first) width, M the largest.
The candidate splits are 0, 1 or 2 alternative widths a_i, a_j (any of the list, the
principal included) and any number of P, with total duration ≤ U + P where
U = 2·M + P (``MaxUtteranceLength``); as Kaldi builds them, a split with at least one P
appended is sorted, the pair [a_i, a_j] alone is not (so [30, 20] and [20, 30] are both
candidates, and count twice in the draw, but [20, 30, P] is one); the candidates are
unique and sorted lexicographically. The table, the cost and the draw are as below with
d = Σ sizes and the split impossible when its largest chunk exceeds u. The drawn split,
plus the P's of a long utterance, is *sorted* and then reversed with probability ½. With
one width this is exactly the single-width rule.

Choosing the number of chunks. A split is n chunks of F frames, nominal duration d = n·F.
For an utterance of u frames its cost is

    c(d, u) = d − u        if d > u   (frames counted twice: overlap)
            = 2·(u − d)    if d ≤ u   (frames thrown away: gap, penalised double)
            = ∞            if u < F   (the chunk does not fit)

Costs are tabulated for u ≤ U = 3·F (Kaldi's ``MaxUtteranceLength`` = 2·max + primary)
over splits with d ≤ U + F. For every tabulated u the allowed splits are those with
c < min_c + 1.9999; one is drawn uniformly. A longer utterance first has F subtracted
(and one extra chunk added) until u ≤ U. Utterances shorter than F give no chunks.
The chunk sizes are then reversed with probability ½ (a no-op with a single size; the
draw is kept so the random stream matches Kaldi's sequence of draws).

Placing the chunks. Let g = u − Σ sizes.
* g ≥ 0 (gap): g is spread as evenly as possible over n + 1 slots (before each chunk and
  at the end): ⌊g/(n+1)⌋ each, one more for g mod (n+1) of them, slots in random order.
* g < 0 (overlap): −g is spread over the n − 1 boundaries between chunks, proportionally
  to the smaller of the two adjacent chunks, largest remainder first, ties to the earlier
  boundary (Kaldi's ``DistributeRandomly``; with one chunk size every boundary gets
  ⌊−g/(n−1)⌋ and the first (−g mod (n−1)) get one more, exactly as Kaldi). No overlap at
  the utterance start or end.

Output weights. Frame t of the utterance gets weight 1 / (number of chunks covering t)
in every chunk that covers it (``SetOutputWeights``), so an overlapped frame counts ½ in
each of its two egs and every frame of the utterance sums to 1 (or 0 if in a gap).

Randomness. Kaldi draws from one generator per process, in utterance order. Here every
utterance has its own generator seeded from (srand, a hash of the utterance id), so an
utterance is cut the same way whichever job, list order or subset it appears in.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from functools import cached_property

import numpy as np

COST_THRESHOLD = 1.9999

# train_rnn.py's defaults (steps/nnet3/train_rnn.py): --egs.chunk-left-context 40,
# --egs.chunk-right-context 0, the initial / final ones -1 (= the same as the others).
CHUNK_LEFT_CONTEXT, CHUNK_RIGHT_CONTEXT = 40, 0
CHUNK_KEYS = (
    "chunk_width",
    "chunk_left_context",
    "chunk_right_context",
    "chunk_left_context_initial",
    "chunk_right_context_final",
)


def parse_chunk_widths(value: int | str, where: str = "egs.chunk_width") -> tuple[int, ...]:
    """``--egs.chunk-width`` "40,30,20" → (40, 30, 20): the principal width first.

    A width may repeat in Kaldi's list; here the list is kept as given (duplicates add
    nothing to the splitter's choices) but must hold positive integers."""
    from paravg.errors import ConfigError

    if isinstance(value, bool):
        raise ConfigError(f"{where}: {value!r}; expected an integer or a list like '40,30,20'")
    parts = [value] if isinstance(value, int) else str(value).split(",")
    try:
        widths = tuple(int(p) for p in parts)
    except ValueError as exc:
        raise ConfigError(
            f"{where}: {value!r}; expected an integer or a list like '40,30,20'"
        ) from exc
    if not widths or min(widths) < 1:
        raise ConfigError(f"{where}: {value!r}; every chunk width must be >= 1")
    return widths


@dataclass(frozen=True)
class ChunkOptions:
    """The chunk egs options of ``egs`` (Kaldi's ``train_rnn.py`` ``--egs.*``) with the
    contexts the egs are cut with (``train_rnn.py`` → ``get_egs.sh``)::

        left_context          = chunk_left_context + model_left
        right_context         = chunk_right_context + model_right
        left_context_initial  = chunk_left_context_initial + model_left  if ≥ 0 else −1
        right_context_final   = chunk_right_context_final + model_right  if ≥ 0 else −1

    −1 meaning "as the non-initial (non-final) value"; the initial / final values apply
    to the first / last chunk of each utterance only (``UtteranceSplitter``)."""

    widths: tuple[int, ...]
    chunk_left_context: int = CHUNK_LEFT_CONTEXT
    chunk_right_context: int = CHUNK_RIGHT_CONTEXT
    chunk_left_context_initial: int = -1
    chunk_right_context_final: int = -1

    @classmethod
    def from_egs_config(cls, egs: dict) -> ChunkOptions | None:
        """None for frame egs (no ``egs.chunk_width``)."""
        from paravg.errors import ConfigError

        if egs.get("chunk_width") is None:
            extra = sorted(k for k in CHUNK_KEYS if egs.get(k) is not None)
            if extra:
                raise ConfigError(
                    f"egs: {extra} set without egs.chunk_width: the chunk contexts are "
                    "options of chunk egs (set egs.chunk_width, e.g. '40,30,20')"
                )
            return None

        def get(key: str, default: int) -> int:  # absent or None: train_rnn.py's
            value = egs.get(key)
            return default if value is None else int(value)

        return cls(
            widths=parse_chunk_widths(egs["chunk_width"]),
            chunk_left_context=get("chunk_left_context", CHUNK_LEFT_CONTEXT),
            chunk_right_context=get("chunk_right_context", CHUNK_RIGHT_CONTEXT),
            chunk_left_context_initial=get("chunk_left_context_initial", -1),
            chunk_right_context_final=get("chunk_right_context_final", -1),
        )

    @property
    def principal(self) -> int:
        return self.widths[0]

    def contexts(self, model_left: int, model_right: int) -> tuple[int, int, int, int]:
        """(left, right, left_initial, right_final) input frames around a chunk, as
        ``train_rnn.py`` computes them from the model's context (class docstring); the
        initial / final ones resolved (−1 replaced by the non-initial value)."""
        left = self.chunk_left_context + model_left
        right = self.chunk_right_context + model_right
        initial = self.chunk_left_context_initial
        final = self.chunk_right_context_final
        return (
            left,
            right,
            left if initial < 0 else initial + model_left,
            right if final < 0 else final + model_right,
        )


def utterance_rng(srand: int, utt: str) -> np.random.Generator:
    """The generator of one utterance: seeded from ``srand`` and a stable hash of ``utt``."""
    digest = hashlib.blake2b(utt.encode("utf-8"), digest_size=8).digest()
    return np.random.default_rng([srand, int.from_bytes(digest, "little")])


def split_cost(duration: float, length: int, max_chunk: int) -> float:
    """Kaldi's cost of a split of nominal ``duration`` for an utterance of ``length``."""
    if length < max_chunk:
        return float("inf")
    if duration > length:
        return duration - length
    return 2.0 * (length - duration)


def distribute_uniform(n: int, size: int, rng: np.random.Generator) -> np.ndarray:
    """Split ``n`` >= 0 into ``size`` near-equal integers in random order (sum = n)."""
    out = np.full(size, n // size, dtype=np.int64)
    out[: n % size] += 1
    return out[rng.permutation(size)]


def distribute_proportional(n: int, magnitudes: np.ndarray) -> np.ndarray:
    """Split ``n`` >= 0 proportionally to ``magnitudes``: floors, then largest remainders.

    Ties go to the earlier position (stable sort), which for equal magnitudes is Kaldi's
    result: the first ``n mod len`` entries get one more.
    """
    magnitudes = np.asarray(magnitudes, dtype=np.float64)
    share = n * magnitudes / magnitudes.sum()
    out = np.floor(share).astype(np.int64)
    missing = n - int(out.sum())
    order = np.argsort(-(share - out), kind="stable")
    out[order[:missing]] += 1
    return out


@dataclass(frozen=True)
class UtteranceChunks:
    """The chunks of one utterance.

    ``first_frames`` (n,): first labelled frame of each chunk; ``weights`` (n, F): output
    weight of each labelled frame; ``ivector_frames`` (n,): the frame r drawn for the
    i-vector rule (see :func:`paravg.egs.archive.ivector_rows`).

    Chunk egs (:meth:`UtteranceSplitter.split_chunks`) also have ``sizes`` (n,) (each
    chunk's width; ``weights`` is then (n, max width), zero beyond a chunk's width) and
    ``left_contexts`` / ``right_contexts`` (n,): the input frames around each chunk (the
    initial / final values on the first / last chunk).
    """

    length: int
    first_frames: np.ndarray
    weights: np.ndarray
    ivector_frames: np.ndarray
    sizes: np.ndarray | None = None
    left_contexts: np.ndarray | None = None
    right_contexts: np.ndarray | None = None

    @property
    def num_chunks(self) -> int:
        return len(self.first_frames)


@dataclass(frozen=True)
class UtteranceSplitter:
    """Kaldi's ``UtteranceSplitter`` for the principal chunk size ``frames_per_eg`` and
    the ``alternatives`` after it in ``--num-frames`` (none: the DNN case)."""

    frames_per_eg: int
    alternatives: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        if min(self.widths) < 1:
            raise ValueError(f"chunk widths must be >= 1, got {self.widths}")

    @property
    def widths(self) -> tuple[int, ...]:
        """Kaldi's ``--num-frames`` list: the principal width first."""
        return (self.frames_per_eg, *self.alternatives)

    @property
    def max_width(self) -> int:
        return max(self.widths)

    @property
    def max_tabulated_length(self) -> int:
        """Kaldi's ``MaxUtteranceLength()`` = 2·max width + principal width."""
        return 2 * self.max_width + self.frames_per_eg

    @cached_property
    def candidate_splits(self) -> tuple[tuple[int, ...], ...]:
        """Kaldi's ``InitSplits`` (module docstring): ≤ 2 alternatives and principals,
        sorted once a principal is added, duration ≤ U + P, unique, sorted."""
        P, widths = self.frames_per_eg, self.widths
        ceiling = self.max_tabulated_length + P
        found: set[tuple[int, ...]] = set()
        for i in range(len(widths)):
            for j in range(len(widths)):
                vec = [widths[k] for k in (i, j) if k > 0]
                while sum(vec) <= ceiling:
                    if vec:
                        found.add(tuple(vec))
                    vec = sorted([*vec, P])
        return tuple(sorted(found))

    @cached_property
    def allowed_splits(self) -> tuple[tuple[tuple[int, ...], ...], ...]:
        """For u = 0 .. U: the splits within 1.9999 of the cheapest (empty: too short)."""
        table = []
        for u in range(self.max_tabulated_length + 1):
            costs = [split_cost(sum(c), u, max(c)) for c in self.candidate_splits]
            best = min(costs)
            if best == float("inf"):
                table.append(())
                continue
            table.append(
                tuple(
                    c
                    for c, cost in zip(self.candidate_splits, costs, strict=True)
                    if cost < best + COST_THRESHOLD
                )
            )
        return tuple(table)

    @property
    def splits_for_length(self) -> tuple[tuple[int, ...], ...]:
        """For u = 0 .. U: the numbers of chunks of the allowed splits (one width: the
        splits themselves)."""
        return tuple(tuple(len(c) for c in splits) for splits in self.allowed_splits)

    def chunk_sizes(self, length: int, rng: np.random.Generator) -> list[int]:
        """Draw the chunk sizes of an utterance (``GetChunkSizesForUtterance``)."""
        if length < 0:
            raise ValueError(f"utterance length must be >= 0, got {length}")
        P = self.frames_per_eg
        # Kaldi removes principal chunks until the length is tabulated: the fewest r with
        # length − r·P ≤ U
        repeats = max(0, -(-(length - self.max_tabulated_length) // P))
        u = length - repeats * P
        possible = self.allowed_splits[u]
        if not possible:
            return []
        sizes = sorted([*possible[int(rng.integers(0, len(possible)))], *([P] * repeats)])
        if int(rng.integers(0, 2)) == 0:
            sizes.reverse()
        return sizes

    def gap_sizes(self, length: int, sizes: list[int], rng: np.random.Generator) -> np.ndarray:
        """Signed gap before each chunk (negative: overlap with the previous chunk)."""
        n = len(sizes)
        if n == 0:
            return np.zeros(0, dtype=np.int64)
        total_gap = length - sum(sizes)
        if total_gap >= 0:
            return distribute_uniform(total_gap, n + 1, rng)[:n]
        if n == 1:
            raise ValueError(f"chunk of {sizes[0]} frames exceeds utterance length {length}")
        magnitudes = np.minimum(sizes[:-1], sizes[1:])
        overlaps = distribute_proportional(-total_gap, magnitudes)
        gaps = np.zeros(n, dtype=np.int64)
        gaps[1:] = -overlaps
        return gaps

    def _place(
        self, length: int, rng: np.random.Generator
    ) -> tuple[list[int], np.ndarray, np.ndarray]:
        """(sizes, first frames, weights (n, max width)) of an utterance's chunks."""
        sizes = self.chunk_sizes(length, rng)
        gaps = self.gap_sizes(length, sizes, rng)
        n, W = len(sizes), self.max_width
        first = np.zeros(n, dtype=np.int64)
        t = 0
        for i in range(n):
            t += int(gaps[i])
            first[i] = t
            t += sizes[i]
        if n and (first[0] < 0 or t > length):
            raise AssertionError(f"chunking of length {length} left the utterance: {first}")
        inside = np.arange(W)[None, :] < np.asarray(sizes, dtype=np.int64)[:, None]
        frames = np.minimum(first[:, None] + np.arange(W)[None, :], max(length - 1, 0))
        count = np.zeros(length, dtype=np.int64)
        np.add.at(count, frames[inside], 1)
        weights = np.zeros((n, W), np.float32)
        if n:
            weights[inside] = (1.0 / count[frames[inside]]).astype(np.float32)
        return sizes, first, weights

    def split(
        self, length: int, rng: np.random.Generator, left_context: int = 0
    ) -> UtteranceChunks:
        """Cut an utterance of ``length`` frames; also draw each chunk's i-vector frame.

        The i-vector frame of a chunk is r ~ UniformInt[s, s + length − 1] with
        s = first_frame − left_context (Kaldi's ``nnet3-get-egs``), drawn after the chunking.
        """
        sizes, first, weights = self._place(length, rng)
        n = len(sizes)
        start = first - left_context
        ivector_frames = (
            rng.integers(start, start + length) if n else np.zeros(0, dtype=np.int64)
        ).astype(np.int64)
        return UtteranceChunks(length, first, weights, ivector_frames)

    def split_chunks(
        self,
        length: int,
        rng: np.random.Generator,
        contexts: tuple[int, int, int, int],
    ) -> UtteranceChunks:
        """Chunk egs (``nnet3-get-egs`` with ``--left-context-initial`` /
        ``--right-context-final``): the chunks, their widths, and each chunk's contexts
        from ``contexts`` = (left, right, left_initial, right_final) (resolved:
        :meth:`ChunkOptions.contexts`): the first chunk gets left_initial, the last
        right_final (``GetChunksForUtterance``). The i-vector frame of a chunk is drawn
        as in :meth:`split` with the chunk's own left context."""
        left, right, left_initial, right_final = contexts
        sizes, first, weights = self._place(length, rng)
        n = len(sizes)
        lefts = np.full(n, left, dtype=np.int64)
        rights = np.full(n, right, dtype=np.int64)
        if n:
            lefts[0], rights[-1] = left_initial, right_final
        start = first - lefts
        ivector_frames = (
            rng.integers(start, start + length) if n else np.zeros(0, dtype=np.int64)
        ).astype(np.int64)
        return UtteranceChunks(
            length,
            first,
            weights,
            ivector_frames,
            np.asarray(sizes, dtype=np.int64),
            lefts,
            rights,
        )
