"""Graphs from a user's Kaldi files (``graph.source: lang`` or ``hclg``), checked first.

``hclg``: a ready ``HCLG.fst`` + ``words.txt`` + the GMM ``final.mdl`` whose
transition-ids the graph carries (text form: ``gmm-copy --binary=false``). They are
checked (the model parses; the graph's input labels are transition-ids of that model and
its output labels words of ``words.txt``) and copied into the graph dir.

``lang``: a Kaldi lang dir + ``G.fst`` or an ARPA file + that ``final.mdl`` (+ its
``tree``). With ``tree`` (Kaldi's binary ``tree`` file from ``build-tree``: a triphone
tree of ``train_deltas.sh``, or any context width), the tree is read
(:func:`paravg.gmm.tree_io.load_kaldi_tree`), a ``TransitionModel(tree, topo)`` is built
over the lang's ``topo``, and its transition-id -> pdf map must equal ``final.mdl``'s
(``gmm-init-model`` makes the transition model from exactly these two); the context
transducer then takes the tree's N and P (``mkgraph.sh`` reads them with ``tree-info``).
Without ``tree``, the tree is rebuilt the way ``gmm-init-mono
--shared-phones=phones/sets.int`` makes it (one pdf per phone set and pdf class) and
compared the same way, so a context-dependent ``final.mdl`` given without its tree is
reported rather than silently decoded with wrong pdfs. ``phones.txt`` of the lang and the
phones of the transition model must agree. Then HCLG is built as for the demo
(:func:`paravg.graph.hclg.make_hclg`).
"""

from __future__ import annotations

import shutil
import struct
from dataclasses import replace
from pathlib import Path

import numpy as np

from paravg.errors import DataError
from paravg.graph.lang import check_lang_dir, read_lang, read_symbol_table
from paravg.graph.load import read_transition_model
from paravg.io import write_json_atomic, write_text_atomic


def _copy(src: Path, dst: Path) -> None:
    dst.parent.mkdir(parents=True, exist_ok=True)
    tmp = dst.with_name(f".{dst.name}.tmp")
    shutil.copyfile(src, tmp)
    tmp.replace(dst)


def check_phones_agree(phones_txt: Path, model_path: Path, topo_phones: list[int]) -> None:
    """Every non-disambiguation phone of ``phones.txt`` has a topology in the model and
    vice versa (Kaldi's ``utils/validate_lang.pl`` + ``gmm-info`` comparison)."""
    table = read_symbol_table(phones_txt)
    lang_ids = {i for p, i in table.items() if p != "<eps>" and not p.startswith("#")}
    model_ids = set(topo_phones)
    if lang_ids != model_ids:
        only_lang = sorted(lang_ids - model_ids)[:10]
        only_model = sorted(model_ids - lang_ids)[:10]
        raise DataError(
            f"{phones_txt} and {model_path} disagree: phone ids only in phones.txt "
            f"{only_lang}, only in the model's topology {only_model}"
        )


def check_hclg_labels(hclg, num_tids: int, words: dict[str, int], path: Path) -> None:
    """Input labels are transition-ids ≤ num_tids, output labels ids of words.txt."""
    max_word = max(words.values())
    for state in range(hclg.num_states):
        for arc in _arcs(hclg, state):
            if arc.ilabel > num_tids:
                raise DataError(
                    f"{path}: state {state} has input label {arc.ilabel}, but the "
                    f"transition model has {num_tids} transition-ids (graph and final.mdl "
                    "do not belong together)"
                )
            if arc.olabel > max_word:
                raise DataError(
                    f"{path}: state {state} has output label {arc.olabel}, not in words.txt"
                )


def _arcs(fst, state):
    import kaldifst

    it = kaldifst.ArcIterator(fst, state)
    while not it.done:
        yield it.value
        it.next()


def import_hclg(
    hclg_fst: str | Path, words_txt: str | Path, final_mdl: str | Path, out_dir: str | Path
) -> dict:
    """Check a user's HCLG + words.txt + final.mdl and copy them into ``out_dir``."""
    from paravg.graph.hclg import read_fst

    hclg_fst, words_txt, final_mdl, out = (
        Path(hclg_fst),
        Path(words_txt),
        Path(final_mdl),
        Path(out_dir),
    )
    words = read_symbol_table(words_txt)
    info = read_transition_model(final_mdl)
    hclg = read_fst(hclg_fst)
    check_hclg_labels(hclg, len(info.tid_to_pdf) - 1, words, hclg_fst)
    _copy(hclg_fst, out / "HCLG.fst")
    _copy(words_txt, out / "words.txt")
    _copy(final_mdl, out / "transition.mdl")
    boundary = hclg_fst.parent / "phones" / "word_boundary.int"
    if boundary.is_file():
        _copy(boundary, out / "phones" / "word_boundary.int")
    summary = {"source": "hclg", "num_pdfs": info.num_pdfs, "hclg": str(hclg_fst)}
    write_json_atomic(out / "graph.json", summary)
    return summary


def _user_tree(tree: Path, topo_text: str):
    """(ContextDependency, TransitionModel over ``topo_text``, N, P) of a Kaldi binary
    ``tree`` file; a file that is not one is reported naming it."""
    import kaldi_hmm_gmm

    from paravg.gmm.tree_io import load_kaldi_tree, read_tree
    from paravg.graph.topology import read_topology

    try:
        _emap, width, central = read_tree(tree)
        ctx = load_kaldi_tree(tree)
    except (ValueError, IndexError, struct.error) as exc:
        raise DataError(
            f"{tree}: not a Kaldi binary tree file (as build-tree writes it): {exc}"
        ) from exc
    return ctx, kaldi_hmm_gmm.TransitionModel(ctx, read_topology(topo_text)), width, central


def build_from_lang(
    lang_dir: str | Path,
    lm: str | Path,
    final_mdl: str | Path,
    tree: str | Path | None,
    out_dir: str | Path,
    options=None,
) -> dict:
    """HCLG from a user's lang dir + G.fst/ARPA + final.mdl (+ tree; see the module doc)."""
    from paravg.graph.grammar import arpa_to_g, check_arpa_words
    from paravg.graph.hclg import GraphOptions, make_hclg, read_fst, write_graph
    from paravg.graph.topology import tid_to_pdf, transition_model, transition_model_text

    lang_dir, lm, final_mdl, out = Path(lang_dir), Path(lm), Path(final_mdl), Path(out_dir)
    check_lang_dir(lang_dir)
    if tree is not None and not Path(tree).is_file():
        raise DataError(f"{tree}: tree file does not exist")
    if not final_mdl.is_file():
        raise DataError(f"{final_mdl}: model file does not exist")
    info = read_transition_model(final_mdl)
    check_phones_agree(lang_dir / "phones.txt", final_mdl, info.phones)
    lang = read_lang(lang_dir)
    if not lm.is_file():
        raise DataError(f"{lm}: language model file does not exist")
    if lm.suffix == ".fst":
        read_fst(lm)  # a G.fst cut short fails here, naming it, before anything is written
    else:
        check_arpa_words(lm, lang_dir / "words.txt")
    lexicon = read_fst(lang_dir / "L_disambig.fst")
    topo_text = (lang_dir / "topo").read_text()
    options = options or GraphOptions()
    if tree is None:
        _topo, ctx, trans_model = transition_model(lang, topo_text)
        built_from = f"the monophone tree of {lang_dir / 'phones/sets.int'}"
        hint = " (a context-dependent model? give its tree: graph.tree)"
    else:
        ctx, trans_model, width, central = _user_tree(Path(tree), topo_text)
        options = replace(options, context_width=width, central_position=central)
        built_from = f"{tree} (context width {width}, central position {central})"
        hint = " (final.mdl and tree do not belong together)"
    ours = tid_to_pdf(trans_model)
    if len(ours) != len(info.tid_to_pdf) or not np.array_equal(ours[1:], info.tid_to_pdf[1:]):
        raise DataError(
            f"{final_mdl}: its transition-id -> pdf map ({len(info.tid_to_pdf) - 1} "
            f"transition-ids) is not the one of {built_from} over {lang_dir / 'topo'} "
            f"({len(ours) - 1} transition-ids){hint}"
        )
    out.mkdir(parents=True, exist_ok=True)
    if lm.suffix == ".fst":
        _copy(lm, out / "G.fst")
    else:
        arpa_to_g(lm, lang_dir / "words.txt", out / "G.fst")
    hclg, sizes = make_hclg(
        lexicon,
        read_fst(out / "G.fst"),
        lang.disambig_phone_ids,
        ctx,
        trans_model,
        options,
    )
    write_text_atomic(out / "transition.mdl", transition_model_text(trans_model, topo_text))
    for name in ("words.txt", "phones.txt", "phones/word_boundary.int"):
        _copy(lang_dir / name, out / name)
    if tree is not None:
        _copy(Path(tree), out / "tree")
    summary = {
        "source": "lang",
        "num_pdfs": trans_model.num_pdfs,
        "context_width": options.context_width,
        "central_position": options.central_position,
        "sizes": sizes,
    }
    write_graph(hclg, out / "HCLG.fst", summary, out / "graph.json")
    return summary
