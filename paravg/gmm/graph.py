"""The decode graph of the GMM path: ``utils/mkgraph.sh`` with the triphone tree, as
``HCLG = min(det(H ∘ C ∘ det(L ∘ G)))`` plus self-loops (:func:`paravg.graph.hclg.make_hclg`).

* ``L``: the GMM lang dir's ``L_disambig.fst`` (``prepare_lang.sh``);
* ``G``: an ARPA language model over its ``words.txt`` (``arpa2fst``, via kaldilm), or
  the Witten-Bell bigram of training sentences (:func:`paravg.graph.arpa.write_bigram_arpa`);
* ``C``: ``fstcomposecontext --context-size=N --central-position=P`` with the tree's N and
  P (3 and 1 for ``train_deltas.sh``'s tree): the input labels of CLG are phone windows;
* ``H``: ``make-h-transducer`` from those windows, the tree (``ContextDependency``) and the
  triphone transition model of the final ``.mdl``; ``add-self-loops --self-loop-scale``.

Written beside ``HCLG.fst``: ``G.fst``, the lang's ``words.txt``, ``phones.txt`` and
``phones/word_boundary.int``, the ``tree`` (Kaldi binary), the transition model in Kaldi's
text form (``transition.mdl``, as the demo graph writes it), the lang's ``phones/``
tables the export copies, and ``graph.json`` (the layout of :mod:`paravg.graph.build`).
"""

from __future__ import annotations

import shutil
from collections.abc import Iterable, Sequence
from pathlib import Path

from paravg.errors import DataError

# the lang's phone tables the export copies into its graph/ (paravg.export.layout)
PHONE_TABLES = ("word_boundary.int", "silence.csl", "nonsilence.csl", "disambig.int",
                "align_lexicon.int")  # fmt: skip


def gmm_graph(
    lang_dir: str | Path,
    model_path: str | Path,
    tree_path: str | Path,
    out_dir: str | Path,
    arpa: str | Path | None = None,
    sentences: Iterable[Sequence[str]] | None = None,
    transition_scale: float = 1.0,
    self_loop_scale: float = 0.1,
) -> dict:
    """HCLG of the GMM lang dir, an ARPA LM (or the bigram of ``sentences``, words not in
    the lexicon mapped to ``oov.txt``'s word) and the final triphone model + tree."""
    from paravg.gmm.model import GmmModel

    model = GmmModel.load(model_path)
    topo_text = (Path(lang_dir) / "topo").read_text()
    return lang_graph(
        lang_dir, model.ctx, model.trans, topo_text, tree_path, out_dir, arpa, sentences,
        transition_scale, self_loop_scale, {"source": "gmm"},
    )  # fmt: skip


def lang_graph(
    lang_dir: str | Path,
    ctx_dep,
    trans_model,
    topo_text: str,
    tree_path: str | Path,
    out_dir: str | Path,
    arpa: str | Path | None = None,
    sentences: Iterable[Sequence[str]] | None = None,
    transition_scale: float = 1.0,
    self_loop_scale: float = 0.1,
    summary: dict | None = None,
) -> dict:
    """``mkgraph.sh`` on a lang dir with any tree and transition model over its phones
    (the triphone GMM's, :func:`gmm_graph`, or a chain model's,
    :func:`paravg.chain.graph.chain_lang_graph`); ``tree_path`` the tree file (its
    context width and central position; copied beside the graph); ``topo_text`` the
    transition model's topology (``transition.mdl``); ``summary`` added to
    ``graph.json``."""
    from paravg.gmm.tree_io import read_tree
    from paravg.graph.arpa import write_bigram_arpa
    from paravg.graph.grammar import arpa_to_g
    from paravg.graph.hclg import GraphOptions, make_hclg, read_fst, write_graph
    from paravg.graph.lang import read_symbol_table
    from paravg.graph.topology import transition_model_text

    lang, out = Path(lang_dir), Path(out_dir)
    for name in ("L_disambig.fst", "words.txt", "phones.txt", "phones/disambig.int", "topo"):
        if not (lang / name).is_file():
            raise DataError(f"{lang}: not a lang dir for the GMM graph, missing {name}")
    out.mkdir(parents=True, exist_ok=True)
    words = read_symbol_table(lang / "words.txt")
    if arpa is None:
        if sentences is None:
            raise ValueError("a lang graph needs an ARPA file or training sentences")
        oov = (lang / "oov.txt").read_text().split()[0]
        vocab = [w for w in words if w not in ("<eps>", "#0", "<s>", "</s>")]
        mapped = ([w if w in words else oov for w in s] for s in sentences)  # streamed
        arpa = out / "lm.arpa"
        lm = write_bigram_arpa(arpa, mapped, vocab)
    else:
        lm = {"arpa": str(arpa)}
    arpa_to_g(arpa, lang / "words.txt", out / "G.fst")
    _tree, width, central = read_tree(Path(tree_path))
    disambig = [int(x) for x in (lang / "phones/disambig.int").read_text().split()]
    options = GraphOptions(transition_scale, self_loop_scale, width, central)
    hclg, sizes = make_hclg(
        read_fst(lang / "L_disambig.fst"), read_fst(out / "G.fst"), disambig, ctx_dep,
        trans_model, options,
    )  # fmt: skip
    (out / "transition.mdl").write_text(transition_model_text(trans_model, topo_text))
    (out / "phones").mkdir(exist_ok=True)
    for name in ("words.txt", "phones.txt", *(f"phones/{n}" for n in PHONE_TABLES)):
        if (lang / name).is_file():
            shutil.copyfile(lang / name, out / name)
    shutil.copyfile(tree_path, out / "tree")
    summary = {
        **(summary or {}),
        "num_pdfs": trans_model.num_pdfs,
        "context_width": width,
        "central_position": central,
        "lm": lm,
        "sizes": sizes,
    }
    write_graph(hclg, out / "HCLG.fst", summary, out / "graph.json")
    return summary
