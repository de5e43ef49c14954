"""Chain training (paravg/chain/train.py through paravg/train_job.py): the chain TDNN-F
(run_tdnn_1d's output without softmax and its output-xent branch) trained by the
cross-entropy job's update on chain egs improves its chain objective."""

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
    after = chain_subset_stats(model, prefix)
    assert after["chain_objf"] > before["chain_objf"] + 0.2, (before, after)
    assert after["xent_objf"] > before["xent_objf"], (before, after)
