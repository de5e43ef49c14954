"""Kaldi's model averaging: selection, mean, robustness to broken jobs."""

import json
import math

import pytest
import torch

from paravg.sync.average import NoAcceptableJobError, average_jobs, select_jobs
from paravg.sync.tensors import mean
from tests.unit.dummies import seeded, tdnn_config, write_jobs

CFG = tdnn_config((8, [0]), input_splice=[-1, 0, 1])


def model(seed):
    return seeded(CFG, seed, feat=4, ivec=0, targets=5)


def test_selection_threshold_and_iteration_zero():
    objfs = [-2.0, -1.5, -2.6, -2.4]
    assert select_jobs(objfs, 0) == [1]
    assert select_jobs(objfs, 3, threshold=1.0) == [0, 1, 3]
    assert select_jobs(objfs, 3, threshold=0.1) == [1]
    assert select_jobs([-1.0, math.nan, None, -1.2], 2) == [0, 3]
    assert select_jobs([math.inf * -1, math.nan], 2) == []


def test_identical_models_average_to_themselves_and_order_is_irrelevant():
    sd = model(0).state_dict()
    avg = mean([sd, sd, sd])
    assert all(torch.equal(avg[k], sd[k]) for k in sd)
    sds = [model(s).state_dict() for s in range(4)]
    a, b = mean(sds), mean(sds[::-1])
    assert all(torch.allclose(a[k], b[k], atol=1e-7) for k in a)
    by_hand = (
        sds[0]["hidden.0.weight"]
        + sds[1]["hidden.0.weight"]
        + sds[2]["hidden.0.weight"]
        + sds[3]["hidden.0.weight"]
    ) / 4
    assert torch.allclose(a["hidden.0.weight"], by_hand, atol=1e-6)


def jobs_of(tmp_path, objfs):
    """Job j: the model of seed j, objective ``objfs[j]``."""
    return write_jobs(tmp_path, [model(j) for j in range(len(objfs))], objfs)


def test_average_jobs_rejects_outliers(tmp_path):
    paths, stats = jobs_of(tmp_path, [-1.0, -1.2, -3.0])
    synced, summary = average_jobs(paths, stats, iteration=5)
    assert summary["accepted"] == [0, 1] and summary["rejected"] == [2]
    expected = (model(0).hidden[0].weight + model(1).hidden[0].weight) / 2
    assert torch.allclose(synced["state_dict"]["hidden.0.weight"], expected, atol=1e-6)


def test_iteration_zero_takes_best_job(tmp_path):
    paths, stats = jobs_of(tmp_path, [-1.5, -1.0, -1.2])
    synced, summary = average_jobs(paths, stats, iteration=0)
    assert summary["accepted"] == [1]
    assert torch.equal(synced["state_dict"]["hidden.0.weight"], model(1).hidden[0].weight)


def test_diverged_and_truncated_jobs_are_excluded(tmp_path):
    paths, stats = jobs_of(tmp_path, [-1.0, float("nan"), -1.1])
    data = paths[2].read_bytes()
    paths[2].write_bytes(data[:100])
    _synced, summary = average_jobs(paths, stats, iteration=3)
    assert summary["accepted"] == [0]
    assert any("job 1" in p for p in summary["problems"])
    assert any("job 2" in p and "job2.pt" in p for p in summary["problems"])


def test_all_diverged_names_iteration_and_jobs(tmp_path):
    paths, stats = jobs_of(tmp_path, [float("nan"), float("-inf")])
    with pytest.raises(NoAcceptableJobError, match=r"iteration 7.*job 0.*job 1"):
        average_jobs(paths, stats, iteration=7)


def test_models_are_read_one_at_a_time_and_give_the_bits_of_the_list_mean(tmp_path, monkeypatch):
    """The node and every job average N models holding one at a time (a float64 running
    sum beside it: memory ≈ 3 models, not N), bit for bit the mean of the list; only the
    accepted jobs' models are read, and an unreadable best job is dropped and the
    selection made again without it."""
    import gc
    import weakref

    import paravg.nnet.model_file as tdnn

    paths, stats = jobs_of(tmp_path, [-1.0, -1.1, -5.0, -1.2, -0.9])
    real_load, alive, reads = tdnn.load_model_file, [], []

    def load(path):
        gc.collect()
        alive.append(sum(r() is not None for r in refs))
        reads.append(str(path))
        model = real_load(path)
        refs.append(weakref.ref(model["state_dict"]["hidden.0.weight"]))
        return model

    refs = []
    monkeypatch.setattr(tdnn, "load_model_file", load)
    synced, summary = average_jobs(paths, stats, iteration=4)
    assert summary["accepted"] == [0, 1, 3, 4] and summary["rejected"] == [2]
    assert max(alive) == 0  # the previous model is gone before the next is read
    assert str(paths[2]) not in reads  # a rejected job's model is never read
    monkeypatch.setattr(tdnn, "load_model_file", real_load)
    listed = mean([real_load(paths[j])["state_dict"] for j in (0, 1, 3, 4)])
    assert all(torch.equal(synced["state_dict"][k], v) for k, v in listed.items())
    # the best job's file is damaged: it is excluded and job 2 is judged against job 0
    paths[4].write_bytes(paths[4].read_bytes()[:100])
    _synced, summary = average_jobs(paths, stats, iteration=4)
    assert summary["accepted"] == [0, 1, 3] and "job 4" in summary["problems"][0]


def test_the_node_refuses_inputs_of_another_plan_and_records_the_plan_it_checked(tmp_path):
    """The average node (nodes.run_node) checks its inputs' plan before it writes
    anything, and its summary records the fingerprint, which jobs starting from its
    <t>.pt check instead of the N statistics."""
    from paravg.errors import TrainingError
    from paravg.sync.nodes import run_node

    paths, stats = jobs_of(tmp_path, [-1.0, -1.1])
    for s, fp in zip(stats, ["abc", "abc"], strict=True):
        s.write_text(json.dumps({"objf": -1.0, "plan": {"fingerprint": fp}}))
    outputs = {"model": str(tmp_path / "2.pt"), "summary": str(tmp_path / "2.json")}
    node = {
        "iteration": 1,
        "sync": {"objf_threshold": 1.0},
        "files": {"models": [str(p) for p in paths], "stats": [str(s) for s in stats]},
        "fingerprint": "abc",
    }
    run_node("average", node, outputs)
    assert json.loads((tmp_path / "2.json").read_text())["plan"] == {"fingerprint": "abc"}
    for f in outputs.values():
        (tmp_path / f).unlink()
    stats[1].write_text(json.dumps({"objf": -1.0, "plan": {"fingerprint": "old"}}))
    with pytest.raises(TrainingError, match=r"job1\.json was made by another plan"):
        run_node("average", node, outputs)
    assert not any((tmp_path / n).exists() for n in ("2.pt", "2.json"))
