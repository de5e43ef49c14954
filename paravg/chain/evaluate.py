"""A chain model on a whole eval set: the chain objective per output frame, where a
cross-entropy model's evaluation gives frame accuracy and cross-entropy
(:mod:`paravg.evaluate` calls :func:`chain_evaluate_utterances` for a ``model.objective:
chain`` model).

Frame accuracy and cross-entropy are not defined for a chain model: its ``output`` has no
softmax and its pdfs (forward and self-loop pdf of each phone, the chain tree's) are not the
frame targets, which are allowed to move by the tolerances. What Kaldi computes for held-out
chain data is ``nnet3-chain-compute-prob``'s objective (``nnet-chain-diagnostics.cc``),
and that is what this gives on each eval utterance as one sequence:

    objf = Σ_u (log P_num(u) − log Z_den(u)) / Σ_u T_u

with the numerator of the utterance's whole supervision (its frame targets as phones
``k + 1`` within ``left_tolerance`` / ``right_tolerance`` frames, subsampled × f,
weighted by the normalisation FST: :class:`paravg.chain.egs.ChunkSupervisor` over the
utterance's ``T_u`` output frames) and the leaky-HMM denominator of the run's den graph
(:mod:`paravg.chain.denominator`); no l2 term (``chain_l2`` is reported beside it), the
output at frames 0, f, 2f, … (:func:`paravg.decode.posteriors.utterance_log_posteriors`,
the decoder's). Utterances shorter than f frames have no supervision and are skipped
(listed); a non-finite objective counts as Kaldi's −10 per frame and is counted.

The den graph's phone LM allows only the phone n-grams the training alignments have
(``chain-est-phone-lm``: no smoothing, no unigram state), so a held-out utterance with an
unseen n-gram has no path in it: its supervision cannot be composed with the normalisation
FST and, as ``nnet3-chain-get-egs`` does with such an utterance ("Failed to add weight to
supervision"), it is skipped and listed (``skipped_no_den_path``). The objective is that
of the others; how many were skipped is part of the result.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import torch

from paravg.chain.den_graph import DenominatorGraph
from paravg.chain.egs import ChunkSupervisor, SupervisionTable
from paravg.chain.objective import compute_chain_objf_and_deriv


@torch.no_grad()
def chain_evaluate_utterances(model, chain_dir, utterances: Iterable[tuple]) -> dict:
    """The chain objective of ``model`` over ``utterances`` ((utt, output rows (T_out, P)
    as a tensor, frame targets), one at a time); returns ``chain_objf``, ``chain_l2``,
    ``frames``, ``utterances``, ``failed_utterances``, ``skipped_too_short``,
    ``skipped_no_den_path``."""
    from paravg.chain.prepare import load_chain
    from paravg.chain.train import chain_options

    opts, sup_opts = chain_options(model.model_cfg)
    setup = load_chain(chain_dir)
    if setup.num_pdfs != model.num_targets:
        raise ValueError(
            f"{chain_dir}: the chain setup has {setup.num_pdfs} pdfs, the model "
            f"{model.num_targets} outputs"
        )
    den = DenominatorGraph.from_fst(setup.den_fst, setup.num_pdfs)
    objf = l2 = weight = 0.0
    failed, short, no_path, count = [], [], [], 0
    for utt, output, targets in utterances:
        chunker = ChunkSupervisor(
            np.asarray(targets), setup.ctx_dep, setup.trans_model, setup.normalization_fst,
            sup_opts,
        )  # fmt: skip
        if len(targets) < sup_opts.frame_subsampling_factor:
            short.append(utt)
            continue
        frames = min(chunker.num_output_frames(), output.shape[0])
        try:
            fst = chunker.chunk(0, frames)
        except ValueError:  # add_weight_to_supervision: no path the den graph allows
            no_path.append(utt)
            continue
        if fst is None:
            short.append(utt)
            continue
        table = SupervisionTable.from_fsts([fst], frames)
        x = output[:frames].to(torch.float32)[:, None, :]  # (T, 1, P)
        num = table.numerator_graph([0], setup.num_pdfs, x.dtype)
        obj = compute_chain_objf_and_deriv(opts, den, num, x)
        count += 1
        objf += obj.objf
        l2 += obj.l2_term
        weight += obj.weight
        if not obj.ok:
            failed.append(utt)
    w = weight or 1.0
    return {
        "chain_objf": objf / w,
        "chain_l2": l2 / w,
        "frames": int(weight),
        "utterances": count,
        "failed_utterances": failed,
        "skipped_too_short": short,
        "skipped_no_den_path": no_path,
    }
