"""Element-wise arithmetic on state dicts, in float64, shared by every sync method.

A state dict here is a ``{name: tensor}`` mapping as in ``model_to_file_dict(...)["state_dict"]``.
Floating tensors are combined in float64 and cast back to the dtype of the first operand
(so a float32 model stays float32); integer tensors (counters, never trained) must agree
across operands and are copied from the first.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch


def _check_same_keys(state_dicts: Sequence[dict]) -> None:
    keys = list(state_dicts[0])
    for i, sd in enumerate(state_dicts[1:], start=1):
        if list(sd) != keys:
            missing = sorted(set(keys) ^ set(sd))
            raise ValueError(
                f"state dict {i} has different parameters from state dict 0: {missing}"
            )


class RunningSum:
    """Σ_k c_k · sd_k per tensor, one state dict at a time: a float64 accumulator and the
    state dict being added are all it holds (memory ≈ 3 × a float32 model, whatever the
    number of models). Integer tensors are the first's. The sum of each element is formed
    in the order the state dicts come, so streaming them gives the bits of a list."""

    def __init__(self) -> None:
        self.count = 0
        self._acc: dict = {}
        self._first: dict = {}

    def add(self, sd: dict, weight: float | None = None) -> None:
        """Add ``sd`` (times ``weight``; ``None``: 1, as a mean's terms)."""
        if self.count == 0:
            self._first = {k: (v.dtype, v.clone() if not v.is_floating_point() else None)
                           for k, v in sd.items()}  # fmt: skip
            self._acc = {
                k: torch.zeros_like(v, dtype=torch.float64)
                for k, v in sd.items()
                if v.is_floating_point()
            }
        elif set(sd) != set(self._first):
            missing = sorted(set(self._first) ^ set(sd))
            raise ValueError(
                f"state dict {self.count} has different parameters from state dict 0: {missing}"
            )
        for name, acc in self._acc.items():
            if weight is None:
                acc.add_(sd[name])  # in float64, without a float64 copy of the term
            elif weight != 0.0:
                acc += float(weight) * sd[name].to(torch.float64)
        self.count += 1

    def result(self, divide: bool = False, dtype=None) -> dict:
        """The sum (``divide``: over the count, once: the mean), cast to ``dtype`` or each
        tensor's first dtype. Once: the accumulator is released as it is read."""
        if self.count == 0:
            raise ValueError("nothing to combine")
        out = {}
        for name, (first_dtype, integer) in self._first.items():
            if integer is not None:
                out[name] = integer
                continue
            acc = self._acc.pop(name)  # freed tensor by tensor: the sum is read once
            out[name] = (acc.div_(self.count) if divide else acc).to(dtype or first_dtype)
        self._first, self.count = {}, 0
        return out


def weighted_sum(state_dicts: Sequence[dict], weights: Sequence[float], dtype=None) -> dict:
    """Σ_k c_k · sd_k per tensor (float64 accumulation, cast to ``dtype`` or the first's dtype)."""
    if not state_dicts:
        raise ValueError("no state dicts to combine")
    if len(weights) != len(state_dicts):
        raise ValueError(f"{len(weights)} weights for {len(state_dicts)} state dicts")
    _check_same_keys(state_dicts)
    total = RunningSum()
    for c, sd in zip(weights, state_dicts, strict=True):
        total.add(sd, c)
    return total.result(dtype=dtype)


def mean(state_dicts: Sequence[dict]) -> dict:
    """(1/n) Σ_k sd_k per tensor: summed in float64, divided once, cast to the first's dtype.

    The one mean of every sync method (Kaldi's ``nnet3-average``, the ring mixing, the
    consensus): the same models in the same order give the same bits wherever it runs,
    so a train job's in-memory start model equals the synced file written beside it.
    """
    if not state_dicts:
        raise ValueError("nothing to average")
    _check_same_keys(state_dicts)
    total = RunningSum()
    for sd in state_dicts:
        total.add(sd)
    return total.result(divide=True)


def to_float64(sd: dict) -> dict:
    """A float64 copy of the floating tensors (integer tensors copied unchanged)."""
    return {k: v.to(torch.float64) if v.is_floating_point() else v.clone() for k, v in sd.items()}


def cast_like(sd: dict, like: dict) -> dict:
    """``sd`` with every tensor cast to the dtype of the same tensor in ``like``."""
    return {k: v.to(like[k].dtype) for k, v in sd.items()}


def zeros_like(sd: dict, dtype=torch.float64) -> dict:
    """Zeros shaped as ``sd`` (floating tensors in ``dtype``, integer tensors copied)."""
    return {
        k: torch.zeros_like(v, dtype=dtype) if v.is_floating_point() else v.clone()
        for k, v in sd.items()
    }


PARAMETER_KEYS = ("state_dict", "meta")


def file_header(file_dict: dict) -> dict:
    """The header of a model file dict (what rebuilds the network) without parameters and
    metadata, to build a new model file around new parameters."""
    return {k: v for k, v in file_dict.items() if k not in PARAMETER_KEYS}
