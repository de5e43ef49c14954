"""Tree statistics: Gaussian stats per (phonetic context, pdf-class), as ``acc-tree-stats``.

Mirrors ``AccumulateTreeStats`` (``src/hmm/tree-accu.cc``, used by ``src/bin/acc-tree-stats``)
and ``sum-tree-stats``. Each frame aligned to pdf-class ``c`` of the central phone of a
window of ``N`` phones ``(p_0 .. p_{N-1})`` (0 = outside the utterance; central position
``P``) adds its feature vector to the :mod:`clusterable` stats (count, Σx, Σx²) of the
event ``{0: p_0, …, N-1: p_{N-1}, kPdfClass: c}``. For a context-independent central phone
(``--ci-phones``) only the central key is kept, so the tree never asks about its context.

:class:`TreeStats` holds all events as one integer matrix, column ``k`` for key ``k`` and
the last column for ``kPdfClass`` (-1 where an event lacks that key), with the stats as
arrays, so a split's candidates are summed with a few ``bincount`` calls.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from paravg.gmm.clusterable import (
    DEFAULT_VAR_FLOOR,
    GaussStats,
    gauss_objf,
    sum_stats_by_group,
)
from paravg.gmm.event_map import PDF_CLASS_KEY

ABSENT = -1


@dataclass
class TreeStats:
    """Per-event Gaussian statistics (Kaldi's ``BuildTreeStatsType``)."""

    events: np.ndarray  # (S, N + 1) int64: phone keys 0..N-1, then pdf-class; ABSENT = no key
    count: np.ndarray  # (S,)
    x_stats: np.ndarray  # (S, D)
    x2_stats: np.ndarray  # (S, D)
    central_position: int
    var_floor: float = DEFAULT_VAR_FLOOR

    @property
    def context_width(self) -> int:
        return self.events.shape[1] - 1

    def __len__(self) -> int:
        return len(self.count)

    def column(self, key: int) -> int:
        """The events' column of Kaldi key ``key`` (``kPdfClass`` = -1 is the last)."""
        return self.context_width if key == PDF_CLASS_KEY else key

    def event_keys(self) -> list[int]:
        return [*range(self.context_width), PDF_CLASS_KEY]

    def event(self, i: int) -> dict[int, int]:
        """Event ``i`` as Kaldi's (key -> value) map, absent keys left out."""
        return {
            k: int(v) for k, v in zip(self.event_keys(), self.events[i], strict=True) if v != ABSENT
        }

    def subset(self, rows) -> TreeStats:
        return TreeStats(
            self.events[rows], self.count[rows], self.x_stats[rows], self.x2_stats[rows],
            self.central_position, self.var_floor,
        )  # fmt: skip

    def total(self) -> GaussStats:
        """All the stats pooled (``SumStats``)."""
        return GaussStats(
            float(self.count.sum()), self.x_stats.sum(0), self.x2_stats.sum(0), self.var_floor
        )

    def objf(self) -> float:
        """Objective of all events pooled into one Gaussian."""
        return self.total().objf()

    def sum_by_value(self, key: int, num_values: int | None = None):
        """Stats summed per value of ``key`` (``SplitStatsByKey`` + ``SumStatsVec``):
        (count (V,), Σx (V, D), Σx² (V, D)); the key must be present in every event."""
        values = self.events[:, self.column(key)]
        size = int(values.max()) + 1 if num_values is None else num_values
        return sum_stats_by_group(values, self.count, self.x_stats, self.x2_stats, size)

    def objf_of_groups(self, count, xs, x2s) -> np.ndarray:
        return gauss_objf(count, xs, x2s, self.var_floor)

    def save(self, path: Path) -> None:
        """Write as ``.npz`` (paravg's ``treeacc``)."""
        np.savez(
            path, events=self.events, count=self.count, x_stats=self.x_stats,
            x2_stats=self.x2_stats, central_position=self.central_position,
            var_floor=self.var_floor,
        )  # fmt: skip

    @classmethod
    def load(cls, path: Path) -> TreeStats:
        with np.load(path) as z:
            return cls(
                z["events"], z["count"], z["x_stats"], z["x2_stats"],
                int(z["central_position"]), float(z["var_floor"]),
            )  # fmt: skip


def context_windows(phones: Sequence[int], context_width: int, central_position: int) -> np.ndarray:
    """The window of every phone of an utterance's phone sequence, (len, N), 0 outside it:
    row ``i`` is ``phones[i-P .. i-P+N-1]`` (``AccumulateTreeStats``'s loop)."""
    n = len(phones)
    padded = np.concatenate(
        [np.zeros(central_position, int), np.asarray(phones, int),
         np.zeros(context_width - central_position - 1, int)]
    )  # fmt: skip
    return np.stack([padded[i : i + context_width] for i in range(n)]).reshape(n, context_width)


def accumulate_tree_stats(
    contexts: np.ndarray,
    pdf_classes: np.ndarray,
    feats: np.ndarray,
    central_position: int,
    ci_phones: Iterable[int] = (),
    var_floor: float = DEFAULT_VAR_FLOOR,
) -> TreeStats:
    """acc-tree-stats from per-frame keys: ``contexts`` (T, N) is each frame's phone window,
    ``pdf_classes`` (T,) its pdf-class, ``feats`` (T, D) its features. Frames with the
    same event are pooled; a context-independent central phone keeps only key ``P``."""
    contexts = np.asarray(contexts, dtype=np.int64)
    pdf_classes = np.asarray(pdf_classes, dtype=np.int64)
    feats = np.asarray(feats, dtype=np.float64)
    if contexts.ndim != 2 or not 0 <= central_position < contexts.shape[1]:
        raise ValueError(f"contexts must be (T, N) with 0 <= P < N, got {contexts.shape}")
    if not len(contexts) == len(pdf_classes) == len(feats):
        raise ValueError(
            f"frames differ: {len(contexts)} contexts, {len(pdf_classes)} pdf-classes, "
            f"{len(feats)} feature rows"
        )
    events = np.concatenate([contexts, pdf_classes[:, None]], axis=1)
    ci = np.isin(contexts[:, central_position], np.asarray(sorted(set(ci_phones)), dtype=np.int64))
    others = [j for j in range(contexts.shape[1]) if j != central_position]
    events[np.ix_(ci, others)] = ABSENT
    unique, inverse = np.unique(events, axis=0, return_inverse=True)
    inverse = inverse.reshape(-1)
    count, xs, x2s = sum_stats_by_group(
        inverse, np.ones(len(feats)), feats, feats * feats, len(unique)
    )
    return TreeStats(unique, count, xs, x2s, central_position, var_floor)


def sum_tree_stats(parts: Sequence[TreeStats]) -> TreeStats:
    """Several jobs' stats added event by event (``sum-tree-stats``)."""
    if not parts:
        raise ValueError("no tree statistics to sum")
    first = parts[0]
    for part in parts[1:]:
        if (
            part.events.shape[1] != first.events.shape[1]
            or part.central_position != first.central_position
        ):
            raise ValueError("tree statistics with different context windows cannot be summed")
    events = np.concatenate([p.events for p in parts])
    unique, inverse = np.unique(events, axis=0, return_inverse=True)
    inverse = inverse.reshape(-1)
    count, xs, x2s = sum_stats_by_group(
        inverse,
        np.concatenate([p.count for p in parts]),
        np.concatenate([p.x_stats for p in parts]),
        np.concatenate([p.x2_stats for p in parts]),
        len(unique),
    )
    return TreeStats(unique, count, xs, x2s, first.central_position, first.var_floor)
