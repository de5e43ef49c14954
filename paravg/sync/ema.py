"""Exponential moving average of the synced models (Tian et al., arXiv 1703.01024).

Combines with any sync method. With m_t the synced model after t iterations (``<t>.pt``
for ``average``; the BMUF global model g_t for ``bmuf``; the consensus model for the
decentralized methods) and decay α:

    e_1 = m_1,        e_t = α · e_{t−1} + (1 − α) · m_t   (t ≥ 2)

(the first update copies, as ``torch.optim.swa_utils.AveragedModel`` does, so the random
initial model never enters the average). Hence after k updates with the same m = w,
e = α^k · e_0 + (1 − α^k) · w. The EMA model is **never a start model**: no train job
reads ``ema/<t>.pt`` (Tian et al. do not broadcast it); it is offered to the final
combination and evaluated beside the final model.

Arithmetic is in float64 per update and stored in the model's dtype.
"""

from __future__ import annotations

from pathlib import Path

from paravg.io import save_torch_atomic
from paravg.nnet.model_file import load_model_file
from paravg.sync.tensors import file_header, weighted_sum


def check_decay(decay: float) -> None:
    """α ∈ [0, 1): α = 1 would never move from e_1."""
    if not 0.0 <= decay < 1.0:
        raise ValueError(f"sync.ema.decay must be in [0, 1), got {decay}")


def ema_update(ema: dict, model: dict, decay: float) -> dict:
    """One update of the state dict ``ema``: α · e + (1 − α) · m, in float64, returned in
    the dtype of ``model`` (as stored: IEEE addition commutes, so the order is free)."""
    check_decay(decay)
    return weighted_sum([model, ema], [1.0 - decay, decay])


def update_ema_file(
    prev_ema: str | Path | None,
    model_path: str | Path,
    decay: float,
    out_path: str | Path,
    iteration: int,
) -> dict:
    """Write ``ema/<t>.pt`` from ``ema/<t−1>.pt`` (``None`` at t = 1) and the synced model m_t."""
    check_decay(decay)
    model = load_model_file(model_path)
    out = file_header(model)
    if prev_ema is None:
        out["state_dict"] = {k: v.clone() for k, v in model["state_dict"].items()}
    else:
        prev = load_model_file(prev_ema)
        out["state_dict"] = ema_update(prev["state_dict"], model["state_dict"], decay)
    out["meta"] = {"ema_iteration": iteration, "ema_decay": decay, "synced_model": str(model_path)}
    save_torch_atomic(out_path, out)
    return out
