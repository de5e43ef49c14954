"""Final combination (``nnet3-combine``, Kaldi since Dec 2017; kaldi-recipe.md §4.8).

The candidate models (``Schedule.models_to_combine``) are ordered newest first; the
uniform average of the newest n models is evaluated on the ``combine`` egs (all frames,
average log-prob per frame) for n = 1, then every ⌈N / max_objective_evaluations⌉
additions and at n = N. The n with the best objective wins (ties keep the smaller n:
the comparison is strict). No per-layer weights are learned.

The EMA model (Tian et al.; :mod:`paravg.sync.ema`) is never one of Kaldi's candidates:
averaging an average again with raw models, or dropping Kaldi's first candidate (the
newest model alone), would change ``final.pt`` whenever the EMA is on. With
``combine.ema``

* ``candidate`` (default): the EMA alone is scored on the same combine egs, and the final
  model is whichever of {Kaldi's combination, the EMA} has the better objective (ties keep
  the combination);
* ``final``: the EMA is the final model (the combination is still scored, for the record);
* ``none``: the EMA is not read; the final model is Kaldi's combination (the name is not
  ``off``, which YAML reads as false).

A model with batch-norm (TDNN-F) is handled as ``nnet3-combine`` does it
(``src/nnet3bin/nnet3-combine.cc``): each candidate is scored with batch-norm in training
mode (every minibatch of the combine egs, of :data:`COMBINE_MINIBATCH` egs, normalised by
its own statistics; ``--batchnorm-test-mode`` false) and dropout off; the chosen model
then has its statistics recomputed on the combine egs (``RecomputeStats``,
``nnet-utils.cc``: zeroed, every combine eg forwarded in training mode, the sums stored),
which test mode reads. A model without batch-norm is scored and written as it is. At a
low frame rate (``model.frame_subsampling_factor`` f) both use the network's outputs at eg frames
k ≡ 0 (mod f) (:func:`paravg.nnet.objective.eg_outputs`), as ``nnet3-combine`` on egs
with output indexes t = 0, f, 2f, …

``combine.json`` holds all three: ``combined`` (Kaldi's choice and its objective), ``ema``
(its objective) and ``chosen``; with ``none`` or the EMA disabled it is exactly Kaldi's.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from pathlib import Path

import torch

from paravg.egs import EgsArchive, all_minibatches
from paravg.io import save_torch_atomic, write_json_atomic
from paravg.nnet.acoustic import AcousticModel
from paravg.nnet.model_file import build_model, load_model_file
from paravg.nnet.objective import eg_outputs, evaluate_minibatches
from paravg.provenance import record_of
from paravg.sync.tensors import mean

log = logging.getLogger(__name__)


EMA_CHOICES = ("candidate", "final", "none")


COMBINE_MINIBATCH = 512


@torch.no_grad()
def recompute_batchnorm_stats(model: AcousticModel, archive: EgsArchive) -> None:
    """Kaldi's ``RecomputeStats`` on every frame of ``archive`` (module docstring); the
    model is left in eval (test) mode. A no-op for a model without batch-norm."""
    batchnorms = model.batchnorms()
    if not batchnorms:
        return
    for bn in batchnorms:
        bn.zero_stats()
    model.set_dropout_proportion(0.0)
    model.train()
    batches = all_minibatches(archive, model.left_context, model.right_context, COMBINE_MINIBATCH)
    for mb in batches:
        eg_outputs(model, mb)
    model.eval()


def combine_objective(file_dict: dict, archive: EgsArchive) -> float:
    """Average log-prob per frame of a model on every frame of the combine egs, scored as
    ``nnet3-combine``'s ``ComputeObjf`` with its defaults: dropout off, batch-norm in
    training mode (each minibatch normalised by its own statistics)."""
    model = build_model(file_dict)
    if getattr(model, "objective", "xent") == "chain":  # nnet3-chain-combine: the chain objf
        from paravg.chain.train import chain_subset_stats

        return chain_subset_stats(model, archive.prefix, batchnorm_test_mode=False)["chain_objf"]
    batches = all_minibatches(archive, model.left_context, model.right_context, COMBINE_MINIBATCH)
    stats = evaluate_minibatches(model, batches, torch.device("cpu"), batchnorm_test_mode=False)
    return stats.logprob


def with_recomputed_stats(file_dict: dict, archive: EgsArchive) -> dict:
    """``file_dict`` with its batch-norm statistics recomputed on ``archive`` (the chosen
    model; ``nnet3-combine`` calls ``RecomputeStats`` on it); unchanged without batch-norm."""
    model = build_model(file_dict)
    if not model.batchnorms():
        return file_dict
    recompute_batchnorm_stats(model, archive)
    state = {k: v.detach().clone().contiguous() for k, v in model.state_dict().items()}
    return {**file_dict, "state_dict": state}


@torch.no_grad()
def combine_models(
    model_paths: Sequence[str | Path],
    combine_prefix: str | Path,
    max_objective_evaluations: int,
    model_out: str | Path,
    summary_out: str | Path,
    ema_path: str | Path | None = None,
    ema_choice: str = "candidate",
) -> dict:
    """Pick the best uniform average of the newest models (and, by ``ema_choice``, the
    EMA model ``ema_path`` instead); write it and a summary."""
    if ema_choice not in EMA_CHOICES:
        raise ValueError(f"combine.ema must be one of {EMA_CHOICES}, got {ema_choice!r}")
    newest_first = list(reversed(list(model_paths)))
    files = [load_model_file(p) for p in newest_first]
    archive = EgsArchive(combine_prefix)
    n_total = len(files)
    step = math.ceil(n_total / max_objective_evaluations)
    evaluated = {}
    best_n, best_objf, best_sd = 0, -math.inf, None
    for n in range(1, n_total + 1):
        if not (n == 1 or n == n_total or (n - 1) % step == 0):
            continue
        sd = mean([f["state_dict"] for f in files[:n]])
        objf = combine_objective({**files[0], "state_dict": sd}, archive)
        evaluated[n] = objf
        log.info("average of newest %d models: objective %.5f", n, objf)
        if objf > best_objf:
            best_n, best_objf, best_sd = n, objf, sd
    combined = {**files[0], "state_dict": best_sd, "meta": {"combined_models": best_n}}
    summary = {
        "candidates": [str(p) for p in newest_first],
        "objective_by_num_models": {str(k): v for k, v in evaluated.items()},
        "num_models": best_n,
        "objective": best_objf,
        "newest_alone": evaluated[1],
        "combined": {"num_models": best_n, "objective": best_objf},
        "chosen": "combined",
    }
    if ema_path is not None and ema_choice != "none":
        ema = load_model_file(ema_path)
        ema_objf = combine_objective(ema, archive)
        log.info("EMA model %s: objective %.5f (combination %.5f)", ema_path, ema_objf, best_objf)
        summary["ema"] = {"path": str(ema_path), "objective": ema_objf, "choice": ema_choice}
        if ema_choice == "final" or ema_objf > best_objf:
            combined = {**ema, "meta": {"combined_models": "EMA", "ema": str(ema_path)}}
            summary.update(chosen="ema", objective=ema_objf)
    combined = with_recomputed_stats(combined, archive)
    summary |= record_of("combine", {model_out: save_torch_atomic(model_out, combined)})
    write_json_atomic(summary_out, summary)
    return summary
