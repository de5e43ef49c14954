"""Kaldi's ``RectifiedLinearComponent`` with self-repair (``src/nnet3/nnet-simple-component.cc``).

Forward y = max(0, x). In a training job the component keeps, from the start of the job
(Kaldi's ``ZeroComponentStats``), the number of rows it has seen, ``count``, and per unit
i how many of them were active, ``deriv_sum_i`` = Σ_rows [y_i > 0] (``StoreStats``: the
rows of a minibatch are added with probability 1/2, always on the first).

Backward (``Backprop`` + ``RepairGradients``, xconfig ``self-repair-scale=1e-5``): with
σ the self-repair scale and, with probability 1/2 (``repair_probability``), per unit

    r_i = (σ / 0.5) · ( [deriv_sum_i ≤ 0.05·count] − [deriv_sum_i > 0.95·count] ),

Kaldi adds r to the derivative of the objective F w.r.t. x on every row: a unit active
in under 5% of the rows is pushed up, one active in over 95% down. Here the loss is −F,
so its gradient w.r.t. x is  ∂loss/∂y ⊙ [y > 0] − r.

The draws (``RandInt(0, 1)`` in ``StoreStats``, ``RandUniform()`` in ``RepairGradients``)
come from a generator seeded by :meth:`RectifiedLinear.reset_stats` (the job's seed).
Without a reset, or outside training (eval mode, ``torch.no_grad``), the component is a
plain ReLU and keeps no statistics. The statistics are not part of the state_dict.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from torch import nn

DEFAULT_SELF_REPAIR_SCALE = 1.0e-5  # xconfig relu-renorm-layer default
LOWER_THRESHOLD = 0.05  # Kaldi's default_lower_threshold
UPPER_THRESHOLD = 0.95  # Kaldi's default_upper_threshold
REPAIR_PROBABILITY = 0.5


class _RepairedRelu(torch.autograd.Function):
    """max(0, x) whose backward adds Kaldi's self-repair term (module docstring)."""

    @staticmethod
    def forward(ctx, x, component):
        y = torch.relu(x)
        ctx.save_for_backward(y)
        ctx.component = component
        return y

    @staticmethod
    def backward(ctx, grad_out):
        (y,) = ctx.saved_tensors
        grad_in = grad_out * (y > 0).to(grad_out.dtype)
        repair = ctx.component.repair_term()
        if repair is not None:
            grad_in = grad_in - repair.to(device=grad_in.device, dtype=grad_in.dtype)
        return grad_in, None


class RectifiedLinear(nn.Module):
    """ReLU of ``dim`` units with Kaldi's statistics and self-repair."""

    def __init__(self, dim: int, self_repair_scale: float = DEFAULT_SELF_REPAIR_SCALE) -> None:
        super().__init__()
        if not 0.0 <= self_repair_scale < 0.1:
            raise ValueError(
                f"self_repair_scale = {self_repair_scale}; expected 0 (off) or in (0, 0.1)"
            )
        self.dim = int(dim)
        self.self_repair_scale = float(self_repair_scale)
        self._rng: np.random.Generator | None = None
        self.count = 0.0
        self.deriv_sum: torch.Tensor | None = None
        self.num_repairs = 0

    def reset_stats(self, seed: int | Sequence[int]) -> None:
        """Zero the statistics and seed the draws (start of a training job)."""
        self._rng = np.random.default_rng(seed)
        self.count = 0.0
        self.deriv_sum = None
        self.num_repairs = 0

    def _collecting(self, x: torch.Tensor) -> bool:
        return (
            self._rng is not None and self.training and torch.is_grad_enabled() and x.requires_grad
        )

    def store_stats(self, y: torch.Tensor) -> None:
        """Kaldi's ``StoreStats``: skip with probability 1/2 unless nothing is stored yet."""
        if int(self._rng.integers(0, 2)) == 0 and self.count != 0:
            return
        active = (y.detach().reshape(-1, self.dim) > 0).sum(0, dtype=torch.float64)
        self.deriv_sum = active if self.deriv_sum is None else self.deriv_sum + active
        self.count += y.numel() // self.dim

    def repair_term(self) -> torch.Tensor | None:
        """r of the module docstring (per unit), or None when no repair happens."""
        if self.self_repair_scale == 0.0 or self.count == 0.0 or self.deriv_sum is None:
            return None
        if self._rng.random() > REPAIR_PROBABILITY:
            return None
        self.num_repairs += 1
        low = (self.deriv_sum <= LOWER_THRESHOLD * self.count).double()
        high = (self.deriv_sum > UPPER_THRESHOLD * self.count).double()
        return (self.self_repair_scale / REPAIR_PROBABILITY) * (low - high)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self._collecting(x):
            return torch.relu(x)
        y = _RepairedRelu.apply(x, self)
        self.store_stats(y)
        return y

    def extra_repr(self) -> str:
        return f"dim={self.dim}, self_repair_scale={self.self_repair_scale}"
