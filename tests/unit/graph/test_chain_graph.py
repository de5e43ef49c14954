"""The chain model's decoding graph (``build_from_lexicon(..., chain=True)``): the chain
topology and a tree whose pdfs are the chain network's outputs (target k's phone: forward
pdf 2k, self-loop pdf 2k + 1), self-loop scale 1.0 (Kaldi's ``mkgraph.sh
--self-loop-scale 1.0`` for chain models); it decodes chain-style acoustics (one output
frame per phone is enough) to the spoken words."""

import numpy as np
import pytest

from paravg.corpus.phones import PHONE_IDS, PHONES
from paravg.decode.reference import GraphDecoder
from paravg.decode.search import SearchOptions
from paravg.graph.hclg import GraphOptions
from paravg.graph.load import load_graph, read_transition_model

from .conftest import LEXICON, SENTENCES

CHAIN_OPTIONS = GraphOptions(transition_scale=1.0, self_loop_scale=1.0)


@pytest.fixture(scope="module")
def chain_graph(tmp_path_factory):
    from paravg.graph.build import build_from_lexicon

    out = tmp_path_factory.mktemp("graph") / "chain_words"
    summary = build_from_lexicon(LEXICON, SENTENCES, out, CHAIN_OPTIONS, chain=True)
    return out, summary


def test_chain_transition_model_gives_target_k_pdfs_2k_and_2k_plus_1(chain_graph):
    out, summary = chain_graph
    assert summary["num_pdfs"] == 2 * len(PHONES) and summary["topology"] == "chain"
    text = (out / "transition.mdl").read_text()
    assert "<Tuples>" in text and "<ForwardPdfClass> 0 <SelfLoopPdfClass> 1" in text
    info = read_transition_model(out / "transition.mdl")
    names = {i: p for p, i in _phone_ids(out).items()}
    for tid in range(1, len(info.tid_to_pdf)):
        phone = names[int(info.tid_to_phone[tid])].rsplit("_", 1)[0]
        k = PHONES.index(phone)
        # the chain topology's state 0: transition 0 is the self-loop, 1 the forward one
        want = 2 * k + (0 if info.tid_starts_phone[tid] else 1)
        assert info.tid_to_pdf[tid] == want, (tid, phone)


def test_exported_transition_model_reads_the_chain_tuples(chain_graph):
    from paravg.export.transition_model import TransitionModel

    tm = TransitionModel.from_file(chain_graph[0] / "transition.mdl")
    assert tm.num_pdfs == 2 * len(PHONES) and not tm.is_hmm


def _phone_ids(out):
    return {
        line.split()[0]: int(line.split()[1])
        for line in (out / "phones.txt").read_text().splitlines()
    }


def chain_spell(words, frames_per_phone):
    """Chain-style log-likelihoods (T, 80) at the subsampled rate: each phone's first
    frame scores its forward pdf 2k, its later frames its self-loop pdf 2k + 1 (0; every
    other pdf −10), silence around the words."""
    pron = {e.word: e.phones for e in LEXICON}
    seq = ["sil"] + [p for w in words for p in pron[w]] + ["sil"]
    rows = []
    for p in seq:
        k = PHONE_IDS[p]
        for i in range(frames_per_phone):
            row = np.full(2 * len(PHONES), -10.0)
            row[2 * k + (1 if i else 0)] = 0.0
            rows.append(row)
    return np.array(rows)


@pytest.mark.parametrize("frames_per_phone", [1, 3])
@pytest.mark.parametrize("words", [["CALL", "JOHN"], ["SEE", "TWO", "CATS"]])
def test_chain_graph_decodes_chain_acoustics_at_acoustic_scale_1(
    chain_graph, words, frames_per_phone
):
    graph = load_graph(chain_graph[0])
    decoder = GraphDecoder(graph, SearchOptions(acoustic_scale=1.0), [0.0])
    assert decoder.decode("u", chain_spell(words, frames_per_phone), 1, 0.0) == words


def test_a_chain_model_is_refused_on_the_cross_entropy_graph(small_graph, chain_graph):
    """The monophone graph's pdfs are the 40 targets, the chain graph's their 80 pdfs:
    a chain model decoded on the cross-entropy graph is refused by the pdf check."""
    from paravg.decode.decoder import check_num_pdfs
    from paravg.errors import DataError

    check_num_pdfs(load_graph(chain_graph[0]), 2 * len(PHONES), "chain.pt")
    with pytest.raises(DataError, match=r"40 pdfs but the network chain\.pt has 80 outputs"):
        check_num_pdfs(load_graph(small_graph[0]), 2 * len(PHONES), "chain.pt")
