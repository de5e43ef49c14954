"""Final combination: Kaldi's candidates, and the EMA model as one separate candidate."""

import json

import numpy as np
import pytest
import torch

from paravg.combine import combine_models
from paravg.egs.archive import ArchiveMeta, ArchiveWriter
from paravg.io import save_torch_atomic
from paravg.nnet.tdnn import TdnnModel, load_model_file, model_to_file_dict

CFG = {
    "input_splice": [-1, 0, 1],
    "hidden": [{"dim": 8, "splice": [0]}],
    "max_change_hidden": 0.75,
    "max_change_output": 1.5,
}
FEAT, TARGETS = 4, 3


@pytest.fixture
def setup(tmp_path):
    rng = np.random.default_rng(0)
    meta = ArchiveMeta(64, 1, 1, 1, FEAT, 0, "float32")
    with ArchiveWriter(tmp_path / "combine", meta) as w:
        w.arrays["feats"][:] = rng.standard_normal((64, meta.window, FEAT)).astype(np.float32)
        w.arrays["labels"][:] = rng.integers(0, TARGETS, (64, 1))
        w.arrays["weights"][:] = 1.0
        w.set_keys([f"u{i}" for i in range(64)])
    paths = []
    for seed in range(4):
        m = TdnnModel(CFG, FEAT, 0, TARGETS)
        m.init_parameters(seed)
        with torch.no_grad():
            m.output.weight.normal_(0, 0.5, generator=torch.Generator().manual_seed(seed))
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


def test_the_ema_never_joins_kaldis_candidates(setup):
    tmp, paths = setup
    plain, s0 = run(tmp, paths[:3], "plain")
    # a poor "EMA" (the worst model): candidate -> Kaldi's combination, same bits as without
    kept, s1 = run(tmp, paths[:3], "kept", ema_path=paths[3], ema_choice="candidate")
    none, _ = run(tmp, paths[:3], "none", ema_path=paths[3], ema_choice="none")
    assert s1["candidates"] == s0["candidates"] and s1["newest_alone"] == s0["newest_alone"]
    assert s1["combined"] == {"num_models": s0["num_models"], "objective": s0["objective"]}
    if s1["ema"]["objective"] <= s0["objective"]:
        assert s1["chosen"] == "combined" and same(kept, plain)
    assert same(none, plain) and "ema" not in run(tmp, paths[:3], "n2", ema_choice="none")[1]


def test_a_better_ema_is_chosen_and_final_always_takes_it(setup):
    tmp, paths = setup
    _, s0 = run(tmp, paths[:3], "plain")
    # the EMA candidate: score each model alone, take the best as the "EMA"
    scores = [run(tmp, [p], f"alone{i}")[1]["objective"] for i, p in enumerate(paths)]
    best = paths[int(np.argmax(scores))]
    sd, s = run(tmp, paths[:3], "cand", ema_path=best, ema_choice="candidate")
    assert s["ema"]["objective"] == pytest.approx(max(scores))
    if max(scores) > s0["objective"]:
        assert s["chosen"] == "ema" and same(sd, load_model_file(best)["state_dict"])
    worst = paths[int(np.argmin(scores))]
    sd, s = run(tmp, paths[:3], "final", ema_path=worst, ema_choice="final")
    assert s["chosen"] == "ema" and same(sd, load_model_file(worst)["state_dict"])
    assert s["combined"]["objective"] == s0["objective"]
