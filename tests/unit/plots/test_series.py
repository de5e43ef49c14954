"""The numbers each figure shows equal the per-iteration JSON files they come from."""

import json
import math

import pytest
from plots_synth import COMPONENTS, DIVERGED_AT, JOBS, REJECTED_AT, planned_schedule, write_run

from paravg.plots import series
from paravg.plots.runs import load_run


def read(path):
    return json.loads(path.read_text())


def same(a, b):
    """Equal floats, with None/NaN in the JSON matching nan in the series."""
    if a is None or (isinstance(a, float) and math.isnan(a)):
        return isinstance(b, float) and math.isnan(b)
    return a == pytest.approx(b, rel=0, abs=0)


def test_run_is_keyed_by_file_name_in_kaldi_numbering(full_run):
    run = load_run(full_run)
    assert run.name == "default"
    assert run.iterations == list(range(len(JOBS)))  # jobs of iteration t live in <t+1>/
    assert run.completed_iterations == list(range(len(JOBS)))
    assert sorted(run.diags) == list(range(len(JOBS) + 1))  # models 0..num_iters
    for t, n in enumerate(JOBS):
        assert run.num_jobs(t) == n
        assert sorted(run.jobs[t]) == list(range(n))
        assert run.jobs[t][0] == read(full_run / str(t + 1) / "job0.json")
        assert run.syncs[t] == read(full_run / "sync" / f"{t + 1}.json")
    assert run.finished and run.combine["num_models"] == 3 and set(run.evals) == {"test"}
    assert run.problems == []


def test_diagnostic_curves_equal_diag_json(full_run):
    c = series.diagnostic_curves(load_run(full_run))
    assert c.model == list(range(len(JOBS) + 1))
    for i, t in enumerate(c.model):
        d = read(full_run / "diag" / f"{t}.json")
        assert c.train_logprob[i] == d["train"]["logprob"]
        assert c.valid_logprob[i] == d["valid"]["logprob"]
        assert c.train_accuracy[i] == d["train"]["accuracy"]
        assert c.valid_accuracy[i] == d["valid"]["accuracy"]


def test_job_points_equal_job_json_and_sync_decisions(full_run):
    points = series.job_points(load_run(full_run))
    assert len(points) == sum(JOBS)
    by_key = {(p.iteration, p.job): p for p in points}
    for t, n in enumerate(JOBS):
        sync = read(full_run / "sync" / f"{t + 1}.json")
        for j in range(n):
            p = by_key[(t, j)]
            assert same(read(full_run / str(t + 1) / f"job{j}.json")["objf"], p.objf)
            if j in sync["accepted"]:
                assert p.status == series.ACCEPTED
            elif sync["objfs"][j] is None:
                assert p.status == series.UNUSABLE
            else:
                assert p.status == series.REJECTED
    assert by_key[REJECTED_AT].status == series.REJECTED
    assert by_key[DIVERGED_AT].status == series.UNUSABLE and math.isnan(by_key[DIVERGED_AT].objf)
    # iteration 0 has one job: accepted; the only rejections are the planted ones
    assert [k for k, p in by_key.items() if p.status == series.REJECTED] == [REJECTED_AT]


def test_objective_spread_uses_accepted_jobs_only(full_run):
    points = series.job_points(load_run(full_run))
    spread = series.objective_spread(points)
    t = REJECTED_AT[0]
    accepted = [p.objf for p in points if p.iteration == t and p.status == series.ACCEPTED]
    i = spread.iteration.index(t)
    assert spread.lowest[i] == min(accepted) and spread.highest[i] == max(accepted)
    assert spread.mean[i] == pytest.approx(sum(accepted) / len(accepted))
    with_rejected = series.objective_spread(points, include_rejected=True)
    assert with_rejected.lowest[i] < spread.lowest[i]


def test_schedule_series_equals_job_json_and_schedule(full_run):
    run = load_run(full_run)
    planned = planned_schedule()  # the plan's own numbers (average: factor 1)
    s = series.schedule_series(run, planned)
    assert s.iteration == list(range(len(JOBS)))
    for t, n in enumerate(JOBS):
        lr = read(full_run / str(t + 1) / "job0.json")["lr"]
        assert s.lr[t] == pytest.approx(lr)
        assert s.num_jobs[t] == n == len(read(full_run / "sync" / f"{t + 1}.json")["objfs"])
        # the recorded rate over the plan's N_t (this synthetic run ramps faster than its plan)
        assert s.effective_lr[t] == pytest.approx(lr / planned.num_jobs(t))
    assert s.planned_iteration == list(range(planned.num_iters)) and planned.num_iters == 19
    assert s.planned_num_jobs == list(planned.jobs_per_iter)
    assert s.planned_lr == list(planned.learning_rates)
    assert s.planned_effective_lr[-1] == 0.00015  # the config's final_effective_lrate
    # without a plan the method's factor is unknown: no effective rate is invented
    assert all(math.isnan(x) for x in series.schedule_series(run).effective_lr)


#: A small schedule worked out by hand: 8 archives of 1 frame, 2 epochs, 4 jobs throughout:
#: 16 archive-passes in 4 iterations, P(t) = 4t, ε_t = 0.004 · (0.00025/0.004)^(4t/16)
#: = 0.004 · 2^(−t), and the final rate on the last iteration.
HAND_TRAINER = {
    "num_epochs": 2.0,
    "num_jobs_initial": 4,
    "num_jobs_final": 4,
    "initial_effective_lrate": 0.004,
    "final_effective_lrate": 0.00025,
}
HAND_EGS = {"num_archives": 8, "frames_per_eg": 1}
HAND_EPSILON = [0.004, 0.002, 0.001, 0.00025]


@pytest.mark.parametrize(
    ("sync", "per_job"),
    [
        # BMUF, N = 4, bm = 0.75, η_b = 1: per-job rate N · ε · (1 − bm) / η_b = 4 · ε · 0.25
        # = ε; the old lr / N drew ε / 4
        (
            {"method": "bmuf", "bmuf": {"block_momentum": 0.75, "block_lr": 1.0}},
            [0.004, 0.002, 0.001, 0.00025],
        ),
        # BMUF textbook, N = 4, bm = 0.5, η_b = 1: 4 · ε · 0.5 / 1 = 2ε; the old lr / N drew ε / 2
        (
            {
                "method": "bmuf",
                "bmuf": {"block_momentum": 0.5, "block_lr": 1.0, "form": "textbook"},
            },
            [0.008, 0.004, 0.002, 0.0005],
        ),
        # BMUF cntk (the default form), any bm, η_b: every job at ε (CNTK's per-worker rate)
        (
            {"method": "bmuf", "bmuf": {"block_momentum": 0.5, "block_lr": 2.0}},
            [0.004, 0.002, 0.001, 0.00025],
        ),
        # average: per-job rate N · ε = 4ε (lr / N, unchanged)
        ({"method": "average"}, [0.016, 0.008, 0.004, 0.001]),
    ],
    ids=["bmuf-0.75", "bmuf-0.5-textbook", "bmuf-0.5-cntk", "average"],
)
def test_effective_lr_is_epsilon_for_every_method_by_hand(tmp_path, sync, per_job):
    """The schedule figure's effective rate is ε_t, the rate the method is defined by,
    whatever the sync method's factor on the per-job rate (issue 24)."""
    planned = planned_schedule(HAND_TRAINER, sync, HAND_EGS)
    assert planned.jobs_per_iter == (4, 4, 4, 4)
    assert list(planned.learning_rates) == pytest.approx(per_job, rel=1e-12)  # what jobs get
    exp = write_run(tmp_path / "exp" / sync["method"], [4] * 4, learning_rates=per_job)
    s = series.schedule_series(load_run(exp), planned)
    assert s.lr == pytest.approx(per_job, rel=1e-12)  # as recorded in the job JSON
    assert s.effective_lr == pytest.approx(HAND_EPSILON, rel=1e-12)
    assert s.planned_lr == pytest.approx(per_job, rel=1e-12)
    assert s.planned_effective_lr == pytest.approx(HAND_EPSILON, rel=1e-12)


def test_parameter_change_equals_diag_progress(full_run):
    run = load_run(full_run)
    rel, absolute = series.parameter_change(run, True), series.parameter_change(run, False)
    assert rel.components == ["tdnn1.affine", "tdnn2.affine", "output.affine"]  # network order
    for comp in COMPONENTS:
        assert rel.x[comp] == list(range(1, len(JOBS) + 1))  # model 0 has no predecessor
        for t, r, a in zip(rel.x[comp], rel.y[comp], absolute.y[comp], strict=True):
            progress = read(full_run / "diag" / f"{t}.json")["progress"][comp]
            assert same(progress["relative_change"], r)
            assert a == progress["change"]


def test_max_change_rates_are_means_over_jobs(full_run):
    r = series.max_change_rates(load_run(full_run))
    assert r.iteration == list(range(len(JOBS)))
    for t, n in enumerate(JOBS):
        jobs = [read(full_run / str(t + 1) / f"job{j}.json") for j in range(n)]
        for comp in COMPONENTS:
            i = r.per_component.x[comp].index(t)
            expected = sum(job["max_change_per_component"][comp] for job in jobs) / n
            assert r.per_component.y[comp][i] == pytest.approx(expected)
        assert r.global_[t] == pytest.approx(sum(job["max_change_global"] for job in jobs) / n)
        assert r.skipped[t] == sum(job["skipped_updates"] for job in jobs)
    assert sum(r.skipped) == 1


def test_archives_processed_and_summary(full_run):
    run = load_run(full_run)
    processed = series.archives_processed(run)
    assert processed[0] == 0
    assert processed[len(JOBS)] == sum(JOBS)
    assert processed[3] == JOBS[0] + JOBS[1] + JOBS[2]
    summary = series.run_summary(run)
    last = read(full_run / "diag" / f"{len(JOBS)}.json")
    assert summary.valid_logprob == last["valid"]["logprob"]
    assert summary.iterations_done == len(JOBS) and summary.jobs_run == sum(JOBS)
    assert summary.jobs_rejected == 2  # the planted rejection and the diverged job
    assert summary.sync_methods == ["average", "best"]
    assert summary.combined_models == 3


def test_half_finished_run(half_run):
    """Iteration 8 has 2 of 4 jobs and no sync; diagnostics lag behind by one model."""
    run = load_run(half_run)
    assert run.completed_iterations == list(range(8))
    assert run.iterations == list(range(9))
    assert sorted(run.jobs[8]) == [0, 1] and run.num_jobs(8) == 2
    assert not run.finished and run.combine is None and run.evals == {}
    points = [p for p in series.job_points(run) if p.iteration == 8]
    assert [p.status for p in points] == [series.PENDING, series.PENDING]
    s = series.schedule_series(run)
    assert math.isnan(s.num_jobs[8])  # not final while the iteration runs
    assert not math.isnan(s.lr[8])
    assert series.diagnostic_curves(run).model == list(range(8))
    assert max(series.archives_processed(run)) == 8


def test_missing_and_extra_keys_are_tolerated(tmp_path):
    exp = write_run(tmp_path / "exp" / "x", [1, 2, 2])
    for p in (exp / "2").glob("job*.json"):  # a job file of an older/newer format
        data = json.loads(p.read_text())
        for key in ("max_change_per_component", "max_change_global", "lr", "skipped_updates"):
            data.pop(key)
        p.write_text(json.dumps(data))
    diag = json.loads((exp / "diag" / "2.json").read_text())
    diag.pop("progress")
    diag["valid"].pop("accuracy")
    diag["ema"] = {"logprob": -1.0}
    (exp / "diag" / "2.json").write_text(json.dumps(diag))
    sync = json.loads((exp / "sync" / "3.json").read_text())
    sync.update(method="bmuf", selection="average", block_momentum=0.5)
    (exp / "sync" / "3.json").write_text(json.dumps(sync))
    (exp / "ema").mkdir()
    (exp / "ema" / "3.pt").write_bytes(b"not read")
    (exp / "consensus").mkdir()
    (exp / "sync" / ".3.json.abc.tmp").write_text("{half")  # an atomic write in flight
    run = load_run(exp, strict=True)
    c = series.diagnostic_curves(run)
    assert math.isnan(c.valid_accuracy[2]) and c.valid_logprob[2] == diag["valid"]["logprob"]
    assert 2 not in series.parameter_change(run).x["tdnn1.affine"]
    r = series.max_change_rates(run)
    assert 1 not in r.per_component.x["tdnn1.affine"] and math.isnan(r.global_[1])
    assert math.isnan(series.schedule_series(run).lr[1])
    assert series.run_summary(run).sync_methods == ["average", "best", "bmuf"]


def test_consensus_summaries_stand_in_for_a_missing_fan_in(tmp_path):
    exp = write_run(tmp_path / "exp" / "ring", [2, 2, 2])
    (exp / "sync").rename(exp / "consensus")
    run = load_run(exp)
    assert run.completed_iterations == [0, 1, 2]
    assert run.syncs[1] == read(exp / "consensus" / "2.json")


def test_unreadable_file_skipped_when_live_error_when_strict(half_run):
    bad = half_run / "diag" / "3.json"
    bad.write_text("{not json")
    run = load_run(half_run)
    assert 3 not in run.diags and len(run.problems) == 1 and "3.json" in run.problems[0]
    with pytest.raises(ValueError, match=r"diag/3\.json"):
        load_run(half_run, strict=True)
    (half_run / "diag" / "3.json").write_text("[1, 2]")
    with pytest.raises(ValueError, match="expected a JSON object"):
        load_run(half_run, strict=True)


def test_missing_directory(tmp_path):
    run = load_run(tmp_path / "nope")
    assert run.iterations == [] and run.diags == {}
    with pytest.raises(ValueError, match="does not exist"):
        load_run(tmp_path / "nope", strict=True)


def test_a_directory_outside_a_layout_is_refused(tmp_path):
    """The run's files are found through its layout (<results>/exp/<name>): a copy of an
    experiment directory elsewhere is no run."""
    exp = write_run(tmp_path / "backup" / "default", [1, 2])
    with pytest.raises(ValueError, match="not an experiment directory"):
        load_run(exp)
    run = load_run(write_run(tmp_path / "exp" / "default", [1, 2]), name="shown")
    assert (run.name, run.exp, run.layout.results) == ("shown", "default", str(tmp_path))


def test_component_order():
    names = ["output.affine", "tdnn10.affine", "prefinal.affine", "tdnn2.affine", "tdnn1.affine"]
    assert series.component_order(names) == [
        "tdnn1.affine",
        "tdnn2.affine",
        "tdnn10.affine",
        "prefinal.affine",
        "output.affine",
    ]


def test_iteration_zero_keeps_the_best_job_which_is_no_rejection(tmp_path):
    exp = write_run(tmp_path / "exp" / "wide", [3, 3, 3])
    points = series.job_points(load_run(exp))
    first = [p for p in points if p.iteration == 0]
    sync = read(exp / "sync" / "1.json")
    assert sync["method"] == "best" and len(sync["accepted"]) == 1
    assert [p.status for p in first].count(series.ACCEPTED) == 1
    assert [p.status for p in first].count(series.NOT_CHOSEN) == 2
    assert series.run_summary(load_run(exp)).jobs_rejected == 0
