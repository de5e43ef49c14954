"""Priors and ``final.pt`` (``compute_average_posterior`` + ``nnet3-am-adjust-priors``).

The prior of pdf c is the average softmax posterior p(c | x) over all frames of a sample
of training egs, normalised to sum 1; it is stored in the model as ``log_priors`` so a
decoder can form the pseudo-log-likelihood log p(c|x) − log prior(c).

The sample is Kaldi's (``steps/libs/nnet3/train/common.py: compute_average_posterior``):
``num_jobs_compute_prior`` = 10 jobs; job k (1..10) reads archive k, or archive 1 for
every job when there are fewer than 10 archives, and keeps
``nnet3-subset-egs --srand=k --n=prior_subset_size`` of it (a reservoir sample: every eg
when the archive has no more); the posteriors of every frame of every kept eg are summed
over all jobs. So up to 10 × ``prior_subset_size`` egs count, and with fewer than 10
archives the first archive counts 10 times (as 10 different subsets when it has more
than ``prior_subset_size`` egs). Job k's reservoir is seeded from (srand, k).

At a low frame rate (``model.frame_subsampling_factor`` f) the posteriors are those of
the network's outputs, eg frames k ≡ 0 (mod f) (:func:`paravg.nnet.objective.eg_outputs`):
the frames it is trained on and decoded at.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch

from paravg.egs import EgsArchive, all_minibatches
from paravg.egs.shuffle import reservoir_sample
from paravg.io import save_torch_atomic, write_json_atomic
from paravg.nnet.model_file import build_model, load_model_file
from paravg.provenance import record_of

NUM_JOBS_COMPUTE_PRIOR = 10  # Kaldi's --trainer.num-jobs-compute-prior
PRIOR_MINIBATCH = 128  # nnet3-merge-egs --minibatch-size=128 in compute_average_posterior


def prior_job_archives(num_archives: int, num_jobs: int = NUM_JOBS_COMPUTE_PRIOR) -> list[int]:
    """The archive (0-based) each prior job reads: job k reads archive k, or archive 0 for
    every job when ``num_jobs > num_archives`` (Kaldi's ``egs_part = 1``)."""
    if num_archives < 1:
        raise ValueError("no egs archives to estimate the priors from")
    return [0] * num_jobs if num_jobs > num_archives else list(range(num_jobs))


def prior_subset(num_egs: int, subset_size: int, srand: int, job: int) -> np.ndarray | None:
    """The egs job ``job`` (1-based) keeps, sorted; None = all of them."""
    if num_egs <= subset_size:
        return None
    rng = np.random.default_rng([srand, job])
    return np.sort(reservoir_sample(num_egs, subset_size, rng))


def posterior_sum(
    model, archive: EgsArchive, indices: np.ndarray | None
) -> tuple[torch.Tensor, int]:
    """Σ over every output frame of the egs ``indices`` (None = all) of p(c | x), and the
    frames."""
    from paravg.nnet.objective import eg_outputs

    total = torch.zeros(model.num_targets, dtype=torch.float64)
    frames = 0
    for mb in all_minibatches(
        archive, model.left_context, model.right_context, PRIOR_MINIBATCH, indices
    ):
        post = eg_outputs(model, mb)[0].exp()
        total += post.reshape(-1, model.num_targets).sum(0).double()
        frames += post.shape[0] * post.shape[1]
    return total, frames


def average_posterior(
    model,
    archives: Sequence[str | Path],
    subset_size: int,
    srand: int = 0,
    num_jobs: int = NUM_JOBS_COMPUTE_PRIOR,
) -> tuple[torch.Tensor, dict]:
    """Mean posterior over Kaldi's prior sample (module docstring) of ``archives`` (the
    first min(num_archives, 10) archive prefixes, in order); returns it and a summary.
    A job whose subset is a whole archive already summed reuses that sum."""
    total = torch.zeros(model.num_targets, dtype=torch.float64)
    frames, egs = 0, 0
    done: dict[int, tuple[torch.Tensor, int, int]] = {}
    jobs = prior_job_archives(len(archives), num_jobs)
    for job, a in enumerate(jobs, start=1):
        archive = EgsArchive(archives[a])
        indices = prior_subset(archive.num_egs, subset_size, srand, job)
        if indices is None and a in done:
            job_total, job_frames, job_egs = done[a]
        else:
            job_total, job_frames = posterior_sum(model, archive, indices)
            job_egs = archive.num_egs if indices is None else len(indices)
            if indices is None:
                done[a] = (job_total, job_frames, job_egs)
        total += job_total
        frames += job_frames
        egs += job_egs
    summary = {"prior_jobs": len(jobs), "prior_archives": sorted(set(jobs)), "prior_egs": egs}
    return total / frames, {**summary, "prior_frames": frames}


@torch.no_grad()
def adjust_priors(
    model_in: str | Path,
    archives: Sequence[str | Path],
    num_egs: int,
    model_out: str | Path,
    summary_out: str | Path,
    srand: int = 0,
) -> dict:
    """Write ``final.pt`` = the combined model with priors, and a summary. ``num_egs`` is
    Kaldi's ``prior_subset_size`` (egs per prior job)."""
    file_dict = load_model_file(model_in)
    model = build_model(file_dict)
    if getattr(model, "objective", "xent") == "chain":  # chain models have no priors
        return _no_priors(file_dict, model_out, summary_out)
    priors, sample = average_posterior(model, archives, num_egs, srand)
    priors = priors / priors.sum()
    old = file_dict["state_dict"]["log_priors"].double().exp()
    old = old / old.sum()
    kl = float((priors * (priors.clamp_min(1e-20).log() - old.clamp_min(1e-20).log())).sum())
    sd = dict(file_dict["state_dict"])
    sd["log_priors"] = priors.clamp_min(1e-20).log().float()
    digest = save_torch_atomic(model_out, {**file_dict, "state_dict": sd})
    summary = {
        **record_of("priors", {model_out: digest}),
        "combined_from": file_dict.get("meta", {}).get("combined_models"),
        "prior_subset_size": num_egs,
        **sample,
        "prior_entropy": float(-(priors * priors.clamp_min(1e-20).log()).sum()),
        "kl_from_previous_priors": kl,
    }
    write_json_atomic(summary_out, summary)
    return summary


def _no_priors(file_dict: dict, model_out: str | Path, summary_out: str | Path) -> dict:
    """A chain model's ``final.pt``: the combined model as it is (its ``log_priors`` stay
    zero: the chain output is the decoder's log-likelihood, acoustic scale 1.0)."""
    digest = save_torch_atomic(model_out, file_dict)
    summary = {
        **record_of("priors", {model_out: digest}),
        "combined_from": file_dict.get("meta", {}).get("combined_models"),
        "priors": "none (model.objective chain)",
    }
    write_json_atomic(summary_out, summary)
    return summary
