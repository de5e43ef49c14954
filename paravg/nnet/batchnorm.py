"""Kaldi's ``BatchNormComponent`` (``src/nnet3/nnet-normalize-component.cc``).

No learnable scale or offset; ``epsilon`` 1e-3, ``target-rms`` 1 (xconfig defaults).

Training mode (a training job, and :func:`recompute_stats`): over the R rows x_r the
component computes in the minibatch (every (eg, time) it is evaluated at),

    μ = (1/R) Σ_r x_r,   v = max(0, (1/R) Σ_r x_r² − μ²),
    y_r = (x_r − μ) · target_rms · (v + ε)^(−½),

and the derivative flows through μ and v as well (torch's autograd of the same
expression; Kaldi's ``Backprop`` is that derivative written out). It also stores the
statistics ``count += R``, ``stats_sum += Σ x_r``, ``stats_sumsq += Σ x_r²`` (float64, as
Kaldi's double vectors), which :meth:`BatchNorm.scale_stats` multiplies by
``--batchnorm-stats-scale`` (0.8) after every minibatch (``ScaleBatchnormStats`` in
``nnet-training.cc``), and a job starts from zero (``ZeroComponentStats``).

Test mode (evaluation, priors, decoding, export: Kaldi's ``SetBatchnormTestMode``): the
same map with μ = stats_sum / count and v = max(0, stats_sumsq / count − μ²). The
statistics are buffers of the state dict, so averaging models averages them, as
``nnet3-average`` scales and adds them. A component that has never seen data
(count 0, e.g. the initial model) uses μ = 0, v = 1 in test mode; Kaldi instead draws
random statistics with a warning (``SetTestMode``).
"""

from __future__ import annotations

import torch
from torch import nn

EPSILON = 1.0e-3  # BatchNormComponent's default epsilon
BATCHNORM_STATS_SCALE = 0.8  # nnet3-train --batchnorm-stats-scale default


class BatchNorm(nn.Module):
    """``BatchNormComponent`` of ``dim`` units (block-dim = dim)."""

    def __init__(self, dim: int, epsilon: float = EPSILON, target_rms: float = 1.0) -> None:
        super().__init__()
        self.dim = int(dim)
        self.epsilon = float(epsilon)
        self.target_rms = float(target_rms)
        self.register_buffer("stats_count", torch.zeros(1, dtype=torch.float64))
        self.register_buffer("stats_sum", torch.zeros(self.dim, dtype=torch.float64))
        self.register_buffer("stats_sumsq", torch.zeros(self.dim, dtype=torch.float64))

    def zero_stats(self) -> None:
        """Kaldi's ``ZeroStats`` (the start of every training job)."""
        self.stats_count.zero_()
        self.stats_sum.zero_()
        self.stats_sumsq.zero_()

    def scale_stats(self, factor: float = BATCHNORM_STATS_SCALE) -> None:
        """Kaldi's ``ScaleBatchnormStats``: multiply the stored statistics by ``factor``."""
        self.stats_count.mul_(factor)
        self.stats_sum.mul_(factor)
        self.stats_sumsq.mul_(factor)

    def test_mean_var(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(μ, v) of test mode from the stored statistics (float64)."""
        count = float(self.stats_count)
        if count <= 0.0:
            return torch.zeros_like(self.stats_sum), torch.ones_like(self.stats_sum)
        mean = self.stats_sum / count
        return mean, torch.clamp(self.stats_sumsq / count - mean * mean, min=0.0)

    def test_scale_offset(self) -> tuple[torch.Tensor, torch.Tensor]:
        """y = x ⊙ scale + offset in test mode (what the nnet3 export stores as stats)."""
        mean, var = self.test_mean_var()
        scale = self.target_rms * torch.rsqrt(var + self.epsilon)
        return scale, -mean * scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.training:
            scale, offset = self.test_scale_offset()
            return x * scale.to(x.dtype) + offset.to(x.dtype)
        rows = x.reshape(-1, self.dim)
        mean = rows.mean(dim=0)
        uvar = (rows * rows).mean(dim=0)
        var = torch.clamp(uvar - mean * mean, min=0.0)
        y = (x - mean) * (self.target_rms * torch.rsqrt(var + self.epsilon))
        with torch.no_grad():
            n = rows.shape[0]
            self.stats_count.add_(n)
            self.stats_sum.add_(mean.detach().double() * n)
            self.stats_sumsq.add_(uvar.detach().double() * n)
        return y

    def extra_repr(self) -> str:
        return f"dim={self.dim}, epsilon={self.epsilon}, target_rms={self.target_rms}"
