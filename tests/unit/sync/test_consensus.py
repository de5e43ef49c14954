"""Consensus model of the decentralized methods: mean of all usable jobs, even at t = 0."""

import json

import torch

from paravg.io import save_torch_atomic
from paravg.nnet.model_file import load_model_file
from paravg.sync.consensus import consensus_model


def test_consensus_is_the_mean_of_all_jobs_at_iteration_zero_too(tmp_path):
    paths, stats = [], []
    for k, (v, objf) in enumerate([(1.0, -1.0), (2.0, -0.5), (6.0, -1.4), (100.0, -9.0)]):
        p = tmp_path / f"job{k}.pt"
        save_torch_atomic(
            p,
            {
                "format": "paravg.tdnn.v1",
                "model": {},
                "state_dict": {"w": torch.full((3,), v)},
                "meta": {},
            },
        )
        (tmp_path / f"job{k}.json").write_text(json.dumps({"objf": objf}))
        paths.append(p)
        stats.append(tmp_path / f"job{k}.json")
    summary = consensus_model(paths, stats, 0, 1.0, tmp_path / "c.pt", tmp_path / "c.json")
    assert summary["accepted"] == [0, 1, 2] and summary["rejected"] == [3]
    c = load_model_file(tmp_path / "c.pt")
    assert c["state_dict"]["w"].tolist() == [3.0, 3.0, 3.0] and "model" in c
    assert json.loads((tmp_path / "c.json").read_text())["method"] == "consensus"
