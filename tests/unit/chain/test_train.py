"""Chain training (paravg/chain/train.py through paravg/train_job.py): the chain TDNN-F
(run_tdnn_1d's output without softmax and its output-xent branch) trained by the
cross-entropy job's update on chain egs improves its chain objective."""

from types import SimpleNamespace

import numpy as np
import pytest
import torch

from paravg.chain.prepare import archive_supervision, load_chain, prepare_chain
from paravg.chain.train import chain_options, chain_subset_stats
from paravg.egs.archive import ArchiveMeta, ArchiveWriter
from paravg.egs.loader import EgsArchive
from paravg.nnet.tdnnf import TdnnfModel
from paravg.train_job import train_one_job
from tests.unit.dummies import job_spec, tdnnf_config

K, D, F = 4, 6, 12  # phones, feature dim, frames per eg (4 outputs at f = 3)
CFG = tdnnf_config(
    self_repair_scale=1e-5,
    objective="chain",
    frame_subsampling_factor=3,
    chain={"leaky_hmm_coefficient": 0.1, "xent_regularize": 0.1},
)


def chain_model(seed=0) -> TdnnfModel:
    m = TdnnfModel(CFG, D, 0, 2 * K)
    m.init_parameters(seed)
    return m


def write_chain_egs(directory, seed=0):
    """Utterances whose features are their phone's one-hot plus noise, cut into egs of
    F frames, their supervision beside the archive and the chain setup in ``chain/``."""
    rng = np.random.default_rng(seed)
    targets, feats = {}, {}
    for u in range(10):
        t = np.repeat(rng.integers(0, K, 14), rng.integers(4, 10, 14))
        targets[f"u{u}"] = t
        x = rng.normal(0, 0.3, (len(t), D)).astype(np.float32)
        x[np.arange(len(t)), t] += 1.0
        feats[f"u{u}"] = x
    prepare_chain(targets.values(), K, directory / "chain")
    lc = rc = 6
    rows = [(u, s) for u in targets for s in range(0, len(targets[u]) - F + 1, F)]
    meta = ArchiveMeta(len(rows), F, lc, rc, D, 0, "float32")
    prefix = directory / "egs.0"
    with ArchiveWriter(prefix, meta) as w:
        for i, (u, s) in enumerate(rows):
            idx = np.clip(np.arange(s - lc, s + F + rc), 0, len(targets[u]) - 1)
            w.arrays["feats"][i] = feats[u][idx]
            w.arrays["labels"][i] = targets[u][s : s + F]
            w.arrays["weights"][i] = 1.0
        w.set_keys([f"{u}-{s}" for u, s in rows])
    _, sup_opts = chain_options(CFG)
    table = archive_supervision(
        [f"{u}-{s}" for u, s in rows],
        [F] * len(rows),
        targets,
        load_chain(directory / "chain"),
        sup_opts,
    )
    table.save(prefix)
    return prefix


def test_the_chain_tdnnf_has_kaldis_two_outputs():
    m = chain_model()
    names = m.component_names()
    assert names[-4:] == [
        "output.affine",
        "prefinal-xent.affine",
        "prefinal-xent.linear",
        "output-xent.affine",
    ]
    x = torch.randn(2, 12 + m.left_context + m.right_context, D)
    m.output.bias.data.fill_(0.5)
    y, xent = m.chain_forward(x, None, 3)
    assert y.shape == xent.shape == (2, 4, 2 * K)
    torch.testing.assert_close(m(x, None, 3), y)  # forward: the chain output, no softmax
    torch.testing.assert_close(xent.exp().sum(-1), torch.ones(2, 4))
    with pytest.raises(ValueError, match="objective"):
        TdnnfModel(tdnnf_config(), D, 0, K).chain_forward(x)


def test_a_chain_job_improves_the_chain_objective(tmp_path):
    prefix = write_chain_egs(tmp_path)
    model = chain_model(seed=1)
    before = chain_subset_stats(model, prefix)
    assert before["chain_objf"] < 0 and before["failed_minibatches"] == 0
    stats = None
    for it in range(6):
        spec = job_spec(iteration=it + 1, minibatch_size=8, learning_rate=0.005)
        stats = train_one_job(model, EgsArchive(prefix), spec, torch.device("cpu"))
    assert stats["num_minibatches"] >= 2 and stats["chain"]["failed_minibatches"] == 0
    assert stats["objf"] == stats["chain"]["chain_objf"] and np.isfinite(stats["objf"])
    assert model.output_xent.learning_rate_factor == pytest.approx(5.0)  # 0.5 / 0.1
    after = chain_subset_stats(model, prefix)
    assert after["chain_objf"] > before["chain_objf"] + 0.2, (before, after)
    assert after["xent_objf"] > before["xent_objf"], (before, after)


def test_combination_scores_the_chain_objective_and_a_chain_model_has_no_priors(tmp_path):
    """``nnet3-chain-combine``: the candidates scored by their chain objective on the
    combine egs (batch-norm in training mode); ``final.pt`` keeps zero priors."""
    from paravg.combine import combine_models
    from paravg.io import read_json
    from paravg.nnet.model_file import load_model_file, model_to_file_dict
    from paravg.priors import adjust_priors

    prefix = write_chain_egs(tmp_path)
    paths = []
    model = chain_model(seed=2)
    for it in range(3):
        spec = job_spec(iteration=it + 1, minibatch_size=8, learning_rate=0.005)
        train_one_job(model, EgsArchive(prefix), spec, torch.device("cpu"))
        paths.append(tmp_path / f"{it}.pt")
        torch.save(model_to_file_dict(model, {"iteration": it}), paths[-1])
    summary = combine_models(paths, prefix, 3, tmp_path / "combined.pt", tmp_path / "c.json")
    newest = chain_model()
    newest.load_state_dict(load_model_file(paths[-1])["state_dict"])
    expected = chain_subset_stats(newest, prefix, batchnorm_test_mode=False)["chain_objf"]
    assert summary["objective_by_num_models"]["1"] == pytest.approx(expected, rel=1e-6)
    assert -2.0 < summary["objective"] < 0
    out = tmp_path / "final.pt"
    adjust_priors(tmp_path / "combined.pt", [prefix], 50, out, tmp_path / "f.json")
    final = load_model_file(out)
    assert torch.equal(final["state_dict"]["log_priors"], torch.zeros(2 * K))
    assert read_json(tmp_path / "f.json")["priors"].startswith("none")


def test_a_chain_job_reproduces_its_bits_and_its_seed_shuffles_the_egs(tmp_path):
    """The same start, archive and seed give the same model bits (a rerun job, a resume);
    another job seed another order of the egs, so other bits."""
    from tests.unit.dummies import trained_twice

    prefix = write_chain_egs(tmp_path)
    spec = job_spec(iteration=2, minibatch_size=8, learning_rate=0.005, dropout_proportion=0.1)
    a, stats = trained_twice(lambda: chain_model(seed=3), EgsArchive(prefix), spec)
    assert stats["chain"]["frames"] > 0
    b = chain_model(seed=3)
    train_one_job(
        b, EgsArchive(prefix), job_spec(**{**spec.__dict__, "job": 0}), torch.device("cpu")
    )
    assert not torch.equal(a.state_dict()["output.weight"], b.state_dict()["output.weight"])


def test_a_frame_shift_moves_the_input_as_shift_chain_example_times():
    """``nnet3-chain-copy-egs --frame-shift s``: inputs move by s, outputs by the nearest
    multiple S of f, so the window moves by S − s (f = 3: shifts 0, 1, 2 → 0, −1, +1)."""
    from paravg.chain.train import frame_shift_offset

    assert [frame_shift_offset(s, 3) for s in range(3)] == [0, -1, 1]
    assert [frame_shift_offset(s, 2) for s in range(2)] == [0, 1]
    assert frame_shift_offset(0, 1) == 0


def test_a_chain_job_merges_its_egs_by_the_rule_and_shifts_their_input(tmp_path):
    """The job's minibatches are the sizes ``nnet3-chain-merge-egs`` makes of the archive's
    supervised egs under the rule (74 egs, "32,16": 32, 32, and no size fits the last
    10), and a frame shift reads each eg's
    window moved by :func:`frame_shift_offset` within the egs' extra context."""
    from paravg.chain.train import ChainComputer
    from paravg.egs.minibatch import MinibatchRule

    prefix = write_chain_egs(tmp_path)
    archive = EgsArchive(prefix)
    comp = ChainComputer(archive, CFG, 2 * K)
    model = chain_model()
    assert comp.num_supervised == 74
    sizes = MinibatchRule.parse("32,16").sizes(archive.meta.window, comp.num_supervised)
    assert sizes == [32, 32]
    assert [len(mb.rows) for mb in comp.minibatches(model, [32, 16, 16])] == [32, 16, 16]
    assert [len(mb.rows) for mb in comp.minibatches(model, [64, 16])] == [64]  # 10 left
    lc = archive.left_context - model.left_context  # 1 frame spare each side
    width = model.left_context + F + model.right_context
    for shift, offset in ((0, 0), (1, -1), (2, 1)):
        (mb,) = comp.minibatches(model, [4], frame_shift=shift)
        expect = np.asarray(archive.feats[mb.rows, lc + offset : lc + offset + width])
        assert np.array_equal(mb.feats.numpy(), expect.astype(np.float32)), shift
    with pytest.raises(ValueError, match="exceeds the egs"):
        wide = SimpleNamespace(left_context=6, right_context=6)  # the egs' own context
        list(comp.minibatches(wide, [4], frame_shift=2))
    spec = job_spec(iteration=1, minibatch_size="32,16", learning_rate=0.005, frame_shift=1)
    stats = train_one_job(model, archive, spec, torch.device("cpu"))
    assert stats["num_minibatches"] == 2 and stats["chain"]["frames"] == 2 * 32 * F // 3
