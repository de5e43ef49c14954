"""Kaldi's decision-tree maps from an event to an answer (leaf/pdf id).

Mirrors ``src/tree/event-map.cc``. An *event* is a set of (key, value) pairs: keys
``0..N-1`` are the phones of the context window (0 = outside the utterance), key
``PDF_CLASS_KEY = -1`` (Kaldi's ``kPdfClass``) the HMM state's pdf-class. Three map kinds:

* :class:`ConstantEventMap` — a leaf: always ``answer``;
* :class:`TableEventMap` — ``table[event[key]]`` (a missing entry answers nothing);
* :class:`SplitEventMap` — ``yes`` if ``event[key] ∈ yes_set`` else ``no``.

``map`` returns None where Kaldi's ``EventMap::Map`` returns false (key absent from the
event, value outside a table). ``copy(mapping)`` replaces leaf ``a`` by ``mapping[a]`` when
given (``EventMap::Copy``), which is how clustering and renumbering rewrite a tree.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

PDF_CLASS_KEY = -1


class EventMap:
    def map(self, event: Mapping[int, int]) -> int | None:
        raise NotImplementedError

    def leaves(self) -> list[int]:
        """Every answer reachable in the map (``EventMap::MultiMap`` on the empty event)."""
        raise NotImplementedError

    def copy(self, mapping: Mapping[int, EventMap] | None = None) -> EventMap:
        raise NotImplementedError


@dataclass(frozen=True)
class ConstantEventMap(EventMap):
    answer: int

    def map(self, event):
        return self.answer

    def leaves(self):
        return [self.answer]

    def copy(self, mapping=None):
        if mapping is not None and self.answer in mapping:
            return mapping[self.answer]
        return ConstantEventMap(self.answer)


@dataclass(frozen=True)
class TableEventMap(EventMap):
    key: int
    table: tuple[EventMap | None, ...]  # indexed by the key's value; None = no entry

    def map(self, event):
        value = event.get(self.key)
        if value is None or not 0 <= value < len(self.table) or self.table[value] is None:
            return None
        return self.table[value].map(event)

    def leaves(self):
        return [leaf for sub in self.table if sub is not None for leaf in sub.leaves()]

    def copy(self, mapping=None):
        return TableEventMap(
            self.key, tuple(None if s is None else s.copy(mapping) for s in self.table)
        )


@dataclass(frozen=True)
class SplitEventMap(EventMap):
    key: int
    yes_set: tuple[int, ...]  # sorted, unique
    yes: EventMap
    no: EventMap

    def map(self, event):
        value = event.get(self.key)
        if value is None:
            return None
        return (self.yes if value in self.yes_set else self.no).map(event)

    def leaves(self):
        return self.yes.leaves() + self.no.leaves()

    def copy(self, mapping=None):
        return SplitEventMap(self.key, self.yes_set, self.yes.copy(mapping), self.no.copy(mapping))


def map_rows(
    emap: EventMap | None, values: dict[int, np.ndarray], rows: np.ndarray, out: np.ndarray
) -> None:
    """Vectorised ``map`` of many events: ``values[key]`` holds every event's value of
    ``key`` (negative = key absent); the answers of events ``rows`` are written to ``out``
    (left as they are, e.g. -1, where the map gives no answer)."""
    if emap is None or len(rows) == 0:
        return
    if isinstance(emap, ConstantEventMap):
        out[rows] = emap.answer
        return
    column = values.get(emap.key)
    if column is None:
        return
    v = column[rows]
    if isinstance(emap, SplitEventMap):
        present = v >= 0
        yes = present & np.isin(v, np.asarray(emap.yes_set, dtype=v.dtype))
        map_rows(emap.yes, values, rows[yes], out)
        map_rows(emap.no, values, rows[present & ~yes], out)
    elif isinstance(emap, TableEventMap):
        for value, sub in enumerate(emap.table):
            if sub is not None:
                map_rows(sub, values, rows[v == value], out)
    else:
        raise TypeError(f"not an EventMap: {emap!r}")


def table_from_dict(key: int, entries: Mapping[int, EventMap]) -> TableEventMap:
    """A TableEventMap from value -> submap, holes None (Kaldi's map constructor)."""
    size = max(entries) + 1 if entries else 0
    return TableEventMap(key, tuple(entries.get(v) for v in range(size)))


def renumber(tree: EventMap) -> tuple[EventMap, int]:
    """Leaves renumbered 0..L-1 in increasing order of their old ids (``RenumberEventMap``)."""
    old = sorted(set(tree.leaves()))
    mapping = {a: ConstantEventMap(i) for i, a in enumerate(old)}
    return tree.copy(mapping), len(old)
