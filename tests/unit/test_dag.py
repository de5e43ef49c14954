"""The DAG of a run without Snakemake: every rule's inputs, params and resources from
paravg.dag.Dag, with the checkpoints faked (the egs info.json and "block b is trained")."""

import dataclasses
import re

import pytest
import yaml

from paravg.config import REPO_CONFIG, deep_merge, validate_config
from paravg.dag import Dag
from paravg.plan import JobSpec
from paravg.resume import target_jobs_from_argv
from paravg.sync.nodes import NODE_KINDS
from tests.unit.fabricated_run import INFO, fabricate


class CheckpointPendingError(Exception):
    """What Snakemake's checkpoint raises before the checkpoint job ran."""


def config_in(tmp_path, overrides=None):
    """The shipped config on the sets' own targets (``data.targets: data``, as the tiny
    pipeline config), unless ``overrides`` says otherwise: the DAG tests below are about
    training; the GMM stage's have their own file (test_dag_gmm.py)."""
    cfg = deep_merge(yaml.safe_load(REPO_CONFIG.read_text()), {"data": {"targets": "data"}})
    return validate_config(
        deep_merge(cfg, {"results": str(tmp_path / "results"), **(overrides or {})})
    )


class Checkpoints:
    """Fake checkpoints: the egs exist once ``egs_done``; blocks < ``trained`` are done."""

    def __init__(self, egs_done=True, trained=0):
        self.egs_done, self.trained, self.asked = egs_done, trained, []

    def egs_info(self):
        if not self.egs_done:
            raise CheckpointPendingError("egs")
        return INFO

    def wait_for_block(self, exp, b):
        self.asked.append((exp, b))
        if b >= self.trained:
            raise CheckpointPendingError(f"{exp} block {b}")


def dag_of(tmp_path, overrides=None, checkpoints=None, target_jobs=()):
    cp = checkpoints or Checkpoints()
    dag = Dag(
        config_in(tmp_path, overrides),
        checkpoint_egs_info=cp.egs_info,
        wait_for_block=cp.wait_for_block,
        target_jobs=target_jobs,
    )
    return dag, cp


def test_a_fresh_run_plans_after_the_egs_checkpoint(tmp_path):
    """Before the egs exist nothing is finished and no plan can be made: the first input
    function that needs one waits for the egs checkpoint; after it, the jobs are planned."""
    dag, cp = dag_of(tmp_path, checkpoints=Checkpoints(egs_done=False))
    assert dag.frontiers["default"].train == 0 and dag.frontiers["default"].diag == -1
    with pytest.raises(CheckpointPendingError):
        dag.train.job_inputs("default", 1, 0)
    cp.egs_done = True
    L = dag.layout
    assert dag.train.job_inputs("default", 1, 0) == {
        "egs": dag.egs.archive_mark(0),
        "initial": [L.init_model("default")],
    }
    # iteration 1 (index 2): every job of iteration 0, its stats JSONs not DAG edges
    assert dag.train.job_inputs("default", 2, 0) == {
        "egs": dag.egs.archive_mark(dag.plan("default").job_archive(1, 0)),
        "models": [L.job_model("default", 1, 0)],
    }


def test_egs_made_with_other_options_are_not_planned_from(tmp_path):
    """A workspace whose egs are frame egs, and a config that asks for chunk egs (an
    LSTM): the parse-time plans would come from the old info.json (its archives, its
    context); they wait for the egs checkpoint (which reruns) instead."""
    import json

    from paravg.egs.plan import EgsOptions

    frame_cfg = config_in(tmp_path)
    info_path = tmp_path / "results" / "egs" / "info.json"
    info_path.parent.mkdir(parents=True)
    frame_info = EgsOptions.from_config(frame_cfg["egs"], 7, 7).info_fields()
    frame_info = {k: v for k, v in frame_info.items() if v is not None}  # as info.json has it
    info_path.write_text(json.dumps({**INFO, **frame_info}))
    dag, _ = dag_of(tmp_path)
    assert dag.stale_egs == [] and dag._plans is not None  # the same options: planned now
    lstm = {
        "family": "tdnn_lstm",
        "tdnn_lstm": {"layers": [{"type": "tdnn", "dim": 8}, {"type": "lstm", "cell_dim": 4}]},
    }
    chunks = {"chunk_width": "40,30,20", "chunk_left_context": 40}
    dag, cp = dag_of(tmp_path, {"egs": chunks, "model": lstm})
    assert {"frames_per_eg", "chunk_widths"} <= set(dag.stale_egs)
    assert dag._plans is None
    cp.egs_done = False
    with pytest.raises(CheckpointPendingError):
        dag.train.job_inputs("default", 1, 0)
    dag, _ = dag_of(tmp_path, {"egs": {"samples_per_iter": 1234}})
    assert dag.stale_egs == ["samples_per_iter"]


def test_job_params_are_the_plans_job_contract(tmp_path):
    dag, _ = dag_of(tmp_path, {"trainer": {"num_jobs_initial": 2, "num_jobs_final": 4}})
    p = dag.plan("default")
    for t, j in ((1, 0), (3, 1), (p.num_iters, p.num_jobs(p.num_iters - 1) - 1)):
        params = dag.train.job_params("default", t, j)
        assert JobSpec(**params["job"]) == p.job(t - 1, j)
        assert params["fingerprint"] == p.fingerprint(t)
        assert params["files"] == p.start_inputs(t - 1, j)
        assert params["method"] == "average"
    # execution knobs are resources, never params (a rerun trigger)
    assert "runtime" not in dag.train.job_params("default", 2, 0)
    assert dag.job_device("default") == "auto"
    assert dag.train.job_straggler_factor("default", 2, 0) == "1.0"


def test_train_jobs_reserve_a_gpu_where_they_will_train_on_one(tmp_path, monkeypatch):
    monkeypatch.setattr("paravg.devices.nvidia_driver_installed", lambda: False)
    for device, gpus in (("cpu", 0), ("cuda", 1), ("auto", 0)):
        dag, _ = dag_of(tmp_path, {"trainer": {"device": device}})
        assert dag.train_gpus("default") == gpus, device
    monkeypatch.setattr("paravg.devices.nvidia_driver_installed", lambda: True)
    assert dag_of(tmp_path, {"trainer": {"device": "auto"}})[0].train_gpus("default") == 1


def test_bmuf_job_and_node_get_the_same_resolved_block_momentum(tmp_path):
    """BMUF's block momentum (1 − 1/N of the iteration whose jobs are averaged) is computed
    once, by the plan: the node of index t and every job of iteration t read it."""
    dag, _ = dag_of(
        tmp_path,
        {"sync": {"method": "bmuf"}, "trainer": {"num_jobs_initial": 2, "num_jobs_final": 4}},
    )
    p = dag.plan("default")
    for t in range(2, p.num_iters + 1):
        node = dag.train.node_params("bmuf", "default", t)
        n = p.num_jobs(t - 2)  # the jobs of iteration t − 2 wrote index t − 1
        job = dag.train.job_params("default", t, 0)["sync"]
        assert job == dag.train.node_params("bmuf", "default", t - 1)["sync"]
        assert job["bmuf"]["block_momentum"] == pytest.approx(1 - 1 / n)
        assert node["iteration"] == t - 1 and len(node["files"]["models"]) == p.num_jobs(t - 1)


def test_node_outputs_and_rules_come_from_the_registry(tmp_path):
    dag, _ = dag_of(tmp_path)
    for name, kind in NODE_KINDS.items():
        outputs = dag.train.node_outputs(name)
        assert list(outputs) == [role for role, _ in kind.outputs]
        assert all("{exp}" in p and "{t}" in p for p in outputs.values())
        assert all(("{j}" in p) == kind.per_job for p in outputs.values())
    assert dag.train.node_outputs("bmuf")["delta"] == dag.layout.bmuf_delta("{exp}", "{t}")
    start = dag.layout.job_start("{exp}", "{t}", "{j}")
    assert dag.train.node_outputs("mix_node")["model"] == start


def test_the_mix_node_is_a_node_kind_of_delay_by_one_only(tmp_path):
    """delay-by-one's mix node is the per-job entry of the node table: its experiments,
    inputs (no statistics as DAG edges: N² per iteration) and params (its MixRule, whose
    fingerprints the node checks and records) come from the same calls as every node's."""
    from paravg.contracts import MixRule

    dag, _ = dag_of(
        tmp_path,
        {"experiments": {"avg": {}, "dbo": {"sync": {"method": "delay-by-one"}}},
         "trainer": {"num_jobs_initial": 3, "num_jobs_final": 3}},
    )  # fmt: skip
    assert dag.experiments_with_node("mix_node") == ["dbo"]
    assert dag.experiments_with_node("average") == ["avg"]
    assert dag.experiments_with_node("consensus") == ["dbo"]
    p, t, j = dag.plan("dbo"), 5, 1
    inputs = dag.train.node_inputs("mix_node", "dbo", t, j)
    assert "stats" not in inputs and inputs["models"] == p.mix_inputs(t - 1, j)["models"]
    params = dag.train.node_params("mix_node", "dbo", t, j)
    assert MixRule.from_params(params) == p.mix_rule(t - 1, j)
    assert params["fingerprints"] == {"own": p.fingerprint(t - 1), "inputs": p.fingerprint(t - 3)}
    assert set(params) == {"iteration", "files", "sync", "fingerprints"}


def test_blocks_wait_for_the_block_before_them(tmp_path):
    """Block b's inputs exist only once block b − 1 is trained (a checkpoint chain); the
    end of the pipeline waits for the last block."""
    dag, cp = dag_of(tmp_path, {"run": {"block_jobs": 12}})
    p = dag.plan("default")
    assert p.num_blocks > 2
    files = dag.train.block_inputs("default", 0)
    assert p.job_outputs(p.block_end(0))[0] in files and dag.layout.diag("default", 0) in files
    assert cp.asked == []
    with pytest.raises(CheckpointPendingError, match="block 0"):
        dag.train.block_inputs("default", 1)
    cp.trained = 1
    assert dag.layout.diag("default", p.block_end(0) - 1) in dag.train.block_inputs("default", 1)
    with pytest.raises(CheckpointPendingError, match=f"block {p.num_blocks - 1}"):
        dag.train.combine_inputs("default")
    cp.trained = p.num_blocks
    assert dag.train.combine_inputs("default")["models"] == p.combine_models()


@pytest.mark.parametrize("method", ["average", "delay-by-one"])
def test_each_block_deletes_the_job_files_no_later_job_reads(tmp_path, method):
    """Snakemake keeps temporary files while a checkpoint is pending (always, in a run of
    blocks): block b's checkpoint deletes the job models (and starts) of indices up to its
    end − 2, once, so that every index is deleted by exactly one block and the next jobs'
    (and delay-by-one's mix nodes') inputs are never among them."""
    n = {"num_jobs_initial": 4, "num_jobs_final": 4}
    cfg = {"run": {"block_jobs": 12}, "trainer": n, "sync": {"method": method}}
    dag, cp = dag_of(tmp_path, cfg)
    cp.trained = 10**6
    p, L = dag.plan("default"), dag.layout
    deleted = [
        f for b in range(p.num_blocks) for f in dag.train.block_params("default", b)["delete"]
    ]
    assert len(deleted) == len(set(deleted))
    kinds = ["job_model"] + (["job_start"] if method == "delay-by-one" else [])
    spent = [
        getattr(L, k)("default", i, j) for i in range(1, p.num_iters - 1) for j in range(4)
        for k in kinds
    ]  # fmt: skip
    assert sorted(deleted) == sorted(spent)
    for b in range(p.num_blocks - 1):  # what the next block's jobs and mix nodes read
        first = p.block_end(b) + 1
        needed = {f for ps in dag.train.job_inputs("default", first, 0).values() for f in ps}
        if method == "delay-by-one":
            needed |= {
                f
                for ps in dag.train.node_inputs("mix_node", "default", first, 0).values()
                for f in ps
            }
            needed |= {
                f
                for ps in dag.train.node_inputs("mix_node", "default", first + 1, 0).values()
                for f in ps
            }
        gone = {f for c in range(b + 1) for f in dag.train.block_params("default", c)["delete"]}
        assert needed and not needed & gone, b
    kept, _ = dag_of(tmp_path, {**cfg, "run": {"block_jobs": 12, "keep_job_models": True}})
    assert kept.train.block_params("default", 0)["delete"] == []


def test_frontiers_make_finished_indices_inputs_and_cap_for_a_target_job(tmp_path):
    """Files of finished iterations are inputs, not jobs: the train rule's index regex
    matches only indices above the frontier, for that experiment's paths only; a job named
    by --target-jobs (a cluster job) stays producible."""
    overrides = {"experiments": {"default": {}, "other": {}}}
    dag, _ = dag_of(tmp_path, overrides)
    fabricate(dag.plan("default"), done=5)
    dag, _ = dag_of(tmp_path, overrides)
    assert dag.frontiers["default"].train == 5 and dag.frontiers["other"].train == 0

    def producible(exp, t):
        """Snakemake's match of the train rule's output against a job model's path."""
        pattern = re.escape(dag.layout.job_model("{exp}", "{t}", "{j}"))
        for name, regex in (
            ("exp", "[^/]+"),
            ("t", dag.index_after_frontier("train")),
            ("j", r"\d+"),
        ):
            pattern = pattern.replace(re.escape(f"{{{name}}}"), f"(?P<{name}>{regex})")
        return re.fullmatch(pattern, dag.layout.job_model(exp, t, 0)) is not None

    assert not producible("default", 5) and producible("default", 6)
    assert producible("other", 1)
    retry = target_jobs_from_argv(["snakemake", "--target-jobs", "train_job:exp=default,t=4,j=0"])
    assert retry == [{"_rule": "train_job", "exp": "default", "t": "4", "j": "0"}]
    dag, _ = dag_of(tmp_path, overrides, target_jobs=retry)
    assert dag.frontiers["default"].train == 3


def test_a_damaged_export_stops_the_main_run_but_not_a_cluster_job(tmp_path, monkeypatch):
    """The final targets hold every experiment's Kaldi export when decoding is on; a
    finished export that lost a file stops the main snakemake, never a cluster job's own
    (it runs one job)."""
    checked = []

    def damaged(kaldi_dir):
        checked.append(kaldi_dir)
        raise RuntimeError(f"{kaldi_dir} is damaged")

    monkeypatch.setattr("paravg.export.manifest.check_finished_export", damaged)
    dag, _ = dag_of(tmp_path)
    assert dag.recognition.enabled
    with pytest.raises(RuntimeError, match="damaged"):
        dag.results.final_targets()
    retry = [{"exp": "default", "t": "4", "j": "0"}]
    targets = dag_of(tmp_path, target_jobs=retry)[0].results.final_targets()
    assert dag.layout.kaldi_dir("default") in targets and len(checked) == 1


def test_recognition_settings(tmp_path):
    dag, _ = dag_of(tmp_path)
    rec = dag.recognition
    assert set(rec.graph_dirs()) == ({"words", "phones"} if rec.per_enabled else {"words"})
    assert rec.grids()["words"] == {"lmwts": list(range(7, 18)), "wips": [0.0, 0.5, 1.0]}
    assert set(dag.recognition.score_inputs("default", "test")) >= {
        "splits",
        "lattices_words",
        "tuned",
    }
    assert "tuned" not in dag.recognition.score_inputs("default", "dev")  # the tuning set itself
    assert dag.recognition.decode_inputs("default", "test")["graph_words"].endswith(
        "words/HCLG.fst"
    )
    assert dag.ivector.online_options()["period"] == dag.config["ivector"]["period"]


def test_experiments_are_resolved_once_and_keep_their_order(tmp_path):
    overrides = {"experiments": {"zeta": {}, "alpha": {"sync": {"method": "bmuf"}}}}
    dag, _ = dag_of(tmp_path, overrides)
    assert list(dag.experiments) == ["zeta", "alpha"]
    assert dag.experiments_with(node="bmuf") == ["alpha"]
    assert dag.experiments_pattern([]) == "(?!)"
    assert dataclasses.asdict(dag.plan("alpha").planned())["num_archives"] == INFO["num_archives"]
