"""The TDNN-LSTM as an nnet3 network: xconfig's fast-lstmp-layer network, the bytes of
Kaldi's LstmNonlinearityComponent and BackpropTruncationComponent, the read-back network
computing (IfDefined recurrences, dim-range nodes, the output-delay) what paravg computes,
and vosk (Kaldi's own reader and looped nnet3 computation) decoding with it exactly as
paravg's decoder does with paravg's network.

The bytes below are worked out by hand from Kaldi's C++ (kaldi-asr/kaldi
``src/nnet3/nnet-combined-component.cc`` LstmNonlinearityComponent::Write,
``src/nnet3/nnet-general-component.cc`` BackpropTruncationComponent::Write,
``nnet-component-itf.cc`` WriteUpdatableCommon, ``nnet-nnet.cc`` GetAsConfigLine for the
dim-range nodes, ``nnet-descriptor.cc`` the descriptors' WriteConfig), not through
paravg's reader; the config lines from ``steps/libs/nnet3/xconfig/lstm.py``
(XconfigFastLstmpLayer) and ``basic_layers.py`` (output-layer's output-delay)."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch
from export_models import (
    FEAT_DIM,
    IVECTOR_DIM,
    NUM_TARGETS,
    assert_written_as_by_hand,
    lstm_cfg,
    nnet3_bytes,
    one_component_file,
    tone_audio,
)
from kaldi_bytes import f32, f64, fm, fv, i32, tok

from paravg.corpus.phones import PHONES
from paravg.export.kaldi_stream import KaldiReader
from paravg.export.layout import IvectorSystem, export_model
from paravg.export.nnet3 import (
    NgOptions,
    compute,
    nnet3_from_model,
    nnet_context,
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
from tests.unit.dummies import (
    lstm_layer,
    random_head,
    random_lda,
    standardising_lda,
    tdnn_lstm_config,
)

CFG = lstm_cfg()


def lstm_model(cfg=CFG, ivector_dim=IVECTOR_DIM, seed=0, stats_feats=None, sharp=False):
    """A random TDNN-LSTM in eval mode: Kaldi's initialisation, a random output layer and
    priors, and an LDA-like transform (random, or standardising ``stats_feats`` with the
    i-vector part 3 x, so the network's input has the scale it has in use). ``sharp``:
    the LSTMs' affine biases and the output bias zero, W_all's input columns x 3, W_rp's
    non-recurrent rows x 8, the output weights x 15: outputs that change from frame to
    frame, so that the acoustics choose the phones of a loop, with the recurrent weights
    as initialised (larger ones make the recurrence chaotic: float32 rounding then grows
    to whole nats, and no two implementations agree)."""
    model = new_model(cfg, FEAT_DIM, ivector_dim, NUM_TARGETS)
    model.init_parameters(seed)
    gen = random_head(model, seed, weight_scale=2.0)
    if stats_feats is None:
        random_lda(model, gen)
    else:
        standardising_lda(model, stats_feats, cfg["input_splice"])
    with torch.no_grad():
        if sharp:
            model.output.weight.mul_(15.0)
            model.output.bias.zero_()
            for layer in model.layers:
                if hasattr(layer, "W_all"):
                    R = layer.rec_dim
                    layer.W_all.weight[:, :-R].mul_(3.0)
                    layer.W_all.bias.zero_()
                    layer.W_rp.weight[R:].mul_(8.0)
                    layer.W_rp.bias.zero_()
    return model.eval()


# ---------------------------------------------------------------------- the network
def test_config_lines_are_xconfigs_fast_lstmp_network():
    nnet = nnet3_from_model(lstm_model())
    lines = nnet.config_lines
    assert lines[:3] == [
        f"input-node name=input dim={FEAT_DIM}",
        f"input-node name=ivector dim={IVECTOR_DIM}",
        "component-node name=lda component=lda input=Append(Offset(input, -1), input, "
        "Offset(input, 1), ReplaceIndex(ivector, t, 0))",
    ]
    i = lines.index("component-node name=tdnn2.renorm component=tdnn2.renorm input=tdnn2.relu")
    assert lines[i + 1 : i + 10] == [
        "component-node name=lstm1.W_all component=lstm1.W_all "
        "input=Append(tdnn2.renorm, IfDefined(Offset(lstm1.r_trunc, -3)))",
        "component-node name=lstm1.lstm_nonlin component=lstm1.lstm_nonlin "
        "input=Append(lstm1.W_all, IfDefined(Offset(lstm1.c_trunc, -3)))",
        "dim-range-node name=lstm1.c input-node=lstm1.lstm_nonlin dim-offset=0 dim=16",
        "dim-range-node name=lstm1.m input-node=lstm1.lstm_nonlin dim-offset=16 dim=16",
        "component-node name=lstm1.rp component=lstm1.W_rp input=lstm1.m",
        "dim-range-node name=lstm1.r input-node=lstm1.rp dim-offset=0 dim=4",
        "component-node name=lstm1.cr_trunc component=lstm1.cr_trunc "
        "input=Append(lstm1.c, lstm1.r)",
        "dim-range-node name=lstm1.c_trunc input-node=lstm1.cr_trunc dim-offset=0 dim=16",
        "dim-range-node name=lstm1.r_trunc input-node=lstm1.cr_trunc dim-offset=16 dim=4",
    ]
    assert (
        "component-node name=tdnn3.affine component=tdnn3.affine "
        "input=Append(Offset(lstm1.rp, -3), lstm1.rp, Offset(lstm1.rp, 3))"
    ) in lines
    assert (
        "component-node name=lstm2.W_all component=lstm2.W_all "
        "input=Append(tdnn3.renorm, IfDefined(Offset(lstm2.r_trunc, -3)))"
    ) in lines
    assert lines[-3:] == [
        "component-node name=output.affine component=output.affine input=lstm2.rp",
        "component-node name=output.log-softmax component=output.log-softmax input=output.affine",
        "output-node name=output input=Offset(output.log-softmax, 2) objective=linear",
    ]
    # components in xconfig's order (W_all, lstm_nonlin, cr_trunc, W_rp) and kinds
    names = [c.name for c in nnet.components]
    assert names[names.index("lstm1.W_all") :][:4] == [
        "lstm1.W_all", "lstm1.lstm_nonlin", "lstm1.cr_trunc", "lstm1.W_rp"
    ]  # fmt: skip
    kinds = {c.name: c.kind for c in nnet.components}
    assert kinds["tdnn3.relu"] == "RectifiedLinearComponent"
    assert kinds["tdnn3.renorm"] == "NormalizeComponent"
    assert kinds["lstm2.W_all"] == kinds["lstm2.W_rp"] == "NaturalGradientAffineComponent"
    assert kinds["lstm2.lstm_nonlin"] == "LstmNonlinearityComponent"
    assert kinds["lstm2.cr_trunc"] == "BackpropTruncationComponent"
    trunc = nnet.component("lstm1.cr_trunc").params
    assert trunc["dim"] == 16 + 4 and trunc["recurrence_interval"] == 3
    assert np.float32(trunc["scale"]) == np.float32(0.85)  # 1 - 3 / 20
    assert (trunc["clipping_threshold"], trunc["zeroing_threshold"]) == (30.0, 15.0)
    assert trunc["zeroing_interval"] == 20
    nonlin = nnet.component("lstm1.lstm_nonlin")
    assert nonlin.input_dim == 5 * 16 and nonlin.output_dim == 2 * 16
    np.testing.assert_allclose(
        nonlin.params["self_repair_config"], [0.05, 0.05, 0.2, 0.05, 0.2] + [1e-5] * 5
    )
    assert nonlin.params["max_change"] == 0.75
    assert nnet.component("lstm1.W_all").params["max_change"] == 1.5
    assert nnet.component("lstm1.W_all").params["ng"] == NgOptions(
        18, 32, 4, 2000.0, 4.0
    )  # (36 + 1) / 2, 64 / 2
    assert nnet.component("lstm1.W_all").input_dim == 32 + 4
    assert nnet.output_dim() == NUM_TARGETS


def test_no_output_delay_is_a_plain_output_node():
    nnet = nnet3_from_model(lstm_model(lstm_cfg(output_delay=0)))
    assert nnet.config_lines[-1] == (
        "output-node name=output input=output.log-softmax objective=linear"
    )


# ---------------------------------------------------------------------- Kaldi's bytes
# One fast-lstmp-layer small enough to write out by hand: 1-dim input, C = 2, R = P = 1,
# delay -2, decay-time 8 (scale 1 - 2/8 = 0.75), clipping 32, zeroing 16 every 24 frames,
# self-repair scale 1/16, nonlinearity max-change 0.5; statistics of 4 rows.
TINY_CFG = tdnn_lstm_config(
    lstm_layer(2, 1, -2, non_recurrent_projection_dim=1, decay_time=8,
               clipping_threshold=32, zeroing_threshold=16, zeroing_interval=24,
               self_repair_scale_nonlinearity=0.0625, nonlinearity_max_change=0.5),
    output_delay=1,
    input_splice=[0],
)  # fmt: skip
PEEPHOLES = [[0.5, -1.0], [0.25, 2.0], [-0.5, 1.0]]  # w_ic, w_fc, w_oc
VALUE_AVG = [[0.5, 0.25], [0.75, 0.5], [-0.25, 0.125], [0.5, 0.5], [0.0, -0.5]]
DERIV_AVG = [[0.25, 0.125], [0.1875, 0.25], [0.5, 0.75], [0.25, 0.0625], [1.0, 0.5]]
REPAIRED = [8.0, 0.0, 4.0, 0.0, 2.0]  # rows x units repaired: over 4 x 2, 1 0 0.5 0 0.25
COUNT = 4.0


def tiny_model():
    model = new_model(TINY_CFG, 1, 0, 2)
    model.init_parameters(0)
    nonlin = model.layers[0].lstm_nonlin
    with torch.no_grad():
        nonlin.params.copy_(torch.tensor(PEEPHOLES))
        model.output.weight.normal_(0, 1, generator=torch.Generator().manual_seed(1))
    nonlin.value_sum = torch.tensor(VALUE_AVG, dtype=torch.float64) * COUNT
    nonlin.deriv_sum = torch.tensor(DERIV_AVG, dtype=torch.float64) * COUNT
    nonlin.self_repair_total = torch.tensor(REPAIRED, dtype=torch.float64)
    nonlin.count = torch.tensor(COUNT, dtype=torch.float64)
    return model.eval()


TINY_CONFIG = [
    "input-node name=input dim=1",
    "component-node name=lda component=lda input=input",
    "component-node name=lstm1.W_all component=lstm1.W_all "
    "input=Append(lda, IfDefined(Offset(lstm1.r_trunc, -2)))",
    "component-node name=lstm1.lstm_nonlin component=lstm1.lstm_nonlin "
    "input=Append(lstm1.W_all, IfDefined(Offset(lstm1.c_trunc, -2)))",
    "dim-range-node name=lstm1.c input-node=lstm1.lstm_nonlin dim-offset=0 dim=2",
    "dim-range-node name=lstm1.m input-node=lstm1.lstm_nonlin dim-offset=2 dim=2",
    "component-node name=lstm1.rp component=lstm1.W_rp input=lstm1.m",
    "dim-range-node name=lstm1.r input-node=lstm1.rp dim-offset=0 dim=1",
    "component-node name=lstm1.cr_trunc component=lstm1.cr_trunc input=Append(lstm1.c, lstm1.r)",
    "dim-range-node name=lstm1.c_trunc input-node=lstm1.cr_trunc dim-offset=0 dim=2",
    "dim-range-node name=lstm1.r_trunc input-node=lstm1.cr_trunc dim-offset=2 dim=1",
    "component-node name=output.affine component=output.affine input=lstm1.rp",
    "component-node name=output.log-softmax component=output.log-softmax input=output.affine",
    "output-node name=output input=Offset(output.log-softmax, 1) objective=linear",
]

# Text mode (WriteToken: token + " "; WriteBasicType: value + " "; Matrix " [" + "\n  v "
# per row + "]\n"; Vector " [ v ]\n"). WriteUpdatableCommon: <MaxChange> (> 0), no
# <L2Regularize> (0), <LearningRate>. <UseDropout> is written only when true. Kaldi prints
# the thresholds 0.05f and 0.2f with 6 digits ("0.05", "0.2"), paravg with 9: the same
# floats. The statistics are written as averages: sums / count, self-repair / (count C).
TINY_TEXT = {
    "lstm1.lstm_nonlin": "<LstmNonlinearityComponent> <MaxChange> 0.5 <LearningRate> 0 "
    "<Params>  [\n  0.5 -1 \n  0.25 2 \n  -0.5 1 ]\n"
    "<ValueAvg>  [\n  0.5 0.25 \n  0.75 0.5 \n  -0.25 0.125 \n  0.5 0.5 \n  0 -0.5 ]\n"
    "<DerivAvg>  [\n  0.25 0.125 \n  0.1875 0.25 \n  0.5 0.75 \n  0.25 0.0625 \n  1 0.5 ]\n"
    "<SelfRepairConfig>  [ 0.0500000007 0.0500000007 0.200000003 0.0500000007 0.200000003 "
    "0.0625 0.0625 0.0625 0.0625 0.0625 ]\n<SelfRepairProb>  [ 1 0 0.5 0 0.25 ]\n"
    "<Count> 4 </LstmNonlinearityComponent> \n",
    "lstm1.cr_trunc": "<BackpropTruncationComponent> <Dim> 3 <Scale> 0.75 "
    "<ClippingThreshold> 32 <ZeroingThreshold> 16 <ZeroingInterval> 24 "
    "<RecurrenceInterval> 2 <NumElementsClipped> 0 <NumElementsZeroed> 0 "
    "<NumElementsProcessed> 0 <NumZeroingBoundaries> 0 </BackpropTruncationComponent> \n",
}


# Binary mode: int32 = size byte 4 + little-endian; float = 4 + IEEE single; double
# (count_, the truncation's statistics) = 8 + IEEE double; Matrix = "FM " + rows + cols
# + row-major floats (Kaldi writes its double statistics as a float matrix); Vector =
# "FV " + dim + floats.
TINY_BINARY = {
    "lstm1.lstm_nonlin": tok("<LstmNonlinearityComponent>", "<MaxChange>") + f32(0.5)
    + tok("<LearningRate>") + f32(0.0) + tok("<Params>") + fm(PEEPHOLES)
    + tok("<ValueAvg>") + fm(VALUE_AVG) + tok("<DerivAvg>") + fm(DERIV_AVG)
    + tok("<SelfRepairConfig>") + fv([0.05, 0.05, 0.2, 0.05, 0.2] + [0.0625] * 5)
    + tok("<SelfRepairProb>") + fv([1.0, 0.0, 0.5, 0.0, 0.25])
    + tok("<Count>") + f64(COUNT) + tok("</LstmNonlinearityComponent>"),
    "lstm1.cr_trunc": tok("<BackpropTruncationComponent>", "<Dim>") + i32(3)
    + tok("<Scale>") + f32(0.75) + tok("<ClippingThreshold>") + f32(32.0)
    + tok("<ZeroingThreshold>") + f32(16.0) + tok("<ZeroingInterval>") + i32(24)
    + tok("<RecurrenceInterval>") + i32(2) + tok("<NumElementsClipped>") + f64(0.0)
    + tok("<NumElementsZeroed>") + f64(0.0) + tok("<NumElementsProcessed>") + f64(0.0)
    + tok("<NumZeroingBoundaries>") + f64(0.0) + tok("</BackpropTruncationComponent>"),
}  # fmt: skip


def test_the_components_are_kaldis_bytes_written_by_hand():
    nnet = nnet3_from_model(tiny_model())
    assert [c.name for c in nnet.components] == [
        "lda", "lstm1.W_all", "lstm1.lstm_nonlin", "lstm1.cr_trunc", "lstm1.W_rp",
        "output.affine", "output.log-softmax",
    ]  # fmt: skip
    assert_written_as_by_hand(nnet, TINY_CONFIG, TINY_TEXT, TINY_BINARY)


@pytest.mark.parametrize("binary", [False, True])
def test_the_reader_reads_kaldis_bytes_written_by_hand(binary):
    for name in TINY_TEXT:
        body = TINY_BINARY[name] if binary else TINY_TEXT[name].encode()
        comp = read_nnet3(KaldiReader(one_component_file(name, body, binary))).components[0]
        p = comp.params
        if name == "lstm1.lstm_nonlin":
            np.testing.assert_array_equal(p["params"], PEEPHOLES)
            np.testing.assert_array_equal(p["value_avg"], VALUE_AVG)
            np.testing.assert_array_equal(p["deriv_avg"], DERIV_AVG)
            np.testing.assert_array_equal(p["self_repair_prob"], [1, 0, 0.5, 0, 0.25])
            assert p["count"] == COUNT and p["use_dropout"] is False
            assert p["max_change"] == 0.5 and p["learning_rate"] == 0.0
            assert comp.input_dim == 10 and comp.output_dim == 4
        else:
            assert p["dim"] == 3 and p["scale"] == 0.75 and p["recurrence_interval"] == 2
            assert (p["clipping_threshold"], p["zeroing_threshold"]) == (32.0, 16.0)
            assert p["zeroing_interval"] == 24 and p["count"] == 0.0


def test_the_tiny_network_computes_by_hand():
    """The tiny network from its bytes, frame by frame with the equations of
    ``ComputeLstmNonlinearity`` written out here: c̃ and r̃ of t - 2 (zero before the first
    frame), scaled 0.75; the output at t reads the layer at t + 1."""
    model = tiny_model()
    nnet = read_nnet3(KaldiReader(nnet3_bytes(nnet3_from_model(model), True)))
    x = np.array([[0.5], [-1.0], [2.0], [0.25], [-0.75], [1.5], [1.0]])
    lda = nnet.component("lda").params
    W_all, W_rp = nnet.component("lstm1.W_all").params, nnet.component("lstm1.W_rp").params
    out = nnet.component("output.affine").params
    w = np.array(PEEPHOLES)

    def sig(v):
        return 1 / (1 + np.exp(-v))

    c_tr, r_tr, rp = {}, {}, {}
    for t in range(len(x)):
        h = lda["linear"].astype(float) @ x[t] + lda["bias"]
        r_prev, c_prev = r_tr.get(t - 2, np.zeros(1)), c_tr.get(t - 2, np.zeros(2))
        a = W_all["linear"].astype(float) @ np.concatenate([h, r_prev]) + W_all["bias"]
        i = sig(a[0:2] + w[0] * c_prev)
        f = sig(a[2:4] + w[1] * c_prev)
        c = f * c_prev + i * np.tanh(a[4:6])
        o = sig(a[6:8] + w[2] * c)
        rp[t] = W_rp["linear"].astype(float) @ (o * np.tanh(c)) + W_rp["bias"]
        c_tr[t], r_tr[t] = 0.75 * c, 0.75 * rp[t][:1]
    y = np.stack([out["linear"].astype(float) @ rp[t + 1] + out["bias"] for t in range(6)])
    by_hand = y - np.log(np.exp(y).sum(axis=1, keepdims=True))
    np.testing.assert_allclose(compute(nnet, x), by_hand, rtol=1e-6, atol=1e-6)
    with torch.no_grad():
        theirs = model(torch.tensor(x, dtype=torch.float32)[None])[0].double().numpy()
    np.testing.assert_allclose(theirs, by_hand, rtol=1e-5, atol=1e-5)


# ---------------------------------------------------------------------- round trip
@pytest.mark.parametrize("binary", [False, True])
def test_write_read_round_trip(binary):
    model = lstm_model()
    nonlin = model.layers[2].lstm_nonlin  # statistics as a training job leaves them
    nonlin.value_sum = torch.rand(5, 16, dtype=torch.float64) * 30
    nonlin.deriv_sum = torch.rand(5, 16, dtype=torch.float64) * 10
    nonlin.self_repair_total = torch.tensor([30.0, 0, 2, 0, 5], dtype=torch.float64)
    nonlin.count = torch.tensor(30.0, dtype=torch.float64)
    nnet = nnet3_from_model(model)
    data = nnet3_bytes(nnet, binary)
    back = read_nnet3(KaldiReader(data))
    assert back.config_lines == nnet.config_lines
    assert [(c.name, c.kind) for c in back.components] == [
        (c.name, c.kind) for c in nnet.components
    ]
    assert nnet3_bytes(back, binary) == data
    p = back.component("lstm1.lstm_nonlin").params
    np.testing.assert_allclose(p["value_avg"], nonlin.value_sum.numpy() / 30, rtol=1e-6)
    np.testing.assert_allclose(p["self_repair_prob"], [30 / 480, 0, 2 / 480, 0, 5 / 480], 1e-6)
    assert p["count"] == 30.0


# ---------------------------------------------------------------------- computing
@pytest.mark.parametrize("binary", [False, True])
@pytest.mark.parametrize("ivector_dim", [IVECTOR_DIM, 0], ids=["ivectors", "no-ivectors"])
@pytest.mark.parametrize("output_delay", [2, 0])
def test_read_back_computes_what_paravg_computes(binary, ivector_dim, output_delay):
    """compute() (Kaldi's semantics, blockwise in time order in the recurrences) on the
    read-back file against paravg's forward on the same input frames: equal wherever
    both compute. Kaldi's left context is max(0, L - k) (k the output-delay; Kaldi's
    ComputeSimpleNnetContext), paravg's L: on the same frames Kaldi computes k more
    output frames at the start, and the rest agree (the recurrences start at the same
    input frame, the first where their input is computable)."""
    model = lstm_model(lstm_cfg(output_delay=output_delay), ivector_dim, seed=3)
    nnet = read_nnet3(KaldiReader(nnet3_bytes(nnet3_from_model(model), binary)))
    rng = np.random.default_rng(1)
    feats = (rng.standard_normal((60, FEAT_DIM)) * 2 + 1).astype(np.float32)
    iv = rng.standard_normal(ivector_dim).astype(np.float32) if ivector_dim else None
    ours = compute(nnet, feats, iv)
    with torch.no_grad():
        ivt = torch.from_numpy(iv)[None] if ivector_dim else None
        theirs = model(torch.from_numpy(feats)[None], ivt)[0].double().numpy()
    L, R, k = model.left_context, model.right_context, output_delay
    assert (L, R - k) == (5, 5)
    assert theirs.shape == (60 - L - R, NUM_TARGETS)
    assert ours.shape == (60 - max(0, L - k) - R, NUM_TARGETS)
    np.testing.assert_allclose(ours[k:], theirs, rtol=1e-4, atol=1e-4 * np.abs(theirs).max())


@pytest.mark.parametrize("output_delay", [0, 2, 7])
def test_kaldis_context_takes_the_output_delay_from_the_left(output_delay):
    """Kaldi's ComputeSimpleNnetContext on the exported network: (max(0, L - k), R + k);
    paravg's model_context says (L, R + k)."""
    model = lstm_model(lstm_cfg(output_delay=output_delay))
    L, R = model.left_context, model.right_context
    assert (L, R - output_delay) == (5, 5)
    assert nnet_context(nnet3_from_model(model)) == (max(0, L - output_delay), R)


def test_kaldis_context_of_the_feed_forward_families_is_paravgs():
    from export_models import random_model, tdnnf_model

    for model in (random_model(), tdnnf_model()):
        nnet = nnet3_from_model(model)
        assert nnet_context(nnet) == (model.left_context, model.right_context)


def test_the_recurrence_starts_at_zero_where_its_input_starts():
    """Kaldi's IfDefined: the LSTM's state is zero before the first frame its input is
    computable, whatever came before in the input: so changing frames outside the
    context of the first output frame (but inside the window) changes it; paravg does
    the same."""
    model = lstm_model(seed=4)
    nnet = nnet3_from_model(model)
    rng = np.random.default_rng(2)
    feats = rng.standard_normal((40, FEAT_DIM)).astype(np.float32)
    iv = rng.standard_normal(IVECTOR_DIM).astype(np.float32)
    a = compute(nnet, feats, iv)
    other = feats.copy()
    other[0] += 1.0  # frame 0 reaches only the LSTM's earliest steps
    b = compute(nnet, other, iv)
    # one of the 3 chains of t mod 3 carries it on to the last frames
    assert np.abs(a[-3:] - b[-3:]).max() > 1e-6
    with torch.no_grad():
        pa = model(torch.from_numpy(feats)[None], torch.from_numpy(iv)[None])[0].numpy()
        pb = model(torch.from_numpy(other)[None], torch.from_numpy(iv)[None])[0].numpy()
    np.testing.assert_allclose(b[2:] - a[2:], pb - pa, atol=1e-4 * np.abs(pa).max())


# ---------------------------------------------------------------------- vosk
@pytest.fixture(scope="module")
def tm40():
    return monophone_transition_model(40)[1]


class _Shape:
    """The contexts Kaldi computes for the network (:func:`nnet_context`, Kaldi's
    ``ComputeSimpleNnetContext``: left max(0, L - k), right R, which counts k), for
    :func:`vosk_online_ivectors` and :func:`kaldi_loglikes`."""

    def __init__(self, model) -> None:
        self.left_context, self.right_context = nnet_context(nnet3_from_model(model))
        self.input_splice = model.input_splice
        self.frame_subsampling_factor = 1


def kaldi_loglikes(model, feats, ivectors):
    """paravg's network on the frames Kaldi's looped decoder gives it: input frames from
    -max(0, L - k) (frame 0 repeated before the utterance, the last frame after it), so
    every recurrence starts where Kaldi's does. paravg's forward of the same network with
    the output-delay moved into the times (output_delay 0: its output at t' is the
    delayed network's at t' - k) on that window; ``ivectors``: a row per window frame."""
    twin = copy.deepcopy(model)
    k = twin.output_delay
    twin.output_delay = 0
    twin.right_context = model.right_context - k
    twin._levels = {}
    shape = _Shape(model)
    x = torch.as_tensor(np.asarray(feats, np.float32))
    T = x.shape[0]
    t = np.clip(np.arange(-shape.left_context, T + model.right_context), 0, T - 1)
    iv = None if ivectors is None else torch.from_numpy(np.asarray(ivectors, np.float32))[None]
    with torch.no_grad():
        logp = twin(x[t][None], iv)[0].double().numpy()
    first = model.left_context - shape.left_context  # t' of the first row: min(L, k)
    logp = logp[k - first :]
    assert logp.shape[0] == T
    return logp - np.maximum(model.log_priors.double().numpy(), np.log(1e-20))


def _decode(ll, tm, graph):
    tid2pdf = np.array([pdf for row in transition_ids(tm) for _t, _d, pdf in row])
    return reference_decode({"a": ll}, tid2pdf, graph / "HCLG.fst", graph / "words.txt", 1.0)["a"]


@pytest.mark.parametrize(
    ("binary", "with_ivectors", "output_delay"),
    [(True, False, 2), (False, True, 2), (True, True, 0)],
    ids=["binary-delay2", "text-ivectors-delay2", "binary-ivectors-delay0"],
)
def test_vosk_decodes_like_paravgs_decoder(
    tmp_path, ivector_files, tm40, binary, with_ivectors, output_delay
):
    """vosk 0.3.45 (Kaldi's nnet3 reader and looped computation, which carries the
    recurrent state from chunk to chunk and reads the i-vector of its chunk) loads the
    exported TDNN-LSTM and decodes a phone loop at acoustic scale 1: its hypothesis is
    exactly that of Kaldi's FasterDecoder on paravg's own network, fed the input frames
    and i-vectors vosk's computation uses (dither 0). With output-delay 0 that is
    paravg's whole-utterance forward as paravg's decoder runs it (``paravg_loglikes``);
    with output-delay k, Kaldi's left context is L - k and the recurrences start k frames
    later than there (:func:`kaldi_loglikes`). The comparison sees a peephole row order,
    the truncation's scale and the i-vectors."""
    wav, samples = tone_audio(tmp_path)
    mfcc = MfccOptions(dither=0.0)
    feats = compute_mfcc(samples.astype(np.float32), mfcc)
    system = IvectorSystem(*ivector_files) if with_ivectors else None
    ivector_dim = IVECTOR_DIM if with_ivectors else 0
    cfg = lstm_cfg(output_delay=output_delay)
    model = lstm_model(cfg, ivector_dim, seed=5, stats_feats=feats, sharp=True)
    ivectors = None
    if with_ivectors:
        from paravg.ivector.extractor import IvectorExtractor
        from paravg.ivector.features import IvectorFeaturePipeline
        from paravg.ivector.online import OnlineIvectorOptions
        from paravg.ivector.ubm import DiagGmm

        pca, ubm, extractor = ivector_files
        parts = (IvectorFeaturePipeline.load(pca), DiagGmm.load(ubm),
                 IvectorExtractor.load(extractor), OnlineIvectorOptions())  # fmt: skip
        ivectors = vosk_online_ivectors(_Shape(model), feats, len(samples), mfcc, *parts)
    # paravg's window (L frames before the first output) starts min(L, k) frames earlier
    ivectors_paravg = None
    if with_ivectors:
        first = ivectors[:1].repeat(model.left_context - _Shape(model).left_context, axis=0)
        ivectors_paravg = np.concatenate([first, ivectors])
    path = tmp_path / "final.pt"
    torch.save(model_to_file_dict(model), path)
    graph = write_phone_loop_graph(tm40, list(PHONES[:40]), tmp_path / "graph", 2.0)
    out = tmp_path / "kaldi"
    export_model(path, out, tm40, mfcc, graph, system, 1.0, {"lattice_beam": 1.0},
                 binary=binary)  # fmt: skip
    vosk = vosk_decode(out, {"a": wav})["a"]
    ours = _decode(kaldi_loglikes(model, feats, ivectors), tm40, graph)
    assert len(ours.split()) >= 30, ours  # ~1 phone per 5 frames: the acoustics decide
    assert vosk == ours
    if output_delay > 0:  # paravg's own decoding pads L frames, Kaldi L - k: it differs
        own = paravg_loglikes(model, feats, ivectors_paravg, None)
        assert np.abs(own - kaldi_loglikes(model, feats, ivectors))[:24].max() > 1e-3
    if output_delay == 0:  # paravg's own whole-utterance log-likelihoods, unchanged
        np.testing.assert_allclose(
            paravg_loglikes(model, feats, ivectors_paravg, None),
            kaldi_loglikes(model, feats, ivectors),
            rtol=1e-5,
            atol=1e-5,
        )

    def differs(edit) -> None:
        other = lstm_model(cfg, ivector_dim, seed=5, stats_feats=feats, sharp=True)
        edit(other)
        assert _decode(kaldi_loglikes(other, feats, ivectors), tm40, graph) != vosk

    def peepholes(m):  # w_ic and w_oc swapped in lstm1
        with torch.no_grad():
            m.layers[2].lstm_nonlin.params.copy_(m.layers[2].lstm_nonlin.params[[2, 1, 0]])

    def scale(m):  # no decay-time in lstm1
        m.layers[2].cr_trunc.scale = 1.0

    differs(peepholes)
    differs(scale)
    if with_ivectors:
        assert _decode(kaldi_loglikes(model, feats, np.zeros_like(ivectors)), tm40, graph) != vosk
