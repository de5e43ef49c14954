"""The chain tree rebuilt from alignments, as ``steps/nnet3/chain/build_tree.sh
--frame-subsampling-factor 3 --context-opts "--context-width=2 --central-position=1"``
(left-biphone, the chain recipes' default), with the GMM stage's tree builder
(:func:`paravg.gmm.train_deltas.grow_tree`).

build_tree.sh's steps, and what is here:

1. ``gen_topo.py`` and a monophone model with the chain topology; ``convert-ali
   --frame-subsampling-factor 3`` of the alignments to it, and the features subsampled
   to match (``subsample-feats --n=3``): here each utterance's frame targets (target
   ``k`` is chain phone ``k + 1``, :mod:`paravg.chain.prepare`) are read at input frames
   0, 3, 6, … and the features with them; a phone no sampled frame falls in is dropped
   (Kaldi's ``ConvertAlignment`` redistributes the phones' subsampled lengths so that
   each keeps a frame where the utterance is long enough: a difference on phones shorter
   than 3 frames). Within a phone the first subsampled frame is pdf-class 0 (the forward
   pdf-class; the chain topology is read with ``reorder``), the others pdf-class 1 (the
   self-loop's).
2. ``acc-tree-stats --context-width=2 --central-position=1 --ci-phones=<silence>``:
   per frame, its phone's window (left phone, phone; 0 at the start) and pdf-class
   (:func:`paravg.gmm.tree_stats.accumulate_tree_stats`), silence context-independent.
3. ``cluster-phones``, ``compile-questions``, ``build-tree --max-leaves=num_leaves`` with
   ``roots.int`` (one ``shared split`` root per phone) and the chain ``topo``, on a lang
   dir of the chain phones written here (:func:`chain_lang_dir`). On GMM alignments
   (``data.targets: gmm``) the chain phones are the GMM lang's
   (:class:`paravg.chain.topology.ChainPhones`): its ``sets.int``, ``roots.int`` (a base
   phone's word-position variants share a root) and ``extra_questions.int``, its
   ``context_indep`` phones as ``--ci-phones``, as build_tree.sh reads ``$lang``.

The result is a kaldi-hmm-gmm ``ContextDependency`` (written in Kaldi's binary tree
format, :mod:`paravg.gmm.tree_io`) that the den FST, the supervision and the transition
model take as they take the monophone tree (``tests/unit/chain/test_biphone.py``).
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterable
from pathlib import Path

import numpy as np

from paravg.errors import DataError

CONTEXT_WIDTH, CENTRAL_POSITION = 2, 1
SILENCE_PHONE = 1  # chain phone 1 = target 0 (silence, as the egs' targets)


def subsampled_alignment(frame_targets, frame_subsampling_factor: int):
    """(phones, pdf-classes) of one utterance at ⌈T/f⌉ frames: the chain phone of input
    frames 0, f, 2f, … and its pdf-class (0 at a phone's first frame, 1 after)."""
    t = np.asarray(frame_targets, dtype=np.int64)[:: int(frame_subsampling_factor)] + 1
    first = np.ones(len(t), dtype=bool)
    first[1:] = t[1:] != t[:-1]
    return t, np.where(first, 0, 1)


def chain_tree_stats(
    utterances: Iterable[tuple], frame_subsampling_factor: int = 3, ci_phones=(SILENCE_PHONE,)
):
    """acc-tree-stats (left-biphone) summed over ``utterances``: (frame targets, features
    (T, D)) pairs, at the subsampled rate."""
    from paravg.gmm.tree_stats import accumulate_tree_stats, context_windows, sum_tree_stats

    f = int(frame_subsampling_factor)
    parts = []
    for targets, feats in utterances:
        if len(targets) == 0:
            continue
        phones, classes = subsampled_alignment(targets, f)
        x = np.asarray(feats, dtype=np.float64)[::f][: len(phones)]
        if len(x) != len(phones):
            raise DataError(f"{len(targets)} frame targets but {len(feats)} feature frames")
        starts = np.flatnonzero(classes == 0)
        runs = phones[starts]  # the utterance's phone sequence at the subsampled rate
        windows = context_windows(runs.tolist(), CONTEXT_WIDTH, CENTRAL_POSITION)
        which = np.cumsum(classes == 0) - 1  # each frame's phone in ``runs``
        parts.append(accumulate_tree_stats(windows[which], classes, x, CENTRAL_POSITION,
                                           ci_phones))  # fmt: skip
    if not parts:
        raise DataError("chain tree: no utterance with targets")
    return sum_tree_stats(parts)


def chain_lang_dir(phones, out_dir: str | os.PathLike) -> Path:
    """The files build-tree reads, for the chain phones ``phones`` (a
    :class:`paravg.chain.topology.ChainPhones`, or a phone count: chain phones ``1 … n``,
    phone 1 silence): ``phones/sets.int`` and ``phones/roots.int`` (``shared split`` per
    phone, as prepare_lang.sh writes them; a lang's own, with its
    ``extra_questions.int``, when the phones are a lang's) and the chain ``topo``."""
    import shutil

    from paravg.chain.topology import ChainPhones
    from paravg.io import write_text_atomic

    if isinstance(phones, int):
        phones = ChainPhones(phones)
    d = Path(out_dir)
    (d / "phones").mkdir(parents=True, exist_ok=True)
    if phones.lang_dir is not None:
        lang = Path(phones.lang_dir) / "phones"
        for name in ("sets.int", "roots.int", "extra_questions.int"):
            if (lang / name).is_file():
                shutil.copyfile(lang / name, d / "phones" / name)
    else:
        ids = range(1, phones.num_phones + 1)
        write_text_atomic(d / "phones" / "sets.int", "".join(f"{p}\n" for p in ids))
        write_text_atomic(d / "phones" / "roots.int", "".join(f"shared split {p}\n" for p in ids))
    write_text_atomic(d / "topo", phones.topo_text())
    return d


def build_chain_tree(
    utterances: Iterable[tuple],
    num_phones,
    num_leaves: int,
    frame_subsampling_factor: int = 3,
    tree_path: str | os.PathLike | None = None,
    thresh: float = 300.0,
):
    """(kaldi-hmm-gmm ``ContextDependency``, :class:`paravg.gmm.build_tree.BuiltTree`) of
    the left-biphone chain tree with at most ``num_leaves`` leaves (its pdfs), written
    to ``tree_path`` in Kaldi's format when given; a split is kept while it gains more
    than ``thresh`` in log-likelihood (build-tree's ``--thresh``, 300: on little data
    the tree stays at one leaf per phone). ``num_phones``: a phone count (chain phones
    ``1 … n`` of the targets) or a :class:`paravg.chain.topology.ChainPhones` (a lang's:
    its roots, questions and context-independent phones)."""
    from paravg.chain.topology import ChainPhones
    from paravg.gmm.train_deltas import grow_tree
    from paravg.gmm.tree_io import context_dependency_bytes, kaldi_context_dependency, write_tree

    phones = ChainPhones(num_phones) if isinstance(num_phones, int) else num_phones
    stats = chain_tree_stats(utterances, frame_subsampling_factor, phones.silence)
    with tempfile.TemporaryDirectory() as tmp:
        built = grow_tree(stats, chain_lang_dir(phones, tmp), num_leaves, thresh=thresh)
    if tree_path is not None:
        write_tree(Path(tree_path), built.tree, CONTEXT_WIDTH, CENTRAL_POSITION)
    data = context_dependency_bytes(built.tree, CONTEXT_WIDTH, CENTRAL_POSITION)
    return kaldi_context_dependency(data), built
