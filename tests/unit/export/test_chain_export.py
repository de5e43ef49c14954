"""The export of a chain model (``model.objective: chain``): Kaldi's chain ``final.mdl``
(the output node ``output`` reads ``output.affine``, no log-softmax, the ``output-xent``
branch left out, no priors), the chain graph's transition model (``<Tuples>``), and
vosk's chain ``conf/model.conf`` (``--acoustic-scale=1 --frame-subsampling-factor=3``);
vosk 0.3.45 decodes it exactly as Kaldi's FasterDecoder decodes paravg's own ``output``
at acoustic scale 1 on the same graph."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from export_models import TDNNF_CFG, tdnnf_model, tone_audio

from paravg.corpus.phones import PHONES
from paravg.export.final_mdl import read_final_mdl
from paravg.export.layout import export_model
from paravg.export.verify import paravg_loglikes, reference_decode, vosk_decode
from paravg.features import MfccOptions, compute_mfcc
from paravg.graph.hclg import GraphOptions
from paravg.graph.lexicon import phone_lexicon
from paravg.nnet.model_file import model_to_file_dict

CHAIN_CFG = {**TDNNF_CFG, "objective": "chain", "frame_subsampling_factor": 3}
NUM_PDFS = 2 * len(PHONES)


@pytest.fixture(scope="module")
def chain_phone_graph(tmp_path_factory):
    """A phone bigram graph of the demo's 40 phones with the chain topology and tree
    (every phone a word; 200 random phone strings as its training text)."""
    from paravg.graph.build import build_from_lexicon

    rng = np.random.default_rng(0)
    sentences = [list(rng.choice(PHONES, size=8)) for _ in range(200)]
    out = tmp_path_factory.mktemp("graph") / "chain_phones"
    build_from_lexicon(
        phone_lexicon(PHONES, with_silence=True), sentences, out,
        GraphOptions(transition_scale=1.0, self_loop_scale=1.0), PHONES, 0.0, chain=True,
    )  # fmt: skip
    return out


def _chain_model(tmp_path, feats):
    model = tdnnf_model(CHAIN_CFG, 0, stats_feats=feats, num_targets=NUM_PDFS)
    assert model.objective == "chain" and model.frame_subsampling_factor == 3
    path = tmp_path / "final.pt"
    torch.save(model_to_file_dict(model), path)
    return model, path


def test_chain_final_mdl_model_conf_and_vosk(tmp_path, chain_phone_graph):
    wav, samples = tone_audio(tmp_path)
    mfcc = MfccOptions(dither=0.0)
    feats = compute_mfcc(samples.astype(np.float32), mfcc)
    model, path = _chain_model(tmp_path, feats)
    out = tmp_path / "kaldi"
    summary = export_model(
        path, out, chain_phone_graph / "transition.mdl", mfcc, chain_phone_graph, None, 1.0,
        {"lattice_beam": 1.0},
    )  # fmt: skip
    assert summary["objective"] == "chain" and summary["num_pdfs"] == NUM_PDFS
    am = read_final_mdl(out / "am" / "final.mdl")
    assert len(am.priors) == 0  # Kaldi's chain models: <Priors> [ ]
    assert not am.transition_model.is_hmm  # the chain topology: <Tuples>
    lines = am.nnet.config_lines
    assert "output-node name=output input=output.affine objective=linear" in lines
    assert not any("log-softmax" in x or "xent" in x for x in lines), lines
    conf = (out / "conf" / "model.conf").read_text().split()
    assert "--acoustic-scale=1" in conf and "--frame-subsampling-factor=3" in conf
    # vosk decodes it as Kaldi's FasterDecoder decodes paravg's output (acoustic scale 1,
    # no priors subtracted, every third frame), graph scale 0.9 (vosk's)
    from paravg.graph.lang import read_lang
    from paravg.graph.topology import chain_transition_model, tid_to_pdf

    tm = chain_transition_model(read_lang(chain_phone_graph / "lang"))[2]
    ll = {"a": paravg_loglikes(model, feats, None, None)}
    assert ll["a"].shape == (-(-len(feats) // 3), NUM_PDFS)
    graph = chain_phone_graph
    ours = reference_decode(ll, tid_to_pdf(tm)[1:], graph / "HCLG.fst", graph / "words.txt", 1.0)
    vosk = vosk_decode(out, {"a": wav})["a"]
    assert len(ours["a"].split()) >= 10, ours  # the acoustics choose the phones
    assert vosk == ours["a"]
    # what the comparison sees: the priors the random head wrote into final.pt (the
    # decoders subtract none of a chain model's), subtracted, decode otherwise (a
    # log-softmax would not: it moves every path of a frame by the same amount)
    with_priors = ll["a"] - model.log_priors.double().numpy()
    hyp = reference_decode({"a": with_priors}, tid_to_pdf(tm)[1:], graph / "HCLG.fst",
                           graph / "words.txt", 1.0)["a"]  # fmt: skip
    assert hyp != vosk
