"""Kaldi's frame-level cross-entropy objective and accuracy.

``nnet3-train``/``nnet3-compute-prob`` with a log-softmax output: the objective of a
minibatch is F = Σ_rows w_row · log p(label_row | x_row), **summed** (not averaged), and
the reported figure is F / Σ w ("log-likelihood per frame"). Accuracy counts rows whose
argmax equals the label, weighted the same way.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import torch


def weighted_logprob(
    logp: torch.Tensor, labels: torch.Tensor, weights: torch.Tensor
) -> torch.Tensor:
    """F = Σ w · log p(label): ``logp`` (..., C), ``labels`` and ``weights`` (...)."""
    picked = logp.gather(-1, labels.long().unsqueeze(-1)).squeeze(-1)
    return (picked * weights).sum()


@dataclass
class ObjectiveStats:
    """Running sums of objective, weight and correctly classified weight."""

    objf: float = 0.0
    weight: float = 0.0
    correct: float = 0.0

    def add(self, logp: torch.Tensor, labels: torch.Tensor, weights: torch.Tensor) -> None:
        with torch.no_grad():
            self.objf += float(weighted_logprob(logp, labels, weights))
            self.weight += float(weights.sum())
            self.correct += float(((logp.argmax(-1) == labels).to(weights.dtype) * weights).sum())

    @property
    def logprob(self) -> float:
        """Average log-probability per (weighted) frame."""
        return self.objf / self.weight if self.weight > 0 else float("nan")

    @property
    def accuracy(self) -> float:
        return self.correct / self.weight if self.weight > 0 else float("nan")

    def as_dict(self) -> dict:
        return {"logprob": self.logprob, "accuracy": self.accuracy, "frames": self.weight}


def evaluate_minibatches(
    model: torch.nn.Module, minibatches: Iterable, device: torch.device
) -> ObjectiveStats:
    """Average log-prob and accuracy of ``model`` over minibatches with all frames of each eg."""
    stats = ObjectiveStats()
    model.eval()
    with torch.no_grad():
        for mb in minibatches:
            ivec = mb.ivectors.to(device) if mb.ivectors is not None else None
            logp = model(mb.feats.to(device), ivec)
            labels = mb.labels.to(device)
            weights = mb.weights.to(device)
            if labels.dim() == 1:
                logp = logp[:, 0]
            stats.add(logp, labels, weights)
    return stats
