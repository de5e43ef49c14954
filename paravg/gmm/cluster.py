"""Clustering of Gaussian statistics: refinement, k-means, top-down tree and bottom-up.

Mirrors ``src/tree/cluster-utils.cc``. Points and clusters are Gaussian stats (count,
Σx, Σx², see :mod:`clusterable`); the objective of a clustering is the sum of its
clusters' ``objf``, which only grows as points move to where they fit better.

* :func:`refine_clusters` (``RefineClusters``): move each point to the cluster whose
  objective gains most from it, until no move helps or ``num_iters`` sweeps.
* :func:`kmeans` (``ClusterKMeans``/``ClusterKMeansOnce``): points dealt round-robin to
  ``k`` clusters along a random stride coprime to their number, then refined; the best of
  ``num_tries`` starts wins.
* :func:`tree_cluster` (``TreeCluster``): start with one cluster; repeatedly split (by
  2-means) the leaf whose split gains most, until ``max_clust`` leaves or no gain above
  ``thresh``. Returns Kaldi's numbering: leaves ``0..L-1``, non-leaves after them with the
  root last, and each cluster's parent (the root its own).
* :func:`cluster_bottom_up` (``ClusterBottomUp``): repeatedly merge the pair of clusters
  whose merge loses least (``Clusterable::Distance``), while that loss is below ``thresh``.
"""

from __future__ import annotations

import heapq
import math
import random
from dataclasses import dataclass

import numpy as np

from paravg.gmm.clusterable import gauss_objf, sum_stats_by_group


@dataclass
class Points:
    """M Gaussian stats: count (M,), Σx (M, D), Σx² (M, D), one variance floor."""

    count: np.ndarray
    x_stats: np.ndarray
    x2_stats: np.ndarray
    var_floor: float

    def __len__(self) -> int:
        return len(self.count)

    def objf(self, count, xs, x2s) -> np.ndarray:
        return gauss_objf(count, xs, x2s, self.var_floor)

    def sums(self, assignments: np.ndarray, k: int):
        """Stats of each of ``k`` clusters given each point's cluster."""
        return sum_stats_by_group(assignments, self.count, self.x_stats, self.x2_stats, k)

    def subset(self, rows) -> Points:
        return Points(self.count[rows], self.x_stats[rows], self.x2_stats[rows], self.var_floor)


def refine_clusters(points: Points, assignments: np.ndarray, k: int, num_iters: int = 100) -> float:
    """Move points between ``k`` clusters while it helps (``RefineClusters``); updates
    ``assignments`` in place and returns the objective's gain."""
    count, xs, x2s = points.sums(assignments, k)
    objf = points.objf(count, xs, x2s)
    gain = 0.0
    for _ in range(num_iters):
        moved = False
        for i in range(len(points)):
            a = assignments[i]
            pc, px, px2 = points.count[i], points.x_stats[i], points.x2_stats[i]
            without = float(points.objf(count[a] - pc, xs[a] - px, x2s[a] - px2))
            with_it = points.objf(count + pc, xs + px, x2s + px2)  # adding to each cluster
            change = with_it - objf + (without - objf[a])
            change[a] = 0.0
            b = int(np.argmax(change))
            if change[b] > 1.0e-6 * (1.0 + abs(float(objf[a]))):
                count[a], xs[a], x2s[a] = count[a] - pc, xs[a] - px, x2s[a] - px2
                count[b], xs[b], x2s[b] = count[b] + pc, xs[b] + px, x2s[b] + px2
                objf[a], objf[b] = without, with_it[b]
                assignments[i] = b
                gain += float(change[b])
                moved = True
        if not moved:
            break
    return gain


def _kmeans_once(points: Points, k: int, rng: random.Random, num_iters: int):
    m = len(points)
    skip = 1
    if m > 1:
        skip = 1 + rng.randrange(m - 1)
        while math.gcd(skip, m) != 1:
            skip = 1 if skip == m - 1 else skip + 1
    assignments = np.zeros(m, dtype=np.int64)
    for count in range(m):  # point (count·skip mod m) -> cluster (count mod k)
        assignments[(count * skip) % m] = count % k
    total = float(points.objf(points.count.sum(), points.x_stats.sum(0), points.x2_stats.sum(0)))
    gain = float(points.objf(*points.sums(assignments, k)).sum()) - total
    for _ in range(num_iters):
        impr = refine_clusters(points, assignments, k)
        gain += impr
        if impr == 0:
            break
    return gain, assignments


def kmeans(
    points: Points, k: int, num_tries: int = 2, num_iters: int = 20, seed: int = 0
) -> tuple[float, np.ndarray]:
    """``ClusterKMeans``: (objective gain over one cluster, each point's cluster)."""
    if not 1 <= k <= len(points):
        raise ValueError(f"cannot make {k} clusters of {len(points)} points")
    rng = random.Random(seed)
    best = None
    for _ in range(num_tries):
        gain, assignments = _kmeans_once(points, k, rng, num_iters)
        if best is None or gain > best[0]:
            best = (gain, assignments)
    return best


def tree_cluster(
    points: Points, max_clust: int, thresh: float = 0.0, num_tries: int = 10, seed: int = 0
) -> tuple[np.ndarray, list[int], int]:
    """``TreeCluster`` with branch factor 2: (point -> leaf, cluster -> parent, #leaves).

    Leaves are numbered in the order they were created (a split keeps the parent's number
    for its first child); non-leaf ``j`` (in split order) is numbered ``L + J - 1 - j``, so
    the root is last and is its own parent."""
    leaves: list[list[int]] = [list(range(len(points)))]  # leaf -> point indices
    leaf_parent: list[int | None] = [None]  # leaf -> non-leaf index (split order)
    nonleaf_parent: list[int | None] = []
    splits: dict[int, tuple[float, np.ndarray]] = {}
    queue: list[tuple[float, int, int]] = []  # (-gain, tie, leaf)
    tie = 0

    def find_best_split(leaf: int) -> None:
        nonlocal tie
        members = leaves[leaf]
        if len(members) <= 1:
            return
        gain, assignments = kmeans(points.subset(members), 2, num_tries=num_tries, seed=seed + tie)
        splits[leaf] = (gain, assignments)
        if gain > thresh:
            heapq.heappush(queue, (-gain, tie, leaf))
        tie += 1

    find_best_split(0)
    while len(leaves) < max_clust and queue:
        _, _, leaf = heapq.heappop(queue)
        _, assignments = splits.pop(leaf)
        members = leaves[leaf]
        node = len(nonleaf_parent)
        nonleaf_parent.append(leaf_parent[leaf])
        leaves[leaf] = [p for p, a in zip(members, assignments, strict=True) if a == 0]
        leaf_parent[leaf] = node
        leaves.append([p for p, a in zip(members, assignments, strict=True) if a == 1])
        leaf_parent.append(node)
        find_best_split(leaf)
        find_best_split(len(leaves) - 1)
    num_leaves, num_nonleaves = len(leaves), len(nonleaf_parent)

    def out(j: int) -> int:
        return num_leaves + num_nonleaves - 1 - j

    point_leaf = np.empty(len(points), dtype=np.int64)
    for leaf, members in enumerate(leaves):
        point_leaf[members] = leaf
    parents = [0 if p is None else out(p) for p in leaf_parent]
    parents += [0] * num_nonleaves
    for j, p in enumerate(nonleaf_parent):
        parents[out(j)] = out(j) if p is None else out(p)
    return point_leaf, parents, num_leaves


def cluster_bottom_up(points: Points, thresh: float) -> tuple[np.ndarray, float]:
    """``ClusterBottomUp``: merge the cheapest pair while its loss is at most ``thresh``;
    returns (each point's cluster, objective change (<= 0))."""
    (assignments,), change = cluster_bottom_up_compartmentalized([points], thresh, 0)
    return assignments, change


def cluster_bottom_up_compartmentalized(
    compartments: list[Points], thresh: float = math.inf, min_clust: int = 0
) -> tuple[list[np.ndarray], float]:
    """``ClusterBottomUpCompartmentalized``: bottom-up merging where only points of one
    compartment may merge; the cheapest merge over all compartments goes first, while its
    loss is at most ``thresh`` and more than ``min_clust`` clusters remain in all.
    Returns each compartment's assignments (numbered in order of the surviving, highest
    point) and the objective change (<= 0)."""
    state = []
    for points in compartments:
        count = points.count.astype(np.float64).copy()
        xs, x2s = points.x_stats.copy(), points.x2_stats.copy()
        state.append((points, count, xs, x2s, points.objf(count, xs, x2s), np.arange(len(points))))
    alive = [np.ones(len(p), dtype=bool) for p in compartments]
    version = [np.zeros(len(p), dtype=np.int64) for p in compartments]
    heap: list[tuple[float, int, int, int, int, int]] = []

    def push(c: int, i: int, j: int) -> None:  # i > j
        points, count, xs, x2s, objf, _ = state[c]
        pooled = points.objf(count[i] + count[j], xs[i] + xs[j], x2s[i] + x2s[j])
        loss = max(float(objf[i] + objf[j] - pooled), 0.0)
        if loss <= thresh:
            heapq.heappush(heap, (loss, c, i, j, int(version[c][i]), int(version[c][j])))

    for c, points in enumerate(compartments):
        for i in range(len(points)):
            for j in range(i):
                push(c, i, j)
    clusters = sum(len(p) for p in compartments)
    change = 0.0
    while clusters > min_clust and heap:
        loss, c, i, j, vi, vj = heapq.heappop(heap)
        if not (alive[c][i] and alive[c][j]) or version[c][i] != vi or version[c][j] != vj:
            continue
        # the higher-numbered cluster absorbs the lower, as BottomUpClusterer::MergeClusters
        points, count, xs, x2s, objf, owner = state[c]
        count[i], xs[i], x2s[i] = count[i] + count[j], xs[i] + xs[j], x2s[i] + x2s[j]
        objf[i] = float(points.objf(count[i], xs[i], x2s[i]))
        alive[c][j] = False
        owner[owner == j] = i
        version[c][i] += 1
        change -= loss
        clusters -= 1
        for k in np.flatnonzero(alive[c]):
            if k != i:
                push(c, max(k, i), min(k, i))
    out = [np.unique(s[5], return_inverse=True)[1].reshape(-1) for s in state]
    return out, change
