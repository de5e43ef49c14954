"""The TDNN as an nnet3 network: the file Kaldi reads, and the same outputs as paravg.

The round trip through paravg's own writer and reader cannot see a bug both share; the
file itself is checked against bytes worked out by hand from Kaldi's C++ ``Write``
functions (kaldi-asr/kaldi ``src/nnet3/nnet-nnet.cc``, ``nnet-simple-component.cc``,
``nnet-component-itf.cc``, ``nnet-normalize-component.cc``, ``src/matrix/kaldi-matrix.cc``,
``kaldi-vector.cc``, ``src/base/io-funcs.cc``), and Kaldi's own reader (vosk) loads and
decodes exported files in ``test_layout.py``."""

from __future__ import annotations

import struct

import numpy as np
import pytest
import torch
from export_models import FEAT_DIM, IVECTOR_DIM, nnet3_bytes, random_model

from paravg.export.kaldi_stream import KaldiReader
from paravg.export.nnet3 import NgOptions, compute, nnet3_from_model, read_nnet3
from paravg.nnet.tdnn import TdnnModel
from tests.unit.dummies import tdnn_config


def test_config_lines_are_kaldis_xconfig_network():
    nnet = nnet3_from_model(random_model())
    lines = nnet.config_lines
    assert lines[0] == f"input-node name=input dim={FEAT_DIM}"
    assert lines[1] == f"input-node name=ivector dim={IVECTOR_DIM}"
    assert lines[2] == (
        "component-node name=lda component=lda input=Append(Offset(input, -2), "
        "Offset(input, -1), input, Offset(input, 1), Offset(input, 2), "
        "ReplaceIndex(ivector, t, 0))"
    )
    assert (
        "input=Append(Offset(tdnn1.renorm, -1), tdnn1.renorm, Offset(tdnn1.renorm, 1))"
        in (lines[6])
    )
    assert lines[-1] == "output-node name=output input=output.log-softmax objective=linear"
    kinds = [c.kind for c in nnet.components]
    assert kinds[0] == "FixedAffineComponent"
    assert kinds[1:4] == [
        "NaturalGradientAffineComponent", "RectifiedLinearComponent", "NormalizeComponent",
    ]  # fmt: skip
    assert kinds[-1] == "LogSoftmaxComponent"
    assert nnet.output_dim() == 40


def test_file_starts_and_nonlinear_fields():
    nnet = nnet3_from_model(random_model())
    text, binary = nnet3_bytes(nnet, False), nnet3_bytes(nnet, True)
    assert text.startswith(b"<Nnet3> \n")
    assert binary.startswith(b"\0B<Nnet3> \n")
    relu = text[text.index(b"<RectifiedLinearComponent>") :]
    relu = relu[: relu.index(b"</RectifiedLinearComponent>")]
    for field in (b"<Dim>", b"<ValueAvg>", b"<DerivAvg>", b"<Count>"):
        assert field in relu
    assert len(binary) < 0.5 * len(text)


@pytest.mark.parametrize("binary", [False, True])
@pytest.mark.parametrize("ivector_dim", [0, IVECTOR_DIM])
def test_read_back_computes_what_paravg_computes(binary, ivector_dim):
    model = random_model(ivector_dim)
    nnet = read_nnet3(KaldiReader(nnet3_bytes(nnet3_from_model(model), binary)))
    rng = np.random.default_rng(1)
    feats = rng.standard_normal((30, FEAT_DIM)).astype(np.float32)
    iv = rng.standard_normal(ivector_dim).astype(np.float32) if ivector_dim else None
    ours = compute(nnet, feats, iv)
    with torch.no_grad():
        ivt = torch.from_numpy(iv)[None] if ivector_dim else None
        theirs = model(torch.from_numpy(feats)[None], ivt)[0].double().numpy()
    assert ours.shape == theirs.shape == (30 - model.left_context - model.right_context, 40)
    np.testing.assert_allclose(ours, theirs, atol=2e-4)


# ---------------------------------------------------------------------- Kaldi's bytes
# A network small enough to write out by hand: 1-dim input spliced at −1, +1; the LDA-like
# 2×2 transform; one 2-dim TDNN layer spliced at −1, 0; 2 outputs. Parameters are short
# binary fractions, so their text form is the same in C++'s `os << f` and anywhere else.
TINY_CFG = tdnn_config((2, [-1, 0]), input_splice=[-1, 1])
TINY = {
    "lda_weight": [[0.5, -1.0], [2.0, 0.25]],
    "lda_bias": [1.0, -0.5],
    "hidden_weight": [[1.0, 2.0, -3.0, 0.5], [0.0, -0.25, 4.0, 8.0]],
    "hidden_bias": [0.125, -2.0],
    "output_weight": [[0.5, 0.0], [-1.5, 3.0]],
    "output_bias": [0.75, -0.75],
}


def tiny_model():
    model = TdnnModel(TINY_CFG, 1, 0, 2)
    with torch.no_grad():
        model.lda_weight.copy_(torch.tensor(TINY["lda_weight"]))
        model.lda_bias.copy_(torch.tensor(TINY["lda_bias"]))
        model.hidden[0].weight.copy_(torch.tensor(TINY["hidden_weight"]))
        model.hidden[0].bias.copy_(torch.tensor(TINY["hidden_bias"]))
        model.output.weight.copy_(torch.tensor(TINY["output_weight"]))
        model.output.bias.copy_(torch.tensor(TINY["output_bias"]))
    return model


# The config section of Nnet::Write (nnet-nnet.cc): GetConfigLines(include_dim=false), one
# per line, as Nnet::GetAsConfigLine and Descriptor::WriteConfig print them ("Append(" parts
# joined by ", " ")", "Offset(" node ", " t ")"), then an empty line.
TINY_CONFIG = (
    "input-node name=input dim=1\n"
    "component-node name=lda component=lda input=Append(Offset(input, -1), Offset(input, 1))\n"
    "component-node name=tdnn1.affine component=tdnn1.affine input=Append(Offset(lda, -1), lda)\n"
    "component-node name=tdnn1.relu component=tdnn1.relu input=tdnn1.affine\n"
    "component-node name=tdnn1.renorm component=tdnn1.renorm input=tdnn1.relu\n"
    "component-node name=output.affine component=output.affine input=tdnn1.renorm\n"
    "component-node name=output.log-softmax component=output.log-softmax input=output.affine\n"
    "output-node name=output input=output.log-softmax objective=linear\n"
    "\n"
)

# Text mode, written by hand from Kaldi's Write functions: WriteToken = the token and a
# space; WriteBasicType = `os << value << " "`; Vector::Write = " [ v v ]\n";
# Matrix::Write = " [" then "\n  " and `v ` per row, then "]\n"; bool = "F ".
# Nnet::Write: "<Nnet3> " endl, config, "<NumComponents> 6 " endl, then per component
# "<ComponentName> name " + Component::Write + endl, then "</Nnet3> ".
# FixedAffineComponent::Write: <LinearParams> <BiasParams>. NaturalGradientAffine:
# WriteUpdatableCommon (<MaxChange> as it is > 0, <LearningRate>), <LinearParams>,
# <BiasParams>, <RankIn>, <RankOut>, <UpdatePeriod>, <NumSamplesHistory>, <Alpha>.
# NonlinearComponent::Write: <Dim> <ValueAvg> <DerivAvg> <Count>, then optional statistics
# (<OderivRms> ...) that NonlinearComponent::Read reads only when present: left out.
# NormalizeComponent::Write: <InputDim> <TargetRms> <AddLogStddev>.
NG_TAIL = "<RankIn> 20 <RankOut> 80 <UpdatePeriod> 4 <NumSamplesHistory> 2000 <Alpha> 4 "
TINY_TEXT = (
    "<Nnet3> \n" + TINY_CONFIG + "<NumComponents> 6 \n"
    "<ComponentName> lda <FixedAffineComponent> "
    "<LinearParams>  [\n  0.5 -1 \n  2 0.25 ]\n<BiasParams>  [ 1 -0.5 ]\n"
    "</FixedAffineComponent> \n"
    "<ComponentName> tdnn1.affine <NaturalGradientAffineComponent> "
    "<MaxChange> 0.75 <LearningRate> 0 "
    "<LinearParams>  [\n  1 2 -3 0.5 \n  0 -0.25 4 8 ]\n<BiasParams>  [ 0.125 -2 ]\n"
    + NG_TAIL
    + "</NaturalGradientAffineComponent> \n"
    "<ComponentName> tdnn1.relu <RectifiedLinearComponent> "
    "<Dim> 2 <ValueAvg>  [ 0 0 ]\n<DerivAvg>  [ 0 0 ]\n<Count> 0 "
    "</RectifiedLinearComponent> \n"
    "<ComponentName> tdnn1.renorm <NormalizeComponent> "
    "<InputDim> 2 <TargetRms> 1 <AddLogStddev> F </NormalizeComponent> \n"
    "<ComponentName> output.affine <NaturalGradientAffineComponent> "
    "<MaxChange> 1.5 <LearningRate> 0 "
    "<LinearParams>  [\n  0.5 0 \n  -1.5 3 ]\n<BiasParams>  [ 0.75 -0.75 ]\n"
    + NG_TAIL
    + "</NaturalGradientAffineComponent> \n"
    "<ComponentName> output.log-softmax <LogSoftmaxComponent> "
    "<Dim> 2 <ValueAvg>  [ 0 0 ]\n<DerivAvg>  [ 0 0 ]\n<Count> 0 "
    "</LogSoftmaxComponent> \n"
    "</Nnet3> "
).encode()


def _tiny_binary() -> bytes:
    """The same network in binary mode, byte by byte from Kaldi's io-funcs: the ``\\0B``
    header; tokens and the config section as in text mode; int32 = size byte 4 then
    little-endian; float = 4 then IEEE single, double (``count_``) = 8 then IEEE double;
    bool = ``F`` alone; Vector = ``FV `` int32 dim, data; Matrix = ``FM `` int32 rows,
    int32 cols, row-major data; no newline after a component or after NumComponents."""

    def tok(*names):
        return b"".join(n.encode() + b" " for n in names)

    def i32(v):
        return b"\x04" + struct.pack("<i", v)

    def f32(v):
        return b"\x04" + struct.pack("<f", v)

    def fv(values):
        return tok("FV") + i32(len(values)) + struct.pack(f"<{len(values)}f", *values)

    def fm(rows):
        flat = [v for row in rows for v in row]
        data = struct.pack(f"<{len(flat)}f", *flat)
        return tok("FM") + i32(len(rows)) + i32(len(rows[0])) + data

    def ng(name, max_change, w, b):
        return (
            tok("<ComponentName>", name, "<NaturalGradientAffineComponent>", "<MaxChange>")
            + f32(max_change)
            + tok("<LearningRate>") + f32(0.0)
            + tok("<LinearParams>") + fm(w) + tok("<BiasParams>") + fv(b)
            + tok("<RankIn>") + i32(20) + tok("<RankOut>") + i32(80)
            + tok("<UpdatePeriod>") + i32(4) + tok("<NumSamplesHistory>") + f32(2000.0)
            + tok("<Alpha>") + f32(4.0) + tok("</NaturalGradientAffineComponent>")
        )  # fmt: skip

    def nonlinear(name, kind):
        return (
            tok("<ComponentName>", name, f"<{kind}>", "<Dim>") + i32(2)
            + tok("<ValueAvg>") + fv([0.0, 0.0]) + tok("<DerivAvg>") + fv([0.0, 0.0])
            + tok("<Count>") + b"\x08" + struct.pack("<d", 0.0) + tok(f"</{kind}>")
        )  # fmt: skip

    return (
        b"\0B" + tok("<Nnet3>") + b"\n" + TINY_CONFIG.encode()
        + tok("<NumComponents>") + i32(6)
        + tok("<ComponentName>", "lda", "<FixedAffineComponent>", "<LinearParams>")
        + fm(TINY["lda_weight"]) + tok("<BiasParams>") + fv(TINY["lda_bias"])
        + tok("</FixedAffineComponent>")
        + ng("tdnn1.affine", 0.75, TINY["hidden_weight"], TINY["hidden_bias"])
        + nonlinear("tdnn1.relu", "RectifiedLinearComponent")
        + tok("<ComponentName>", "tdnn1.renorm", "<NormalizeComponent>", "<InputDim>") + i32(2)
        + tok("<TargetRms>") + f32(1.0) + tok("<AddLogStddev>") + b"F"
        + tok("</NormalizeComponent>")
        + ng("output.affine", 1.5, TINY["output_weight"], TINY["output_bias"])
        + nonlinear("output.log-softmax", "LogSoftmaxComponent")
        + tok("</Nnet3>")
    )  # fmt: skip


def test_the_file_is_kaldis_bytes_written_by_hand():
    """paravg's writer against Kaldi's format worked out by hand from Kaldi's Write
    functions (not through paravg's reader): a writer bug that paravg's reader undoes
    (field order, layout, a transposed matrix) still fails here."""
    nnet = nnet3_from_model(tiny_model())
    assert nnet3_bytes(nnet, False) == TINY_TEXT
    assert nnet3_bytes(nnet, True) == _tiny_binary()


@pytest.mark.parametrize("binary", [False, True])
def test_the_reader_reads_kaldis_bytes_written_by_hand(binary):
    """paravg's reader on the hand-written files (not on its writer's output): every
    parameter where Kaldi put it."""
    nnet = read_nnet3(KaldiReader(_tiny_binary() if binary else TINY_TEXT))
    assert "\n".join(nnet.config_lines) + "\n\n" == TINY_CONFIG
    assert [c.name for c in nnet.components] == [
        "lda", "tdnn1.affine", "tdnn1.relu", "tdnn1.renorm", "output.affine",
        "output.log-softmax",
    ]  # fmt: skip
    for name, key in (("lda", "lda"), ("tdnn1.affine", "hidden"), ("output.affine", "output")):
        params = nnet.component(name).params
        np.testing.assert_array_equal(params["linear"], TINY[f"{key}_weight"])
        np.testing.assert_array_equal(params["bias"], TINY[f"{key}_bias"])
    assert nnet.component("output.affine").params["max_change"] == 1.5
    assert nnet.component("tdnn1.affine").params["ng"] == NgOptions(20, 80, 4, 2000.0, 4.0)
    assert nnet.component("tdnn1.renorm").params == {"dim": 2, "target_rms": 1.0}
