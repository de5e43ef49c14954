"""Resume frontiers: the DAG starts at the newest finished iteration, checked by the plan."""

import json
import os
import re
import time

import pytest
import yaml

from paravg.config import REPO_CONFIG, deep_merge, validate_config
from paravg.errors import ConfigError
from paravg.plan import experiment_plans
from paravg.resume import (
    Frontiers,
    first_changed_index,
    frontier_regex,
    indices_above,
    restart_iteration,
    resume_frontiers,
    scan_frontiers,
)
from tests.unit.fabricated_run import INFO, fabricate, plan_in


def test_indices_above_matches_exactly_the_larger_integers():
    for k in [-1, 0, 1, 9, 10, 99, 100, 205, 1999, 2000, 2499]:
        r = re.compile(indices_above(k) + "$")
        assert [n for n in range(3000) if r.match(str(n))] == list(range(max(k + 1, 0), 3000))
    assert "{" not in indices_above(12345)  # Snakemake reads braces as a wildcard's end


def test_frontiers_are_the_newest_contiguous_finished_indices(tmp_path):
    p = plan_in(tmp_path)
    fabricate(p, done=7, diag_done=5)
    os.remove(p.layout.job_stats("default", 4, 0))  # a job of index 4 reruns
    f = scan_frontiers(p)
    assert f == Frontiers(train=3, node=7, ema=0, diag=5)


def test_a_fresh_or_stale_initial_model_starts_at_the_beginning(tmp_path):
    p = plan_in(tmp_path)
    assert resume_frontiers(p) == Frontiers(train=0, node=0, ema=0, diag=-1)
    fabricate(p, done=4)
    assert resume_frontiers(p).train == 4
    time.sleep(0.01)
    os.utime(p.layout.egs_info())  # the egs were rebuilt after 0.pt
    assert resume_frontiers(p) == Frontiers(train=0, node=0, ema=0, diag=-1)


def test_a_changed_plan_stops_with_what_changed_or_retrains(tmp_path):
    done = plan_in(tmp_path)
    fabricate(done, done=9)
    # same plan: resume at 9
    assert resume_frontiers(plan_in(tmp_path)).train == 9
    changed = plan_in(tmp_path, {"trainer": {"minibatch_size": 128}})
    assert first_changed_index(changed, 9) == 1
    with pytest.raises(ConfigError) as err:
        resume_frontiers(changed)
    msg = str(err.value)
    assert "iteration 0" in msg and "minibatch_size: 256 -> 128" in msg
    assert "on_plan_change: retrain" in msg
    assert resume_frontiers(changed, "retrain") == Frontiers(train=0, node=0, ema=0, diag=0)


def test_bisection_finds_the_first_changed_iteration_in_log_reads(tmp_path, monkeypatch):
    done = plan_in(tmp_path)
    fabricate(done, done=done.num_iters)
    late = plan_in(tmp_path, {"trainer": {"final_effective_lrate": 0.0002}})
    import paravg.resume as resume

    reads = []
    real = resume.recorded_plan
    monkeypatch.setattr(resume, "recorded_plan", lambda p, i, j=0: reads.append(i) or real(p, i, j))
    assert first_changed_index(late, late.num_iters) == 2  # iteration 1 is the first changed
    assert len(reads) <= 2 + late.num_iters.bit_length()


def test_a_deleted_synced_model_whose_job_models_are_gone_rewinds_its_iteration(tmp_path):
    """rm <3>.pt (damaged) with the job models deleted (temporary): iteration 2 retrains,
    its jobs starting from <2>.pt, the node's copy of the start they would form."""
    p = plan_in(tmp_path)
    fabricate(p, 6)
    L, e = p.layout, p.name
    os.remove(L.model(e, 3))
    f = scan_frontiers(p)
    assert (f.train, f.node) == (2, 2)
    assert restart_iteration(p, f) == 2
    p = plan_in(tmp_path, restart_at={"default": 2})
    inputs = p.start_inputs(2, 0)
    assert inputs["synced"] == [L.model(e, 2)]
    assert inputs["summary"] == [L.sync_summary(e, 2)]
    assert "models" not in inputs and "stats" not in inputs  # the summary records the plan
    assert "models" in p.start_inputs(3, 0)  # later iterations read the jobs they follow


def test_a_deleted_synced_model_with_its_job_models_kept_reruns_only_the_node(tmp_path):
    p = plan_in(tmp_path)
    fabricate(p, 6)
    L, e = p.layout, p.name
    for path in p.job_models(3):
        open(path, "wb").close()
    os.remove(L.model(e, 3))
    f = scan_frontiers(p)
    assert (f.train, f.node) == (6, 2)
    for path in p.job_models(6):
        open(path, "wb").close()
    assert restart_iteration(p, f) is None


def test_a_decentralized_run_cannot_rewind_without_its_learners_models(tmp_path):
    p = plan_in(
        tmp_path,
        {"sync": {"method": "ring"}, "trainer": {"num_jobs_initial": 2, "num_jobs_final": 2}},
    )
    fabricate(p, 4)
    with pytest.raises(ConfigError, match=r"iteration 3 must run again.*keep_job_models: true"):
        restart_iteration(p, Frontiers(train=3, node=3, ema=3, diag=3))
    for path in p.job_models(3):
        open(path, "wb").close()
    assert restart_iteration(p, Frontiers(train=3, node=3, ema=3, diag=3)) is None


def frontiers_of_run(tmp_path, target, overrides=None, scan=False, monkeypatch=None):
    """(frontiers, plans) of a run of two experiments as a job named by ``target`` (its
    wildcards) plans them; ``scan``: the way before, every experiment's history scanned."""
    import paravg.resume as resume

    cfg = yaml.safe_load(REPO_CONFIG.read_text())
    over = {"trainer": {"num_jobs_initial": 2, "num_jobs_final": 3}, **(overrides or {})}
    cfg = validate_config(
        deep_merge(cfg, {"results": str(tmp_path / "results"), **over,
                         "experiments": {"default": {}, "other": {}}})
    )  # fmt: skip
    plans = experiment_plans(cfg, INFO)
    if scan:
        monkeypatch.setattr(resume, "_indices_below_targets", lambda plans, targets: None)
    frontiers = resume.resume_frontiers_of_run(plans, cfg["run"]["on_plan_change"], [target])
    monkeypatch.undo()
    return frontiers, experiment_plans(
        cfg, INFO, restart_at=resume.restart_iterations(plans, frontiers)
    )


def test_a_cluster_job_plans_from_the_index_below_it_as_the_scan_did(tmp_path, monkeypatch):
    """A job of one iteration named by --target-jobs (what a cluster executor runs on the
    node) takes its frontiers from the index below it and checks the plan there: no scan
    of the run's history (O(t · N) stats), and for its own rule the same frontier, restart
    and params as the scan gave (the off-path files may lag: diagnostics here)."""
    import paravg.resume as resume

    fabricate(frontiers_of_run(tmp_path, {}, monkeypatch=monkeypatch)[1]["default"], 7, 5)
    targets = [("train_job", "train", t) for t in range(1, 9)]
    targets += [("average", "node", t) for t in range(1, 8)]
    targets += [("diagnostics", "diag", t) for t in range(0, 7)]
    for rule, kind, t in targets:
        w = {"exp": "default", "t": str(t), "j": "0"} if rule == "train_job" else {
            "exp": "default", "t": str(t)}  # fmt: skip
        before, old = frontiers_of_run(tmp_path, w, scan=True, monkeypatch=monkeypatch)
        monkeypatch.setattr(resume, "scan_frontiers", lambda p: pytest.fail("scanned"))
        now, new = frontiers_of_run(tmp_path, w, monkeypatch=monkeypatch)
        assert getattr(now["default"], kind) == getattr(before["default"], kind) == t - 1
        assert new["default"].restart_at == old["default"].restart_at, (rule, t)
        if rule == "train_job":
            got, want = new["default"], old["default"]
            assert got.job_rule(t - 1, 0) == want.job_rule(t - 1, 0), t
        if rule == "average":
            assert new["default"].node_rule(t) == old["default"].node_rule(t)
        # the other experiment is not in this job's DAG: nothing of it is produced
        n = new["other"].num_iters
        assert now["other"] == Frontiers(train=n, node=n, ema=n, diag=n)


def test_a_mix_node_cluster_job_plans_without_a_scan_while_its_learner_trains(
    tmp_path, monkeypatch
):
    """delay-by-one's mix node of index t runs while its learner's job of index t − 1 is
    training (unfinished): its frontiers come from index t − 2 (and its inputs' starts,
    t − 1), with no scan of the run's history, and the node stays producible."""
    import paravg.resume as resume

    dbo = {"trainer": {"num_jobs_initial": 3, "num_jobs_final": 3},
           "sync": {"method": "delay-by-one"}}  # fmt: skip
    plan = frontiers_of_run(tmp_path, {}, dbo, monkeypatch=monkeypatch)[1]["default"]
    fabricate(plan, 6)
    L = plan.layout
    for index in range(2, 8):  # the mix nodes' records, one index ahead of the jobs
        os.makedirs(L.job_dir("default", index), exist_ok=True)
        for j in range(3):
            with open(L.job_start_record("default", index, j), "w") as out:
                json.dump({}, out)
    for j in range(3):  # the models its learners' mix nodes read (index t − 2)
        open(L.job_model("default", 5, j), "wb").close()
    os.remove(L.job_stats("default", 6, 1))  # job (5, 1) still trains
    monkeypatch.setattr(resume, "scan_frontiers", lambda p: pytest.fail("scanned"))
    target = {"_rule": "mix_node", "exp": "default", "t": "7", "j": "1"}
    f = frontiers_of_run(tmp_path, target, dbo, monkeypatch=monkeypatch)[0]["default"]
    assert (f.train, f.mix) == (5, 6)
    pattern = frontier_regex(L, {"default": f}, "mix")
    assert re.search(pattern, L.job_start("default", 7, 1)) and not re.search(
        pattern, L.job_start("default", 6, 1)
    )


def test_a_cluster_job_checks_the_plan_and_rewinds_as_the_main_snakemake(tmp_path, monkeypatch):
    first = frontiers_of_run(tmp_path, {}, monkeypatch=monkeypatch)[1]["default"]
    fabricate(first, 6)
    changed = {"trainer": {"num_jobs_initial": 2, "num_jobs_final": 3, "minibatch_size": 128}}
    job = {"exp": "default", "t": "5", "j": "0"}
    with pytest.raises(ConfigError, match="minibatch_size: 256 -> 128"):
        frontiers_of_run(tmp_path, job, changed, monkeypatch=monkeypatch)
    retrain = {**changed, "run": {"on_plan_change": "retrain"}}
    now = frontiers_of_run(tmp_path, job, retrain, monkeypatch=monkeypatch)[0]["default"]
    before = frontiers_of_run(tmp_path, job, retrain, True, monkeypatch)[0]["default"]
    assert now == before == Frontiers(train=0, node=0, ema=0, diag=0)
    # a synced model deleted (damaged) with its job models gone: iteration 2 retrains
    # from <2>.pt, in the job as in the scan
    os.remove(first.layout.model("default", 3))
    job = {"exp": "default", "t": "3", "j": "1"}
    (now, new), (before, old) = (
        frontiers_of_run(tmp_path, job, monkeypatch=monkeypatch),
        frontiers_of_run(tmp_path, job, scan=True, monkeypatch=monkeypatch),
    )
    assert now["default"].train == before["default"].train == 2
    assert new["default"].restart_at == old["default"].restart_at == 2
    assert new["default"].job_rule(2, 1) == old["default"].job_rule(2, 1)


def test_a_cluster_job_whose_index_below_is_unfinished_scans(tmp_path, monkeypatch):
    first = frontiers_of_run(tmp_path, {}, monkeypatch=monkeypatch)[1]["default"]
    fabricate(first, 6)
    os.remove(first.layout.job_stats("default", 5, 1))
    job = {"exp": "default", "t": "6", "j": "0"}
    now = frontiers_of_run(tmp_path, job, monkeypatch=monkeypatch)[0]["default"]
    assert now == frontiers_of_run(tmp_path, job, scan=True, monkeypatch=monkeypatch)[0]["default"]
    assert now.train == 4
