"""Chunk training of the recurrent family (train_rnn.py): whole chunks per minibatch,
derivative truncation, momentum, the plan's chunk params; a reproducible job whose
objective falls."""

import copy

import numpy as np
import pytest
import torch
import yaml

from paravg.config import REPO_CONFIG, deep_merge, validate_config
from paravg.egs import EgsArchive, all_chunk_minibatches
from paravg.egs.archive import ArchiveMeta, ArchiveWriter
from paravg.nnet.ng_affine import make_affine_factory
from paravg.nnet.objective import evaluate_minibatches
from paravg.plan import experiment_plans
from paravg.train_job import deriv_times, train_one_job
from tests.unit.dummies import FEAT, IVEC, TARGETS, job_spec, seeded, trained_twice
from tests.unit.dummies import TINY_LSTM as CFG

# CFG's context (2, 4): input splice 1 + tdnn2 1 left; 1 + 1 + output delay 2 right
# (width, left, right): a chunk with 4 frames of chunk-left-context and one initial chunk
STRUCTURES = [(10, 6, 4), (6, 2, 4)]


def model(seed=0, ng=True):
    return seeded(CFG, seed, factory=make_affine_factory({"enabled": ng}))


def write_chunk_egs(prefix, n, seed=0):
    """Chunk egs whose label at a frame is a fixed function of that frame's features."""
    lc, W, rc = max(s[1] for s in STRUCTURES), max(s[0] for s in STRUCTURES), 4
    meta = ArchiveMeta(n, W, lc, rc, FEAT, IVEC, "float32", chunked=True)
    rng = np.random.default_rng(seed)
    feats = rng.standard_normal((n, meta.window, FEAT)).astype(np.float32)
    proj = np.random.default_rng(99).standard_normal((FEAT, TARGETS))
    structure = np.array([STRUCTURES[i % 2] for i in range(n)], dtype=np.int32)
    labels = np.argmax(feats[:, lc : lc + W] @ proj, axis=2).astype(np.int32)
    weights = np.ones((n, W), np.float32)
    weights[np.arange(W)[None, :] >= structure[:, :1]] = 0.0
    labels[weights == 0] = 0
    with ArchiveWriter(prefix, meta) as w:
        w.arrays["feats"][:] = feats
        w.arrays["ivectors"][:] = rng.standard_normal((n, IVEC)).astype(np.float32)
        w.arrays["labels"][:] = labels
        w.arrays["weights"][:] = weights
        w.arrays["chunks"][:] = structure
        w.set_keys([f"u{i}" for i in range(n)])
    return EgsArchive(prefix)


def spec(**kw):
    chunks = {"minibatch_size": "8,4", "chunk_training": True, "deriv_truncate_margin": 8}
    return job_spec(**{**chunks, "momentum": 0.5, **kw})


def objective(m, archive) -> float:
    mbs = all_chunk_minibatches(archive, m.left_context, m.right_context, 64)
    return evaluate_minibatches(m, mbs, torch.device("cpu")).logprob


def test_derivative_window_is_train_rnns():
    m = model()
    assert (m.left_context, m.right_context) == (2, 4)

    class Mb:
        chunk = (10, 6, 4)

    # --optimization.min-deriv-time = −margin − model_left; max = width − 1 + margin + right
    assert deriv_times(spec(), m, Mb) == {"min_deriv_time": -10, "max_deriv_time": 21}
    assert deriv_times(spec(deriv_truncate_margin=None), m, Mb) == {}


@pytest.mark.parametrize("ng", [True, False])
def test_a_chunk_job_reproduces_its_bits_and_lowers_the_objective(tmp_path, ng):
    archive = write_chunk_egs(tmp_path / "egs", 96)
    before = objective(model(seed=4, ng=ng), archive)
    a, sa = trained_twice(lambda: model(seed=4, ng=ng), archive, spec(ngsgd={"enabled": ng}))
    # 48 egs of each structure, minibatches of 8: 6 + 6; every frame of every chunk scored
    assert sa["num_minibatches"] == 12 and sa["frames"] == 48 * 10 + 48 * 6
    after = objective(a, archive)
    assert after > before + 0.1, (before, after)


def test_truncation_and_momentum_change_the_job_and_momentum_0_is_the_plain_update(tmp_path):
    archive = write_chunk_egs(tmp_path / "egs", 48)

    def trained(**kw):
        m = model(seed=1)
        train_one_job(m, archive, spec(**kw), torch.device("cpu"))
        return m.state_dict()

    def same(x, y):
        return all(torch.equal(x[k], y[k]) for k in x)

    base = trained()
    # margin 8: the window [−10, w + 11] holds every computed time (the chunk's input
    # starts at t = −6): no derivative is cut; margin 0: times before −2 get none
    assert same(base, trained(deriv_truncate_margin=None))
    assert not same(base, trained(deriv_truncate_margin=0))
    assert not same(base, trained(momentum=0.0))
    # momentum 0 takes the frame job's update path: the same bits either way
    assert same(trained(momentum=0.0), trained(momentum=0.0))


LSTM_EXP = {
    "model": {"family": "tdnn_lstm", "tdnn_lstm": copy.deepcopy(CFG["tdnn_lstm"])},
    "trainer": {"num_chunk_per_minibatch": "128,64", "deriv_truncate_margin": 10},
}


def test_the_plan_counts_archives_as_train_rnn_and_passes_the_chunk_params():
    cfg = deep_merge(yaml.safe_load(REPO_CONFIG.read_text()), {
        "egs": {"chunk_width": "40,30,20"},
        "experiments": {"l": LSTM_EXP, "m": {**LSTM_EXP, "trainer": {}}},
    })  # fmt: skip
    info = {"num_archives": 12, "frames_per_eg": 40, "num_frames": 123456}
    plans = experiment_plans(validate_config(cfg), info)
    p = plans["l"]
    epochs = p.trainer["num_epochs"]
    # train_rnn.py: num_archives_to_process = epochs · num_archives, no frames_per_eg
    assert p.schedule.num_archives_to_process == int(epochs * 12)
    job0, job1 = p.job(0, 0), p.job(1, 0)
    assert job0.chunk_training and job0.deriv_truncate_margin == 10 and job0.momentum == 0.5
    assert job0.effective_minibatch() == "64,32" and job1.effective_minibatch() == "128,64"
    assert {p.job(t, j).frame for t in range(p.num_iters) for j in range(p.num_jobs(t))} == {0}
    # the defaults of train_rnn.py when the keys are absent
    q = plans["m"].job(1, 0)
    assert (q.minibatch_size, q.deriv_truncate_margin) == ("100", 8)


def test_chunk_outputs_are_the_chunks_own_frames():
    """Output k of a chunk (w, l, r) is the chunk's frame k, window row l + k: it reads
    input rows up to l + k + model_right and none after (the right context, output
    delay included), whatever the extra left context."""
    from paravg.nnet.objective import chunk_outputs

    m = model(seed=2).eval()
    with torch.no_grad():
        m.output.weight.normal_(0, 1, generator=torch.Generator().manual_seed(0))
    w, left, right = 10, 6, 4
    feats = torch.randn(1, left + w + right, FEAT, generator=torch.Generator().manual_seed(1))
    ivec = torch.randn(1, IVEC, generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        base = chunk_outputs(m, feats, ivec, (w, left, right))
        assert base.shape == (1, w, TARGETS)
        for k in (0, 3, 5):
            edge = left + k + m.right_context
            for row, changes in ((edge, True), (edge + 1, False)):
                moved = feats.clone()
                moved[0, row] += 1.0
                out = chunk_outputs(m, moved, ivec, (w, left, right))
                assert (not torch.allclose(out[0, k], base[0, k])) == changes, (k, row)


def test_a_job_model_carries_its_nonlinearity_statistics(tmp_path):
    """What train_rnn.py's shrinkage reads: the statistics of the job, in its model file."""
    archive = write_chunk_egs(tmp_path / "egs", 48)
    m = model(seed=2)
    m.lstm_nonlinearities()[0].count.fill_(1e6)  # a start model's, zeroed by the job
    train_one_job(m, archive, spec(), torch.device("cpu"))
    (nonlin,) = m.lstm_nonlinearities()
    assert 0 < float(nonlin.count) < 1e6 and "layers.2.lstm_nonlin.count" in m.state_dict()
    assert 0.0 < m.saturation() < 1.0


@pytest.mark.parametrize("iteration, saturated, shrinks", [(0, False, True), (4, True, True),
                                                          (4, False, False)])  # fmt: skip
def test_a_shrinking_job_is_the_job_from_the_scaled_start(tmp_path, iteration, saturated, shrinks):
    """train_rnn.py: the start model × shrink-value (nnet3-am-copy --scale) on iteration 0
    and when its saturation exceeds the threshold; otherwise the job is unchanged."""
    from paravg.nnet.model_file import model_to_file_dict
    from paravg.nnet.shrinkage import scale_parameters
    from paravg.train_job import run_train_job

    write_chunk_egs(tmp_path / "egs", 48)
    start = model(seed=3)
    (nonlin,) = start.lstm_nonlinearities()
    # mean derivatives 0.02 everywhere (saturated: 0.92, 0.98) or 0.24 and 0.95 (0.04, 0.05)
    means = [0.02] * 5 if saturated else [0.24, 0.24, 0.95, 0.24, 0.95]
    nonlin.count.fill_(100.0)
    nonlin.deriv_sum.copy_(100.0 * torch.tensor(means, dtype=torch.float64)[:, None])
    shrink = dict(shrink_value=0.9, shrink_saturation_threshold=0.4)

    def job(name, start_model, **kw):
        s = spec(iteration=iteration, archive=str(tmp_path / "egs"), **kw)
        out = tmp_path / f"{name}.pt"
        stats = run_train_job(
            model_to_file_dict(start_model), s.archive, out, tmp_path / f"{name}.json", s,
            s.ngsgd, torch.device("cpu"),
        )  # fmt: skip
        return torch.load(out)["state_dict"], stats

    shrunk, stats = job("shrunk", start, **shrink)
    plain, plain_stats = job("plain", start)
    scaled = model(seed=3)
    scale_parameters(scaled.components(), 0.9)
    by_hand, _ = job("by_hand", scaled)
    expected = by_hand if shrinks else plain
    assert all(torch.equal(shrunk[k], expected[k]) for k in shrunk)
    assert stats["shrink"]["value"] == (0.9 if shrinks else 1.0) and "shrink" not in plain_stats
    assert (stats["shrink"]["saturation"] is None) == (iteration == 0)


def test_the_plan_passes_the_shrink_options_only_where_the_config_sets_them():
    cfg = deep_merge(yaml.safe_load(REPO_CONFIG.read_text()), {
        "egs": {"chunk_width": "40,30,20"},
        "experiments": {
            "s": deep_merge(LSTM_EXP, {"trainer": {"shrink_value": 0.99, "momentum": 0.25}}),
            "n": LSTM_EXP,
        },
    })  # fmt: skip
    info = {"num_archives": 12, "frames_per_eg": 40, "num_frames": 123456}
    plans = experiment_plans(validate_config(cfg), info)
    s, n = plans["s"].job(2, 0), plans["n"].job(2, 0)
    assert (s.shrink_value, s.shrink_saturation_threshold, s.momentum) == (0.99, 0.4, 0.25)
    assert (n.shrink_value, n.momentum) == (1.0, 0.5)
    assert not {"shrink_value", "shrink_saturation_threshold"} & set(plans["n"].job_params(2, 0))
