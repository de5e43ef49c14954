"""A chain model's decode graph on a lang dir: ``utils/mkgraph.sh --self-loop-scale 1.0``
with the chain ``tree`` and the chain topology, as Kaldi's chain recipes build
``exp/chain/tree_sp/graph`` from ``data/lang`` (``data.targets: gmm``: the GMM lang, L
from the lexicon; the chain phones are its phones, :class:`paravg.chain.topology.ChainPhones`).

The tree is the run's ``<egs>/chain/tree`` (``chain_den``: the left-biphone tree, or the
monophone tree shared by each base phone's position variants), asked of the lang's own
phone ids, so no rewriting of its keys (the demo graph's :mod:`paravg.graph.chain_tree`
maps target phones to lang variants) is needed; the transition model is
:func:`paravg.chain.prepare.chain_models`'s, the one the den FST and the supervision use,
so the graph's pdfs are the network's outputs. ``HCLG = min(det(H ∘ C ∘ det(L ∘ G)))``
with C at the tree's context width and central position
(:func:`paravg.gmm.graph.lang_graph`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path

from paravg.errors import DataError


def chain_lang_graph(
    lang_dir: str | Path,
    chain_dir: str | Path,
    out_dir: str | Path,
    sentences: Iterable[Sequence[str]] | None = None,
    arpa: str | Path | None = None,
    transition_scale: float = 1.0,
    self_loop_scale: float = 1.0,
) -> dict:
    """HCLG of ``lang_dir`` with the chain setup of ``chain_dir`` (its ``tree``,
    ``info.json``) and G the bigram of ``sentences`` (or ``arpa``); ``graph.json``
    records ``topology: chain``, the chain tree and the options."""
    from paravg.chain.prepare import chain_models
    from paravg.chain.topology import ChainPhones
    from paravg.gmm.graph import lang_graph
    from paravg.gmm.tree_io import read_tree
    from paravg.io import read_json

    chain = Path(chain_dir)
    info = read_json(chain / "info.json")
    if not info.get("tree_file"):
        raise DataError(f"{chain}: the chain setup has no tree file (not made on a lang)")
    phones = ChainPhones.of_lang(lang_dir)
    if phones.num_phones != int(info["num_phones"]):
        raise DataError(
            f"{lang_dir}: {phones.num_phones} real phones, but the chain setup of {chain} "
            f"has {info['num_phones']} (made on another lang)"
        )
    ctx_dep, trans_model = chain_models(chain)
    _tree, width, central = read_tree(chain / "tree")
    options = {
        "transition_scale": transition_scale,
        "self_loop_scale": self_loop_scale,
        "context_width": width,
        "central_position": central,
    }
    summary = {
        "source": "gmm",
        "topology": "chain",
        "chain_tree": str(chain / "tree"),
        "options": options,
    }
    return lang_graph(
        lang_dir, ctx_dep, trans_model, phones.topo_text(), chain / "tree", out_dir, arpa,
        sentences, transition_scale, self_loop_scale, summary,
    )  # fmt: skip
