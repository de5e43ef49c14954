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

A model of frame-subsampling-factor f (a low frame rate) is evaluated only at output
frames t = 0, f, 2f, … < T, ⌈T/f⌉ of them, as Kaldi's decodables do with
``--frame-subsampling-factor f`` (``DecodableNnetSimple``: output frame i is input time
i·f, the context around it edge-padded): the network's forward with stride f computes
each layer only where those outputs need it. With i-vectors, chunk k still holds the
outputs t ∈ [k·period, (k+1)·period): its first is t_k = ⌈k·period / f⌉·f and each chunk's
window holds n = ⌈period / f⌉ outputs t_k, t_k + f, … (one more than the chunk has when f
does not divide the period; it is computed and dropped), so every chunk has the same
window length and all go in one batch.

A recurrent model (family ``tdnn_lstm``) is evaluated over the **whole utterance in one
window**: the recurrence runs from the utterance's first frame to its last, as Kaldi's
looped decoding computes it (``nnet3-latgen-faster-looped``, online2 and vosk: state
carried across chunks, i.e. unlimited left context; reference §4.2). Its i-vector is
per input time: the LDA row at time t (padded times included) reads online row
clamp(⌊t / period⌋) (per-frame i-vectors), which is Kaldi's looped
``Round(ivector, chunk)`` with the chunk equal to the i-vector period. The differences
from Kaldi, exactly:

* looped decoding (§4.2): its i-vector period is forced to ``frames-per-chunk`` (here the
  online period, 10 frames by default); otherwise the same computation (the chunk size
  does not change a forward recurrence's outputs);
* chunked decoding (``nnet3-latgen-faster``, §4.1): Kaldi restarts the recurrence every
  ``frames-per-chunk`` output frames with ``extra-left-context`` (40 in the recipes;
  ``extra-left-context-initial`` 0 at the start) frames of warm-up and one i-vector per
  chunk (its middle frame's); here there is no restart and no warm-up limit;
* training sees each chunk with ``chunk_left_context`` frames of history and one
  i-vector per chunk (train_rnn.py's egs), so evaluation, priors' counterpart on the
  egs aside, sees longer histories than training (as Kaldi's looped decoding does).
"""

from __future__ import annotations

import numpy as np
import torch

from paravg.nnet.families import get_family


def padded_index(start: int, stop: int, num_frames: int) -> np.ndarray:
    """Frame indices start..stop-1 clamped into [0, num_frames) (edge repetition)."""
    return np.clip(np.arange(start, stop), 0, num_frames - 1)


def utterance_log_posteriors(
    model, feats: np.ndarray, ivectors: np.ndarray | None = None, period: int = 0
) -> torch.Tensor:
    """(⌈T/f⌉, C) log p(c | x_t) of one utterance of T frames at t = 0, f, 2f, … (f: the
    model's frame-subsampling-factor; every frame at f = 1).

    ``ivectors``: the utterance's online i-vector rows (⌈T/period⌉ × dim, every
    ``period`` frames), or None for a model without i-vector input.
    """
    left, right = model.left_context, model.right_context
    f = getattr(model, "frame_subsampling_factor", 1)
    num_frames = feats.shape[0]
    feats32 = np.ascontiguousarray(feats, dtype=np.float32)
    if ivectors is None or not model.ivector_dim:
        x = torch.from_numpy(feats32[padded_index(-left, num_frames + right, num_frames)])
        return model(x[None], None, stride=f)[0]
    if period <= 0:
        raise ValueError("an i-vector period > 0 is needed with i-vectors")
    if get_family(model.family).chunk_egs:  # one window, looped
        x = torch.from_numpy(feats32[padded_index(-left, num_frames + right, num_frames)])
        times = np.arange(-left, num_frames + right)
        rows = np.clip(np.floor_divide(times, period), 0, len(ivectors) - 1)
        iv = torch.from_numpy(np.ascontiguousarray(ivectors[rows], dtype=np.float32))
        return model(x[None], iv[None], stride=f)[0]
    num_chunks = -(-num_frames // period)
    chunk = np.arange(num_chunks)
    starts = -(-chunk * period // f) * f  # t_k, the chunk's first output (k·period at f = 1)
    per_chunk = -(-period // f)  # outputs in each chunk's window (period at f = 1)
    window = (per_chunk - 1) * f + 1 + left + right
    index = np.stack([padded_index(s - left, s - left + window, num_frames) for s in starts])
    x = torch.from_numpy(feats32[index])  # (K, window, D)
    rows = np.minimum(chunk, len(ivectors) - 1)
    iv = torch.from_numpy(np.ascontiguousarray(ivectors[rows], dtype=np.float32))
    out = model(x, iv, stride=f)  # (K, per_chunk, C)
    if f == 1:
        return out.reshape(-1, out.shape[-1])[:num_frames]
    times = starts[:, None] + f * np.arange(per_chunk)[None, :]
    keep = times < np.minimum((chunk + 1) * period, num_frames)[:, None]
    return out[torch.from_numpy(keep)]
