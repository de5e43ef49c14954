"""Build the demo's decoding graphs (words for WER, phones for PER) in one directory each.

Layout of ``results/graph/<kind>/`` (``kind`` = ``words`` | ``phones``, and for chain
experiments ``chain_words`` | ``chain_phones``: the chain topology and tree,
``build_from_lexicon(..., chain=True)``), the interface the decoder and the Kaldi export
read (stable; see :mod:`paravg.graph.load`):

    lang/          Kaldi lang dir (phones.txt, words.txt, L.fst, L_disambig.fst, topo,
                   oov.txt, lexiconp*.txt, phones/{silence,nonsilence,disambig,sets,roots,
                   word_boundary,align_lexicon,...}.{txt,int,csl})
    lm.arpa        the bigram (Witten-Bell) the graph was built from
    G.fst          arpa2fst of lm.arpa (kaldilm, own process)
    HCLG.fst       the decoding graph (transition-ids in, word ids out)
    words.txt      = lang/words.txt;   phones.txt = lang/phones.txt
    phones/word_boundary.int            = lang/phones/word_boundary.int
    tree           the monophone tree (Kaldi binary, ContextDependency::Write)
    transition.mdl the transition model in Kaldi text form (first part of a final.mdl)
    graph.json     sizes, options, number of pdfs, build time

Words: the lexicon learnt from the training set (:mod:`paravg.graph.lexicon`), the
Witten-Bell word bigram of the training ``text``. Phones: every phone is a "word" (silence
too, in a lang without optional silence, as Kaldi's TIMIT recipe); the bigram is
estimated on the training targets (run-length collapsed); PER ignores silence.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Iterable, Sequence
from pathlib import Path

from paravg.corpus.phones import PHONES, SILENCE
from paravg.graph.arpa import phone_sequences, write_bigram_arpa
from paravg.graph.grammar import arpa_to_g
from paravg.graph.lang import Lang, make_lang, write_lang
from paravg.graph.lexicon import LexiconEntry, demo_lexicon, phone_lexicon, text_sentences
from paravg.io import write_text_atomic
from paravg.kaldi_io import load_scp


def _copy(src: Path, dst: Path) -> None:
    dst.parent.mkdir(parents=True, exist_ok=True)
    tmp = dst.with_name(f".{dst.name}.tmp")
    shutil.copyfile(src, tmp)
    tmp.replace(dst)


def build_from_lexicon(
    entries: Sequence[LexiconEntry],
    sentences: Iterable[Sequence[str]],
    out_dir: str | Path,
    options=None,
    target_phones: Sequence[str] = PHONES,
    sil_prob: float = 0.5,
    chain: bool = False,
    chain_tree: str | Path | None = None,
) -> dict:
    """lang dir, bigram ARPA, G.fst and HCLG.fst of a lexicon + training sentences
    (``sil_prob``: the lang's optional-silence probability, Kaldi's default 0.5).

    ``chain``: the graph of a chain model (``model.objective: chain``): the lang's topology
    is the chain one and the tree gives target k's phone the pdfs 2k (forward) and
    2k + 1 (self-loop), the chain network's outputs
    (:func:`paravg.graph.topology.chain_transition_model`); ``options`` then carry the
    chain recipes' scales (``mkgraph.sh --self-loop-scale 1.0``, transition scale 1.0).
    ``chain_tree``: the chain model's biphone ``tree`` file (``model.chain.tree:
    biphone``) instead of the monophone tree: its pdfs on the lang's phones
    (:func:`paravg.graph.chain_tree.chain_tree_transition_model`), the context
    transducer at its width and central position."""
    from dataclasses import replace

    from paravg.graph.hclg import GraphOptions, make_hclg, read_fst, write_graph
    from paravg.graph.topology import (
        chain_transition_model,
        check_pdfs_are_chain_targets,
        check_pdfs_are_targets,
        lang_topo_text,
        transition_model,
        transition_model_text,
    )

    options = options or GraphOptions()
    start = time.perf_counter()
    out = Path(out_dir)
    lang: Lang = make_lang(
        entries, [target_phones[0]], [p for p in target_phones[1:] if p != SILENCE]
    )
    if chain:
        topo_text, tree, trans_model = chain_transition_model(lang)
    else:
        topo_text = lang_topo_text(lang)
    write_lang(lang, out / "lang", topo_text, sil_prob)
    vocab = [w for w in lang.words if w[0] not in "<#"]
    lm = write_bigram_arpa(out / "lm.arpa", sentences, vocab)
    arpa_to_g(out / "lm.arpa", out / "lang" / "words.txt", out / "G.fst")
    if chain and chain_tree is not None:
        from paravg.graph.chain_tree import chain_tree_transition_model

        tree, trans_model, width, central = chain_tree_transition_model(
            lang, topo_text, chain_tree, target_phones
        )
        options = replace(options, context_width=width, central_position=central)
    elif chain:
        check_pdfs_are_chain_targets(lang, trans_model, target_phones)
    else:
        _topo, tree, trans_model = transition_model(lang, topo_text)
        check_pdfs_are_targets(lang, trans_model, target_phones)
    hclg, sizes = make_hclg(
        read_fst(out / "lang" / "L_disambig.fst"),
        read_fst(out / "G.fst"),
        lang.disambig_phone_ids,
        tree,
        trans_model,
        options,
    )
    tree_tmp = out / ".tree.tmp"
    tree.write(True, str(tree_tmp))
    tree_tmp.replace(out / "tree")
    write_text_atomic(out / "transition.mdl", transition_model_text(trans_model, topo_text))
    for name in ("words.txt", "phones.txt", "phones/word_boundary.int"):
        _copy(out / "lang" / name, out / name)
    summary = {
        "num_pdfs": trans_model.num_pdfs,
        "num_transition_ids": trans_model.num_transition_ids,
        "num_words": len(vocab),
        "lexicon_entries": len(entries),
        "lm": lm,
        "sizes": sizes,
        "options": vars(options),
        "sil_prob": sil_prob,
        **({"topology": "chain"} if chain else {}),
        **({"chain_tree": str(chain_tree)} if chain_tree is not None else {}),
        "build_seconds": round(time.perf_counter() - start, 3),
    }
    write_graph(hclg, out / "HCLG.fst", summary, out / "graph.json")
    return summary


def build_demo_word_graph(
    train_text: str | Path,
    train_ctm: str | Path,
    out_dir: str | Path,
    options=None,
    chain: bool = False,
    chain_tree: str | Path | None = None,
) -> dict:
    """The demo's word graph: learnt lexicon + word bigram of the training text (for a
    chain model with ``chain`` and ``chain_tree``: :func:`build_from_lexicon`)."""
    entries = demo_lexicon(train_text, train_ctm)
    sentences = (ws for ws in text_sentences(train_text) if ws)  # streamed
    return build_from_lexicon(
        entries, sentences, out_dir, options, chain=chain, chain_tree=chain_tree
    )


def build_phone_graph(
    train_targets_scp: str | Path,
    out_dir: str | Path,
    options=None,
    target_phones: Sequence[str] = PHONES,
    sil_prob: float = 0.0,
    chain: bool = False,
    chain_tree: str | Path | None = None,
) -> dict:
    """The PER graph: phones as words, phone bigram of the training alignments.

    As Kaldi's TIMIT recipe (``prepare_lang.sh --sil-prob 0``): no optional silence;
    silence is a "word" of the lexicon and of the bigram, so the graph models where it
    falls instead of offering it between any two phones (scoring removes it from both
    sides: PER counts non-silence phones). ``sil_prob`` > 0 gives the lang the optional
    silence of a word lang instead, and silence leaves the lexicon and the bigram.
    """
    targets = load_scp(train_targets_scp)
    silence_word = sil_prob == 0.0
    sentences = phone_sequences(
        (targets[u] for u in sorted(targets.keys())),
        target_phones,
        None if silence_word else target_phones[0],
    )
    return build_from_lexicon(
        phone_lexicon(target_phones, with_silence=silence_word),
        sentences,
        out_dir,
        options,
        target_phones,
        sil_prob,
        chain,
        chain_tree,
    )
