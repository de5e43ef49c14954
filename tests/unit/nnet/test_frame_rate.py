"""A low frame rate (``model.frame_subsampling_factor`` f): the network evaluated at output
frames 0, f, 2f, … only, each layer at the rows those outputs need, and every pass over
the egs (diagnostics, combination with batch-norm statistics, priors) at eg frames
k ≡ 0 (mod f)."""

import numpy as np
import pytest
import torch

from paravg.combine import recompute_batchnorm_stats
from paravg.egs import EgsArchive, all_frame_minibatches
from paravg.egs.archive import ArchiveMeta, EgsBatch, write_archive
from paravg.egs.loader import Minibatch
from paravg.nnet.context import frame_subsampling_factor, model_context
from paravg.nnet.model_file import build_model, model_header, model_to_file_dict, new_model
from paravg.nnet.objective import eg_outputs, evaluate_minibatches
from paravg.nnet.tdnn import computation_plan
from paravg.priors import posterior_sum
from tests.unit.dummies import FEAT, IVEC, TARGETS, tdnn_config, tdnnf_config

F = 8
TDNN = tdnn_config((12, [0]), (12, [-1, 0, 1]), (12, [-1, 0, 1]), (12, [-3, 0, 3]))
TDNNF = tdnnf_config(time_strides=[1, 0, 3, 3])
FAMILIES = {"tdnn": TDNN, "tdnnf": TDNNF}


def scored(cfg, f=None, seed=0):
    """A model with a random output layer (the initial one is zero), batch-norm statistics
    from a training-mode pass, in eval mode; ``f``: its frame-subsampling-factor."""
    if f is not None:
        cfg = {**cfg, "frame_subsampling_factor": f}
    model = new_model(cfg, FEAT, IVEC, TARGETS)
    model.init_parameters(seed)
    gen = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        model.output.weight.copy_(torch.randn(model.output.weight.shape, generator=gen))
        model.train()
        model(torch.randn(4, 60, FEAT, generator=gen), torch.randn(4, IVEC, generator=gen))
    return model.eval()


def same_weights(model, f):
    """``model``'s parameters and statistics in a model of frame-subsampling-factor f."""
    other = new_model(
        {**model.model_cfg, "frame_subsampling_factor": f}, FEAT, IVEC, TARGETS
    ).eval()
    other.load_state_dict(model.state_dict())
    return other


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("stride", [1, 2, 3, 4])
def test_the_strided_forward_is_every_fth_output_frame(family, stride):
    model = scored(FAMILIES[family])
    x = torch.randn(3, 50, FEAT, generator=torch.Generator().manual_seed(2))
    iv = torch.randn(3, IVEC, generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        full = model(x, iv)
        strided = model(x, iv, stride=stride)
    left, right = model_context(FAMILIES[family])
    assert full.shape[1] == 50 - left - right
    assert strided.shape == (3, -(-full.shape[1] // stride), TARGETS)
    torch.testing.assert_close(strided, full[:, ::stride], rtol=1e-5, atol=1e-6)


def _rows_seen(model, x, iv, stride):
    """How many time rows each updatable component computes at, in order."""
    rows = []
    hooks = [
        comp.register_forward_hook(lambda _m, args, _out: rows.append(args[0].shape[1]))
        for comp in model.components()
    ]
    with torch.no_grad():
        model(x, iv, stride=stride)
    for h in hooks:
        h.remove()
    return rows


def test_the_tdnn_computes_each_layer_only_where_the_strided_outputs_need_it():
    """Default splicing, 60 outputs, stride 3: the output layer, tdnn4 (splice −3, 0, 3,
    which keeps the stride) and tdnn3 at a third of the frames; tdnn2 and tdnn1
    (t + {−1, 0, 1} of a stride-3 set) at every frame."""
    plan = computation_plan((-2, -1, 0, 1, 2), ((0,), (-1, 0, 1), (-1, 0, 1), (-3, 0, 3)), 74, 3)
    out = tuple(range(7, 67, 3))
    assert plan.times[4] == out and plan.times[3] == tuple(range(4, 68, 3))
    assert plan.times[2] == tuple(range(3, 69)) and plan.times[0] == tuple(range(2, 70))
    model = scored(TDNN)
    x, iv = torch.randn(1, 74, FEAT), torch.randn(1, IVEC)
    assert _rows_seen(model, x, iv, 1) == [70, 68, 66, 60, 60]
    assert _rows_seen(model, x, iv, 3) == [68, 66, 22, 20, 20]


def test_the_tdnnf_computes_each_layer_only_where_the_strided_outputs_need_it():
    """Strides 1, 0, 3, 3, 60 outputs, stride 3: from tdnnf2's affine part up, about a
    third of the frames; tdnnf2's linear part (offsets −1, 0 under its affine's 0, 1) at
    two thirds, tdnn1 at every frame."""
    model = scored(TDNNF)
    assert model.left_context == model.right_context == 8
    x, iv = torch.randn(1, 76, FEAT), torch.randn(1, IVEC)
    assert _rows_seen(model, x, iv, 1) == [74, 73, 72, 72, 72, 69, 66, 63, 60, 60, 60, 60, 60]
    assert _rows_seen(model, x, iv, 3) == [72, 48, 24, 24, 24, 23, 22, 21, 20, 20, 20, 20, 20]


def test_the_factor_is_read_from_the_model_config():
    assert frame_subsampling_factor({}) == 1
    assert frame_subsampling_factor({"frame_subsampling_factor": 3}) == 3
    for bad in (0, -3, 1.5, "3", True):
        with pytest.raises(ValueError, match="frame_subsampling_factor"):
            frame_subsampling_factor({"frame_subsampling_factor": bad})
    model = scored(TDNNF, f=3)
    assert model.frame_subsampling_factor == 3
    rebuilt = build_model(model_to_file_dict(model))
    assert rebuilt.frame_subsampling_factor == 3
    assert "frame_subsampling_factor" not in model_header(scored(TDNN))["model"]


def _minibatch(model, num_egs=4, seed=0):
    rng = np.random.default_rng(seed)
    width = model.left_context + F + model.right_context
    feats = torch.from_numpy(rng.standard_normal((num_egs, width, FEAT)).astype(np.float32))
    labels = torch.from_numpy(rng.integers(0, TARGETS, (num_egs, F)))
    weights = torch.from_numpy(rng.uniform(0.5, 1.0, (num_egs, F)).astype(np.float32))
    ivecs = torch.from_numpy(rng.standard_normal((num_egs, IVEC)).astype(np.float32))
    return Minibatch(feats, ivecs, labels, weights)


@pytest.mark.parametrize("family", FAMILIES)
def test_eg_outputs_are_eg_frames_0_f_2f(family):
    model1 = scored(FAMILIES[family])
    model3 = same_weights(model1, 3)
    mb = _minibatch(model1)
    with torch.no_grad():
        full, labels1, weights1 = eg_outputs(model1, mb)
        logp, labels, weights = eg_outputs(model3, mb)
    assert full.shape == (4, F, TARGETS) and labels1 is mb.labels and weights1 is mb.weights
    assert logp.shape == (4, 3, TARGETS)
    torch.testing.assert_close(logp, full[:, [0, 3, 6]], rtol=1e-5, atol=1e-6)
    assert torch.equal(labels, mb.labels[:, [0, 3, 6]])
    assert torch.equal(weights, mb.weights[:, [0, 3, 6]])
    one = Minibatch(mb.feats[:, : model1.left_context + 1 + model1.right_context], mb.ivectors,
                    mb.labels[:, 2], mb.weights[:, 2])  # fmt: skip
    with torch.no_grad():
        single, single_labels, _ = eg_outputs(model3, one)
    assert single.shape == (4, TARGETS) and torch.equal(single_labels, mb.labels[:, 2])
    stats = evaluate_minibatches(model3, [mb], torch.device("cpu"))
    assert stats.weight == pytest.approx(float(weights.sum()))
    picked = logp.gather(-1, labels[..., None])[..., 0]
    assert stats.objf == pytest.approx(float((picked * weights).sum()), rel=1e-5)


def _archive(tmp_path, model, num_egs=10):
    """An archive whose every frame carries the same label, so a frame's posterior at
    another frame is told apart by the features alone (random)."""
    left, right = model.left_context, model.right_context
    meta = ArchiveMeta(num_egs, F, left, right, FEAT, IVEC, "float32")
    rng = np.random.default_rng(5)
    feats = rng.standard_normal((num_egs, meta.window, FEAT)).astype(np.float32)
    labels = rng.integers(0, TARGETS, (num_egs, F)).astype(np.int32)
    weights = np.ones((num_egs, F), np.float32)
    ivecs = rng.standard_normal((num_egs, IVEC)).astype(np.float32)
    batch = EgsBatch(feats, labels, weights, ivecs, [f"u-{i}" for i in range(num_egs)])
    write_archive(tmp_path / "egs.0", batch, meta)
    return EgsArchive(tmp_path / "egs.0")


def test_priors_are_the_mean_posterior_of_the_output_frames(tmp_path):
    model1 = scored(TDNN)
    model3 = same_weights(model1, 3)
    archive = _archive(tmp_path, model1)
    total1, frames1 = posterior_sum(model1, archive, None)
    total3, frames3 = posterior_sum(model3, archive, None)
    assert (frames1, frames3) == (10 * F, 10 * 3)
    mb = next(all_frame_minibatches(archive, model1.left_context, model1.right_context, 100))
    with torch.no_grad():
        post = model1(mb.feats, mb.ivectors).exp()
    torch.testing.assert_close(total3, post[:, [0, 3, 6]].sum((0, 1)).double(), rtol=1e-5,
                               atol=1e-6)  # fmt: skip
    assert not torch.allclose(total3 / frames3, total1 / frames1, atol=1e-4)


def test_combination_recomputes_batchnorm_statistics_at_the_output_frames(tmp_path):
    """``RecomputeStats`` at f = 3 counts the rows the eg frames 0, 3, 6 need: the
    output-level batch-norm (prefinal.batchnorm2) 3 rows per eg, not 8."""
    model1 = scored(TDNNF)
    archive = _archive(tmp_path, model1)
    model3 = same_weights(model1, 3)
    recompute_batchnorm_stats(model1, archive)
    recompute_batchnorm_stats(model3, archive)
    last1, last3 = model1.batchnorms()[-1], model3.batchnorms()[-1]
    assert float(last1.stats_count) == 10 * F
    assert float(last3.stats_count) == 10 * 3
    # the first batch-norm (tdnn1) sees every frame the stride-1 layer above it reads
    assert float(model3.batchnorms()[0].stats_count) < float(model1.batchnorms()[0].stats_count)
