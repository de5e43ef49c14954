"""Rows of a level along the time axis: the selections between the levels of a network
computed only at the times its outputs need (Kaldi's compiler computes a component only
at the indexes some output depends on: ``src/nnet3/nnet-computation-graph.cc``).

A level is a (B, T, D) tensor whose T rows hold known, sorted times. A selection of rows
is a slice when the wanted rows are evenly spaced (a view, no copy), else an index
tensor.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import torch

Selector = slice | torch.Tensor


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
