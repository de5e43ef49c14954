"""TDNN-F: the network Kaldi's xconfig makes, its contexts and computed rows, batch-norm,
dropout, the semi-orthogonal constraint, l2, and a reproducible training job."""

import copy

import numpy as np
import pytest
import torch

from paravg.egs import EgsArchive
from paravg.egs.archive import ArchiveMeta, ArchiveWriter
from paravg.nnet import orthonormal
from paravg.nnet.batchnorm import BatchNorm
from paravg.nnet.context import model_context, model_megabytes
from paravg.nnet.dropout import GeneralDropout
from paravg.nnet.model_file import build_model, model_to_file_dict
from paravg.nnet.ng_affine import make_affine_factory
from paravg.nnet.orthonormal import constrain_components, constrain_orthonormal
from paravg.nnet.tdnnf import TdnnfModel
from paravg.train_job import add_l2_regularization, train_one_job
from tests.unit.dummies import FEAT, IVEC, TARGETS, job_spec, seeded, trained_twice, with_output
from tests.unit.dummies import TINY_TDNNF as CFG


def model(cfg=CFG, seed=0, factory=None) -> TdnnfModel:
    return seeded(cfg, seed, factory=factory or make_affine_factory({"enabled": True}))


def scored(seed=0) -> TdnnfModel:
    """A model whose (zero-initialised) output layer has weights, in eval mode."""
    return with_output(model(seed=seed), seed).eval()


def test_kaldis_component_names_and_order():
    assert model().component_names() == [
        "tdnn1.affine",
        "tdnnf2.linear",
        "tdnnf2.affine",
        "tdnnf3.linear",
        "tdnnf3.affine",
        "tdnnf4.linear",
        "tdnnf4.affine",
        "prefinal-l",
        "prefinal.affine",
        "prefinal.linear",
        "output.affine",
    ]


def test_linear_parts_have_no_bias_and_the_floating_constraint():
    m = model()
    by_name = dict(zip(m.component_names(), m.components(), strict=True))
    for name in ("tdnnf2.linear", "tdnnf4.linear", "prefinal-l", "prefinal.linear"):
        assert by_name[name].bias is None and by_name[name].orthonormal_constraint == -1.0
    for name in ("tdnn1.affine", "tdnnf3.affine", "prefinal.affine", "output.affine"):
        assert by_name[name].bias is not None and by_name[name].orthonormal_constraint == 0.0
    # stride 1: linear splices (-1, 0) of a 12-dim input; stride 0 splices nothing
    assert by_name["tdnnf2.linear"].weight.shape == (4, 24)
    assert by_name["tdnnf3.linear"].weight.shape == (4, 12)
    assert by_name["tdnnf4.affine"].weight.shape == (12, 8)
    assert by_name["output.affine"].l2_regularize == 0.002
    assert by_name["tdnnf2.affine"].l2_regularize == 0.01


def test_context_is_the_input_splice_plus_the_strides():
    assert model_context(CFG) == (1 + 4, 1 + 4)
    m = model().eval()
    x = torch.randn(2, 11, FEAT)
    iv = torch.randn(2, IVEC)
    assert m(x, iv).shape == (2, 1, TARGETS)
    with pytest.raises(ValueError, match="too short"):
        m(x[:, :10], iv)


def test_output_depends_on_exactly_the_context_window():
    m = scored()
    x = torch.randn(1, 40, FEAT)
    iv = torch.randn(1, IVEC)
    base = m(x, iv)
    t = 20  # output row t - left holds time t
    y = x.clone()
    y[:, t - 5] += 1.0  # the leftmost frame it sees
    assert not torch.allclose(m(y, iv)[0, t - 5], base[0, t - 5])
    z = x.clone()
    z[:, t - 6] += 1.0
    z[:, t + 6] += 1.0
    assert torch.equal(m(z, iv)[0, t - 5], base[0, t - 5])


def test_each_layer_is_computed_at_the_times_kaldis_compiler_computes():
    levels = model().level_times((0,))
    # output and prefinal layers at {0}; tdnnf4 (stride 3): linear at {0, 3}, input at
    # {-3, 0, 3}; tdnnf3 (stride 0) keeps them; tdnnf2 (stride 1): linear at
    # {-3,-2,0,1,3,4}, input at those - 1 and - 0 and the bypass
    assert levels[-1] == levels[-2] == levels[-3] == (0,)
    assert levels[-4] == (-3, 0, 3)  # tdnnf3's output = tdnnf4's input
    assert levels[-5] == (-3, 0, 3)
    assert levels[1] == levels[0] == (-4, -3, -2, -1, 0, 1, 2, 3, 4)


def test_a_window_gives_the_same_outputs_as_one_window_per_frame():
    m = scored()
    x, iv = torch.randn(1, 30, FEAT), torch.randn(1, IVEC)
    full = m(x, iv)
    for k in (0, 7, 19):
        one = m(x[:, k : k + 11], iv)
        torch.testing.assert_close(one[0, 0], full[0, k], rtol=1e-5, atol=1e-6)


def test_batchnorm_training_mode_is_kaldis_formula_and_stores_the_stats():
    bn = BatchNorm(3).train()
    x = torch.randn(4, 5, 3, dtype=torch.float64) * 2 + 1
    y = bn(x)
    rows = x.reshape(-1, 3)
    mean, var = rows.mean(0), rows.var(0, unbiased=False)
    torch.testing.assert_close(y, (x - mean) / torch.sqrt(var + 1e-3))
    assert float(bn.stats_count) == 20
    torch.testing.assert_close(bn.stats_sum, rows.sum(0))
    torch.testing.assert_close(bn.stats_sumsq, (rows * rows).sum(0))
    bn.scale_stats()
    assert float(bn.stats_count) == pytest.approx(16.0)
    bn.eval()  # test mode: the stored statistics' mean and variance (scale cancels)
    torch.testing.assert_close(bn(x), (x - mean) / torch.sqrt(var + 1e-3))


def test_batchnorm_without_statistics_is_the_identity_up_to_epsilon():
    bn = BatchNorm(2).eval()
    x = torch.randn(3, 2)
    torch.testing.assert_close(bn(x), x / np.sqrt(1 + 1e-3))


def test_continuous_dropout_scales_each_eg_and_dimension_over_all_times():
    d = GeneralDropout(6).train()
    d.reset([1, 2])
    d.proportion = 0.5
    x = torch.ones(8, 4, 6)
    y = d(x)
    assert torch.all(y >= 0) and torch.all(y <= 2)  # 1 + 2p·U[-1, 1], p = 0.5
    assert torch.equal(y, y[:, :1].expand_as(y))  # one scale per (eg, dim), all times
    assert not torch.equal(y[0], y[1])
    again = GeneralDropout(6).train()
    again.reset([1, 2])
    again.proportion = 0.5
    assert torch.equal(again(x), y)  # seeded
    assert torch.equal(d.eval()(x), x)
    d.train().proportion = 0.0
    assert torch.equal(d(x), x)


def test_l2_adds_minus_two_scale_lr_lambda_theta_to_every_parameter_step():
    m = model()
    deltas = [[torch.zeros_like(p) for p in c.update_params()] for c in m.components()]
    add_l2_regularization(m, deltas, lr=0.1, scale=64 * 0.5)
    for comp, ds in zip(m.components(), deltas, strict=True):
        for p, d in zip(comp.update_params(), ds, strict=True):
            torch.testing.assert_close(d, -2 * 32 * 0.1 * comp.l2_regularize * p.detach())


def test_model_megabytes_is_the_state_dict_size():
    sd = model().state_dict()
    size = sum(v.numel() * v.element_size() for v in sd.values()) / 2**20
    assert model_megabytes(CFG, FEAT, IVEC, TARGETS) == pytest.approx(size)


def test_the_model_file_rebuilds_the_family_with_its_batchnorm_statistics():
    m = model().train()
    m(torch.randn(4, 11, FEAT), torch.randn(4, IVEC))
    file_dict = model_to_file_dict(m)
    again = build_model(copy.deepcopy(file_dict))
    assert isinstance(again, TdnnfModel) and not again.training
    for k, v in m.state_dict().items():
        assert torch.equal(again.state_dict()[k], v), k
    # tdnn1 runs at the 9 times the first tdnnf layer needs, for each of the 4 egs
    assert float(again.batchnorms()[0].stats_count) == 4 * 9


def write_egs(prefix, n, window, seed=0):
    rng = np.random.default_rng(seed)
    meta = ArchiveMeta(n, 1, 5, 5, FEAT, IVEC, "float32")
    assert meta.window == window
    with ArchiveWriter(prefix, meta) as w:
        w.arrays["feats"][:] = rng.standard_normal((n, window, FEAT)).astype(np.float32)
        w.arrays["ivectors"][:] = rng.standard_normal((n, IVEC)).astype(np.float32)
        w.arrays["labels"][:] = rng.integers(0, TARGETS, (n, 1))
        w.arrays["weights"][:] = 1.0
        w.set_keys([f"u{i}" for i in range(n)])
    return EgsArchive(prefix)


def spec(**kw):
    return job_spec(**{"learning_rate": 0.01, "dropout_proportion": 0.3, **kw})


def test_a_training_job_reproduces_its_bits_and_uses_every_mechanism(tmp_path):
    archive = write_egs(tmp_path / "egs", 96, 11)
    trained, sa = trained_twice(lambda: model(seed=4), archive, spec())
    a = trained.state_dict()
    assert sa["num_minibatches"] == 6 and np.isfinite(sa["objf"])
    start = model(seed=4).state_dict()
    assert not torch.equal(a["layers.1.linear.weight"], start["layers.1.linear.weight"])
    # the batch-norm statistics were zeroed, accumulated and scaled by 0.8 per minibatch
    count = float(a["layers.0.batchnorm.stats_count"])
    rows = 16 * 9  # tdnn1 runs at 9 times per eg
    assert count == pytest.approx(rows * sum(0.8**k for k in range(1, 7)))
    # the dropout proportion and the l2 factor each change the model
    for change in ({"dropout_proportion": 0.0}, {"l2_regularize_factor": 0.0}):
        m = model(seed=4)
        train_one_job(m, archive, spec(**change), torch.device("cpu"))
        assert not torch.equal(m.state_dict()["output.weight"], a["output.weight"]), change


def semi_orthogonality(w: torch.Tensor) -> float:
    """ρ = rows · tr(P P) / tr(P)² of P = W Wᵀ: 1 when W is semi-orthogonal up to scale."""
    p = w.detach().double() @ w.detach().double().t()
    return float(p.shape[0] * torch.trace(p @ p) / torch.trace(p) ** 2)


def skewed_bottlenecks(m: TdnnfModel) -> dict[str, torch.Tensor]:
    """Give every constrained matrix singular values spread 1 to 5 (ρ ≈ 1.6-1.8, far from
    semi-orthogonal); return the matrices, by component name."""
    gen = torch.Generator().manual_seed(7)
    start = {}
    for name, comp in zip(m.component_names(), m.components(), strict=True):
        if not comp.orthonormal_constraint:
            continue
        w = torch.randn(comp.weight.shape, generator=gen)
        spread = torch.linspace(1.0, 5.0, min(w.shape))
        if w.shape[0] <= w.shape[1]:
            w = w * spread[:, None] / w.shape[1] ** 0.5
        else:
            w = w * spread[None, :] / w.shape[0] ** 0.5
        with torch.no_grad():
            comp.weight.copy_(w)
        start[name] = w
    return start


def test_a_training_job_moves_each_bottleneck_by_kaldis_constraint_steps(tmp_path):
    """Learning rate 0: the gradient and l2 move nothing, so what moves a matrix is the
    constraint alone. Each constrained matrix ends exactly (bit for bit, on any CPU: the
    same function on the same input) where k of Kaldi's steps take its start, k ≥ 1 of its
    own (each component draws for itself, 1/4 per minibatch); without the constraint,
    where it started."""
    archive = write_egs(tmp_path / "egs", 160, 11)
    steps = {}
    for constrained in (True, False):
        m = model(seed=1)
        start = skewed_bottlenecks(m)
        if not constrained:
            for comp in m.components():
                comp.orthonormal_constraint = 0.0
        stats = train_one_job(
            m, archive, spec(minibatch_size=8, learning_rate=0.0), torch.device("cpu")
        )
        assert stats["num_minibatches"] == 20
        by_name = dict(zip(m.component_names(), m.components(), strict=True))
        for name, w0 in start.items():
            w, k = w0.clone(), 0
            while not torch.equal(w, by_name[name].weight) and k <= 20:
                constrain_orthonormal(w, -1.0)
                k += 1
            assert k <= 20, f"{name}: not a number of constraint steps from its start"
            steps[name, constrained] = k
    assert all(steps[name, False] == 0 for name, _ in steps), steps
    took = [steps[name, True] for name, c in steps if c]
    assert all(k >= 1 for k in took) and len(set(took)) > 1, steps
    assert 0.1 < sum(took) / (20 * len(took)) < 0.4, steps  # about 1/4 of the minibatches


def test_the_constraint_keeps_the_bottlenecks_semi_orthogonal_in_training(tmp_path, monkeypatch):
    """A real training job (learning rate 0.05) from bottlenecks far from semi-orthogonal
    (ρ 1.5 to 2.4), the constraint applied after every minibatch (Kaldi's 1/4 made 1): every
    constrained matrix ends semi-orthogonal up to scale (ρ < 1.01; 20 steps take ρ to
    1 + 1e-4 or less), while without the constraint training leaves each near its start
    (ρ > 1.4: the gradient moves ρ by a few hundredths). The margins are tenths, far beyond
    what another CPU's rounding changes."""
    monkeypatch.setattr(orthonormal, "CONSTRAIN_PROBABILITY_DENOMINATOR", 1)
    archive = write_egs(tmp_path / "egs", 160, 11)
    ratios = {}
    for constrained in (True, False):
        m = model(seed=1)
        start = skewed_bottlenecks(m)
        assert min(semi_orthogonality(w) for w in start.values()) > 1.5
        if not constrained:
            for comp in m.components():
                comp.orthonormal_constraint = 0.0
        train_one_job(m, archive, spec(minibatch_size=8, learning_rate=0.05), torch.device("cpu"))
        by_name = dict(zip(m.component_names(), m.components(), strict=True))
        ratios[constrained] = [semi_orthogonality(by_name[name].weight) for name in start]
    assert max(ratios[True]) < 1.01, ratios
    assert min(ratios[False]) > 1.4, ratios


def test_one_constraint_step_is_kaldis_update():
    gen = torch.Generator().manual_seed(3)
    for shape in ((4, 9), (9, 4)):  # rows <= cols: on M; else on Mᵀ
        w = torch.randn(shape, generator=gen, dtype=torch.float64)
        m = w if shape[0] <= shape[1] else w.t()
        p = m @ m.t()
        alpha_sq = torch.trace(p @ p) / torch.trace(p)
        ratio = m.shape[0] * torch.trace(p @ p) / torch.trace(p) ** 2
        nu = 0.125 * (0.5 if ratio > 1.02 else 1.0) * (0.5 if ratio > 1.1 else 1.0)
        want = m - (4 * nu / alpha_sq) * (p - alpha_sq * torch.eye(m.shape[0])) @ m
        got = w.clone()
        assert constrain_orthonormal(got, -1.0)
        torch.testing.assert_close(got if shape[0] <= shape[1] else got.t(), want)
        for _ in range(60):
            constrain_orthonormal(got, -1.0)
        assert semi_orthogonality(got if shape[0] <= shape[1] else got.t()) < 1.0 + 1e-9
    fixed = torch.randn(3, 8, generator=gen, dtype=torch.float64)
    for _ in range(60):
        constrain_orthonormal(fixed, 2.0)  # fixed scale: P -> 4 I
    torch.testing.assert_close(fixed @ fixed.t(), 4.0 * torch.eye(3, dtype=torch.float64))
    assert not constrain_orthonormal(torch.zeros(2, 5), -1.0)  # an unused component


def test_each_constrained_component_is_constrained_with_probability_one_quarter():
    m = model()
    comps = [c for c in m.components() if c.orthonormal_constraint]
    rng = np.random.default_rng(0)
    done = sum(constrain_components(comps, rng) for _ in range(400))
    assert 0.2 < done / (400 * len(comps)) < 0.3
