"""Phone questions for the tree: ``cluster-phones`` and ``compile-questions``.

Mirrors ``AutomaticallyObtainQuestions`` and ``ObtainSetsOfPhones``
(``src/tree/build-tree.cc``, driven by ``src/bin/cluster-phones.cc``) and
``src/bin/compile-questions.cc`` (``Questions``/``QuestionsForKey`` of
``src/tree/build-tree-questions.cc``).

cluster-phones: the tree statistics whose pdf-class is in ``pdf_class_list`` (Kaldi's
default ``{1}``, the middle state of a 3-state HMM; ``{0}`` for 1-state topologies) are
summed per central phone, then per phone set (``phones/sets.int``: the word-position
variants of a phone). :func:`~paravg.gmm.cluster.tree_cluster` splits the sets top-down by
2-means on the Gaussian likelihood (``num_tries`` 10), down to single sets. Every node of
that tree below the root gives a question, the union of the phones under it (the most
general questions first; the root's set stays empty, as in Kaldi's code), followed by each
phone set itself; duplicates and empty sets go.
Kaldi's recipes then append ``extra_questions.int`` (e.g. silence vs. non-silence, stress).

compile-questions: the sorted, de-duplicated questions are asked of every context position
``0..N-1``; the pdf-class key gets ``{0}, {0,1}, …, {0..M-2}`` for ``M`` the largest
number of pdf-classes of a phone. ``num_iters_refine`` > 0 lets :mod:`build_tree` refine a
split's yes-set by k-means (Kaldi's default 0).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from paravg.errors import DataError
from paravg.gmm.cluster import Points, tree_cluster
from paravg.gmm.event_map import PDF_CLASS_KEY
from paravg.gmm.tree_stats import TreeStats


def read_int_sets(path: Path) -> list[list[int]]:
    """Lines of integers (``sets.int``, ``extra_questions.int``, ``questions.int``):
    ``ReadIntegerVectorVectorSimple``."""
    sets = []
    for n, line in enumerate(Path(path).read_text().splitlines(), 1):
        try:
            sets.append([int(t) for t in line.split()])
        except ValueError:
            raise DataError(f"{path}, line {n}: expected integers, got {line!r}") from None
    return sets


def _unique_in_order(sets: Sequence[Sequence[int]]) -> list[list[int]]:
    seen: set[tuple[int, ...]] = set()
    out = []
    for s in sets:
        key = tuple(s)
        if key not in seen:
            seen.add(key)
            out.append(list(s))
    return out


def cluster_phones(
    stats: TreeStats,
    phone_sets: Sequence[Sequence[int]],
    pdf_class_list: Sequence[int] = (1,),
    num_tries: int = 10,
    seed: int = 0,
) -> list[list[int]]:
    """Questions from a top-down clustering of the phone sets' statistics
    (``AutomaticallyObtainQuestions``), most general first."""
    sets = [sorted(set(s)) for s in phone_sets]
    if any(not s for s in sets):
        raise DataError("cluster-phones: empty phone set")
    phones = [p for s in sets for p in s]
    if len(set(phones)) != len(phones):
        raise DataError("cluster-phones: a phone is in more than one phone set")
    retained = stats.subset(
        np.isin(stats.events[:, stats.column(PDF_CLASS_KEY)], np.asarray(pdf_class_list))
    )
    num_values = max(
        max(phones) + 1, int(retained.events[:, stats.central_position].max(initial=0)) + 1
    )
    count, xs, x2s = retained.sum_by_value(stats.central_position, num_values)
    set_count = np.array([count[s].sum() for s in sets])
    set_x = np.stack([xs[s].sum(0) for s in sets])
    set_x2 = np.stack([x2s[s].sum(0) for s in sets])
    points = Points(set_count, set_x, set_x2, stats.var_floor)
    leaf_of_set, parents, _ = tree_cluster(points, len(sets), num_tries=num_tries, seed=seed)
    raw: list[list[int]] = [[] for _ in parents]
    for set_index, leaf in enumerate(leaf_of_set):
        raw[leaf].extend(sets[set_index])
    top = len(parents) - 1
    for node, parent in enumerate(parents):  # children come before parents in this order
        raw[node].sort()
        if parent < top:  # as ObtainSetsOfPhones, nothing is added to the root's set
            raw[parent].extend(raw[node])
    raw.reverse()  # root (all phones) first
    return [q for q in _unique_in_order([*raw, *sets]) if q]


@dataclass
class Questions:
    """Per-key candidate yes-sets (Kaldi's ``Questions``): key -> sorted phone/pdf-class sets."""

    by_key: dict[int, list[tuple[int, ...]]] = field(default_factory=dict)
    num_iters_refine: int = 0

    def indicator(self, key: int) -> np.ndarray:
        """(questions, max value + 1) 0/1 matrix of ``key``'s yes-sets, cached."""
        cache = self.__dict__.setdefault("_indicators", {})
        if key not in cache:
            sets = self.by_key.get(key, [])
            size = max((max(q) for q in sets if q), default=-1) + 1
            matrix = np.zeros((len(sets), size))
            for row, q in enumerate(sets):
                matrix[row, list(q)] = 1.0
            cache[key] = matrix
        return cache[key]

    def asked_keys(self) -> list[int]:
        """Keys with at least one question, in Kaldi's order (kPdfClass = -1 first)."""
        return [k for k, qs in sorted(self.by_key.items()) if qs]


def compile_questions(
    questions: Sequence[Sequence[int]],
    context_width: int,
    max_num_pdf_classes: int,
    num_iters_refine: int = 0,
) -> Questions:
    """``compile-questions``: the phone questions for keys ``0..N-1``, the nested
    pdf-class questions for ``kPdfClass``."""
    phone_questions = sorted({tuple(sorted(set(q))) for q in questions if q})
    by_key: dict[int, list[tuple[int, ...]]] = {
        k: list(phone_questions) for k in range(context_width)
    }
    by_key[PDF_CLASS_KEY] = [tuple(range(i + 1)) for i in range(max_num_pdf_classes - 1)]
    return Questions(by_key, num_iters_refine)
