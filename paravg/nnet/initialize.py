"""The initial model ``0.pt`` (``train_dnn.py`` stages −3 and −1).

LDA statistics of the model's input vectors (spliced features and the i-vector) are
accumulated over all frames of at most 10 egs archives with rand-prune, the LDA-like
transform is estimated (:mod:`paravg.nnet.lda`) and fixed as the model's first layer,
and the trainable layers get Kaldi's seeded initialisation.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch

from paravg.egs import EgsArchive, EgsInfo, all_minibatches
from paravg.errors import ConfigError, DataError
from paravg.io import save_torch_atomic, write_json_atomic
from paravg.nnet.acoustic import AcousticModel
from paravg.nnet.lda import LdaStats, estimate_transform
from paravg.nnet.model_file import model_to_file_dict, new_model
from paravg.provenance import record_of

log = logging.getLogger(__name__)


def accumulate_lda_stats(
    model: AcousticModel,
    archives: Sequence[str | Path],
    rand_prune: float,
    seed: int,
    num_classes: int | None = None,
) -> LdaStats:
    """LDA statistics of ``model.lda_input`` over every labelled frame of ``archives``,
    the frames' targets the classes (``num_classes``, default the model's outputs)."""
    num_classes = num_classes or model.num_targets
    stats = LdaStats(model.lda_dim, num_classes)
    rng = np.random.default_rng(seed)
    left, right = -min(model.input_splice), max(model.input_splice)
    for prefix in archives:
        archive = EgsArchive(prefix)
        for mb in all_minibatches(archive, left, right, minibatch_size=512):
            ivec = mb.ivectors if model.ivector_dim else None
            with torch.no_grad():
                x = model.lda_input(mb.feats, ivec)  # (B, F, lda_dim)
            if mb.chunk is not None:  # chunk egs: the chunk's w frames, not its context
                w, chunk_left, _ = mb.chunk
                x = x[:, chunk_left - left : chunk_left - left + w]
            labels = mb.labels.reshape(-1).numpy()
            if labels.max(initial=0) >= num_classes:
                raise DataError(
                    f"{prefix}: target {labels.max()} >= num_targets {num_classes}; "
                    "expected every target below the model's output count"
                )
            stats.accumulate(
                x.reshape(-1, model.lda_dim).numpy(),
                labels,
                mb.weights.reshape(-1).numpy(),
                rand_prune,
                rng,
            )
    return stats


def init_model(
    info_path: str | Path,
    archives: Sequence[str | Path],
    model_cfg: dict,
    use_ivector: bool,
    srand: int,
    num_targets: int,
    model_out: str | Path,
    stats_out: str | Path,
    record: dict | None = None,
) -> dict:
    """Estimate the LDA-like transform, initialise the network, write ``0.pt``."""
    info = EgsInfo.load(info_path)
    num_targets = num_targets or info.num_targets
    ivector_dim = info.ivector_dim if use_ivector else 0
    model = new_model(model_cfg, info.feat_dim, ivector_dim, num_targets)
    left, right = model.left_context, model.right_context
    if left > info.left_context or right > info.right_context:
        raise ConfigError(
            f"the model's context ({left}, {right}) (from model.input_splice and "
            "model.hidden[].splice or model.tdnnf.time_strides, or an experiment's model "
            "override) exceeds the egs "
            f"context ({info.left_context}, {info.right_context}) of {info_path}: the egs "
            "must be rebuilt for this model config"
        )
    # the transform's classes are the egs' frame targets: the outputs of a cross-entropy
    # model; a chain model's outputs are its tree's pdfs, and its egs' targets may have
    # more classes (data.targets gmm: the GMM tree's pdfs), so it takes the larger count
    classes = num_targets
    if model_cfg.get("objective") == "chain":
        classes = max(num_targets, int(info.num_targets))
    stats = accumulate_lda_stats(
        model, archives, model_cfg["lda_rand_prune"], seed=srand, num_classes=classes
    )
    transform, offset = estimate_transform(
        stats, model_cfg["lda_within_class_factor"], model_cfg["lda_max_singular_value"]
    )
    with torch.no_grad():
        model.lda_weight.copy_(torch.from_numpy(transform).float())
        model.lda_bias.copy_(torch.from_numpy(offset).float())
    model.init_parameters(seed=srand)
    digest = save_torch_atomic(model_out, model_to_file_dict(model, {"iteration": 0}))
    summary = {
        "lda_dim": model.lda_dim,
        "lda_frames": float(stats.count.sum()),
        "classes_seen": int((stats.count > 0).sum()),
        "num_targets": num_targets,
        "ivector_dim": ivector_dim,
        "context": [left, right],
        "num_parameters": sum(p.numel() for p in model.parameters()),
        "lda_max_singular_value": float(np.linalg.svd(transform, compute_uv=False).max()),
    }
    summary.update(record or {})
    summary |= record_of("init_model", {model_out: digest})
    write_json_atomic(stats_out, summary)
    log.info("initial model: %s", summary)
    return summary
