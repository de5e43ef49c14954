"""Kaldi's frame-level cross-entropy objective and accuracy.

``nnet3-train``/``nnet3-compute-prob`` with a log-softmax output: the objective of a
minibatch is F = Σ_rows w_row · log p(label_row | x_row), **summed** (not averaged), and
the reported figure is F / Σ w ("log-likelihood per frame"). Accuracy counts rows whose
argmax equals the label, weighted the same way.

A model of frame-subsampling-factor f (a low frame rate) has outputs only at eg frames
k ≡ 0 (mod f): Kaldi's egs made with ``--frame-subsampling-factor f`` carry output
indexes t = 0, f, 2f, … , and ``nnet3-compute-prob`` / ``nnet3-combine`` score those.
:func:`eg_outputs` evaluates the network at those frames and keeps their labels and
weights; every pass over all the frames of egs (diagnostics, combination, priors,
batch-norm statistics) goes through it.

Chunk egs (a recurrent model; :func:`paravg.egs.loader.chunk_minibatches`): a minibatch of
chunks of width w with l ≥ model-left input frames before each chunk; the network has an
output at every frame of the window with its full model context, the chunk's frames are
outputs l − model_left … l − model_left + w − 1 (Kaldi's output indexes t = 0 … w − 1 of
the eg), the frames before (the chunk's extra left context) only warm up the recurrence
and are not scored (:func:`chunk_outputs`).
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


def chunk_outputs(model, feats, ivectors, chunk, **deriv_times) -> torch.Tensor:
    """Log-probs (B, w, C) at the w frames of chunks (w, l, r) whose input windows are
    ``feats`` (B, l + w + r, D): the model is called with Kaldi's times (the chunk starts
    at t = 0, the window's first output at t = −(l − model_left): ``first_output_time``)
    and ``deriv_times`` (``min_deriv_time`` / ``max_deriv_time``, training only)."""
    w, left, _ = chunk
    extra = left - model.left_context
    out = model(feats, ivectors, first_output_time=-extra, **deriv_times)
    return out[:, extra : extra + w]


def eg_outputs(model, mb) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Log-probs, labels and weights of minibatch ``mb`` at the model's output frames.

    One frame per eg (``labels`` (B,)): (B, C), (B,), (B,). Every frame of each eg
    (``labels`` (B, F)): the eg frames k = 0, f, 2f, … < F of the model's
    frame-subsampling-factor f (all F at f = 1): (B, ⌈F/f⌉, C) and (B, ⌈F/f⌉)."""
    ivec = mb.ivectors if (mb.ivectors is not None and model.ivector_dim) else None
    if getattr(mb, "chunk", None) is not None:
        return chunk_outputs(model, mb.feats, ivec, mb.chunk), mb.labels, mb.weights
    if mb.labels.dim() == 1:
        return model(mb.feats, ivec)[:, 0], mb.labels, mb.weights
    f = getattr(model, "frame_subsampling_factor", 1)  # a stand-in model may not say
    if f == 1:
        return model(mb.feats, ivec), mb.labels, mb.weights
    return model(mb.feats, ivec, stride=f), mb.labels[:, ::f], mb.weights[:, ::f]


def evaluate_minibatches(
    model: torch.nn.Module,
    minibatches: Iterable,
    device: torch.device,
    batchnorm_test_mode: bool = True,
) -> ObjectiveStats:
    """Average log-prob and accuracy of ``model`` over minibatches with all frames of each
    eg (at a low frame rate, those of its output frames: :func:`eg_outputs`).

    Dropout is always in test mode (off). ``batchnorm_test_mode=False`` normalises each
    minibatch by its own statistics, as ``nnet3-combine`` scores its candidates (its
    ``--batchnorm-test-mode`` default); a model without batch-norm is unaffected."""
    from paravg.egs.loader import Minibatch

    stats = ObjectiveStats()
    model.eval()
    if not batchnorm_test_mode and model.batchnorms():
        model.set_dropout_proportion(0.0)
        model.train()
    with torch.no_grad():
        for mb in minibatches:
            ivec = mb.ivectors.to(device) if mb.ivectors is not None else None
            on_device = Minibatch(
                mb.feats.to(device),
                ivec,
                mb.labels.to(device),
                mb.weights.to(device),
                getattr(mb, "chunk", None),
            )
            stats.add(*eg_outputs(model, on_device))
    return stats
