"""TDNN-LSTM: Kaldi's LstmNonlinearityComponent (equations, backprop, self-repair, its
step), BackpropTruncationComponent, the fast-lstmp recurrence, derivative truncation, the
model's contexts and computed times, and a reproducible training job."""

import copy
import math

import numpy as np
import pytest
import torch

from paravg.egs import EgsArchive
from paravg.egs.archive import ArchiveMeta, ArchiveWriter
from paravg.errors import ConfigError
from paravg.nnet.affine import plain_affine_factory
from paravg.nnet.context import model_context, model_megabytes
from paravg.nnet.lstm import (
    BackpropTruncation,
    FastLstmpLayer,
    LstmNonlinearity,
    TdnnLstmModel,
    grad_runs,
    zeroing_boundary,
)
from paravg.nnet.model_file import build_model, model_to_file_dict, new_model
from paravg.nnet.ng_affine import NaturalGradientAffine, make_affine_factory
from paravg.optim.ngsgd import OnlineNaturalGradient
from tests.unit.dummies import (
    FEAT,
    IVEC,
    TARGETS,
    job_spec,
    lstm_layer,
    seeded,
    tdnn_layer,
    tdnn_lstm_config,
    trained_twice,
    with_output,
)

CFG = tdnn_lstm_config(
    tdnn_layer(),
    tdnn_layer(splice=[-1, 0, 1]),
    lstm_layer(non_recurrent_projection_dim=3, decay_time=20),
    tdnn_layer(splice=[-1, 0, 1]),
    lstm_layer(),
    self_repair_scale=1e-5,
)
WSJ_1A = tdnn_lstm_config(  # egs/wsj/s5/local/nnet3/tuning/run_tdnn_lstm_1a.sh
    tdnn_layer(520),
    tdnn_layer(520, [-1, 0, 1]),
    *[
        layer
        for _ in range(3)
        for layer in (
            lstm_layer(520, 130, non_recurrent_projection_dim=130, decay_time=20),
            tdnn_layer(520, [-3, 0, 3]),
            tdnn_layer(520, [-3, 0, 3]),
        )
    ][:-2],
    output_delay=5,
    input_splice=[-2, -1, 0, 1, 2],
)


def model(cfg=CFG, seed=0, ng=True) -> TdnnLstmModel:
    return seeded(cfg, seed, factory=make_affine_factory({"enabled": ng}))


def scored(seed=0, cfg=CFG) -> TdnnLstmModel:
    """A model whose (zero-initialised) output layer has weights, in eval mode."""
    return with_output(model(cfg, seed=seed), seed).eval()


# ---------------------------------------------------------------------------- the network


def test_kaldis_component_names_order_and_shapes():
    m = model()
    assert m.component_names() == [
        "tdnn1.affine",
        "tdnn2.affine",
        "lstm1.W_all",
        "lstm1.lstm_nonlin",
        "lstm1.W_rp",
        "tdnn3.affine",
        "lstm2.W_all",
        "lstm2.lstm_nonlin",
        "lstm2.W_rp",
        "output.affine",
    ]
    by_name = dict(zip(m.component_names(), m.components(), strict=True))
    # W_all: [x; r] → 4C; W_rp: C → R + P (P defaults to R); the peepholes 3 × C
    assert by_name["lstm1.W_all"].weight.shape == (32, 12 + 2)
    assert by_name["lstm1.W_rp"].weight.shape == (2 + 3, 8)
    assert by_name["tdnn3.affine"].weight.shape == (12, 3 * 5)
    assert by_name["lstm2.W_all"].weight.shape == (32, 12 + 2)
    assert by_name["lstm2.W_rp"].weight.shape == (2 + 2, 8)
    assert by_name["lstm2.lstm_nonlin"].params.shape == (3, 8)
    assert by_name["output.affine"].weight.shape == (TARGETS, 4)
    lstm = [1.5, 0.75, 1.5]  # W_all, lstm_nonlin, W_rp
    assert [c.max_change for c in m.components()] == [0.75, 0.75, *lstm, 0.75, *lstm, 1.5]
    assert isinstance(by_name["lstm1.W_all"], NaturalGradientAffine)
    assert by_name["lstm1.lstm_nonlin"].preconditioner is not None
    assert model(ng=False).components()[3].preconditioner is None
    assert m.layers[2].cr_trunc.scale == pytest.approx(1 - 3 / 20)
    assert m.layers[4].cr_trunc.scale == 1.0  # no decay-time
    assert m.layers[2].cr_trunc.recurrence_interval == 3


def test_init_is_kaldis_and_seeded():
    a, b = model(seed=3), model(seed=3)
    for (k, v), w in zip(a.state_dict().items(), b.state_dict().values(), strict=True):
        assert torch.equal(v, w), k
    peep = torch.cat([n.params.flatten() for n in a.lstm_nonlinearities()])
    assert 0.6 < float(peep.detach().std()) < 1.4  # N(0, 1)
    w_all = a.layers[2].W_all.weight
    assert float(w_all.detach().std()) == pytest.approx(1 / math.sqrt(14), rel=0.3)
    assert torch.count_nonzero(a.output.weight) == 0 and torch.count_nonzero(a.output.bias) == 0


def test_context_counts_the_tdnn_splices_and_the_output_delay_not_the_recurrence():
    assert model_context(CFG) == (1 + 1 + 1, 1 + 1 + 1 + 2)
    # the reference's arithmetic for WSJ 1a: left 2+1+3+3+3+3 = 15, right 15 + 5 = 20
    assert model_context(WSJ_1A) == (15, 20)
    m = model().eval()
    x, iv = torch.randn(2, 9, FEAT), torch.randn(2, IVEC)
    assert m(x, iv).shape == (2, 1, TARGETS)
    with pytest.raises(ValueError, match="too short"):
        m(x[:, :8], iv)


def test_each_lstm_reaches_back_as_far_as_its_input_is_computable():
    m = model()
    # one output at window time 3 (the first output frame); the last layer at 3 + 2
    levels = m.level_times((3,))
    assert levels[-1] == (3,)
    # lstm2 can start at 3 (input frames from 0: lda from 1, tdnn2 from 2, tdnn3 from 3):
    # 5 − 3 = 2 is not computable, so lstm2 runs at 5 only
    assert levels[5] == (5,)
    assert levels[4] == (5,)  # tdnn3
    # lstm1 runs where tdnn3 needs it (4, 5, 6) and back by 3 while ≥ 2
    assert levels[3] == (2, 3, 4, 5, 6)
    assert levels[2] == levels[3]  # tdnn2
    assert levels[1] == levels[0] == (1, 2, 3, 4, 5, 6, 7)
    # every output of a long window: each level is a range from its first computable time
    full = m.level_times(tuple(range(3, 3 + 20)))
    assert [(lv[0], lv[-1], len(lv)) for lv in full] == [
        (1, 26, 26),
        (1, 26, 26),
        (2, 25, 24),
        (2, 25, 24),
        (3, 24, 22),
        (3, 24, 22),
        (3, 22, 20),
    ]


def test_a_stride_computes_the_same_outputs():
    m = scored()
    x, iv = torch.randn(2, 30, FEAT), torch.randn(2, IVEC)
    full = m(x, iv)
    torch.testing.assert_close(m(x, iv, stride=3), full[:, ::3], rtol=1e-5, atol=1e-6)


def test_the_model_file_rebuilds_the_family():
    m = scored()
    again = build_model(copy.deepcopy(model_to_file_dict(m)))
    assert isinstance(again, TdnnLstmModel) and not again.training
    x, iv = torch.randn(2, 20, FEAT), torch.randn(2, IVEC)
    assert torch.equal(again(x, iv), m(x, iv))


def test_model_megabytes_is_the_state_dict_size():
    for cfg, feat, ivec in ((CFG, FEAT, IVEC), (WSJ_1A, 40, 100)):
        m = new_model(cfg, feat, ivec, TARGETS, plain_affine_factory)
        size = sum(v.numel() * v.element_size() for v in m.state_dict().values()) / 2**20
        assert model_megabytes(cfg, feat, ivec, TARGETS) == pytest.approx(size)


def test_config_errors():
    def with_layer(**kw):
        cfg = copy.deepcopy(CFG)
        cfg["tdnn_lstm"]["layers"][2].update(kw)
        return cfg

    with pytest.raises(ConfigError, match="unknown key"):
        model(with_layer(cell=3))
    with pytest.raises(ConfigError, match="must be <= cell_dim"):
        model(with_layer(non_recurrent_projection_dim=7))
    with pytest.raises(ConfigError, match="delay 0"):
        model(with_layer(delay=0))
    with pytest.raises(ConfigError, match="decay_time"):
        model(with_layer(decay_time=2))
    bad = copy.deepcopy(CFG)
    bad["tdnn_lstm"]["layers"][0]["type"] = "gru"
    with pytest.raises(ConfigError, match="expected 'tdnn' or 'lstm'"):
        model(bad)


# ---------------------------------------------------------------------------- nonlinearity


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def test_the_nonlinearity_is_kaldis_equations_by_hand():
    rng = np.random.default_rng(0)
    C, N = 4, 6
    x = rng.standard_normal((N, 5 * C))
    w = rng.standard_normal((3, C))
    want = np.zeros((N, 2 * C))
    for r in range(N):
        for c in range(C):
            i_part, f_part, c_part, o_part, c_prev = (x[r, c + k * C] for k in range(5))
            i_t = sigmoid(i_part + w[0, c] * c_prev)
            f_t = sigmoid(f_part + w[1, c] * c_prev)
            c_t = f_t * c_prev + i_t * math.tanh(c_part)
            o_t = sigmoid(o_part + w[2, c] * c_t)  # the current c_t
            want[r, c], want[r, C + c] = c_t, o_t * math.tanh(c_t)
    nonlin = LstmNonlinearity(C).double()
    with torch.no_grad():
        nonlin.params.copy_(torch.from_numpy(w))
    got = nonlin(torch.from_numpy(x))
    np.testing.assert_allclose(got.detach().numpy(), want, rtol=1e-12, atol=1e-12)


def plain_lstm(x, w, C):
    """The equations with torch ops, for autograd."""
    i_part, f_part, c_part, o_part, c_prev = (x[:, k * C : (k + 1) * C] for k in range(5))
    i = torch.sigmoid(i_part + w[0] * c_prev)
    f = torch.sigmoid(f_part + w[1] * c_prev)
    c = f * c_prev + i * torch.tanh(c_part)
    o = torch.sigmoid(o_part + w[2] * c)
    return torch.cat([c, o * torch.tanh(c)], dim=1), (
        i_part + w[0] * c_prev,
        f_part + w[1] * c_prev,
        c_part,
        o_part + w[2] * c,
        c,
    )


def nonlin_case(C=5, N=7, seed=0, repair=0.0):
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(N, 5 * C, generator=gen, dtype=torch.float64) * 1.5
    w = torch.randn(3, C, generator=gen, dtype=torch.float64)
    dy = torch.randn(N, 2 * C, generator=gen, dtype=torch.float64)
    nonlin = LstmNonlinearity(C, self_repair_scale=repair).double().train()
    with torch.no_grad():
        nonlin.params.copy_(w)
    return nonlin, x, w, dy


def test_the_backward_without_self_repair_is_the_gradient_of_the_equations():
    C = 5
    nonlin, x, w, dy = nonlin_case(C)
    xa, wa = x.clone().requires_grad_(), w.clone().requires_grad_()
    (plain_lstm(xa, wa, C)[0] * dy).sum().backward()
    xb = x.clone().requires_grad_()
    (nonlin(xb) * dy).sum().backward()
    torch.testing.assert_close(xb.grad, xa.grad, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(nonlin.params.grad, wa.grad, rtol=1e-12, atol=1e-12)


def repair_potential(pre, active, scale):
    """Σ over repaired units of the term whose derivative is Kaldi's self-repair (in loss
    = −F terms): scale·(2σ(x) − 1) = d/dx scale·(2 softplus(x) − x) for a sigmoid and
    scale·tanh(x) = d/dx scale·log cosh(x) for a tanh."""
    kinds = ("sigmoid", "sigmoid", "tanh", "sigmoid", "tanh")
    total = 0.0
    for x, kind, on in zip(pre, kinds, active, strict=True):
        phi = (
            2 * torch.nn.functional.softplus(x) - x
            if kind == "sigmoid"
            else torch.log(torch.cosh(x))
        )
        total = total + scale * (phi * on).sum()
    return total


def test_self_repair_is_kaldis_term_on_the_units_below_threshold():
    C, scale = 5, 0.01
    nonlin, x, w, dy = nonlin_case(C, repair=scale)
    # statistics of an earlier minibatch: count 9, so unit j of nonlinearity k is repaired
    # when deriv_sum / 10 < 0.05 (sigmoids) or 0.2 (tanh's)
    nonlin.count = torch.tensor(9.0, dtype=torch.float64)
    nonlin.deriv_sum = torch.tensor(
        [
            [0.2, 0.6, 0.49, 0.51, 3.0],
            [0.0] * 5,
            [1.99, 2.01, 5.0, 0.0, 1.0],
            [0.2, 9.0, 9.0, 0.0, 9.0],
            [2.5, 1.0, 2.5, 2.5, 2.5],
        ],
        dtype=torch.float64,
    )
    active = (nonlin.repair_scales() > 0).double()
    assert active.tolist() == [
        [1, 0, 1, 0, 0],
        [1] * 5,
        [1, 0, 0, 1, 1],
        [1, 0, 0, 1, 0],
        [0, 1, 0, 0, 0],
    ]
    xa, wa = x.clone().requires_grad_(), w.clone().requires_grad_()
    out, pre = plain_lstm(xa, wa, C)
    ((out * dy).sum() + repair_potential(pre, active, scale)).backward()
    xb = x.clone().requires_grad_()
    (nonlin(xb) * dy).sum().backward()
    torch.testing.assert_close(xb.grad, xa.grad, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(nonlin.params.grad, wa.grad, rtol=1e-12, atol=1e-12)
    # and it is not nothing: the plain gradient differs
    xc = x.clone().requires_grad_()
    (plain_lstm(xc, w, C)[0] * dy).sum().backward()
    assert not torch.allclose(xc.grad, xb.grad, rtol=1e-9, atol=1e-9)


def test_statistics_accumulate_in_backward_and_count_at_the_end_of_the_minibatch():
    C = 5
    nonlin, x, w, dy = nonlin_case(C, repair=1e-5)
    nonlin.reset_stats()
    assert bool((nonlin.repair_scales() > 0).all())  # no statistics: every unit repaired
    for half in (x[:3], x[3:]):  # two blocks of one minibatch
        (nonlin(half.clone().requires_grad_()) * dy[: len(half)]).sum().backward()
    assert nonlin.count == 0.0  # self-repair keeps reading the statistics before it
    nonlin.delta(0.1)
    assert nonlin.count == 7.0
    i = torch.sigmoid(x[:, :C] + w[0] * x[:, 4 * C :])
    torch.testing.assert_close(nonlin.deriv_sum[0], (i * (1 - i)).sum(0))
    torch.testing.assert_close(nonlin.value_sum[0], i.sum(0))
    c_part = torch.tanh(x[:, 2 * C : 3 * C])
    torch.testing.assert_close(nonlin.deriv_sum[2], (1 - c_part**2).sum(0))
    assert nonlin.self_repair_total.tolist() == [7.0 * C] * 5
    nonlin.eval()  # no statistics outside training
    (nonlin(x.clone().requires_grad_()) * dy).sum().backward()
    nonlin.delta(0.1)
    assert nonlin.count == 7.0


def test_the_step_is_plain_sgd_or_kaldis_preconditioned_step():
    C, lr = 30, 0.1
    for ng in (False, True):
        nonlin, x, _, dy = nonlin_case(C, N=40)
        nonlin.natural_gradient = ng
        nonlin.reset_state()
        oracle = OnlineNaturalGradient(rank=20, update_period=2, num_samples_history=1000.0)
        for k in range(4):
            nonlin.params.grad = None
            (nonlin(x[k * 10 : (k + 1) * 10]) * dy[k * 10 : (k + 1) * 10]).sum().backward()
            grad = nonlin.params.grad.clone()
            (step,) = nonlin.delta(lr)
            if ng:
                xhat, gamma = oracle.precondition_directions(grad)
                torch.testing.assert_close(step, -lr * gamma * xhat)
                assert not torch.allclose(step, -lr * grad)
            else:
                torch.testing.assert_close(step, -lr * grad)
    assert nonlin.preconditioner.t == 4 and nonlin.preconditioner.W.shape == (20, C)


# ---------------------------------------------------------------------------- truncation


def test_zeroing_boundaries_are_shifted_by_the_sequence_index():
    b = zeroing_boundary([-1, 0, 1, 2, 3, 19, 20, 22, 23], 2, 20, 3)
    # n = 0: ⌊t/20⌋ ≠ ⌊(t − 3)/20⌋ for t ∈ [0, 3) and [20, 23)
    assert b[0].tolist() == [False, True, True, True, False, False, True, True, False]
    # n = 1: boundaries at t − 1 ∈ [0, 3) and [20, 23)
    assert b[1].tolist() == [False, False, True, True, True, False, False, True, True]


def test_truncation_scales_forward_and_clips_and_zeroes_backward():
    trunc = BackpropTruncation(0.85, 30.0, 15.0, 20, 3)
    x = torch.randn(2, 4, 3, requires_grad=True)
    times = [0, 1, 3, 4]  # n = 0: boundaries at t = 0, 1; n = 1: at t = 1, 3
    y = trunc(x, times)
    torch.testing.assert_close(y, 0.85 * x)
    unit = torch.tensor([0.6, 0.0, 0.8])
    norms = torch.tensor([[10.0, 20.0, 40.0, 20.0], [40.0, 17.0, 12.0, 1.0]]) / 0.85
    dy = norms[..., None] * unit
    y.backward(dy)
    g = x.grad
    got = torch.linalg.vector_norm(g, dim=-1)
    # after the scale: 40 clipped to 30 off the boundaries; 20 and 17 (> 15) zeroed on a
    # boundary, 20 kept off them; 10 and 12 (< 15) kept on a boundary
    want = torch.tensor([[10.0, 0.0, 30.0, 20.0], [30.0, 0.0, 12.0, 1.0]])
    torch.testing.assert_close(got, want)
    torch.testing.assert_close(g[0, 2], 30.0 * unit)
    torch.testing.assert_close(g[0, 3], 20.0 * unit)
    off = BackpropTruncation(1.0, 0.0, 0.0, 20, 3)  # thresholds ≤ 0: off
    x2 = torch.zeros(2, 4, 3, requires_grad=True)
    off(x2, times).backward(dy)
    torch.testing.assert_close(x2.grad, dy)


# ---------------------------------------------------------------------------- recurrence


def lstm_layer(seed=0, decay_time=20.0, delay=-3):
    """in 6, C 8, R 2, P 3; thresholds 30, 15, 20; no self-repair; plain affines."""
    dims = ("lstm1", 6, 8, 2, 3, delay, decay_time, 30.0, 15.0, 20)
    layer = FastLstmpLayer(*dims, 1.5, 0.75, 0.0, 0.0, plain_affine_factory, False).double()
    gen = torch.Generator().manual_seed(seed)
    for comp in (layer.W_all, layer.lstm_nonlin, layer.W_rp):
        comp.init_kaldi(gen)
    return layer


def reference_loop(layer, x, lo=-math.inf, hi=math.inf):
    """Frame by frame from the definition (module docstring of paravg.nnet.lstm), state
    zero before frame 0; frames outside [lo, hi] without autograd."""
    C, R, d = layer.cell_dim, layer.rec_dim, abs(layer.delay)
    s = layer.cr_trunc.scale
    w = layer.lstm_nonlin.params
    B, T, _ = x.shape
    c_state, r_state, outs = {}, {}, []
    for t in range(T):
        with torch.set_grad_enabled(lo <= t <= hi):
            c_prev = c_state.get(t - d, x.new_zeros(B, C))
            r_prev = r_state.get(t - d, x.new_zeros(B, R))
            a = layer.W_all.weight @ torch.cat([x[:, t], r_prev], 1).T
            a = a.T + layer.W_all.bias
            i = torch.sigmoid(a[:, :C] + w[0] * c_prev)
            f = torch.sigmoid(a[:, C : 2 * C] + w[1] * c_prev)
            c = f * c_prev + i * torch.tanh(a[:, 2 * C : 3 * C])
            o = torch.sigmoid(a[:, 3 * C :] + w[2] * c)
            m = o * torch.tanh(c)
            rp = m @ layer.W_rp.weight.T + layer.W_rp.bias
            c_state[t], r_state[t] = s * c, s * rp[:, :R]
            outs.append(rp)
    return torch.stack(outs, 1)


def run_layer(layer, x, lo=None, hi=None):
    times = tuple(range(x.shape[1]))
    return layer(x, times, times, grad_runs(times, lo, hi), 0)


def test_the_chunk_equals_the_frame_by_frame_loop_with_zero_state_before_frame_0():
    x = torch.randn(3, 17, 6, dtype=torch.float64)
    for decay in (20.0, -1.0):
        layer = lstm_layer(decay_time=decay)
        torch.testing.assert_close(run_layer(layer, x), reference_loop(layer, x))
    # frame 0 by itself: W_rp m of the nonlinearity of [W_all [x_0; 0] + b; 0]
    a = torch.cat([x[:, 0], torch.zeros(3, 2, dtype=torch.float64)], 1) @ layer.W_all.weight.T
    cm = layer.lstm_nonlin(torch.cat([a + layer.W_all.bias, torch.zeros(3, 8).double()], 1))
    torch.testing.assert_close(run_layer(layer, x)[:, 0], layer.W_rp(cm[:, 8:]))


def test_the_output_at_t_depends_on_the_input_at_t_t_minus_3_t_minus_6_only():
    layer = lstm_layer()
    x = torch.randn(2, 16, 6, dtype=torch.float64)
    base = run_layer(layer, x)
    y = x.clone()
    y[:, 5] += 1.0
    changed = (run_layer(layer, y) - base).abs().amax(dim=(0, 2)) > 0
    assert changed.nonzero().flatten().tolist() == [5, 8, 11, 14]
    one = lstm_layer(delay=-1)  # delay −1: every later frame
    changed = (run_layer(one, y) - run_layer(one, x)).abs().amax(dim=(0, 2)) > 0
    assert changed.nonzero().flatten().tolist() == list(range(5, 16))


def test_blocks_hold_at_most_delay_frames_and_break_at_the_derivative_window():
    layer = lstm_layer()
    times = tuple(range(10))
    assert [b for b, _ in layer.blocks(times, grad_runs(times, None, None))] == [
        (0, 1, 2),
        (3, 4, 5),
        (6, 7, 8),
        (9,),
    ]
    assert layer.blocks(times, grad_runs(times, 4, 7)) == [
        ((0, 1, 2), False),
        ((3,), False),
        ((4, 5, 6), True),
        ((7,), True),
        ((8, 9), False),
    ]
    assert [b for b, _ in layer.blocks((2, 5, 8), grad_runs((2, 5, 8), None, None))] == [
        (2,),
        (5,),
        (8,),
    ]


# ---------------------------------------------------------------------------- truncation


def test_derivative_truncation_is_the_loop_with_no_derivative_outside_the_window():
    x = torch.randn(3, 18, 6, dtype=torch.float64)
    dy = torch.randn(3, 18, 5, dtype=torch.float64)
    grads = []
    for run in (
        lambda layer, xx: run_layer(layer, xx, 4, 12),
        lambda layer, xx: reference_loop(layer, xx, 4, 12),
    ):
        layer = lstm_layer().train()
        xx = x.clone().requires_grad_()
        (run(layer, xx) * dy).sum().backward()
        grads.append([xx.grad] + [p.grad for p in layer.parameters()])
        if len(grads) == 1:
            layer.lstm_nonlin.commit_stats()
            assert layer.lstm_nonlin.count == 3 * 9  # rows at t = 4 … 12 only
    for a, b in zip(*grads, strict=True):
        torch.testing.assert_close(a, b)
    assert torch.count_nonzero(grads[0][0][:, :4]) == 0
    assert torch.count_nonzero(grads[0][0][:, 13:]) == 0
    assert torch.count_nonzero(grads[0][0][:, 4:13]) > 0


SPLICED_TDNN1 = copy.deepcopy(CFG)
SPLICED_TDNN1["tdnn_lstm"]["layers"][0]["splice"] = [-1, 0, 1]


@pytest.mark.parametrize("cfg", [CFG, SPLICED_TDNN1], ids=["tdnn1", "spliced-tdnn1"])
def test_derivative_truncation_of_the_model_zeroes_the_derivatives_outside_the_window(cfg):
    m = scored(cfg=cfg)
    L = m.left_context
    feats = torch.randn(2, 40, FEAT, requires_grad=True)
    iv = torch.randn(2, IVEC)
    lo, hi = 5, 20  # relative to the first output frame (window frame L)
    m(feats, iv, min_deriv_time=lo, max_deriv_time=hi).sum().backward()
    per_frame = feats.grad.abs().sum(dim=(0, 2))
    # frame w feeds the LDA rows w − 1, w, w + 1 (input splice ±1): all outside ⇒ zero
    for w in range(40):
        rows = [w - L + s for s in (-1, 0, 1)]
        inside = any(lo <= t <= hi for t in rows)
        assert (per_frame[w] > 0) == inside, w
    # the rows outside reach no natural-gradient preconditioner: each component stashed
    # its rows at the times inside only (2 egs each)
    num_out = 40 - L - m.right_context
    levels = m.level_times(tuple(range(L, L + num_out)))
    inside = lambda times: sum(lo <= t - L <= hi for t in times)  # noqa: E731
    for layer, times in zip(m.layers, levels[1:-1], strict=True):
        for name, comp in layer.parts():
            if isinstance(comp, NaturalGradientAffine):
                rows = sum(x.shape[0] for x, _ in comp._stash)
                assert rows == 2 * inside(times), name
    assert sum(x.shape[0] for x, _ in m.output._stash) == 2 * inside([t + 2 for t in levels[-1]])
    # the recurrence reaches back further without truncation
    full = torch.randn(2, 40, FEAT).requires_grad_()
    m(full, iv).sum().backward()
    assert float(full.grad[:, : L + lo - 1].abs().sum()) > 0
    # the forward values do not change
    truncated = m(feats, iv, min_deriv_time=lo, max_deriv_time=hi)
    torch.testing.assert_close(truncated, m(feats, iv))
    # the same window in Kaldi's times of a chunk eg with 7 frames of extra left context:
    # the chunk starts 7 output frames in, and the derivative window moves with it
    again = feats.detach().clone().requires_grad_()
    y = m(again, iv, min_deriv_time=lo - 7, max_deriv_time=hi - 7, first_output_time=-7)
    y.sum().backward()
    torch.testing.assert_close(again.grad, feats.grad)


def test_the_truncation_components_see_kaldis_times(monkeypatch):
    m = scored()
    seen = []
    trunc = m.layers[2].cr_trunc
    monkeypatch.setattr(trunc, "forward", lambda x, times: seen.extend(times) or x)
    x, iv = torch.randn(2, 20, FEAT), torch.randn(2, IVEC)
    for first in (0, -7):
        seen.clear()
        m(x, iv, first_output_time=first)
        # lstm1 runs at window frames 2 … 17; the first output frame is window frame 3
        assert seen == [k - 3 + first for k in range(2, 18)]


# ---------------------------------------------------------------------------- training


def write_egs(prefix, n, seed=0):
    """Frame egs of the model's context whose label is a fixed function of the output
    frame's features (something to learn)."""
    left, right = model_context(CFG)
    rng = np.random.default_rng(seed)
    meta = ArchiveMeta(n, 1, left, right, FEAT, IVEC, "float32")
    feats = rng.standard_normal((n, meta.window, FEAT)).astype(np.float32)
    projection = np.random.default_rng(99).standard_normal((FEAT, TARGETS))
    with ArchiveWriter(prefix, meta) as w:
        w.arrays["feats"][:] = feats
        w.arrays["ivectors"][:] = rng.standard_normal((n, IVEC)).astype(np.float32)
        w.arrays["labels"][:] = np.argmax(feats[:, left] @ projection, axis=1)[:, None]
        w.arrays["weights"][:] = 1.0
        w.set_keys([f"u{i}" for i in range(n)])
    return EgsArchive(prefix)


spec = job_spec


def objective(m, archive) -> float:
    """Average log-prob of the labels over the archive (eval mode)."""
    feats = torch.tensor(np.asarray(archive.feats, dtype=np.float32))
    ivec = torch.tensor(np.asarray(archive.ivectors, dtype=np.float32))
    labels = torch.from_numpy(np.asarray(archive.labels)[:, 0].astype(np.int64))
    with torch.no_grad():
        logp = m.eval()(feats, ivec)[:, 0]
    return float(logp.gather(1, labels[:, None]).mean())


@pytest.mark.parametrize("ng", [True, False])
def test_a_training_job_reproduces_its_bits_and_lowers_the_objective(tmp_path, ng):
    archive = write_egs(tmp_path / "egs", 160)
    before = objective(model(seed=4, ng=ng), archive)
    a, sa = trained_twice(lambda: model(seed=4, ng=ng), archive, spec(ngsgd={"enabled": ng}))
    sd_a = a.state_dict()
    assert sa["num_minibatches"] == 10 and np.isfinite(sa["objf"])
    start = model(seed=4, ng=ng).state_dict()
    for key in ("layers.2.lstm_nonlin.params", "layers.2.W_all.weight", "layers.4.W_rp.bias"):
        assert not torch.equal(sd_a[key], start[key]), key
    nonlin = a.lstm_nonlinearities()[0]
    assert nonlin.count > 0 and nonlin._pending is None  # every minibatch's stats counted
    after = objective(a, archive)
    assert after > before + 0.1, (before, after)
    assert set(sa["max_change_per_component"]) == set(a.component_names())
