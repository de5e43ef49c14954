"""The sync registry: one entry per configurable method, the DAG edges each implies."""

import json

import pytest
import torch

from paravg.config import load_schema
from paravg.io import save_torch_atomic
from paravg.sync.decentralized import start_model
from paravg.sync.registry import DECENTRALIZED, SYNC_METHODS, get_method, neighbourhoods

SYNC = {
    "method": "bmuf",
    "objf_threshold": 1.0,
    "bmuf": {"block_momentum": None, "block_lr": 1.0, "nesterov": True},
    "ema": {"enabled": True, "decay": 0.9},
}


def test_registry_covers_exactly_the_configurable_methods():
    enum = load_schema()["$defs"]["sync"]["properties"]["method"]["enum"]
    assert sorted(SYNC_METHODS) == sorted(enum)
    with pytest.raises(ValueError, match="known"):
        get_method("gossip")


def test_fan_in_and_synced_model_per_method():
    assert get_method("average").fan_in == "average"
    assert get_method("bmuf").fan_in == "bmuf" and get_method("bmuf").synced_model == "bmuf-global"
    for name in DECENTRALIZED:
        m = get_method(name)
        assert m.decentralized and m.fan_in is None and m.synced_model == "consensus"


@pytest.mark.parametrize("name", sorted(SYNC_METHODS))
def test_iteration_zero_starts_from_the_initial_model(name):
    for j in range(3):
        r = get_method(name).start_recipe(0, j, 3, 0)
        assert r.synced == 0 and r.job_outputs(j) == []


def test_global_methods_read_only_the_synced_model():
    for name in ("average", "bmuf"):
        r = get_method(name).start_recipe(7, 2, 4, 0)
        assert r.synced == 7 and r.job_outputs(2) == []


def test_ring_jobs_read_only_their_neighbours_of_the_previous_iteration():
    m = get_method("ring")
    for t in (1, 2, 9):
        for j in range(6):
            r = m.start_recipe(t, j, 6, 0)
            assert sorted(r.job_outputs(j)) == [
                (t - 1, k) for k in sorted({(j - 1) % 6, j, (j + 1) % 6})
            ]


def test_random_ring_edges_are_seeded_and_redrawn():
    m = get_method("random-ring")
    n = 6

    def edges(t, srand):
        return [tuple(m.start_recipe(t, j, n, srand).job_outputs(j)) for j in range(n)]

    assert edges(3, 5) == edges(3, 5)
    assert len({tuple(edges(t, 5)) for t in range(1, 12)}) > 5
    for t in range(1, 12):
        e = edges(t, 5)
        assert all(len(x) == 3 and all(it == t - 1 for it, _ in x) for x in e)
        # every job's output is read by exactly three jobs (mean-preserving mixing)
        readers = [sum(1 for x in e for _, k in x if k == job) for job in range(n)]
        assert readers == [3] * n
    assert neighbourhoods("random-ring", 4, n, 5) != neighbourhoods("random-ring", 5, n, 5)


def test_learning_rate_scale():
    assert get_method("bmuf").learning_rate_scale(SYNC, 4) == pytest.approx(0.25)
    fixed = dict(SYNC, bmuf={"block_momentum": 0.0, "block_lr": 1.0, "nesterov": True})
    assert get_method("bmuf").learning_rate_scale(fixed, 4) == 1.0
    for name in ("average", *DECENTRALIZED):
        assert get_method(name).learning_rate_scale(SYNC, 4) == 1.0


def test_bad_job_or_iteration_is_refused():
    with pytest.raises(ValueError, match="no job 4"):
        get_method("ring").start_recipe(2, 4, 4, 0)


def test_diverged_neighbour_is_left_out_of_the_mixing(tmp_path):
    paths, stats = [], []
    for k, (v, objf) in enumerate([(1.0, -1.0), (float("nan"), -1.0), (3.0, -1.2), (9.0, -5.0)]):
        p = tmp_path / f"job{k}.pt"
        save_torch_atomic(
            p, {"format": "paravg.tdnn.v1", "state_dict": {"w": torch.full((2,), v)}, "meta": {}}
        )
        (tmp_path / f"job{k}.json").write_text(json.dumps({"objf": objf}))
        paths.append(p)
        stats.append(tmp_path / f"job{k}.json")
    start, record = start_model(paths, stats, 5, 1.0)
    assert start["state_dict"]["w"].tolist() == [2.0, 2.0]  # mean of jobs 0 and 2
    assert record["rejected"] == [str(paths[1]), str(paths[3])]
    with pytest.raises(RuntimeError, match="no usable neighbour"):
        start_model(paths[1:2], stats[1:2], 5, 1.0)
