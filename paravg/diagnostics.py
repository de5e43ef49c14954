"""Per-iteration diagnostics, off the critical path.

Kaldi's ``nnet3-compute-prob`` and ``nnet3-show-progress``.

For the model ``<t>.pt``: average log-probability per frame and frame accuracy on the
``train_diag`` and ``valid_diag`` egs (all frames of each eg), and, against ``<t−1>.pt``,
the parameter change of every updatable component: ‖θ_t − θ_{t−1}‖_F and its ratio to
‖θ_{t−1}‖_F (Kaldi's show-progress prints the same per component).
"""

from __future__ import annotations

import logging
from pathlib import Path

import torch

from paravg.egs import EgsArchive, all_minibatches
from paravg.io import write_json_atomic
from paravg.nnet.acoustic import AcousticModel
from paravg.nnet.model_file import build_model, load_model_file
from paravg.nnet.objective import evaluate_minibatches

log = logging.getLogger(__name__)


def subset_stats(model: AcousticModel, prefix: str | Path, minibatch_size: int = 512) -> dict:
    if getattr(model, "objective", "xent") == "chain":  # nnet3-chain-compute-prob
        from paravg.chain.train import chain_subset_stats

        stats = chain_subset_stats(model, prefix)
        log.info(
            "%s: chain objective %.4f, xent objective %.4f per frame over %d frames",
            Path(prefix).name,
            stats["chain_objf"],
            stats["xent_objf"],
            stats["frames"],
        )
        return stats
    archive = EgsArchive(prefix)
    batches = all_minibatches(archive, model.left_context, model.right_context, minibatch_size)
    return evaluate_minibatches(model, batches, torch.device("cpu")).as_dict()


def parameter_progress(model: AcousticModel, prev: AcousticModel) -> dict:
    """Per component: absolute and relative Frobenius change of its parameters (weights
    and bias together)."""
    out = {}
    for name, cur, old in zip(
        model.component_names(), model.components(), prev.components(), strict=True
    ):
        pairs = list(zip(cur.update_params(), old.update_params(), strict=True))
        diff = torch.sqrt(sum(((c - o) ** 2).sum() for c, o in pairs))
        norm = torch.sqrt(sum((o**2).sum() for _, o in pairs))
        out[name] = {
            "change": float(diff),
            "relative_change": float(diff / norm) if norm > 0 else None,
        }
    return out


@torch.no_grad()
def compute_diagnostics(
    model_path: str | Path,
    prev_path: str | Path | None,
    valid_prefix: str | Path,
    train_prefix: str | Path,
    out_path: str | Path,
    iteration: int,
) -> dict:
    """Write ``diag/<t>.json`` for one model."""
    model = build_model(load_model_file(model_path))
    result = {
        "iteration": iteration,
        "valid": subset_stats(model, valid_prefix),
        "train": subset_stats(model, train_prefix),
    }
    if prev_path is not None:
        prev = build_model(load_model_file(prev_path))
        result["progress"] = parameter_progress(model, prev)
    write_json_atomic(out_path, result)
    return result
