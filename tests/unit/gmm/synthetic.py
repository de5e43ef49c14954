"""Synthetic tree statistics whose best questions are known (shared by the gmm tests)."""

from __future__ import annotations

import numpy as np

from paravg.gmm.tree_stats import TreeStats, accumulate_tree_stats, context_windows

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


# 3-state triphones: silence 1 and phones 2-7, the recipe of train_deltas.sh's tree
TRI_SIL, TRI_PHONES = 1, (2, 3, 4, 5, 6, 7)
TRI_TOPO = """<Topology>
<TopologyEntry>
<ForPhones> 1 2 3 4 5 6 7 </ForPhones>
<State> 0 <PdfClass> 0 <Transition> 0 0.75 <Transition> 1 0.25 </State>
<State> 1 <PdfClass> 1 <Transition> 1 0.75 <Transition> 2 0.25 </State>
<State> 2 <PdfClass> 2 <Transition> 2 0.75 <Transition> 3 0.25 </State>
<State> 3 </State>
</TopologyEntry>
</Topology>
"""


def triphone_utterance(rng):
    """Phones of one utterance and its per-frame (window, pdf-class, feature) rows: the
    mean depends on the phone, the state and whether the left phone is a 'vowel' (2-4)."""
    phones = [TRI_SIL, *rng.choice(TRI_PHONES, size=8), TRI_SIL]
    windows = context_windows(phones, 3, 1)
    rows = []
    for window in windows:
        for pdf_class in range(3):
            for _ in range(rng.integers(2, 5)):
                vowel_left = window[0] in (2, 3, 4)
                mean = (
                    4.0 * window[1]
                    + pdf_class
                    + (2.5 if vowel_left and window[1] != TRI_SIL else 0)
                )
                rows.append((window, pdf_class, mean + rng.normal(size=3)))
    return rows


def triphone_job_stats(rng, utterances: int = 60) -> TreeStats:
    """acc-tree-stats of one job of :func:`triphone_utterance` utterances (silence CI)."""
    rows = [r for _ in range(utterances) for r in triphone_utterance(rng)]
    contexts = np.array([r[0] for r in rows])
    pdf_classes = np.array([r[1] for r in rows])
    feats = np.array([r[2] for r in rows])
    return accumulate_tree_stats(contexts, pdf_classes, feats, 1, ci_phones=[TRI_SIL])
