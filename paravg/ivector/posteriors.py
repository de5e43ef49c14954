"""Pruned Gaussian posteriors, as Kaldi's ``VectorToPosteriorEntry`` (``src/hmm/posterior.cc``).

Per frame, from the log-likelihoods ``l_i`` of all Gaussians (``gmm-global-get-post``,
``OnlineIvectorFeature::UpdateStatsForFrames``):

1. ``m = max_i l_i``; keep the Gaussians with ``l_i > m + log(min_post)`` with value
   ``v_i = exp(l_i - m)`` (all of them if none qualifies or ``min_post == 0``);
2. sort by value, keep the top ``num_gselect``; ``tot = sum v_i``;
3. ``cutoff = min_post * tot``, computed once: drop the smallest value while more than one
   remains and it is below ``cutoff`` (``tot`` loses what is dropped);
4. posteriors ``v_i / tot``, then multiplied by ``scale`` (``posterior_scale``).

Posteriors are stored sparsely as ``(index, value)`` arrays of shape ``T x n``, with index
``-1`` and value 0 in unused slots.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass
class SparsePosteriors:
    """Per-frame pruned posteriors: ``index`` (int32, -1 = empty) and ``value`` arrays."""

    index: np.ndarray
    value: np.ndarray

    @property
    def num_frames(self) -> int:
        return self.index.shape[0]

    def to_dense(self, num_gauss: int) -> np.ndarray:
        """``T x num_gauss`` float64 matrix with zeros where pruned."""
        dense = np.zeros((self.num_frames, num_gauss))
        rows, cols = np.nonzero(self.index >= 0)
        dense[rows, self.index[rows, cols]] = self.value[rows, cols]
        return dense

    def scaled(self, scale: float) -> SparsePosteriors:
        return SparsePosteriors(self.index, self.value * scale)

    def subset(self, frames: np.ndarray | slice) -> SparsePosteriors:
        return SparsePosteriors(self.index[frames], self.value[frames])

    @staticmethod
    def concatenate(parts: list[SparsePosteriors], width: int) -> SparsePosteriors:
        """Stack per-utterance posteriors into one array pair of ``width`` columns."""
        idx = [_pad(p.index, width, -1) for p in parts]
        val = [_pad(p.value, width, 0.0) for p in parts]
        if not parts:
            return SparsePosteriors(np.zeros((0, width), np.int32), np.zeros((0, width)))
        return SparsePosteriors(np.concatenate(idx), np.concatenate(val))


def _pad(a: np.ndarray, width: int, fill) -> np.ndarray:
    if a.shape[1] == width:
        return a
    out = np.full((a.shape[0], width), fill, dtype=a.dtype)
    out[:, : a.shape[1]] = a
    return out


def posteriors_from_loglikes(
    loglikes: np.ndarray, num_gselect: int, min_post: float, scale: float = 1.0
) -> tuple[SparsePosteriors, np.ndarray]:
    """``VectorToPosteriorEntry`` on every row of ``loglikes`` (``T x I``).

    Returns the scaled posteriors (sorted by decreasing posterior within a frame) and the
    per-frame ``m + log(tot)`` that Kaldi returns (a pruned total log-likelihood).
    """
    if not (num_gselect > 0 and 0.0 <= min_post < 1.0):
        raise ValueError(
            f"need num_gselect > 0 and 0 <= min_post < 1, got {num_gselect}, {min_post}"
        )
    ll = np.asarray(loglikes, dtype=np.float64)
    num_gauss = ll.shape[1]
    n = min(num_gselect, num_gauss)
    order = np.argsort(-ll, axis=1, kind="stable")[:, :n]
    top = np.take_along_axis(ll, order, axis=1)
    best = top[:, :1]
    values = np.exp(top - best)
    if min_post > 0.0:
        qualifies = top > best + np.log(min_post)
        # A frame where nothing qualifies (only possible with non-finite values) keeps all.
        none = ~qualifies.any(axis=1)
        qualifies[none] = True
    else:
        qualifies = np.ones_like(values, dtype=bool)
    values = np.where(qualifies, values, 0.0)
    tot = values.sum(axis=1, keepdims=True)
    cutoff = min_post * tot
    keep = qualifies & (values >= cutoff)
    keep[:, 0] = True  # at least one entry always remains
    values = np.where(keep, values, 0.0)
    tot = values.sum(axis=1, keepdims=True)
    post = values / tot * scale
    index = np.where(keep, order, -1).astype(np.int32)
    return SparsePosteriors(index, post), best[:, 0] + np.log(tot[:, 0])
