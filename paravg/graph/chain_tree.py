"""The chain model's context-dependent tree on a lang's phones, for its decode graph.

The chain tree (``model.chain.tree: biphone``, :mod:`paravg.chain.tree`) asks about chain
phones ``1 … K`` (chain phone ``k + 1`` is target ``k``, the base phone
``target_phones[k]``), while the graph's lang has word-position variants (``aa_B``,
``aa_E``, ``aa_I``, ``aa_S``; ``sil`` and its variants), numbered in ``phones.txt``. Kaldi
builds the tree on the lang's own phones, the variants of a base phone sharing a root
(``roots.int``) so that its questions are asked of them all alike; here the tree's
phone-valued keys (the context positions ``0 … N − 1``, not the pdf-class key ``−1``)
are rewritten so that a variant answers as its base phone's chain phone:

* ``SplitEventMap``'s yes-set: each chain phone replaced by all its lang variants (phone
  0, the utterance boundary of ``fstcomposecontext``, stays 0);
* ``TableEventMap``: entry ``v`` of the new table is the old entry of ``v``'s chain phone.

The rewritten tree maps every lang phone window to the pdf the chain tree gives the
corresponding chain phone window, so the graph's pdfs are the network's outputs
(:func:`chain_tree_transition_model` checks the count); ``make_hclg`` then composes the
context transducer at the tree's width and central position (2 and 1: left biphone), as
``utils/mkgraph.sh`` does with a chain ``tree``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from paravg.errors import DataError
from paravg.gmm.event_map import ConstantEventMap, EventMap, SplitEventMap, TableEventMap
from paravg.graph.lang import Lang, base_phone


def lang_to_chain_phones(lang: Lang, target_phones: Sequence[str]) -> dict[int, int]:
    """Lang phone id -> chain phone (target index + 1) of every real (non-``<eps>``,
    non-disambiguation) phone of ``lang``; raises for a phone that is not a target."""
    target = {p: k for k, p in enumerate(target_phones)}
    out, unknown = {}, []
    for name, i in lang.phones.items():
        if name[0] in "<#":
            continue
        k = target.get(base_phone(name))
        if k is None:
            unknown.append(name)
        else:
            out[i] = k + 1
    if unknown:
        raise DataError(f"lang phones {unknown[:10]} are not chain targets {list(target)[:10]}")
    return out


def remap_tree_phones(
    emap: EventMap | None, to_chain: Mapping[int, int], phone_keys: Sequence[int]
) -> EventMap | None:
    """``emap`` with its phone-valued keys (``phone_keys``) asked of lang phones: a lang
    phone ``v`` answers as chain phone ``to_chain[v]`` (0 as 0)."""
    if emap is None or isinstance(emap, ConstantEventMap):
        return emap
    variants: dict[int, list[int]] = {0: [0]}
    for v, c in to_chain.items():
        variants.setdefault(c, []).append(v)
    if isinstance(emap, SplitEventMap):
        yes, no = (remap_tree_phones(m, to_chain, phone_keys) for m in (emap.yes, emap.no))
        if emap.key not in phone_keys:
            return SplitEventMap(emap.key, emap.yes_set, yes, no)
        yes_set = sorted(v for c in emap.yes_set for v in variants.get(c, ()))
        return SplitEventMap(emap.key, tuple(yes_set), yes, no)
    if isinstance(emap, TableEventMap):
        table = [remap_tree_phones(m, to_chain, phone_keys) for m in emap.table]
        if emap.key not in phone_keys:
            return TableEventMap(emap.key, tuple(table))
        chain_of = {0: 0, **to_chain}
        size = max(chain_of) + 1
        new = [table[chain_of[v]] if v in chain_of and chain_of[v] < len(table) else None
               for v in range(size)]  # fmt: skip
        return TableEventMap(emap.key, tuple(new))
    raise TypeError(f"unknown EventMap {type(emap).__name__}")


def chain_tree_transition_model(
    lang: Lang, topo_text: str, tree_path: str | Path, target_phones: Sequence[str]
):
    """(ContextDependency over ``lang``'s phones, TransitionModel over ``topo_text``,
    context width, central position) of the chain ``tree`` file at ``tree_path``; raises
    unless the lang's transition model has the tree's pdfs."""
    import kaldi_hmm_gmm

    from paravg.gmm.tree_io import context_dependency_bytes, kaldi_context_dependency, read_tree
    from paravg.graph.topology import read_topology

    tree, width, central = read_tree(Path(tree_path))
    chain_num_pdfs = _num_leaves(tree)
    remapped = remap_tree_phones(tree, lang_to_chain_phones(lang, target_phones), range(width))
    ctx = kaldi_context_dependency(context_dependency_bytes(remapped, width, central))
    trans = kaldi_hmm_gmm.TransitionModel(ctx, read_topology(topo_text))
    if trans.num_pdfs != chain_num_pdfs:
        raise DataError(
            f"{tree_path}: the lang's chain transition model has {trans.num_pdfs} pdfs, the "
            f"chain tree {chain_num_pdfs} (phones of the tree missing from the lexicon?)"
        )
    return ctx, trans, width, central


def _num_leaves(emap: EventMap | None) -> int:
    """1 + the largest pdf (``ConstantEventMap`` answer) of a tree."""

    def answers(m):
        if isinstance(m, ConstantEventMap):
            yield m.answer
        elif isinstance(m, SplitEventMap):
            yield from answers(m.yes)
            yield from answers(m.no)
        elif isinstance(m, TableEventMap):
            for sub in m.table:
                yield from answers(sub)

    return 1 + max(answers(emap), default=-1)
