"""Decoding a chain model (``decode_split(..., chain=...)``; Kaldi's ``steps/nnet3/decode.sh
--acwt 1.0 --post-decode-acwt 10.0``): its ``output`` with no priors subtracted, every
third frame, searched at acoustic scale 1.0 on the chain graph, the lattice's acoustic
costs × 10; a model and the settings of the other objective are refused."""

import json

import kaldiio
import numpy as np
import pytest
import torch

from paravg.corpus.phones import PHONES
from paravg.decode.decoder import decode_split
from paravg.decode.lattice import LatticeArchives
from paravg.decode.search import SearchGraph, SearchOptions, search
from paravg.errors import DataError
from paravg.graph.hclg import GraphOptions
from paravg.graph.lexicon import phone_lexicon
from paravg.io import save_torch_atomic
from paravg.nnet.model_file import model_to_file_dict, new_model
from tests.unit.dummies import random_head, tdnnf_config

FEAT = 5
CHAIN = {"chain_acoustic_scale": 1.0, "chain_post_decode_acwt": 10.0}
# raw lattices: the test compares them link for link with the search (determinised ones
# are tested in test_determinize.py)
OPTS = SearchOptions(beam=12.0, lattice_beam=4.0, determinize_lattice=False)


@pytest.fixture(scope="module")
def chain_graph(tmp_path_factory):
    from paravg.graph.build import build_from_lexicon

    rng = np.random.default_rng(0)
    sentences = [list(rng.choice(PHONES, size=6)) for _ in range(100)]
    out = tmp_path_factory.mktemp("graph") / "chain_phones"
    build_from_lexicon(
        phone_lexicon(PHONES, with_silence=True), sentences, out,
        GraphOptions(transition_scale=1.0, self_loop_scale=1.0), PHONES, 0.0, chain=True,
    )  # fmt: skip
    return out


def model(objective, num_targets):
    cfg = tdnnf_config(frame_subsampling_factor=3, self_repair_scale=1e-5)
    if objective == "chain":
        cfg["objective"] = "chain"
    m = new_model(cfg, FEAT, 0, num_targets)
    m.init_parameters(0)
    random_head(m, 0, weight_scale=3.0)  # random priors too: a chain decode ignores them
    return m.eval()


def _decode(tmp_path, graph, m, chain):
    rng = np.random.default_rng(3)
    feats = {u: rng.standard_normal((n, FEAT)).astype(np.float32) for u, n in (("a", 31),)}
    kaldiio.save_ark(str(tmp_path / "f.ark"), feats, scp=str(tmp_path / "feats.scp"))
    path = tmp_path / "m.pt"
    save_torch_atomic(path, model_to_file_dict(m))
    lat = tmp_path / "lat.gz"
    decode_split(path, {"words": graph}, tmp_path / "feats.scp", tmp_path / "s.json",
                 {"words": lat}, 1, 0, OPTS, chain=chain)  # fmt: skip
    return json.loads((tmp_path / "s.json").read_text()), dict(LatticeArchives([lat])), feats


def test_a_chain_model_is_searched_at_acwt_1_and_its_lattice_scaled_by_10(tmp_path, chain_graph):
    from paravg.decode.posteriors import utterance_log_posteriors
    from paravg.graph.load import load_graph

    m = model("chain", 2 * len(PHONES))
    info, lattices, feats = _decode(tmp_path, chain_graph, m, CHAIN)
    assert info["objective"] == "chain" and info["frame_subsampling_factor"] == 3
    assert info["search_acoustic_scale"] == 1.0 and info["post_decode_acwt"] == 10.0
    assert info["options"]["acoustic_scale"] == 0.1  # the config's, recorded as it is
    graph = load_graph(chain_graph)
    arrays = SearchGraph.from_fst(graph.hclg)
    arc_pdf = graph.transitions.tid_to_pdf[arrays.ilabel["emit"]]
    with torch.no_grad():  # the output, no priors subtracted
        loglikes = utterance_log_posteriors(m, feats["a"]).double().numpy()
    assert loglikes.shape[0] == lattices["a"].num_frames == 11
    expected = search(arrays, arc_pdf, loglikes, SearchOptions(acoustic_scale=1.0, beam=12.0,
                                                              lattice_beam=4.0))  # fmt: skip
    assert lattices["a"].num_links == expected.num_links
    np.testing.assert_allclose(
        np.sort(lattices["a"].acoustic), np.sort(10 * expected.acoustic), rtol=1e-4, atol=1e-3
    )
    best = lattices["a"].best_paths([10.0], [0.0])[(10.0, 0.0)]  # LMWT 10: the search's
    want = expected.best_paths([1.0], [0.0])[(1.0, 0.0)]
    assert list(lattices["a"].tid[best]) == list(expected.tid[want])
    # no priors: final.pt's random ones would move every arc's acoustic cost
    assert lattices["a"].acoustic[best].sum() == pytest.approx(
        10 * expected.acoustic[want].sum(), 1e-4
    )
    assert np.ptp(m.log_priors.numpy()) > 0.5


def test_the_other_objectives_settings_are_refused(tmp_path, chain_graph):
    with pytest.raises(DataError, match="a chain model, decoded with the cross-entropy"):
        _decode(tmp_path, chain_graph, model("chain", 2 * len(PHONES)), None)
    with pytest.raises(DataError, match="a cross-entropy model, decoded with the chain"):
        _decode(tmp_path, chain_graph, model("xent", 2 * len(PHONES)), CHAIN)
