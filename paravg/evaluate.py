"""Evaluation of a model on a whole data set (frame accuracy and cross-entropy).

The log-posteriors come from :func:`paravg.decode.posteriors.utterance_log_posteriors`,
the function the decoder uses too: edges padded by repetition (as the egs are), and one
online i-vector, row ⌊t / period⌋, for every input frame of output frame t's receptive
field (as in training: Kaldi's ``ReplaceIndex(ivector, t, 0)``). Targets may differ from
the feature length by at most ``tolerance`` frames (Kaldi's ``targets_length_tolerance``);
the shorter length is used.
Cross-entropy is −(1/N) Σ_t log p(label_t | x), in nats per frame. A model of
frame-subsampling-factor f is scored at its output frames t = 0, f, 2f, … (the frames it
is trained on and decoded at): N = ⌈n/f⌉ per utterance of n frames, the targets at those
frames (Kaldi's LFR targets: the full-rate alignment subsampled).

Before the first forward pass every target id is checked against the model's outputs
(with ``data.num_targets: 0`` the training set's largest id decides the output count,
and an eval set may hold a larger one): the error names the utterance and its place in
the user's targets file (the prepared dir's ``origin``), never a raw index error.
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import torch

from paravg.data import read_origin
from paravg.decode.posteriors import utterance_log_posteriors
from paravg.errors import DataError
from paravg.io import read_json, write_json_atomic
from paravg.kaldi_io import load_scp
from paravg.nnet.model_file import build_model, load_model_file
from paravg.nnet.objective import ObjectiveStats

log = logging.getLogger(__name__)


def check_target_ids(targets, num_outputs: int, prepared_dir: Path, model_path) -> None:
    """Raise :class:`DataError` unless every target id is below the model's outputs."""
    origin = read_origin(prepared_dir)
    for utt in targets:
        vec = np.asarray(targets[utt])
        if vec.size and int(vec.max()) >= num_outputs:
            bad = int(vec.max())
            where = origin.targets_of(utt) if origin else targets.where(utt)
            raise DataError(
                f"{where}: target id {bad} at frame {int(np.argmax(vec == bad))}, but the "
                f"model {model_path} has {num_outputs} outputs (ids 0..{num_outputs - 1}; "
                "with data.num_targets: 0 the training set's largest id sets the count: "
                "set data.num_targets to the number of pdfs)"
            )


@torch.no_grad()
def evaluate_set(
    model_path: str | Path,
    feats_scp: str | Path,
    targets_scp: str | Path,
    out_path: str | Path,
    ivectors_scp: str | Path | None = None,
    period_path: str | Path | None = None,
    tolerance: int = 2,
    chain_dir: str | Path | None = None,
) -> dict:
    """Write ``eval/<set>.json`` with frame accuracy, cross-entropy and counts; for a
    chain model (``chain_dir``: the run's ``<egs>/chain``) the chain objective instead
    (:func:`_write_chain_result`)."""
    model = build_model(load_model_file(model_path)).eval()
    feats = load_scp(feats_scp)
    targets = load_scp(targets_scp)
    ivecs = load_scp(ivectors_scp) if (ivectors_scp and model.ivector_dim) else None
    period = int(Path(period_path).read_text().strip()) if ivecs is not None else 0
    chain = getattr(model, "objective", "xent") == "chain"
    if chain:
        if chain_dir is None:
            raise ValueError("a chain model is evaluated with its run's chain setup (chain_dir)")
        # the frame targets are phones 0 … K − 1 (with data.targets gmm: the set's
        # per-frame lang phones 1 … K, read as p − 1); the chain model's outputs are the
        # chain tree's pdfs (2K for the monophone tree, the leaves of the biphone one)
        from paravg.chain.prepare import FrameTargets

        info = read_json(Path(chain_dir) / "info.json")
        targets = FrameTargets.of(targets, info)
        if model.num_targets != int(info["num_pdfs"]):
            raise DataError(
                f"model {model_path} has {model.num_targets} outputs but the chain tree of "
                f"{chain_dir} has {info['num_pdfs']} pdfs (trained with another tree?)"
            )
        check_target_ids(targets, int(info["num_phones"]), Path(targets_scp).parent, model_path)
    else:
        check_target_ids(targets, model.num_targets, Path(targets_scp).parent, model_path)
    skipped = []

    def outputs():
        """(utt, output rows at t = 0, f, 2f, … < n, the n frame targets) of every
        utterance with targets."""
        for utt in sorted(feats.keys()):
            if utt not in targets:
                skipped.append(utt)
                continue
            x = feats[utt]
            y = np.asarray(targets[utt])
            if abs(len(y) - len(x)) > tolerance:
                raise DataError(
                    f"{targets_scp}: utterance {utt} has {len(y)} targets but {len(x)} "
                    f"feature frames (tolerance {tolerance})"
                )
            n = min(len(y), len(x))
            iv = None
            if ivecs is not None:
                if utt not in ivecs:
                    raise DataError(f"{ivectors_scp}: no i-vectors for utterance {utt}")
                iv = ivecs[utt]
            kept = -(-n // model.frame_subsampling_factor)  # outputs t = 0, f, 2f, … < n
            yield utt, utterance_log_posteriors(model, x, iv, period)[:kept], y[:n]

    if chain:
        return _write_chain_result(model, model_path, chain_dir, outputs(), skipped, out_path)
    stats = ObjectiveStats()
    f = model.frame_subsampling_factor
    for _utt, logp, y in outputs():
        labels = torch.from_numpy(y[::f].astype(np.int64))
        stats.add(logp, labels, torch.ones(len(labels)))
    if stats.weight == 0:
        raise DataError(f"{feats_scp}: no utterance with targets to evaluate")
    result = {
        "frame_accuracy": stats.accuracy,
        "cross_entropy": -stats.logprob,
        "frames": int(stats.weight),
        "utterances": len(feats) - len(skipped),
        "skipped_without_targets": skipped,
        "model": str(model_path),
    }
    write_json_atomic(out_path, result)
    log.info(
        "%s: accuracy %.4f, cross-entropy %.4f over %d frames",
        out_path,
        result["frame_accuracy"],
        result["cross_entropy"],
        result["frames"],
    )
    return result


def _write_chain_result(model, model_path, chain_dir, outputs, skipped, out_path) -> dict:
    """A chain model's ``eval/<set>.json``: ``chain_objf`` per output frame
    (:func:`paravg.chain.evaluate.chain_evaluate_utterances`, what Kaldi's
    ``nnet3-chain-compute-prob`` computes); ``frame_accuracy`` and ``cross_entropy`` are
    null (not defined for a model without softmax whose pdfs are not the targets), and
    ``not_scored`` says so (the results table prints n/a); so is ``chain_objf`` when no
    utterance of the set has a supervision the den graph allows (held-out phone n-grams
    that the training alignments' phone LM lacks: ``skipped_no_den_path``)."""
    from paravg.chain.evaluate import chain_evaluate_utterances

    stats = chain_evaluate_utterances(model, chain_dir, outputs)
    why = (
        "frame accuracy and cross-entropy: a chain model's output has no softmax and its "
        "pdfs (the chain tree's, two per phone) are not the frame targets; chain_objf is "
        "the chain objective per output frame (nnet3-chain-compute-prob) of each "
        "utterance's supervision from its targets"
    )
    if stats["frames"] == 0:  # e.g. every utterance has a phone n-gram the LM has not
        why += (
            f"; not computed here: no utterance has a supervision the den graph allows "
            f"({len(stats['skipped_no_den_path'])} with phone n-grams the training "
            f"alignments' phone LM does not have, {len(stats['skipped_too_short'])} too "
            "short): the valid_diag chain objective (diag/<t>.json) is the held-out figure"
        )
        log.warning("%s: %s", out_path, why)
    result = {
        "objective": "chain",
        "chain_objf": stats["chain_objf"] if stats["frames"] else None,
        "chain_l2": stats["chain_l2"] if stats["frames"] else None,
        "frame_accuracy": None,
        "cross_entropy": None,
        "not_scored": why,
        "frames": stats["frames"],
        "utterances": stats["utterances"],
        "failed_utterances": stats["failed_utterances"],
        "skipped_too_short": stats["skipped_too_short"],
        "skipped_no_den_path": stats["skipped_no_den_path"],
        "skipped_without_targets": skipped,
        "model": str(model_path),
    }
    write_json_atomic(out_path, result)
    if stats["frames"]:
        log.info("%s: chain objective %.4f per frame over %d output frames",
                 out_path, result["chain_objf"], result["frames"])  # fmt: skip
    return result
