"""Decision-tree building: Kaldi's ``build-tree``.

Mirrors ``BuildTree``, ``GetStubMap``, ``ReadRootsFile`` (``src/tree/build-tree.cc``) and
``SplitDecisionTree``/``DecisionTreeSplitter``, ``FindBestSplitForKey``,
``ComputeInitialSplit``, ``ClusterEventMapRestrictedByMap``, ``ClusterEventMapGetMapping``,
``SplitStatsByMap``, ``RenumberEventMap`` (``src/tree/build-tree-utils.cc``), as run by
``src/bin/build-tree.cc``.

1. **Stub** (``GetStubMap``): one root per line of ``roots.txt``. A *shared* root is one
   leaf for all pdf-classes of its phones; a *not-shared* root has one leaf per pdf-class
   (a table on ``kPdfClass``). The roots are told apart by a table on the central phone
   (when every set is a single phone) or by splits on it, halving the list of sets.
2. **Greedy splitting** (``SplitDecisionTree``): every stub leaf holds the statistics of
   its events (those of *not-split* roots left out). A leaf's best split is the
   (key, question) whose yes/no partition of its events gains most likelihood,

       gain = objf(Σ_yes) + objf(Σ_no) - objf(Σ_all)

   (:mod:`clusterable`), over keys ``kPdfClass, 0..N-1`` with their compiled questions; a
   key missing from some event (context of a CI phone) cannot be asked. Optionally the
   yes-set is refined by 2-means over the key's values. The leaf whose best gain is
   largest is split while that gain exceeds ``thresh`` and there are fewer than
   ``max_leaves`` leaves; the yes child keeps the leaf id, the no child takes the next.
3. **Clustering** (``ClusterEventMapRestrictedByMap``): within each stub leaf, leaves are
   merged bottom-up while a merge loses at most ``cluster_thresh`` likelihood (negative:
   the smallest gain of any split made, Kaldi's default; 0: no clustering).
4. **Rounding** (``--round-num-leaves``, on by default as in build-tree;
   ``ClusterEventMapToNClustersRestrictedByMap``): the cheapest merges, still within stub
   leaves, bring the number of leaves down to a multiple of 8 (none when that would leave
   fewer leaves than the stub has). Finally the leaves are renumbered ``0..L-1``
   (``RenumberEventMap``): these are the pdf ids.
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from paravg.errors import DataError
from paravg.gmm.cluster import (
    Points,
    cluster_bottom_up,
    cluster_bottom_up_compartmentalized,
    refine_clusters,
)
from paravg.gmm.clusterable import sum_stats_by_group
from paravg.gmm.event_map import (
    PDF_CLASS_KEY,
    ConstantEventMap,
    EventMap,
    SplitEventMap,
    map_rows,
    renumber,
    table_from_dict,
)
from paravg.gmm.questions import Questions
from paravg.gmm.tree_stats import ABSENT, TreeStats


@dataclass(frozen=True)
class Roots:
    """``roots.txt``: phone sets, whether each shares one root over its pdf-classes, and
    whether it is split."""

    phone_sets: tuple[tuple[int, ...], ...]
    shared: tuple[bool, ...]
    split: tuple[bool, ...]


def read_roots(path: Path) -> Roots:
    """Parse ``phones/roots.int`` (``ReadRootsFile``): ``shared|not-shared split|not-split``
    then phone ids, per line."""
    sets, shared, split = [], [], []
    for n, line in enumerate(Path(path).read_text().splitlines(), 1):
        fields = line.split()
        if (
            len(fields) < 3
            or fields[0] not in ("shared", "not-shared")
            or fields[1] not in ("split", "not-split")
        ):
            raise DataError(
                f"{path}, line {n}: expected 'shared|not-shared split|not-split PHONES', "
                f"got {line!r}"
            )
        try:
            phones = sorted(int(p) for p in fields[2:])
        except ValueError:
            raise DataError(f"{path}, line {n}: phone ids must be integers: {line!r}") from None
        if len(set(phones)) != len(phones) or phones[0] <= 0:
            raise DataError(f"{path}, line {n}: duplicate or non-positive phone ids: {line!r}")
        sets.append(tuple(phones))
        shared.append(fields[0] == "shared")
        split.append(fields[1] == "split")
    if not sets:
        raise DataError(f"{path}: empty roots file")
    return Roots(tuple(sets), tuple(shared), tuple(split))


def get_stub_map(
    central_position: int,
    phone_sets: Sequence[Sequence[int]],
    num_pdf_classes: Mapping[int, int],
    shared: Sequence[bool],
    first_leaf: int = 0,
) -> tuple[EventMap, int]:
    """``GetStubMap``: the tree before splitting and the next free leaf id."""
    all_phones = [p for s in phone_sets for p in s]
    if not phone_sets or len(set(all_phones)) != len(all_phones):
        raise DataError("roots: no phone sets, or a phone in two of them")
    if len(phone_sets) == 1:
        if shared[0]:
            return ConstantEventMap(first_leaf), first_leaf + 1
        lengths = {num_pdf_classes[p] for p in phone_sets[0]}
        entries = {c: ConstantEventMap(first_leaf + c) for c in range(max(lengths))}
        return table_from_dict(PDF_CLASS_KEY, entries), first_leaf + max(lengths)
    if max(len(s) for s in phone_sets) == 1 and len(phone_sets) <= 2 * max(all_phones):
        entries: dict[int, EventMap] = {}
        leaf = first_leaf
        for phones, share in zip(phone_sets, shared, strict=True):
            entries[phones[0]], leaf = get_stub_map(
                central_position, [phones], num_pdf_classes, [share], leaf
            )
        return table_from_dict(central_position, entries), leaf
    half = len(phone_sets) // 2
    first, leaf = get_stub_map(
        central_position, phone_sets[:half], num_pdf_classes, shared[:half], first_leaf
    )
    second, leaf = get_stub_map(
        central_position, phone_sets[half:], num_pdf_classes, shared[half:], leaf
    )
    yes_set = tuple(sorted(p for s in phone_sets[:half] for p in s))
    return SplitEventMap(central_position, yes_set, first, second), leaf


def map_stats(stats: TreeStats, tree: EventMap) -> np.ndarray:
    """Each event's answer under ``tree`` (``SplitStatsByMap``); an unmappable event is an
    error, as in Kaldi (context width/position or CI phones not matching the roots)."""
    answers = np.full(len(stats), -1, dtype=np.int64)
    values = {key: stats.events[:, stats.column(key)] for key in stats.event_keys()}
    map_rows(tree, values, np.arange(len(stats)), answers)
    if (answers < 0).any():
        i = int(np.flatnonzero(answers < 0)[0])
        raise DataError(
            f"tree statistics: event {stats.event(i)} maps to no leaf: check that the context "
            "width and central position match the stats and that context-independent phones "
            "do not share roots with others"
        )
    return answers


def find_best_split_for_key(
    stats: TreeStats, questions: Questions, key: int
) -> tuple[float, tuple[int, ...]]:
    """``FindBestSplitForKey`` + ``ComputeInitialSplit``: (gain, yes-set) of the best
    question on ``key`` for these events; (0, ()) when none helps or the key is not in
    every event."""
    column = stats.events[:, stats.column(key)]
    if len(stats) <= 1 or (column == ABSENT).any():
        return 0.0, ()
    count, xs, x2s = stats.sum_by_value(key)
    unsplit = float(stats.objf_of_groups(count.sum(), xs.sum(0), x2s.sum(0)))
    candidates = questions.by_key.get(key, [])
    best_gain, best = 0.0, -1
    if candidates:
        yes = questions.indicator(key)[:, : len(count)]
        if yes.shape[1] < len(count):  # values no question names: always "no"
            yes = np.pad(yes, ((0, 0), (0, len(count) - yes.shape[1])))
        no = 1.0 - yes
        gains = (
            stats.objf_of_groups(yes @ count, yes @ xs, yes @ x2s)
            + stats.objf_of_groups(no @ count, no @ xs, no @ x2s)
            - unsplit
        )
        for q, gain in enumerate(gains):  # first best wins ties, as Kaldi's loop
            if gain > best_gain:
                best_gain, best = float(gain), q
    yes_set = tuple(candidates[best]) if best >= 0 else ()
    if questions.num_iters_refine > 0:
        points = Points(count, xs, x2s, stats.var_floor)
        assignments = np.isin(np.arange(len(count)), yes_set).astype(np.int64)
        best_gain += refine_clusters(points, assignments, 2, questions.num_iters_refine)
        yes_set = tuple(int(v) for v in np.flatnonzero(assignments == 1))
    return best_gain, yes_set


class _Splitter:
    """One subtree being grown (``DecisionTreeSplitter``): a leaf with its stats and best
    split, or a split node with two children."""

    def __init__(self, leaf: int, stats: TreeStats, questions: Questions):
        self.leaf, self.stats, self.questions = leaf, stats, questions
        self.yes: _Splitter | None = None
        self.no: _Splitter | None = None
        self.best_gain, self.key, self.yes_set = 0.0, 0, ()
        for key in questions.asked_keys():
            gain, yes_set = find_best_split_for_key(stats, questions, key)
            if gain > self.best_gain:
                self.best_gain, self.key, self.yes_set = gain, key, yes_set

    def do_split(self, next_leaf: int) -> int:
        """Split the best leaf under this node; returns the next free leaf id."""
        if self.yes is None:
            assert self.best_gain > 0
            values = self.stats.events[:, self.stats.column(self.key)]
            in_yes = np.isin(values, np.asarray(self.yes_set, dtype=np.int64))
            self.yes = _Splitter(self.leaf, self.stats.subset(in_yes), self.questions)
            self.no = _Splitter(next_leaf, self.stats.subset(~in_yes), self.questions)
            next_leaf += 1
            self.stats = None
        else:
            child = self.yes if self.yes.best_gain >= self.no.best_gain else self.no
            next_leaf = child.do_split(next_leaf)
        self.best_gain = max(self.yes.best_gain, self.no.best_gain)
        return next_leaf

    def event_map(self) -> EventMap:
        if self.yes is None:
            return ConstantEventMap(self.leaf)
        return SplitEventMap(
            self.key, tuple(sorted(self.yes_set)), self.yes.event_map(), self.no.event_map()
        )


@dataclass(frozen=True)
class SplitResult:
    tree: EventMap
    num_leaves: int
    gain: float  # total likelihood gain of the splits
    smallest_split: float  # smallest gain of a split made (1e20 when none)
    num_splits: int


def split_decision_tree(
    stub: EventMap,
    stats: TreeStats,
    questions: Questions,
    thresh: float,
    max_leaves: int,
    num_leaves: int,
) -> SplitResult:
    """``SplitDecisionTree``: grow every leaf of ``stub`` greedily, best gain first, while
    the gain exceeds ``thresh`` and ``max_leaves`` (<= 0: no limit) is not reached."""
    answers = map_stats(stats, stub) if len(stats) else np.zeros(0, dtype=np.int64)
    size = max(int(answers.max(initial=-1)) + 1, 1)
    order = np.argsort(answers, kind="stable")  # each stub leaf's events: one slice (a view)
    by_leaf = stats.subset(order)
    bounds = np.searchsorted(answers[order], np.arange(size + 1))
    builders = [
        _Splitter(leaf, by_leaf.subset(slice(bounds[leaf], bounds[leaf + 1])), questions)
        for leaf in range(size)
    ]
    queue = [(-b.best_gain, -i) for i, b in enumerate(builders)]
    heapq.heapify(queue)
    gain, smallest, count = 0.0, 1.0e20, 0
    while -queue[0][0] > thresh and (max_leaves <= 0 or num_leaves < max_leaves):
        best, i = heapq.heappop(queue)
        smallest = min(smallest, -best)
        gain += -best
        num_leaves = builders[-i].do_split(num_leaves)
        heapq.heappush(queue, (-builders[-i].best_gain, i))
        count += 1
    tree = stub.copy({i: b.event_map() for i, b in enumerate(builders)})
    return SplitResult(tree, num_leaves, gain, smallest, count)


def _leaves_by_region(
    tree: EventMap, stats: TreeStats, restrict: EventMap
) -> tuple[int, list[tuple[list[int], Points]]]:
    """Per leaf of ``restrict`` with stats (``SplitStatsByMap``), the ids of ``tree``'s
    leaves there and their summed stats; also the size of Kaldi's split (max answer + 1)."""
    regions = map_stats(stats, restrict)
    leaves = map_stats(stats, tree)
    order = np.argsort(regions, kind="stable")  # each region's events: one slice
    regions, leaves, ordered = regions[order], leaves[order], stats.subset(order)
    starts = np.flatnonzero(np.r_[True, regions[1:] != regions[:-1]]) if len(regions) else []
    out = []
    for start, end in zip(starts, [*starts[1:], len(regions)], strict=True):
        part = ordered.subset(slice(start, end))
        ids, rows = np.unique(leaves[start:end], return_inverse=True)
        count, xs, x2s = sum_stats_by_group(
            rows.reshape(-1), part.count, part.x_stats, part.x2_stats, len(ids)
        )
        out.append((ids.tolist(), Points(count, xs, x2s, stats.var_floor)))
    return int(regions.max(initial=-1)) + 1, out


def _leaf_mapping(regions, assignments) -> tuple[dict[int, EventMap], int]:
    """Leaf ``ids[k]`` -> ``ids[assignments[k]]`` in every region (Kaldi reuses the first
    ids of a region for its merged clusters), and the number of leaves removed."""
    mapping: dict[int, EventMap] = {}
    removed = 0
    for (ids, _), assigned in zip(regions, assignments, strict=True):
        removed += len(ids) - (int(assigned.max()) + 1)
        for k, leaf in enumerate(ids):
            if leaf in mapping:
                raise DataError("tree clustering: a leaf's events lie in two stub regions")
            mapping[leaf] = ConstantEventMap(ids[assigned[k]])
    return mapping, removed


def cluster_event_map_restricted_by_map(
    tree: EventMap, stats: TreeStats, thresh: float, restrict: EventMap
) -> tuple[EventMap, int]:
    """``ClusterEventMapRestrictedByMap``: merge ``tree``'s leaves bottom-up (loss at most
    ``thresh``), only among leaves whose events share a leaf of ``restrict``; returns the
    new tree (leaf ids not yet contiguous) and the number of leaves removed."""
    _, regions = _leaves_by_region(tree, stats, restrict)
    assignments = [cluster_bottom_up(points, thresh)[0] for _, points in regions]
    mapping, removed = _leaf_mapping(regions, assignments)
    return tree.copy(mapping), removed


def cluster_event_map_to_n_clusters_restricted_by_map(
    tree: EventMap, stats: TreeStats, num_clusters: int, restrict: EventMap
) -> tuple[EventMap, int]:
    """``ClusterEventMapToNClustersRestrictedByMap``: merge the cheapest pairs of leaves
    (within one leaf of ``restrict``, over all of them) until ``num_clusters`` remain;
    unchanged when fewer than ``restrict``'s leaves or more than the leaves there are."""
    size, regions = _leaves_by_region(tree, stats, restrict)
    required = num_clusters - (size - len(regions))  # empty regions need no cluster
    if num_clusters < size or required > sum(len(ids) for ids, _ in regions):
        return tree.copy(), 0
    assignments, _ = cluster_bottom_up_compartmentalized(
        [points for _, points in regions], min_clust=required
    )
    mapping, removed = _leaf_mapping(regions, assignments)
    return tree.copy(mapping), removed


def objf_given_map(stats: TreeStats, tree: EventMap) -> float:
    """Total likelihood with one Gaussian per leaf (``ObjfGivenMap``)."""
    answers = map_stats(stats, tree)
    _, rows = np.unique(answers, return_inverse=True)
    rows = rows.reshape(-1)
    k = int(rows.max(initial=-1)) + 1
    count, xs, x2s = sum_stats_by_group(rows, stats.count, stats.x_stats, stats.x2_stats, k)
    return float(stats.objf_of_groups(count, xs, x2s).sum())


@dataclass(frozen=True)
class BuiltTree:
    tree: EventMap  # leaves 0..num_leaves-1 (the pdf ids)
    num_leaves: int
    split_gain: float  # likelihood gain of the splitting, over all frames
    cluster_thresh: float  # the clustering threshold used
    num_removed: int  # leaves merged away by the clustering
    objf: float  # final likelihood, one Gaussian per leaf
    num_frames: float


def build_tree(
    stats: TreeStats,
    questions: Questions,
    roots: Roots,
    num_pdf_classes: Mapping[int, int],
    thresh: float = 300.0,
    max_leaves: int = 0,
    cluster_thresh: float = -1.0,
    round_num_leaves: bool = True,
) -> BuiltTree:
    """``BuildTree`` with build-tree's defaults (``--thresh 300 --cluster-thresh -1``,
    ``--max-leaves 0`` = no limit, ``--round-num-leaves true``;
    ``steps/train_deltas.sh`` passes ``--max-leaves``)."""
    if thresh <= 0 and max_leaves <= 0:
        raise ValueError("build-tree needs thresh > 0 or max_leaves > 0")
    if not len(stats):
        raise DataError("build-tree: no tree statistics")
    missing = sorted({p for s in roots.phone_sets for p in s} - set(num_pdf_classes))
    if missing:
        raise DataError(f"build-tree: phones {missing} of the roots file are not in the topology")
    stub, num_leaves = get_stub_map(
        stats.central_position, roots.phone_sets, num_pdf_classes, roots.shared
    )
    nonsplit = [
        p for s, split in zip(roots.phone_sets, roots.split, strict=True) if not split for p in s
    ]
    keep = ~np.isin(stats.events[:, stats.central_position], np.asarray(nonsplit, dtype=np.int64))
    result = split_decision_tree(
        stub, stats.subset(keep), questions, thresh, max_leaves, num_leaves
    )
    if cluster_thresh < 0:
        cluster_thresh = result.smallest_split
    tree, removed = result.tree, 0
    if cluster_thresh != 0:
        tree, removed = cluster_event_map_restricted_by_map(tree, stats, cluster_thresh, stub)
    if round_num_leaves:  # down to a multiple of 8 by merging the cheapest pairs
        required = (result.num_leaves - removed) // 8 * 8
        tree, rounded = cluster_event_map_to_n_clusters_restricted_by_map(
            tree, stats, required, stub
        )
        removed += rounded
    tree, leaves = renumber(tree)
    return BuiltTree(
        tree,
        leaves,
        result.gain,
        cluster_thresh,
        removed,
        objf_given_map(stats, tree),
        float(stats.count.sum()),
    )


def pdf_class_counts(topology_entries: Mapping[int, int] | Sequence[int]) -> dict[int, int]:
    """phone -> number of pdf-classes, from a mapping or a list indexed by phone
    (``HmmTopology::GetPhoneToNumPdfClasses``; entry 0, epsilon, ignored)."""
    if isinstance(topology_entries, Mapping):
        return {int(p): int(n) for p, n in topology_entries.items()}
    return {p: int(n) for p, n in enumerate(topology_entries) if p > 0 and n > 0}
