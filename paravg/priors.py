"""Priors and ``final.pt`` (``compute_average_posterior`` + ``nnet3-am-adjust-priors``).

The prior of pdf c is the average softmax posterior p(c | x) over all frames of a sample
of training egs (Kaldi: 10 jobs × 20000 egs), normalised to sum 1; it is stored in the
model as ``log_priors`` so a decoder can form the pseudo-log-likelihood
log p(c|x) − log prior(c). The archives are fully shuffled, so the first egs of each
archive are a random sample.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import torch

from paravg.egs import EgsArchive, all_frame_minibatches
from paravg.io import save_torch_atomic, write_json_atomic
from paravg.nnet.tdnn import build_model, load_model_file


def average_posterior(model, archives: Sequence[str | Path], num_egs: int) -> torch.Tensor:
    """Mean posterior over every frame of ``num_egs`` egs spread across ``archives``."""
    per_archive = max(1, num_egs // len(archives))
    total = torch.zeros(model.num_targets, dtype=torch.float64)
    frames = 0
    for prefix in archives:
        archive = EgsArchive(prefix)
        seen = 0
        for mb in all_frame_minibatches(archive, model.left_context, model.right_context, 128):
            take = min(mb.feats.shape[0], per_archive - seen)
            ivec = mb.ivectors[:take] if (mb.ivectors is not None and model.ivector_dim) else None
            post = model(mb.feats[:take], ivec).exp()
            total += post.reshape(-1, model.num_targets).sum(0).double()
            frames += post.shape[0] * post.shape[1]
            seen += take
            if seen >= per_archive:
                break
    return total / frames


def adjust_priors(
    model_in: str | Path,
    archives: Sequence[str | Path],
    num_egs: int,
    model_out: str | Path,
    summary_out: str | Path,
) -> dict:
    """Write ``final.pt`` = the combined model with priors, and a summary."""
    torch.set_grad_enabled(False)
    file_dict = load_model_file(model_in)
    model = build_model(file_dict)
    priors = average_posterior(model, archives, num_egs)
    priors = priors / priors.sum()
    old = file_dict["state_dict"]["log_priors"].double().exp()
    old = old / old.sum()
    kl = float((priors * (priors.clamp_min(1e-20).log() - old.clamp_min(1e-20).log())).sum())
    sd = dict(file_dict["state_dict"])
    sd["log_priors"] = priors.clamp_min(1e-20).log().float()
    save_torch_atomic(model_out, {**file_dict, "state_dict": sd})
    summary = {
        "combined_from": file_dict.get("meta", {}).get("combined_models"),
        "prior_egs": num_egs,
        "prior_entropy": float(-(priors * priors.clamp_min(1e-20).log()).sum()),
        "kl_from_previous_priors": kl,
    }
    write_json_atomic(summary_out, summary)
    return summary
