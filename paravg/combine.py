"""Final combination (``nnet3-combine``, Kaldi since Dec 2017; kaldi-recipe.md §4.8).

The candidate models (``Schedule.models_to_combine``) are ordered newest first; the
uniform average of the newest n models is evaluated on the ``combine`` egs (all frames,
average log-prob per frame) for n = 1, then every ⌈N / max_objective_evaluations⌉
additions and at n = N. The n with the best objective wins (ties keep the smaller n:
the comparison is strict). No per-layer weights are learned.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from pathlib import Path

import torch

from paravg.egs import EgsArchive, all_frame_minibatches
from paravg.io import save_torch_atomic, write_json_atomic
from paravg.nnet.objective import evaluate_minibatches
from paravg.nnet.tdnn import build_model, load_model_file
from paravg.sync.tensors import mean

log = logging.getLogger(__name__)


def combine_models(
    model_paths: Sequence[str | Path],
    combine_prefix: str | Path,
    max_objective_evaluations: int,
    model_out: str | Path,
    summary_out: str | Path,
) -> dict:
    """Pick the best uniform average of the newest models; write it and a summary."""
    torch.set_grad_enabled(False)
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
        model = build_model({**files[0], "state_dict": sd})
        batches = all_frame_minibatches(archive, model.left_context, model.right_context, 512)
        objf = evaluate_minibatches(model, batches, torch.device("cpu")).logprob
        evaluated[n] = objf
        log.info("average of newest %d models: objective %.5f", n, objf)
        if objf > best_objf:
            best_n, best_objf, best_sd = n, objf, sd
    combined = {**files[0], "state_dict": best_sd, "meta": {"combined_models": best_n}}
    save_torch_atomic(model_out, combined)
    summary = {
        "candidates": [str(p) for p in newest_first],
        "objective_by_num_models": {str(k): v for k, v in evaluated.items()},
        "num_models": best_n,
        "objective": best_objf,
        "newest_alone": evaluated[1],
    }
    write_json_atomic(summary_out, summary)
    return summary
