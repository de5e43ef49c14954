"""The TDNN-F as an nnet3 network: Kaldi's xconfig network without its dropout, the bytes of
its components as Kaldi writes them, the read-back network computing what paravg
computes, and vosk (Kaldi's own reader and nnet3 computation) decoding with it exactly as
paravg's decoder does with paravg's network.

The bytes below are worked out by hand from Kaldi's C++ (kaldi-asr/kaldi
``src/nnet3/nnet-tdnn-component.cc`` TdnnComponent::Write, ``nnet-simple-component.cc``
LinearComponent / NoOpComponent / NaturalGradientAffineComponent::Write,
``nnet-normalize-component.cc`` BatchNormComponent::Write, ``nnet-component-itf.cc``
WriteUpdatableCommon, ``nnet-descriptor.cc`` the descriptors' WriteConfig,
``src/base/io-funcs-inl.h`` WriteIntegerVector), not through paravg's reader."""

from __future__ import annotations

import struct

import numpy as np
import pytest
import torch
from export_models import (
    FEAT_DIM,
    IVECTOR_DIM,
    NUM_TARGETS,
    TDNNF_CFG,
    assert_written_as_by_hand,
    nnet3_bytes,
    one_component_file,
    tdnnf_model,
    tone_audio,
)
from kaldi_bytes import f32, fm, fv, i32, tok

from paravg.corpus.phones import PHONES
from paravg.export.kaldi_stream import KaldiReader
from paravg.export.layout import IvectorSystem, export_model
from paravg.export.nnet3 import (
    NgOptions,
    Nnet3,
    compute,
    nnet3_from_model,
    read_nnet3,
)
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
from tests.unit.dummies import tdnnf_config

CFG = TDNNF_CFG


def _cfg(**tdnnf):
    return {**CFG, "tdnnf": {**CFG["tdnnf"], **tdnnf}}


# ---------------------------------------------------------------------- the network
def test_config_lines_are_kaldis_xconfig_network_without_dropout():
    nnet = nnet3_from_model(tdnnf_model())
    lines = nnet.config_lines
    assert lines[:3] == [
        f"input-node name=input dim={FEAT_DIM}",
        f"input-node name=ivector dim={IVECTOR_DIM}",
        "component-node name=lda component=lda input=Append(Offset(input, -1), input, "
        "Offset(input, 1), ReplaceIndex(ivector, t, 0))",
    ]

    def node(name, source):
        return f"component-node name={name} component={name} input={source}"

    assert node("tdnn1.affine", "lda") in lines
    assert node("tdnn1.batchnorm", "tdnn1.relu") in lines
    assert node("tdnnf2.linear", "tdnn1.batchnorm") in lines  # the dropout is gone
    assert node("tdnnf2.noop", "Sum(Scale(0.66, tdnn1.batchnorm), tdnnf2.batchnorm)") in lines
    assert node("tdnnf3.linear", "tdnnf2.noop") in lines
    assert node("prefinal-l", "tdnnf5.noop") in lines
    assert node("prefinal.batchnorm2", "prefinal.linear") in lines
    assert node("output.affine", "prefinal.batchnorm2") in lines
    assert lines[-1] == "output-node name=output input=output.log-softmax objective=linear"
    assert not any("dropout" in line for line in lines)
    kinds = {c.name: c.kind for c in nnet.components}
    assert kinds["tdnn1.affine"] == "NaturalGradientAffineComponent"
    assert kinds["tdnnf4.linear"] == kinds["tdnnf4.affine"] == "TdnnComponent"
    assert kinds["tdnnf4.batchnorm"] == "BatchNormComponent"
    assert kinds["tdnnf4.noop"] == "NoOpComponent"
    assert kinds["prefinal-l"] == kinds["prefinal.linear"] == "LinearComponent"
    assert kinds["output.log-softmax"] == "LogSoftmaxComponent"
    offsets = {n: nnet.component(n).params["time_offsets"] for n, k in kinds.items()
               if k == "TdnnComponent"}  # fmt: skip
    assert offsets["tdnnf2.linear"] == [-1, 0] and offsets["tdnnf2.affine"] == [0, 1]
    assert offsets["tdnnf4.linear"] == offsets["tdnnf4.affine"] == [0]  # stride 0
    assert offsets["tdnnf5.linear"] == [-3, 0] and offsets["tdnnf5.affine"] == [0, 3]
    # Kaldi's initial natural-gradient ranks: min(20, (in + 1) / 2), min(80, (out + 1) / 2)
    assert nnet.component("tdnnf2.linear").params["ng"] == NgOptions(20, 8, 4, 2000.0, 4.0)
    assert nnet.component("prefinal-l").params["ng"] == NgOptions(20, 8, 4, 2000.0, 4.0)
    assert nnet.output_dim() == NUM_TARGETS


def test_without_bypass_the_layer_output_is_its_batchnorm():
    nnet = nnet3_from_model(tdnnf_model(_cfg(bypass_scale=0.0, time_strides=[1, 2])))
    assert not any(c.kind == "NoOpComponent" for c in nnet.components)
    assert "component-node name=tdnnf3.linear component=tdnnf3.linear input=tdnnf2.batchnorm" in (
        nnet.config_lines
    )


# ---------------------------------------------------------------------- Kaldi's bytes
# A TDNN-F small enough to write out by hand: 1-dim input, tdnn1 and one tdnnf layer of
# dim 2, bottleneck 1, stride 1, bypass 0.5; l2 0.25; a 1-dim linear-component; prefinal
# 2 / 1; 2 outputs. Parameters and statistics are short binary fractions, so their text
# is the same in C++'s `os << f` and in paravg's writer.
TINY_CFG = tdnnf_config(
    2, 1, [1], linear_dim=1, prefinal=(2, 1), bypass_scale=0.5, l2=(0.25, 0.125), input_splice=[0]
)
TDNN_LINEAR = [[0.5, -1.0, 2.0, 0.25]]  # 1 x (2 dims x offsets -1, 0)
TDNN_AFFINE = [[1.0, -0.5], [0.125, 4.0]]  # 2 x (1 dim x offsets 0, 1)
TDNN_AFFINE_BIAS = [0.75, -2.0]
PREFINAL_L = [[1.5, -2.0]]
TDNN1 = [[0.5], [-0.25]]
TDNN1_BIAS = [1.0, 0.0]
# tdnnf2.batchnorm: count 4, sums (2, -1), sums of squares (2, 4.25): mean (0.5, -0.25),
# variance (0.25, 1)
BN_COUNT, BN_MEAN, BN_VAR = 4.0, [0.5, -0.25], [0.25, 1.0]


def tiny_model():
    """The tiny TDNN-F: Kaldi's random initialisation and a random output layer, with the
    components written out below set by hand."""
    model = new_model(TINY_CFG, 1, 0, 2)
    model.init_parameters(0)
    tdnn1, tdnnf2, prefinal_l = model.layers[0], model.layers[1], model.layers[2]
    with torch.no_grad():
        model.output.weight.normal_(0, 1, generator=torch.Generator().manual_seed(1))
        tdnn1.affine.weight.copy_(torch.tensor(TDNN1))
        tdnn1.affine.bias.copy_(torch.tensor(TDNN1_BIAS))
        tdnnf2.linear.weight.copy_(torch.tensor(TDNN_LINEAR))
        tdnnf2.affine.weight.copy_(torch.tensor(TDNN_AFFINE))
        tdnnf2.affine.bias.copy_(torch.tensor(TDNN_AFFINE_BIAS))
        bn = tdnnf2.batchnorm
        bn.stats_count.fill_(BN_COUNT)
        bn.stats_sum.copy_(torch.tensor([2.0, -1.0], dtype=torch.float64))
        bn.stats_sumsq.copy_(torch.tensor([2.0, 4.25], dtype=torch.float64))
        prefinal_l.linear.weight.copy_(torch.tensor(PREFINAL_L))
    return model.eval()


# Nnet::Write's config section: Descriptor::WriteConfig prints Sum(a, b) and
# Scale(<float>, node) (SimpleForwardingDescriptor with a scale), a node alone otherwise.
TINY_CONFIG = [
    "input-node name=input dim=1",
    "component-node name=lda component=lda input=input",
    "component-node name=tdnn1.affine component=tdnn1.affine input=lda",
    "component-node name=tdnn1.relu component=tdnn1.relu input=tdnn1.affine",
    "component-node name=tdnn1.batchnorm component=tdnn1.batchnorm input=tdnn1.relu",
    "component-node name=tdnnf2.linear component=tdnnf2.linear input=tdnn1.batchnorm",
    "component-node name=tdnnf2.affine component=tdnnf2.affine input=tdnnf2.linear",
    "component-node name=tdnnf2.relu component=tdnnf2.relu input=tdnnf2.affine",
    "component-node name=tdnnf2.batchnorm component=tdnnf2.batchnorm input=tdnnf2.relu",
    "component-node name=tdnnf2.noop component=tdnnf2.noop "
    "input=Sum(Scale(0.5, tdnn1.batchnorm), tdnnf2.batchnorm)",
    "component-node name=prefinal-l component=prefinal-l input=tdnnf2.noop",
    "component-node name=prefinal.affine component=prefinal.affine input=prefinal-l",
    "component-node name=prefinal.relu component=prefinal.relu input=prefinal.affine",
    "component-node name=prefinal.batchnorm1 component=prefinal.batchnorm1 input=prefinal.relu",
    "component-node name=prefinal.linear component=prefinal.linear input=prefinal.batchnorm1",
    "component-node name=prefinal.batchnorm2 component=prefinal.batchnorm2 input=prefinal.linear",
    "component-node name=output.affine component=output.affine input=prefinal.batchnorm2",
    "component-node name=output.log-softmax component=output.log-softmax input=output.affine",
    "output-node name=output input=output.log-softmax objective=linear",
]

# Text mode: WriteToken = token + " "; WriteBasicType = value + " "; bool "T "; Vector
# " [ v ]\n" (empty: " [ ]\n"); Matrix " [" + "\n  v " per row + "]\n";
# WriteIntegerVector "[ a b ]\n"; Nnet::Write ends each component with a newline.
# WriteUpdatableCommon: <MaxChange> (> 0), <L2Regularize> (> 0), <LearningRate>.
# TdnnComponent always writes <OrthonormalConstraint>; LinearComponent and
# NaturalGradientAffineComponent only when nonzero. The ranks are Kaldi's initial ones:
# tdnnf2.linear min(20, (4 + 1) / 2) = 2, min(80, (1 + 1) / 2) = 1.
TINY_TEXT = {
    "tdnn1.affine": "<NaturalGradientAffineComponent> <MaxChange> 0.75 <L2Regularize> 0.25 "
    "<LearningRate> 0 <LinearParams>  [\n  0.5 \n  -0.25 ]\n<BiasParams>  [ 1 0 ]\n"
    "<RankIn> 1 <RankOut> 1 <UpdatePeriod> 4 <NumSamplesHistory> 2000 <Alpha> 4 "
    "</NaturalGradientAffineComponent> \n",
    "tdnnf2.linear": "<TdnnComponent> <MaxChange> 0.75 <L2Regularize> 0.25 <LearningRate> 0 "
    "<TimeOffsets> [ -1 0 ]\n<LinearParams>  [\n  0.5 -1 2 0.25 ]\n<BiasParams>  [ ]\n"
    "<OrthonormalConstraint> -1 <UseNaturalGradient> T <NumSamplesHistory> 2000 "
    "<AlphaInOut> 4 4 <RankInOut> 2 1 </TdnnComponent> \n",
    "tdnnf2.affine": "<TdnnComponent> <MaxChange> 0.75 <L2Regularize> 0.25 <LearningRate> 0 "
    "<TimeOffsets> [ 0 1 ]\n<LinearParams>  [\n  1 -0.5 \n  0.125 4 ]\n"
    "<BiasParams>  [ 0.75 -2 ]\n<OrthonormalConstraint> 0 <UseNaturalGradient> T "
    "<NumSamplesHistory> 2000 <AlphaInOut> 4 4 <RankInOut> 1 1 </TdnnComponent> \n",
    # Kaldi prints epsilon 0.001f with 7 digits ("0.001"), paravg with 9: the same float
    "tdnnf2.batchnorm": "<BatchNormComponent> <Dim> 2 <BlockDim> 2 <Epsilon> 0.00100000005 "
    "<TargetRms> 1 <TestMode> T <Count> 4 <StatsMean>  [ 0.5 -0.25 ]\n"
    "<StatsVar>  [ 0.25 1 ]\n</BatchNormComponent> \n",
    "tdnnf2.noop": "<NoOpComponent> <Dim> 2 <BackpropScale> 1 </NoOpComponent> \n",
    "prefinal-l": "<LinearComponent> <MaxChange> 0.75 <L2Regularize> 0.25 <LearningRate> 0 "
    "<Params>  [\n  1.5 -2 ]\n<OrthonormalConstraint> -1 <UseNaturalGradient> T "
    "<RankInOut> 1 1 <Alpha> 4 <NumSamplesHistory> 2000 <UpdatePeriod> 4 "
    "</LinearComponent> \n",
}


def _updatable_common(kind):
    """WriteUpdatableCommon in binary: the tag, <MaxChange> 0.75, <L2Regularize> 0.25,
    <LearningRate> 0."""
    return (
        tok(f"<{kind}>", "<MaxChange>") + f32(0.75) + tok("<L2Regularize>") + f32(0.25)
        + tok("<LearningRate>") + f32(0.0)
    )  # fmt: skip


# Binary mode: int32 = size byte 4 + little-endian; float = 4 + IEEE single; double
# (BatchNormComponent's count_) = 8 + IEEE double; bool = "T" alone; WriteIntegerVector =
# size byte 4, then the int32 length and the elements raw (no size bytes); Vector =
# "FV " + int32 dim + data; Matrix = "FM " + rows + cols + row-major data; no newline
# after a component.
TINY_BINARY = {
    "tdnn1.affine": _updatable_common("NaturalGradientAffineComponent")
    + tok("<LinearParams>") + fm(TDNN1) + tok("<BiasParams>") + fv(TDNN1_BIAS)
    + tok("<RankIn>") + i32(1) + tok("<RankOut>") + i32(1)
    + tok("<UpdatePeriod>") + i32(4) + tok("<NumSamplesHistory>") + f32(2000.0)
    + tok("<Alpha>") + f32(4.0) + tok("</NaturalGradientAffineComponent>"),
    "tdnnf2.linear": _updatable_common("TdnnComponent")
    + tok("<TimeOffsets>") + b"\x04" + struct.pack("<iii", 2, -1, 0)
    + tok("<LinearParams>") + fm(TDNN_LINEAR) + tok("<BiasParams>") + fv([])
    + tok("<OrthonormalConstraint>") + f32(-1.0) + tok("<UseNaturalGradient>") + b"T"
    + tok("<NumSamplesHistory>") + f32(2000.0) + tok("<AlphaInOut>") + f32(4.0)
    + f32(4.0) + tok("<RankInOut>") + i32(2) + i32(1) + tok("</TdnnComponent>"),
    "tdnnf2.affine": _updatable_common("TdnnComponent")
    + tok("<TimeOffsets>") + b"\x04" + struct.pack("<iii", 2, 0, 1)
    + tok("<LinearParams>") + fm(TDNN_AFFINE) + tok("<BiasParams>") + fv(TDNN_AFFINE_BIAS)
    + tok("<OrthonormalConstraint>") + f32(0.0) + tok("<UseNaturalGradient>") + b"T"
    + tok("<NumSamplesHistory>") + f32(2000.0) + tok("<AlphaInOut>") + f32(4.0)
    + f32(4.0) + tok("<RankInOut>") + i32(1) + i32(1) + tok("</TdnnComponent>"),
    "tdnnf2.batchnorm": tok("<BatchNormComponent>", "<Dim>") + i32(2) + tok("<BlockDim>")
    + i32(2) + tok("<Epsilon>") + f32(0.001) + tok("<TargetRms>") + f32(1.0)
    + tok("<TestMode>") + b"T" + tok("<Count>") + b"\x08" + struct.pack("<d", BN_COUNT)
    + tok("<StatsMean>") + fv(BN_MEAN) + tok("<StatsVar>") + fv(BN_VAR)
    + tok("</BatchNormComponent>"),
    "tdnnf2.noop": tok("<NoOpComponent>", "<Dim>") + i32(2) + tok("<BackpropScale>")
    + f32(1.0) + tok("</NoOpComponent>"),
    "prefinal-l": _updatable_common("LinearComponent")
    + tok("<Params>") + fm(PREFINAL_L) + tok("<OrthonormalConstraint>") + f32(-1.0)
    + tok("<UseNaturalGradient>") + b"T" + tok("<RankInOut>") + i32(1) + i32(1)
    + tok("<Alpha>") + f32(4.0) + tok("<NumSamplesHistory>") + f32(2000.0)
    + tok("<UpdatePeriod>") + i32(4) + tok("</LinearComponent>"),
}  # fmt: skip


def test_the_components_are_kaldis_bytes_written_by_hand():
    """paravg's writer against Kaldi's formats worked out by hand (not through paravg's
    reader): field order, the integer vector, the empty bias, the double count."""
    assert_written_as_by_hand(nnet3_from_model(tiny_model()), TINY_CONFIG, TINY_TEXT, TINY_BINARY)


@pytest.mark.parametrize("binary", [False, True])
def test_the_reader_reads_kaldis_bytes_written_by_hand(binary):
    """paravg's reader on the hand-written components, each in a one-component file."""
    for name in TINY_TEXT:
        body = TINY_BINARY[name] if binary else TINY_TEXT[name].encode()
        nnet = read_nnet3(KaldiReader(one_component_file(name, body, binary)))
        params = nnet.components[0].params
        if name == "tdnnf2.linear":
            np.testing.assert_array_equal(params["linear"], TDNN_LINEAR)
            assert params["time_offsets"] == [-1, 0] and len(params["bias"]) == 0
            assert params["orthonormal_constraint"] == -1.0
            assert params["l2_regularize"] == 0.25 and params["max_change"] == 0.75
            assert params["ng"] == NgOptions(2, 1, 4, 2000.0, 4.0)
        if name == "tdnnf2.affine":
            np.testing.assert_array_equal(params["bias"], TDNN_AFFINE_BIAS)
            assert params["time_offsets"] == [0, 1]
        if name == "tdnnf2.batchnorm":
            assert params["count"] == BN_COUNT and params["test_mode"] is True
            np.testing.assert_array_equal(params["mean"], BN_MEAN)
            np.testing.assert_array_equal(params["var"], BN_VAR)
        if name == "tdnnf2.noop":
            assert params == {"dim": 2, "backprop_scale": 1.0}
        if name == "prefinal-l":
            np.testing.assert_array_equal(params["linear"], PREFINAL_L)
            assert params["orthonormal_constraint"] == -1.0
            assert params["ng"] == NgOptions(1, 1, 4, 2000.0, 4.0)


def test_the_tiny_network_computes_by_hand():
    """The hand-sized network at one output frame: tdnnf2's output worked by hand from
    the numbers above (TdnnComponent column blocks per offset, Kaldi's test-mode
    batch-norm scale = (var + ε)^−½, offset = −mean · scale, the bypass), the rest through
    paravg's modules, against paravg's forward and compute() on the read-back file."""
    model = tiny_model()
    nnet = read_nnet3(KaldiReader(nnet3_bytes(nnet3_from_model(model), True)))
    x = np.array([[0.5], [-1.0], [2.0]])  # t = 0, 1, 2; the output at t = 1
    with torch.no_grad():
        theirs = model(torch.tensor(x, dtype=torch.float32)[None])[0].double().numpy()
        tdnn1 = model.layers[0]
        h1 = tdnn1.batchnorm(tdnn1.relu(tdnn1.affine(model.lda(torch.tensor(x).float()))))
        h1 = h1.double().numpy()
    lin = np.array(TDNN_LINEAR)[0]
    bottleneck = [lin[:2] @ h1[t - 1] + lin[2:] @ h1[t] for t in (1, 2)]  # offsets -1, 0
    affine = np.array(TDNN_AFFINE) @ bottleneck + TDNN_AFFINE_BIAS  # offsets 0, 1
    scale = 1.0 / np.sqrt(np.array(BN_VAR) + 1e-3)
    y = np.maximum(affine, 0.0) * scale - np.array(BN_MEAN) * scale + 0.5 * h1[1]
    with torch.no_grad():
        rest = torch.tensor(y, dtype=torch.float32)[None, None]
        for layer in model.layers[2:]:
            rest = layer(rest, (0,), (0,))
        by_hand = torch.log_softmax(model.output(rest), dim=-1)[0].double().numpy()
    assert theirs.shape == (1, 2)
    np.testing.assert_allclose(theirs, by_hand, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(compute(nnet, x), theirs, rtol=1e-5, atol=1e-5)


# ---------------------------------------------------------------------- round trip
def _same_params(a: dict, b: dict) -> None:
    """The fields of a component written and read back: arrays as float32, numbers
    exactly as float32 (absent l2 / constraint = Kaldi's default 0)."""
    for key in sorted(set(a) | set(b)):
        va, vb = a.get(key, 0.0), b.get(key, 0.0)
        if isinstance(va, np.ndarray) or isinstance(vb, np.ndarray):
            np.testing.assert_array_equal(np.float32(va), np.float32(vb), err_msg=key)
        elif isinstance(va, float | int) and not isinstance(va, bool):
            assert np.float32(va) == np.float32(vb), key
        else:
            assert va == vb, key


@pytest.mark.parametrize("binary", [False, True])
def test_write_read_round_trip(binary):
    nnet = nnet3_from_model(tdnnf_model())
    back = read_nnet3(KaldiReader(nnet3_bytes(nnet, binary)))
    assert back.config_lines == nnet.config_lines
    assert [(c.name, c.kind) for c in back.components] == [
        (c.name, c.kind) for c in nnet.components
    ]
    for c, d in zip(nnet.components, back.components, strict=True):
        _same_params(c.params, d.params)
    assert nnet3_bytes(back, binary) == nnet3_bytes(nnet, binary)


@pytest.mark.parametrize("binary", [False, True])
@pytest.mark.parametrize(
    ("cfg", "ivector_dim"),
    [
        (CFG, IVECTOR_DIM),
        (CFG, 0),
        (_cfg(bypass_scale=0.0, time_strides=[2, 0]), IVECTOR_DIM),
        (_cfg(bypass_scale=0.75, time_strides=[]), 0),
    ],
    ids=["tdnnf", "no-ivectors", "no-bypass", "no-tdnnf-layers"],
)
def test_read_back_computes_what_paravg_computes(binary, cfg, ivector_dim):
    model = tdnnf_model(cfg, ivector_dim)
    nnet = read_nnet3(KaldiReader(nnet3_bytes(nnet3_from_model(model), binary)))
    rng = np.random.default_rng(1)
    feats = (rng.standard_normal((40, FEAT_DIM)) * 2 + 1).astype(np.float32)
    iv = rng.standard_normal(ivector_dim).astype(np.float32) if ivector_dim else None
    ours = compute(nnet, feats, iv)
    with torch.no_grad():
        ivt = torch.from_numpy(iv)[None] if ivector_dim else None
        theirs = model(torch.from_numpy(feats)[None], ivt)[0].double().numpy()
    assert ours.shape == theirs.shape == (40 - model.left_context - model.right_context, 40)
    np.testing.assert_allclose(ours, theirs, rtol=1e-4, atol=1e-4 * np.abs(theirs).max())


def test_batchnorm_without_statistics_is_paravgs_identity():
    """A batch-norm that never saw data: paravg uses mean 0, variance 1; Kaldi would draw
    random statistics for count 0, so the file says count 1, mean 0, variance 1."""
    model = tdnnf_model()
    for bn in model.batchnorms():
        bn.zero_stats()
    nnet = nnet3_from_model(model)
    bn = nnet.component("tdnnf3.batchnorm").params
    assert bn["count"] == 1.0 and not bn["mean"].any() and (bn["var"] == 1.0).all()
    feats = np.random.default_rng(2).standard_normal((30, FEAT_DIM)).astype(np.float32)
    iv = np.ones(IVECTOR_DIM, np.float32)
    with torch.no_grad():
        theirs = model(torch.from_numpy(feats)[None], torch.from_numpy(iv)[None])[0].numpy()
    ours = compute(read_nnet3(KaldiReader(nnet3_bytes(nnet, True))), feats, iv)
    np.testing.assert_allclose(ours, theirs, rtol=1e-4, atol=1e-4 * np.abs(theirs).max())


# ---------------------------------------------------------------------- vosk
@pytest.fixture(scope="module")
def tm40():
    return monophone_transition_model(40)[1]


def _reference(model, feats, ivectors, tm, graph):
    """paravg's network (+ i-vectors per frame) decoded by Kaldi's FasterDecoder on the
    export's graph at acoustic scale 1, graph scale 0.9 (vosk's)."""
    tid2pdf = np.array([pdf for row in transition_ids(tm) for _t, _d, pdf in row])
    ll = {"a": paravg_loglikes(model, feats, ivectors, None)}
    return reference_decode(ll, tid2pdf, graph / "HCLG.fst", graph / "words.txt", 1.0)["a"]


@pytest.mark.parametrize("binary", [True, False])
@pytest.mark.parametrize("with_ivectors", [False, True])
def test_vosk_decodes_like_paravgs_decoder(tmp_path, ivector_files, tm40, binary, with_ivectors):
    """vosk 0.3.45 (Kaldi's nnet3 reader and looped computation: TdnnComponent,
    LinearComponent, BatchNormComponent in test mode, the Sum/Scale bypass) loads the
    exported TDNN-F and decodes a phone loop, acoustic scale 1 (so the acoustics, not the
    loop's penalty, choose each of ~90 phones): its hypothesis is exactly that of Kaldi's
    FasterDecoder on paravg's own network (dither 0 on both sides; with i-vectors, each
    frame given the one vosk's looped computation uses there). The same comparison sees
    a bypass scale or one batch-norm offset that differ from paravg's, and the i-vectors."""
    wav, samples = tone_audio(tmp_path)
    mfcc = MfccOptions(dither=0.0)
    feats = compute_mfcc(samples.astype(np.float32), mfcc)
    ivectors = None
    system = IvectorSystem(*ivector_files) if with_ivectors else None
    ivector_dim = IVECTOR_DIM if with_ivectors else 0
    if with_ivectors:
        from paravg.ivector.extractor import IvectorExtractor
        from paravg.ivector.features import IvectorFeaturePipeline
        from paravg.ivector.online import OnlineIvectorOptions
        from paravg.ivector.ubm import DiagGmm

        pca, ubm, extractor = ivector_files
        parts = (IvectorFeaturePipeline.load(pca), DiagGmm.load(ubm),
                 IvectorExtractor.load(extractor), OnlineIvectorOptions())  # fmt: skip
        shape = new_model(CFG, FEAT_DIM, ivector_dim, NUM_TARGETS)  # contexts only
        ivectors = vosk_online_ivectors(shape, feats, len(samples), mfcc, *parts)
    model = tdnnf_model(
        ivector_dim=ivector_dim,
        stats_feats=feats,
        stats_ivectors=None if ivectors is None else ivectors[: len(feats)],
    )
    path = tmp_path / "final.pt"
    torch.save(model_to_file_dict(model), path)
    graph = write_phone_loop_graph(tm40, list(PHONES[:40]), tmp_path / "graph", 2.0)
    out = tmp_path / "kaldi"
    export_model(path, out, tm40, mfcc, graph, system, 1.0, {"lattice_beam": 1.0},
                 binary=binary)  # fmt: skip
    ours = _reference(model, feats, ivectors, tm40, graph)
    vosk = vosk_decode(out, {"a": wav})["a"]
    assert len(ours.split()) >= 60, ours  # ~1 phone per 2 frames: the acoustics decide
    assert vosk == ours

    # what the comparison can see: each of these networks decodes otherwise
    def differs(edit) -> None:
        other = tdnnf_model(
            ivector_dim=ivector_dim,
            stats_feats=feats,
            stats_ivectors=None if ivectors is None else ivectors[: len(feats)],
        )
        edit(other)
        assert _reference(other, feats, ivectors, tm40, graph) != vosk

    def bypass(m):
        m.layers[2].bypass_scale = 0.6

    def offset(m):  # tdnnf3.batchnorm's mean (so its offset) 0.1 higher in one dim
        bn = m.layers[2].batchnorm
        mean, var = bn.test_mean_var()
        mean[0] += 0.1
        bn.stats_sum.copy_(mean * bn.stats_count)
        bn.stats_sumsq.copy_((var + mean * mean) * bn.stats_count)

    differs(bypass)
    differs(offset)
    if with_ivectors:
        assert _reference(model, feats, np.zeros_like(ivectors), tm40, graph) != vosk


def test_an_export_names_its_family(tmp_path):
    """The nnet3 of an unknown family is refused by name."""
    model = tdnnf_model()
    model.family = "lstm"
    with pytest.raises(Exception, match="no nnet3 export for the model family 'lstm'"):
        nnet3_from_model(model)
    assert isinstance(nnet3_from_model(tdnnf_model()), Nnet3)
