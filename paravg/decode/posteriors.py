"""An utterance's log-posteriors log p(pdf | x_t) with the trained network: the one
function evaluation and decoding share.

Edges are padded by repeating the first and last frames by the model's left/right
context, as the egs are. With i-vectors, **one i-vector serves every input frame of an
output frame's receptive field**, as in training, where each eg carries one i-vector for
all its frames (Kaldi: ``ReplaceIndex(ivector, t, 0)``): output frame t uses online
i-vector row ⌊t / period⌋. The utterance is therefore cut into chunks of ``period``
output frames (Kaldi's decodable likewise uses one i-vector per chunk, its last frame's:
with chunks of ``period`` frames that is the same row); each chunk is computed over its
own padded window [k·period − left, (k+1)·period + right) with its row broadcast over
the window, all chunks in one batch.

Without i-vectors the whole utterance is one window.
"""

from __future__ import annotations

import numpy as np
import torch


def padded_index(start: int, stop: int, num_frames: int) -> np.ndarray:
    """Frame indices start..stop-1 clamped into [0, num_frames) (edge repetition)."""
    return np.clip(np.arange(start, stop), 0, num_frames - 1)


def utterance_log_posteriors(
    model, feats: np.ndarray, ivectors: np.ndarray | None = None, period: int = 0
) -> torch.Tensor:
    """(T, C) log p(c | x_t) of one utterance of T frames.

    ``ivectors``: the utterance's online i-vector rows (⌈T/period⌉ × dim, every
    ``period`` frames), or None for a model without i-vector input.
    """
    left, right = model.left_context, model.right_context
    num_frames = feats.shape[0]
    feats32 = np.ascontiguousarray(feats, dtype=np.float32)
    if ivectors is None or not model.ivector_dim:
        x = torch.from_numpy(feats32[padded_index(-left, num_frames + right, num_frames)])
        return model(x[None], None)[0]
    if period <= 0:
        raise ValueError("an i-vector period > 0 is needed with i-vectors")
    num_chunks = -(-num_frames // period)
    starts = np.arange(num_chunks) * period
    window = period + left + right
    index = np.stack([padded_index(s - left, s - left + window, num_frames) for s in starts])
    x = torch.from_numpy(feats32[index])  # (K, window, D)
    rows = np.minimum(np.arange(num_chunks), len(ivectors) - 1)
    iv = torch.from_numpy(np.ascontiguousarray(ivectors[rows], dtype=np.float32))
    out = model(x, iv)  # (K, period, C)
    return out.reshape(-1, out.shape[-1])[:num_frames]


def pseudo_log_likelihoods(
    log_posteriors: torch.Tensor, log_priors: torch.Tensor, acoustic_scale: float
) -> np.ndarray:
    """acoustic_scale · (log p(pdf | x) − log prior(pdf)), float32 (T, num_pdfs).

    Kaldi's nnet3 decodables divide by the priors (``nnet3-am-adjust-priors``) and scale
    by ``--acoustic-scale`` (0.1) before the decoder adds graph costs.
    """
    return (acoustic_scale * (log_posteriors - log_priors[None, :])).float().numpy()
