"""The chain graph with the biphone chain tree (``build_from_lexicon(..., chain=True,
chain_tree=...)``, ``model.chain.tree: biphone``): the tree's questions about chain phones
asked of the lang's word-position variants, the context transducer at width 2, central
position 1, the graph's pdfs the tree's; it decodes acoustics that score each phone's
biphone pdf to the spoken words."""

import numpy as np
import pytest

from paravg.corpus.phones import PHONE_IDS, PHONES
from paravg.decode.reference import GraphDecoder
from paravg.decode.search import SearchOptions
from paravg.gmm.event_map import PDF_CLASS_KEY, ConstantEventMap, SplitEventMap, TableEventMap
from paravg.graph.hclg import GraphOptions
from paravg.graph.load import load_graph

from .conftest import LEXICON, SENTENCES

K = len(PHONES)
T, AE = PHONE_IDS["t"] + 1, PHONE_IDS["ae"] + 1  # chain phones (target + 1)
SPLIT_PDF = 2 * K  # "t" after "ae": its own forward pdf


def biphone_tree():
    """Two pdfs a phone (2 (p − 1), 2 (p − 1) + 1) as the monophone chain tree, except
    that "t"'s forward pdf after "ae" is pdf 2K: 2K + 1 pdfs."""
    table = [None]
    for p in range(1, K + 1):
        forward = ConstantEventMap(2 * (p - 1))
        if p == T:
            forward = SplitEventMap(0, (AE,), ConstantEventMap(SPLIT_PDF), forward)
        table.append(TableEventMap(PDF_CLASS_KEY, (forward, ConstantEventMap(2 * (p - 1) + 1))))
    return TableEventMap(1, tuple(table))


def pdf(tree, left, phone, pdf_class):
    return tree.map({0: left, 1: phone, PDF_CLASS_KEY: pdf_class})


@pytest.fixture(scope="module")
def graph(tmp_path_factory):
    from paravg.gmm.tree_io import write_tree
    from paravg.graph.build import build_from_lexicon

    tmp = tmp_path_factory.mktemp("graph")
    write_tree(tmp / "tree", biphone_tree(), 2, 1)
    options = GraphOptions(transition_scale=1.0, self_loop_scale=1.0)
    out = tmp / "chain_words"
    summary = build_from_lexicon(LEXICON, SENTENCES, out, options, chain=True,
                                 chain_tree=tmp / "tree")  # fmt: skip
    return out, summary


def test_the_graph_has_the_trees_pdfs_and_its_context(graph):
    out, summary = graph
    assert summary["num_pdfs"] == 2 * K + 1 and summary["topology"] == "chain"
    assert (summary["options"]["context_width"], summary["options"]["central_position"]) == (2, 1)
    assert (out / "tree").read_bytes()[:2] == b"\0B"


def test_the_lang_variants_answer_as_their_chain_phone():
    from paravg.graph.chain_tree import lang_to_chain_phones, remap_tree_phones
    from paravg.graph.lang import make_lang

    lang = make_lang(LEXICON, ["sil"], [p for p in PHONES[1:] if p != "sil"])
    to_chain = lang_to_chain_phones(lang, PHONES)
    tree = remap_tree_phones(biphone_tree(), to_chain, range(2))
    ids = lang.phones
    assert pdf(tree, ids["ae_I"], ids["t_E"], 0) == SPLIT_PDF
    assert pdf(tree, ids["ae_B"], ids["t_I"], 0) == SPLIT_PDF
    assert pdf(tree, ids["l_E"], ids["t_B"], 0) == 2 * (T - 1)
    assert pdf(tree, 0, ids["t_S"], 1) == 2 * (T - 1) + 1
    assert pdf(tree, ids["sil"], ids["k_B"], 0) == 2 * PHONE_IDS["k"]


def spell(words, frames_per_phone):
    """Log-likelihoods (T, 2K + 1): each phone's first frame scores its biphone forward
    pdf (left phone: the one before, silence at the start), later frames its self-loop
    pdf (0; every other pdf −10)."""
    tree = biphone_tree()
    pron = {e.word: e.phones for e in LEXICON}
    seq = ["sil"] + [p for w in words for p in pron[w]] + ["sil"]
    rows = []
    for i, p in enumerate(seq):
        left = PHONE_IDS[seq[i - 1]] + 1 if i else 0
        for f in range(frames_per_phone):
            row = np.full(2 * K + 1, -10.0)
            row[pdf(tree, left, PHONE_IDS[p] + 1, 1 if f else 0)] = 0.0
            rows.append(row)
    return np.array(rows)


@pytest.mark.parametrize("frames_per_phone", [1, 3])
@pytest.mark.parametrize("words", [["CALL", "TWO", "CATS"], ["CALL", "JOHN", "TO", "SEE", "CAT"]])
def test_the_biphone_chain_graph_decodes_biphone_acoustics(graph, words, frames_per_phone):
    decoder = GraphDecoder(load_graph(graph[0]), SearchOptions(acoustic_scale=1.0), [0.0])
    assert decoder.decode("u", spell(words, frames_per_phone), 1, 0.0) == words


def test_a_graph_tree_that_is_not_the_chain_trees_is_an_error(tmp_path):
    from paravg.errors import DataError
    from paravg.graph.chain_tree import lang_to_chain_phones
    from paravg.graph.lang import make_lang

    lang = make_lang(LEXICON[:1], ["sil"], ["k", "ao", "l", "zz"])
    with pytest.raises(DataError, match=r"lang phones \['zz_B"):
        lang_to_chain_phones(lang, PHONES)
