"""Gaussian sufficient statistics and their likelihood, as Kaldi's ``GaussClusterable``.

Mirrors ``src/tree/clusterable-classes.cc``. A cluster of frames is summarised by its
count ``n``, first-order stats ``s = Σx`` and second-order stats ``q = Σx²`` (per
dimension: a diagonal Gaussian). With the maximum-likelihood mean ``μ = s/n`` and variance
``σ²_d = q_d/n - μ_d²``, floored ``v_d = max(σ²_d, var_floor)``, the log-likelihood of the
frames under that Gaussian (``GaussClusterable::Objf``) is

    objf = -0.5 · n · ( Σ_d log v_d + D·log 2π + Σ_d σ²_d / v_d )

(the last term is D when no variance is floored), and 0 for ``n <= 0``. Merging two
clusters ``a`` and ``b`` loses ``distance(a, b) = objf(a) + objf(b) - objf(a+b) >= 0``
(``Clusterable::Distance``); splitting gains the same. All functions are vectorised over
a leading axis so one call scores many clusters.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

LOG_2PI = math.log(2.0 * math.pi)
DEFAULT_VAR_FLOOR = 0.01  # acc-tree-stats --var-floor


def gauss_objf(count, x_stats, x2_stats, var_floor: float = DEFAULT_VAR_FLOOR) -> np.ndarray:
    """``GaussClusterable::Objf`` of each cluster: ``count`` (C,), stats (C, D) -> (C,).

    A single cluster (scalar count, (D,) stats) gives a 0-d array."""
    count = np.asarray(count, dtype=np.float64)
    x_stats = np.asarray(x_stats, dtype=np.float64)
    x2_stats = np.asarray(x2_stats, dtype=np.float64)
    positive = count > 0
    safe = np.where(positive, count, 1.0)[..., None]
    mean = x_stats / safe
    var = x2_stats / safe - mean * mean
    floored = np.maximum(var, var_floor)
    dim = x_stats.shape[-1]
    per_frame = -0.5 * (np.log(floored).sum(-1) + dim * LOG_2PI + (var / floored).sum(-1))
    objf = np.where(positive, per_frame * np.where(positive, count, 0.0), 0.0)
    return np.where(np.isnan(objf), 0.0, objf)


def sum_rows_by_group(index: np.ndarray, rows: np.ndarray, size: int) -> np.ndarray:
    """``out[g] = Σ_{i: index[i] = g} rows[i]`` for (S,) or (S, D) rows: one ``bincount``
    over the flattened rows (much faster than ``np.add.at``)."""
    rows = np.asarray(rows, dtype=np.float64)
    index = np.asarray(index, dtype=np.int64)
    if rows.ndim == 1:
        return np.bincount(index, weights=rows, minlength=size)[:size]
    dim = rows.shape[1]
    flat = (index[:, None] * dim + np.arange(dim)).reshape(-1)
    return np.bincount(flat, weights=rows.reshape(-1), minlength=size * dim)[: size * dim].reshape(
        size, dim
    )


def sum_stats_by_group(index, count, x_stats, x2_stats, size: int):
    """Gaussian stats (count, Σx, Σx²) summed per group: ``SumStatsVec`` of split stats."""
    return (
        sum_rows_by_group(index, count, size),
        sum_rows_by_group(index, x_stats, size),
        sum_rows_by_group(index, x2_stats, size),
    )


@dataclass
class GaussStats:
    """One cluster's statistics (count, Σx, Σx²) and variance floor: a ``GaussClusterable``."""

    count: float
    x_stats: np.ndarray
    x2_stats: np.ndarray
    var_floor: float = DEFAULT_VAR_FLOOR

    @classmethod
    def zeros(cls, dim: int, var_floor: float = DEFAULT_VAR_FLOOR) -> GaussStats:
        return cls(0.0, np.zeros(dim), np.zeros(dim), var_floor)

    def add_frames(self, feats: np.ndarray, weight: float = 1.0) -> None:
        """Accumulate frames (T, D) with one weight (``GaussClusterable::AddStats``)."""
        feats = np.atleast_2d(np.asarray(feats, dtype=np.float64))
        self.count += weight * feats.shape[0]
        self.x_stats = self.x_stats + weight * feats.sum(0)
        self.x2_stats = self.x2_stats + weight * (feats * feats).sum(0)

    def add(self, other: GaussStats) -> None:
        """Pool another cluster into this one (``GaussClusterable::Add``)."""
        self.count += other.count
        self.x_stats = self.x_stats + other.x_stats
        self.x2_stats = self.x2_stats + other.x2_stats

    def copy(self) -> GaussStats:
        return GaussStats(self.count, self.x_stats.copy(), self.x2_stats.copy(), self.var_floor)

    def objf(self) -> float:
        return float(gauss_objf(self.count, self.x_stats, self.x2_stats, self.var_floor))

    def distance(self, other: GaussStats) -> float:
        """Likelihood lost by merging with ``other``, clipped at 0 (``Clusterable::Distance``)."""
        pooled = self.copy()
        pooled.add(other)
        return max(0.0, self.objf() + other.objf() - pooled.objf())
