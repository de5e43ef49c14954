"""A run's chain setup from its frame targets, and the supervision of its egs archives:
the steps of Kaldi's ``local/chain/run_tdnn.sh`` before training (``gen_topo.py``, the
tree, ``chain-est-phone-lm``, ``chain-make-den-fst``) and ``steps/nnet3/chain/get_egs.sh``'s
supervision part.

* :func:`prepare_chain` (the ``chain_den`` rule): the chain topology over phones
  ``1 … num_targets`` (target ``k`` is phone ``k + 1``; phone 1, target 0, is silence),
  the tree (``model.chain.tree``): ``monophone`` (``MonophoneContextDependency``: pdfs
  ``2 (p − 1)`` forward and ``2 (p − 1) + 1`` self-loop) or ``biphone``
  (:func:`paravg.chain.tree.build_chain_tree` from the train set's targets and features,
  ``build_tree.sh --context-width=2 --central-position=1`` with at most
  ``model.chain.num_leaves`` pdfs, written as Kaldi's binary ``tree``), the phone LM of
  the training targets' phone runs, the den and normalisation FSTs. Files in ``DIR``:
  ``topo``, ``phone_lm.fst``, ``den.fst``, ``normalization.fst``, ``info.json``
  (``num_pdfs``, the network's outputs; ``num_phones``, ``tree``, the phone LM's and the
  den FST's sizes), and ``tree`` for the biphone tree. On GMM alignments
  (``data.targets: gmm``, ``lang_dir``: Kaldi's chain lang is the GMM lang with the
  chain topology) the chain phones are the lang's phones (position-dependent, sil first,
  its ids), the frame labels its per-frame phones (``ali-to-phones --per-frame``, read as
  phone − 1 by :class:`FrameTargets`), and the tree, biphone or monophone, is a file.
* :func:`archive_supervision` (the ``chain_sup`` rule, one per egs archive or subset):
  the weighted supervision of every eg of a paravg egs archive, rows in the archive's
  order (so the egs stage's split and shuffle serve chain egs unchanged): eg
  ``<utt>-<first_frame>`` with ``F`` frames gets output frames
  ``first_frame / f …`` (:class:`paravg.chain.egs.ChunkSupervisor`), written as
  :class:`paravg.chain.egs.SupervisionTable` files beside the archive.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from paravg.chain.egs import ChunkSupervisor, SupervisionTable, output_frames, targets_to_phones
from paravg.chain.phone_lm import LanguageModelOptions, estimate_phone_lm
from paravg.chain.supervision import SupervisionOptions
from paravg.errors import DataError
from paravg.io import read_json, write_json_atomic, write_text_atomic

CHAIN_FILES = ("topo", "phone_lm.fst", "den.fst", "normalization.fst", "info.json")
#: ``model.chain.tree`` values (the monophone tree needs no file; the biphone one is ``tree``)
CHAIN_TREES = ("monophone", "biphone")


@dataclass
class ChainSetup:
    """The models a chain job needs: tree, transition model, den and normalisation FSTs."""

    num_phones: int
    num_pdfs: int
    ctx_dep: object
    trans_model: object
    den_fst: object
    normalization_fst: object


def _models(num_phones: int, ctx_dep=None):
    """(tree, transition model) over chain phones ``1 … num_phones``: ``ctx_dep`` (a tree
    read from ``tree``), or the monophone tree when None. The chain topology is one entry
    for every phone (the silence / non-silence split only orders its phone list), so it
    is the same for the targets' phones and a lang's."""
    import kaldi_hmm_gmm

    from paravg.chain.topology import chain_topology

    topo = chain_topology(list(range(2, num_phones + 1)), [1])
    if ctx_dep is None:
        classes = list(topo.get_phone_to_num_pdf_classes())
        phones = list(range(1, num_phones + 1))
        ctx_dep = kaldi_hmm_gmm.monophone_context_dependency(phones, classes)
    return ctx_dep, kaldi_hmm_gmm.TransitionModel(ctx_dep, topo)


def shared_monophone_tree(phones):
    """``gmm-init-mono --shared-phones``'s tree for a lang's chain phones
    (:class:`paravg.chain.topology.ChainPhones` with a ``lang_dir``): one forward and one
    self-loop pdf per line of ``phones/sets.int`` (a base phone's position variants
    share them: 2 pdfs per set, set ``s`` gets ``2s`` and ``2s + 1``)."""
    import kaldi_hmm_gmm

    from paravg.gmm.questions import read_int_sets

    sets = read_int_sets(Path(phones.lang_dir) / "phones" / "sets.int")
    covered = sorted(p for s in sets for p in s)
    if covered != list(range(1, phones.num_phones + 1)):
        raise DataError(
            f"{phones.lang_dir}/phones/sets.int: its sets must hold every real phone "
            f"1 … {phones.num_phones} once"
        )
    classes = list(phones.topology().get_phone_to_num_pdf_classes())
    return kaldi_hmm_gmm.monophone_context_dependency_shared(sets, classes)


def prepare_chain(
    frame_targets: Iterable[Sequence[int]],
    num_targets: int,
    out_dir: str | os.PathLike,
    lm_opts: LanguageModelOptions | None = None,
    tree: str = "monophone",
    num_leaves: int = 0,
    tree_utterances: Iterable[tuple] | None = None,
    frame_subsampling_factor: int = 3,
    tree_thresh: float = 300.0,
    lang_dir: str | os.PathLike | None = None,
) -> dict:
    """Write the chain setup of targets ``0 … num_targets − 1`` to ``out_dir``; returns
    its ``info.json``. ``tree`` ``biphone`` grows the tree from ``tree_utterances``
    ((frame targets, features) pairs) with at most ``num_leaves`` leaves, splitting while
    a split gains more than ``tree_thresh`` (build-tree's ``--thresh``).

    ``lang_dir``: the chain phones are that lang's (``data.targets: gmm``: the GMM
    lang; target ``k`` is its phone ``k + 1``, ``num_targets`` its real phones,
    :class:`paravg.chain.topology.ChainPhones`): the biphone tree is grown with its
    roots, questions and context-independent phones, the monophone tree shares a
    base phone's pdfs among its position variants (:func:`shared_monophone_tree`), and
    either is written to ``tree`` (``info.json``'s ``tree_file``)."""
    from paravg.chain.den_fst import create_denominator_fst
    from paravg.chain.den_graph import normalization_fst
    from paravg.chain.topology import ChainPhones

    phones = ChainPhones(num_targets) if lang_dir is None else ChainPhones.of_lang(lang_dir)
    if lang_dir is not None and phones.num_phones != num_targets:
        raise DataError(
            f"chain: {lang_dir} has {phones.num_phones} real phones, num_targets {num_targets}"
        )
    if num_targets < 1:
        raise DataError(f"chain: num_targets must be >= 1, got {num_targets}")
    if tree not in CHAIN_TREES:
        raise DataError(f"chain: model.chain.tree {tree!r} is not one of {CHAIN_TREES}")
    if tree == "biphone" and (tree_utterances is None or num_leaves < 1):
        raise DataError("chain: a biphone tree needs the features and num_leaves >= 1")
    sentences = []
    for targets in frame_targets:
        t = np.asarray(targets)
        if len(t) and (t.min() < 0 or t.max() >= num_targets):
            raise DataError(f"chain: targets outside 0..{num_targets - 1}")
        if len(t):
            sentences.append(targets_to_phones(t)[0])
    if not sentences:
        raise DataError("chain: no training targets for the phone LM")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    ctx_dep = None
    if tree == "biphone":
        from paravg.chain.tree import build_chain_tree

        ctx_dep, _built = build_chain_tree(
            tree_utterances,
            phones,
            num_leaves,
            frame_subsampling_factor,
            out / "tree",
            thresh=tree_thresh,
        )
    elif lang_dir is not None:
        ctx_dep = shared_monophone_tree(phones)
        tmp = out / ".tree.tmp"
        ctx_dep.write(True, str(tmp))
        tmp.replace(out / "tree")
    ctx_dep, trans_model = _models(num_targets, ctx_dep)
    lm, _ = estimate_phone_lm(sentences, lm_opts)
    den, _ = create_denominator_fst(lm, ctx_dep, trans_model)
    write_text_atomic(out / "topo", phones.topo_text())
    lm.write(str(out / "phone_lm.fst"))
    den.write(str(out / "den.fst"))
    normalization_fst(den).write(str(out / "normalization.fst"))
    info = {
        "num_phones": num_targets,
        "num_pdfs": int(trans_model.num_pdfs),
        "tree": tree,
        "phone_lm_states": int(lm.num_states),
        "den_states": int(den.num_states),
    }
    if lang_dir is not None:  # the frame labels are the lang's phone ids, the tree a file
        info.update({"lang_dir": str(lang_dir), "frame_labels": "phones", "tree_file": True})
    write_json_atomic(out / "info.json", info)
    return info


def chain_models(chain_dir: str | os.PathLike):
    """(tree, transition model) of the setup :func:`prepare_chain` wrote: its ``tree``
    file (biphone, or any tree made on a lang), else the monophone tree."""
    d = Path(chain_dir)
    info = read_json(d / "info.json")
    ctx_dep = None
    if info.get("tree", "monophone") == "biphone" or info.get("tree_file"):
        from paravg.gmm.tree_io import load_kaldi_tree

        ctx_dep = load_kaldi_tree(d / "tree")
    return _models(int(info["num_phones"]), ctx_dep)


def load_chain(chain_dir: str | os.PathLike) -> ChainSetup:
    """The :class:`ChainSetup` that :func:`prepare_chain` wrote."""
    import kaldifst

    d = Path(chain_dir)
    info = read_json(d / "info.json")
    ctx_dep, trans_model = chain_models(d)
    fsts = [kaldifst.StdVectorFst.read(str(d / n)) for n in ("den.fst", "normalization.fst")]
    if any(f is None for f in fsts):
        raise DataError(f"{d}: den.fst / normalization.fst cannot be read")
    return ChainSetup(int(info["num_phones"]), int(info["num_pdfs"]), ctx_dep, trans_model, *fsts)


class FrameTargets(Mapping):
    """A frame-label table read as the chain stage's targets (target ``k`` is chain phone
    ``k + 1``): the table itself (``data.targets: data``: the phone targets), or, where
    the setup's ``info.json`` has ``frame_labels: phones`` (``data.targets: gmm``), the
    GMM stage's ``ali-to-phones --per-frame`` (lang phone ids ``p``) as ``p − 1``."""

    def __init__(self, table, offset: int = 0) -> None:
        self.table, self.offset = table, int(offset)

    @classmethod
    def of(cls, table, info: Mapping) -> FrameTargets:
        return cls(table, 1 if info.get("frame_labels") == "phones" else 0)

    def __getitem__(self, key: str) -> np.ndarray:
        vec = np.asarray(self.table[key])
        if self.offset and vec.size and int(vec.min()) < self.offset:
            raise DataError(f"{self.where(key)}: phone id {int(vec.min())} (<eps>?) in a frame")
        return vec - self.offset if self.offset else vec

    def __iter__(self):
        return iter(self.table)

    def __len__(self) -> int:
        return len(self.table)

    def __contains__(self, key: object) -> bool:
        return key in self.table

    def where(self, key: str) -> str:
        where = getattr(self.table, "where", None)
        return where(key) if where else f"utterance {key!r}"


def _split_key(key: str) -> tuple[str, int]:
    utt, _, first = key.rpartition("-")
    if not utt or not first.lstrip("-").isdigit():
        raise DataError(f"eg key {key!r} is not <utt>-<first_frame>")
    return utt, int(first)


def archive_supervision(
    keys: Sequence[str],
    widths: Sequence[int],
    targets: Mapping[str, np.ndarray],
    setup: ChainSetup,
    opts: SupervisionOptions,
) -> SupervisionTable:
    """The supervision table of egs ``keys`` (``<utt>-<first_frame>``) of ``widths``
    frames each (one output-frame count per table: Kaldi merges egs of one structure)."""
    f = opts.frame_subsampling_factor
    frames = {output_frames(w, f) for w in widths}
    if len(frames) > 1:
        raise DataError(f"chain egs of several output lengths {sorted(frames)}")
    num_out = frames.pop() if frames else 1
    chunkers: dict[str, ChunkSupervisor] = {}
    fsts = []
    for key in keys:
        utt, first = _split_key(key)
        if utt not in chunkers:
            if utt not in targets:
                raise DataError(f"eg {key}: utterance {utt} has no targets")
            chunkers[utt] = ChunkSupervisor(
                targets[utt], setup.ctx_dep, setup.trans_model, setup.normalization_fst, opts
            )
        fsts.append(chunkers[utt].chunk(first, num_out))
    return SupervisionTable.from_fsts(fsts, num_out)
