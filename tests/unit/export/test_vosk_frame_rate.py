"""The export of a model of frame-subsampling-factor 3: ``conf/model.conf`` (and
``conf/online.conf``) carry ``--frame-subsampling-factor=3`` and 3 × the acoustic scale,
and vosk (Kaldi's nnet3 looped computation at every third frame, its lattice decoder on
⌈T/3⌉ frames) decodes the export exactly as Kaldi's FasterDecoder does on paravg's own
network evaluated at frames 0, 3, 6, … — for both families, with and without i-vectors."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from export_models import (
    FEAT_DIM,
    IVECTOR_DIM,
    NUM_TARGETS,
    TDNNF_CFG,
    tdnnf_model,
    tone_audio,
)

from paravg.corpus.phones import PHONES
from paravg.export.layout import IvectorSystem, export_model
from paravg.export.phone_loop import (
    monophone_transition_model,
    transition_ids,
    write_phone_loop_graph,
)
from paravg.export.verify import (
    paravg_loglikes,
    reference_decode,
    vosk_decode,
    vosk_online_ivectors,
)
from paravg.features import MfccOptions, compute_mfcc
from paravg.nnet.model_file import model_to_file_dict, new_model
from tests.unit.dummies import random_head, standardising_lda, tdnn_config

F = 3
#: A TDNN that stacks 3 frames at its input (Tian et al.'s frame stacking) and has the
#: stride-3 splice of Kaldi's recipes on top.
TDNN_CFG = tdnn_config((64, [0]), (64, [-1, 0, 1]), (64, [-3, 0, 3]), input_splice=[-1, 0, 1])


@pytest.fixture(scope="module")
def tm40():
    return monophone_transition_model(40)[1]


def tdnn_model(cfg, ivector_dim, feats, seed=0):
    """A random TDNN whose LDA-like transform standardises ``feats`` (the i-vector part
    3 ×), a random output layer and priors: acoustics that change from frame to frame."""
    model = new_model(cfg, FEAT_DIM, ivector_dim, NUM_TARGETS)
    model.init_parameters(seed)
    random_head(model, seed)
    standardising_lda(model, feats, cfg["input_splice"])
    x = torch.from_numpy(np.asarray(feats, np.float32))
    with torch.no_grad():
        # the ReLU layers' outputs share a large positive mean: take it out of the output
        # layer, so that the pdf changes with the acoustics
        seen = []
        hook = model.output.register_forward_hook(lambda _m, a, _o: seen.append(a[0]))
        window = torch.cat([x[:1].expand(model.left_context, -1), x,
                            x[-1:].expand(model.right_context, -1)])  # fmt: skip
        iv = torch.zeros(1, ivector_dim) if ivector_dim else None
        model.eval()(window[None], iv)
        hook.remove()
        model.output.bias.sub_(model.output.weight @ seen[0][0].mean(0))
    return model.eval()


def _ivector_parts(ivector_files):
    from paravg.ivector.extractor import IvectorExtractor
    from paravg.ivector.features import IvectorFeaturePipeline
    from paravg.ivector.online import OnlineIvectorOptions
    from paravg.ivector.ubm import DiagGmm

    pca, ubm, extractor = ivector_files
    return (IvectorFeaturePipeline.load(pca), DiagGmm.load(ubm),
            IvectorExtractor.load(extractor), OnlineIvectorOptions())  # fmt: skip


@pytest.mark.parametrize("with_ivectors", [False, True])
@pytest.mark.parametrize("family", ["tdnn", "tdnnf"])
def test_vosk_decodes_a_factor_3_export_like_paravgs_network(
    tmp_path, ivector_files, tm40, family, with_ivectors
):
    wav, samples = tone_audio(tmp_path)
    mfcc = MfccOptions(dither=0.0)
    feats = compute_mfcc(samples.astype(np.float32), mfcc)
    ivector_dim = IVECTOR_DIM if with_ivectors else 0
    cfg = {**(TDNN_CFG if family == "tdnn" else TDNNF_CFG), "frame_subsampling_factor": F}
    ivectors = None
    if with_ivectors:
        shape = new_model(cfg, FEAT_DIM, ivector_dim, NUM_TARGETS)  # contexts only
        parts = _ivector_parts(ivector_files)
        ivectors = vosk_online_ivectors(shape, feats, len(samples), mfcc, *parts)
    if family == "tdnn":
        model = tdnn_model(cfg, ivector_dim, feats)
    else:
        stats_ivectors = None if ivectors is None else ivectors[: len(feats)]
        model = tdnnf_model(cfg, ivector_dim, 0, feats, stats_ivectors)
    assert model.frame_subsampling_factor == F
    path = tmp_path / "final.pt"
    torch.save(model_to_file_dict(model), path)
    graph = write_phone_loop_graph(tm40, list(PHONES[:40]), tmp_path / "graph", 2.0)
    out = tmp_path / "kaldi"
    system = IvectorSystem(*ivector_files) if with_ivectors else None
    summary = export_model(path, out, tm40, mfcc, graph, system, 1.0, {"lattice_beam": 1.0})
    assert summary["frame_subsampling_factor"] == F
    model_conf = (out / "conf" / "model.conf").read_text().split()
    assert "--frame-subsampling-factor=3" in model_conf and "--acoustic-scale=3" in model_conf
    online = (out / "conf" / "online.conf").read_text().split()
    assert "--frame-subsampling-factor=3" in online and "--acoustic-scale=3" in online

    tid2pdf = np.array([pdf for row in transition_ids(tm40) for _t, _d, pdf in row])
    ll = paravg_loglikes(model, feats, ivectors, None)
    assert ll.shape == (-(-len(feats) // F), NUM_TARGETS)  # 148 frames: 50 outputs
    hclg, words = graph / "HCLG.fst", graph / "words.txt"
    ours = reference_decode({"a": ll}, tid2pdf, hclg, words, 3.0)["a"]
    vosk = vosk_decode(out, {"a": wav})["a"]
    assert len(ours.split()) >= 20, ours  # ~1 phone per 2 output frames: acoustics decide
    assert vosk == ours
    # what the comparison sees: the network at every frame, or at frames 1, 4, 7, …
    every = paravg_loglikes(new_model_like(model, 1), feats, ivectors, None)
    assert reference_decode({"a": every}, tid2pdf, hclg, words, 1.0)["a"] != vosk
    shifted = every[1::F]
    assert reference_decode({"a": shifted}, tid2pdf, hclg, words, 3.0)["a"] != vosk
    if with_ivectors:  # and the i-vectors vosk computes reach the network
        blind = paravg_loglikes(model, feats, np.zeros_like(ivectors), None)
        assert reference_decode({"a": blind}, tid2pdf, hclg, words, 3.0)["a"] != vosk


def new_model_like(model, f):
    """``model``'s weights in a model of frame-subsampling-factor ``f``."""
    other = new_model(
        {**model.model_cfg, "frame_subsampling_factor": f},
        model.feat_dim,
        model.ivector_dim,
        model.num_targets,
    )
    other.load_state_dict(model.state_dict())
    return other.eval()
