"""Synthetic tree statistics whose best questions are known (shared by the gmm tests)."""

from __future__ import annotations

import numpy as np

from paravg.gmm.tree_stats import TreeStats, accumulate_tree_stats

PHONES = (1, 2, 3, 4)
LEFT_CLASS = (1, 2)  # the left phone's class decides the mean


def left_class_stats(shift: dict[int, float], frames: int = 4000, seed: int = 0) -> TreeStats:
    """Triphone (N=3, P=1) stats of one pdf-class: the frames of central phone ``c`` have
    mean ``10·c`` plus ``shift[c]`` when the left phone is in LEFT_CLASS, unit variance;
    the right phone has no effect."""
    rng = np.random.default_rng(seed)
    contexts = rng.choice(PHONES, size=(frames, 3))
    central = contexts[:, 1]
    mean = 10.0 * central + np.where(
        np.isin(contexts[:, 0], LEFT_CLASS), [shift[c] for c in central], 0.0
    )
    feats = mean[:, None] + rng.normal(size=(frames, 2))
    return accumulate_tree_stats(contexts, np.zeros(frames, int), feats, central_position=1)
