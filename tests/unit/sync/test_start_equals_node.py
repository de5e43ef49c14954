"""The start model a train job forms in memory is bit for bit the synced file the off-path
node writes from the same inputs (average and BMUF): the node is off the critical path."""

import json

import torch

from paravg.io import save_torch_atomic
from paravg.layout import Layout
from paravg.nnet.tdnn import TdnnModel, load_model_file, model_to_file_dict
from paravg.sync.average import average_jobs
from paravg.sync.bmuf import bmuf_sync
from paravg.sync.registry import get_method
from paravg.sync.start import form_start_model

CFG = {"input_splice": [-1, 0, 1], "hidden": [{"dim": 8, "splice": [0]}],
       "max_change_hidden": 0.75, "max_change_output": 1.5}  # fmt: skip
SYNC = {"objf_threshold": 1.0, "bmuf": {"block_momentum": None, "block_lr": 1.0, "nesterov": True}}


def write_jobs(layout, t, n, seed):
    for j in range(n):
        m = TdnnModel(CFG, 4, 0, 5)
        m.init_parameters(seed * 10 + j)
        save_torch_atomic(layout.job_model("e", t, j), model_to_file_dict(m, {}))
        with open(layout.job_stats("e", t, j), "w") as f:
            json.dump({"objf": -1.0 - 0.1 * j}, f)


def files(refs, layout):
    return {role: [r.path(layout, "e") for r in rs] for role, rs in refs.items()}


def test_average_start_is_the_nodes_model(tmp_path):
    L = Layout(str(tmp_path))
    (tmp_path / "exp" / "e" / "3").mkdir(parents=True)
    write_jobs(L, 3, 4, 1)
    refs = get_method("average").start_inputs(3, 1, (4, 4, 4, 4), 0)
    start, _ = form_start_model("average", files(refs, L), 3, SYNC)
    node = files(get_method("average").node_inputs(3, (4, 4, 4, 4), 0), L)
    synced, summary = average_jobs(node["models"], node["stats"], 2, 1.0)
    assert summary["accepted"] == [0, 1, 2, 3]
    assert all(
        torch.equal(start["state_dict"][k], synced["state_dict"][k]) for k in synced["state_dict"]
    )


def test_bmuf_start_is_the_nodes_start_model(tmp_path):
    L = Layout(str(tmp_path))
    jobs = (2, 2, 2, 2)
    e = tmp_path / "exp" / "e"
    for d in ("1", "2", "bmuf"):
        (e / d).mkdir(parents=True)
    m0 = TdnnModel(CFG, 4, 0, 5)
    m0.init_parameters(0)
    save_torch_atomic(L.init_model("e"), model_to_file_dict(m0, {}))
    # block 1 (jobs of iteration 0 at index 1) through the node, then block 2 both ways
    write_jobs(L, 1, 2, 1)
    n1 = files(get_method("bmuf").node_inputs(1, jobs, 0), L)
    bmuf_sync(n1["models"], n1["stats"], n1["global"][0], None, n1["start"][0], 0, 1.0,
              SYNC["bmuf"], L.model("e", 1), L.bmuf_global("e", 1), L.bmuf_delta("e", 1),
              L.sync_summary("e", 1))  # fmt: skip
    write_jobs(L, 2, 2, 2)
    refs = get_method("bmuf").start_inputs(2, 0, jobs, 0)
    start, _ = form_start_model("bmuf", files(refs, L), 2, SYNC)
    n2 = files(get_method("bmuf").node_inputs(2, jobs, 0), L)
    bmuf_sync(n2["models"], n2["stats"], n2["global"][0], n2["delta"][0], n2["start"][0], 1,
              1.0, SYNC["bmuf"], L.model("e", 2), L.bmuf_global("e", 2), L.bmuf_delta("e", 2),
              L.sync_summary("e", 2))  # fmt: skip
    node_start = load_model_file(L.model("e", 2))["state_dict"]
    assert all(torch.equal(start["state_dict"][k], node_start[k]) for k in node_start)
