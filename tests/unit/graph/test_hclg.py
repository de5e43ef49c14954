"""HCLG built as mkgraph.sh: it decodes posteriors that spell a known word sequence."""

import numpy as np
import pytest

from paravg.corpus.phones import PHONE_IDS
from paravg.decode.reference import GraphDecoder
from paravg.decode.search import SearchOptions
from paravg.graph.load import load_graph, read_transition_model

from .conftest import LEXICON


def spell(words, frames_per_phone=4, silence_frames=6):
    """Log-likelihoods (T, 40): the phones of ``words`` one after the other, silence
    around them; the right phone scores 0, every other −10."""
    pron = {e.word: e.phones for e in LEXICON}
    seq = ["sil"] + [p for w in words for p in pron[w]] + ["sil"]
    rows = []
    for i, p in enumerate(seq):
        n = silence_frames if i in (0, len(seq) - 1) else frames_per_phone
        row = np.full(40, -10.0)
        row[PHONE_IDS[p]] = 0.0
        rows += [row] * n
    return np.array(rows)


def test_graph_files_and_sizes(small_graph):
    out, summary = small_graph
    for name in (
        "HCLG.fst",
        "G.fst",
        "words.txt",
        "phones.txt",
        "tree",
        "transition.mdl",
        "phones/word_boundary.int",
        "lang/L_disambig.fst",
        "lm.arpa",
    ):
        assert (out / name).is_file(), name
    assert summary["num_pdfs"] == 40
    assert summary["sizes"]["HCLG"][0] > 0


@pytest.mark.parametrize(
    "words", [["CALL", "JOHN"], ["SEE", "TWO", "CATS"], ["CALL", "JOHN", "TO", "SEE", "CAT"]]
)
def test_hclg_decodes_a_synthetic_utterance(small_graph, words):
    graph = load_graph(small_graph[0])
    decoder = GraphDecoder(graph, SearchOptions(), [0.0])
    assert decoder.decode("u", spell(words), 10, 0.0) == words


def test_word_insertion_penalty_removes_words(small_graph):
    graph = load_graph(small_graph[0])
    decoder = GraphDecoder(graph, SearchOptions(), [0.0, 100.0])
    ll = spell(["CALL", "JOHN"])
    assert len(decoder.decode("u", ll, 10, 100.0)) < 2


def test_transition_model_text_reads_back(small_graph):
    from paravg.graph.lang import read_lang
    from paravg.graph.topology import tid_to_pdf, transition_model

    out = small_graph[0]
    lang = read_lang(out / "lang")
    _, _, tm = transition_model(lang, (out / "lang" / "topo").read_text())
    info = read_transition_model(out / "transition.mdl")
    assert np.array_equal(info.tid_to_pdf, tid_to_pdf(tm))
    assert info.num_pdfs == 40
    # pdf k is target k: every variant of a base phone maps to its id in PHONE_IDS
    names = {i: p for p, i in lang.phones.items()}
    for t in range(1, len(info.tid_to_pdf)):
        base = names[int(info.tid_to_phone[t])].split("_")[0]
        assert info.tid_to_pdf[t] == PHONE_IDS[base]
