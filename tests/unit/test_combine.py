"""Final combination: Kaldi's candidates, and the EMA model as one separate candidate."""

import json

import numpy as np
import pytest
import torch

from paravg.combine import combine_models
from paravg.egs import EgsArchive, all_frame_minibatches
from paravg.egs.archive import ArchiveMeta, ArchiveWriter
from paravg.io import save_torch_atomic
from paravg.nnet.model_file import build_model, load_model_file, model_to_file_dict
from paravg.nnet.objective import weighted_logprob
from paravg.sync.tensors import mean
from tests.unit.dummies import seeded, tdnn_config, tdnnf_config, with_output

CFG = tdnn_config((8, [0]), input_splice=[-1, 0, 1])
FEAT, TARGETS = 4, 3


def write_combine_egs(prefix, n: int, context: int, seed: int) -> None:
    """``n`` random one-frame egs (``context`` frames either side), random labels."""
    rng = np.random.default_rng(seed)
    meta = ArchiveMeta(n, 1, context, context, FEAT, 0, "float32")
    with ArchiveWriter(prefix, meta) as w:
        w.arrays["feats"][:] = rng.standard_normal((n, meta.window, FEAT)).astype(np.float32)
        w.arrays["labels"][:] = rng.integers(0, TARGETS, (n, 1))
        w.arrays["weights"][:] = 1.0
        w.set_keys([f"u{i}" for i in range(n)])


@pytest.fixture
def setup(tmp_path):
    write_combine_egs(tmp_path / "combine", 64, 1, seed=0)
    paths = []
    for seed in range(4):
        m = with_output(seeded(CFG, seed, FEAT, 0, TARGETS), seed, std=0.5)
        p = tmp_path / f"{seed + 1}.pt"
        save_torch_atomic(p, model_to_file_dict(m, {}))
        paths.append(p)
    return tmp_path, paths


def run(tmp_path, models, name, **kw):
    out, summary = tmp_path / f"{name}.pt", tmp_path / f"{name}.json"
    s = combine_models(models, tmp_path / "combine", 30, out, summary, **kw)
    assert json.loads(summary.read_text()) == s
    return load_model_file(out)["state_dict"], s


def same(a, b):
    return all(torch.equal(a[k], b[k]) for k in a)


def trained_further(tmp_path, path, name, epochs=30):
    """``path``'s model after more SGD on the combine egs themselves: a model truly better
    there than any average of the raw models (what an EMA of a longer-trained run is)."""
    file_dict = load_model_file(path)
    model = build_model(file_dict)
    archive = EgsArchive(tmp_path / "combine")
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    model.train()
    for _ in range(epochs):
        for mb in all_frame_minibatches(archive, model.left_context, model.right_context, 16):
            logp = model(mb.feats)
            loss = -weighted_logprob(logp, mb.labels, mb.weights) / mb.weights.sum()
            opt.zero_grad()
            loss.backward()
            opt.step()
    out = tmp_path / f"{name}.pt"
    save_torch_atomic(out, model_to_file_dict(model, {}))
    return out


def test_the_ema_never_joins_kaldis_candidates(setup):
    """With ``candidate`` a poorer EMA changes nothing of Kaldi's combination (same
    candidates, same objective, same bits of the final model), an EMA exactly as good as
    the combination loses the tie, and ``none`` does not even read it."""
    tmp, paths = setup
    plain, s0 = run(tmp, paths[:3], "plain")
    # a poor "EMA" (the fourth raw model: one model alone scores below the combination)
    kept, s1 = run(tmp, paths[:3], "kept", ema_path=paths[3], ema_choice="candidate")
    none, _ = run(tmp, paths[:3], "none", ema_path=paths[3], ema_choice="none")
    assert s1["candidates"] == s0["candidates"] and s1["newest_alone"] == s0["newest_alone"]
    assert s1["combined"] == {"num_models": s0["num_models"], "objective": s0["objective"]}
    assert s1["ema"]["objective"] < s0["objective"]  # the setup: the EMA really is worse
    assert s1["chosen"] == "combined" and s1["objective"] == s0["objective"]
    assert same(kept, plain)
    # an EMA as good as the combination (its very file): the tie keeps the combination
    tie, s2 = run(tmp, paths[:3], "tie", ema_path=tmp / "plain.pt", ema_choice="candidate")
    assert s2["ema"]["objective"] == s0["objective"] and s2["chosen"] == "combined"
    assert same(tie, plain)
    assert same(none, plain) and "ema" not in run(tmp, paths[:3], "n2", ema_choice="none")[1]


def test_a_better_ema_is_chosen_and_final_always_takes_it(setup):
    """``candidate`` takes the EMA when it scores better than Kaldi's combination on the
    combine egs (its bits, its objective); ``final`` takes it even when it is worse."""
    tmp, paths = setup
    _, s0 = run(tmp, paths[:3], "plain")
    # the EMA: the newest model trained further (better than any average of the raw ones)
    ema = trained_further(tmp, paths[2], "ema")
    ema_alone = run(tmp, [ema], "ema_alone")[1]["objective"]
    assert ema_alone > s0["objective"] + 0.1  # the setup: the EMA really is better
    sd, s = run(tmp, paths[:3], "cand", ema_path=ema, ema_choice="candidate")
    assert s["ema"] == {"path": str(ema), "objective": ema_alone, "choice": "candidate"}
    assert s["chosen"] == "ema" and s["objective"] == ema_alone
    assert same(sd, load_model_file(ema)["state_dict"])
    # Kaldi's own choice is still recorded beside it
    assert s["combined"] == {"num_models": s0["num_models"], "objective": s0["objective"]}
    assert s["candidates"] == s0["candidates"]
    # final: the EMA even when it is the worst model
    scores = [run(tmp, [p], f"alone{i}")[1]["objective"] for i, p in enumerate(paths)]
    worst = paths[int(np.argmin(scores))]
    assert min(scores) < s0["objective"]
    sd, s = run(tmp, paths[:3], "final", ema_path=worst, ema_choice="final")
    assert s["chosen"] == "ema" and same(sd, load_model_file(worst)["state_dict"])
    assert s["combined"]["objective"] == s0["objective"]


TDNNF_CFG = tdnnf_config(8, 3, [1], linear_dim=3, prefinal=(6, 4))


def test_batchnorm_statistics_are_recomputed_on_the_combine_egs(tmp_path):
    """nnet3-combine's RecomputeStats: the final TDNN-F's batch-norm statistics are the
    combine egs' own (zeroed, then every row of every eg), not the jobs' averages."""
    write_combine_egs(tmp_path / "combine", 40, 2, seed=1)
    paths = []
    for seed in range(2):
        m = seeded(TDNNF_CFG, seed, FEAT, 0, TARGETS)
        m.train()(torch.randn(16, 5, FEAT) * 3 + 2)  # job-like statistics, far from the egs'
        p = tmp_path / f"{seed + 1}.pt"
        save_torch_atomic(p, model_to_file_dict(m, {}))
        paths.append(p)
    final, summary = run(tmp_path, paths, "final")
    model = build_model({**load_model_file(paths[0]), "state_dict": final})
    tdnn1 = model.layers[0]
    # tdnn1 runs at the 3 times the stride-1 layer needs (-1, 0, 1) of each of the 40 egs
    assert float(final["layers.0.batchnorm.stats_count"]) == 40 * 3
    feats = torch.from_numpy(np.asarray(EgsArchive(tmp_path / "combine").feats[:], np.float32))
    with torch.no_grad():
        lda = model.lda(model.lda_input(feats, None))  # rows at times 1..3 of the window
        rows = tdnn1.relu(tdnn1.affine(lda)).reshape(-1, 8).double()
    torch.testing.assert_close(final["layers.0.batchnorm.stats_sum"] / 120, rows.mean(0))
    # the candidates were scored with batch-norm in training mode (the one minibatch of
    # 40 egs normalised by its own statistics), not with any stored statistics
    files = [load_model_file(p) for p in reversed(paths)]
    for n in (1, 2):
        cand = build_model({**files[0], "state_dict": mean([f["state_dict"] for f in files[:n]])})
        cand.train()
        batch = next(iter(all_frame_minibatches(EgsArchive(tmp_path / "combine"), 2, 2, 512)))
        with torch.no_grad():
            logp = cand(batch.feats, None)[:, 0]
        want = float(weighted_logprob(logp, batch.labels[:, 0], batch.weights[:, 0])) / 40
        assert summary["objective_by_num_models"][str(n)] == pytest.approx(want, rel=1e-5)
