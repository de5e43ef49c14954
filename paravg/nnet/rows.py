"""Rows of a level along the time axis: the selections between the levels of a network
computed only at the times its outputs need (Kaldi's compiler computes a component only
at the indexes some output depends on: ``src/nnet3/nnet-computation-graph.cc``).

A level is a (B, T, D) tensor whose T rows hold known, sorted times. A selection of rows
is a slice when the wanted rows are evenly spaced (a view, no copy), else an index
tensor. Derivative truncation (Kaldi's ``--optimization.min-deriv-time`` /
``max-deriv-time``) cuts the times of a level into runs computed with or without
autograd (:func:`grad_runs`, :func:`by_runs`).
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Sequence

import torch

Selector = slice | torch.Tensor
Times = tuple[int, ...]


def selector(positions: list[int]) -> Selector:
    """Rows ``positions`` as a slice when they are evenly spaced, else an index tensor."""
    if len(positions) == 1:
        return slice(positions[0], positions[0] + 1)
    step = positions[1] - positions[0]
    if step > 0 and all(b - a == step for a, b in itertools.pairwise(positions)):
        return slice(positions[0], positions[-1] + 1, step)
    return torch.tensor(positions, dtype=torch.long)


def take(h: torch.Tensor, rows: Selector) -> torch.Tensor:
    """Rows of a (B, T, D) level along the time axis."""
    if isinstance(rows, slice):
        return h[:, rows]
    return h.index_select(1, rows.to(h.device))


def append(h: torch.Tensor, selectors: Sequence[Selector]) -> torch.Tensor:
    """Kaldi's ``Append`` of the selected rows along the feature axis."""
    parts = [take(h, rows) for rows in selectors]
    return parts[0] if len(parts) == 1 else torch.cat(parts, dim=-1)


@functools.lru_cache(maxsize=8192)
def rows_of(have: Times, want: Times) -> Selector:
    """Where the times ``want`` sit among the rows ``have`` of a level."""
    where = {t: i for i, t in enumerate(have)}
    return selector([where[t] for t in want])


def grad_runs(times: Times, lo: int | None, hi: int | None) -> list[tuple[Times, bool]]:
    """``times`` (sorted) cut into runs before, inside and after [lo, hi], each with
    whether derivatives are wanted there (all of them, in one run, without bounds)."""
    if lo is None and hi is None:
        return [(times, True)]
    lo = -math.inf if lo is None else lo
    hi = math.inf if hi is None else hi
    runs: list[tuple[Times, bool]] = []
    for t in times:
        inside = lo <= t <= hi
        if runs and runs[-1][1] == inside:
            runs[-1] = (runs[-1][0] + (t,), inside)
        else:
            runs.append(((t,), inside))
    return runs


def by_runs(runs, compute) -> torch.Tensor:
    """``compute(times)`` for each run (without autograd outside the derivative window),
    concatenated along the time axis."""
    parts = []
    for times, grad in runs:
        with torch.set_grad_enabled(grad and torch.is_grad_enabled()):
            parts.append(compute(times))
    return parts[0] if len(parts) == 1 else torch.cat(parts, dim=1)
