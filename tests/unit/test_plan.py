"""The plan and the layout: one place for every job's numbers and every path."""

import re
import subprocess
import sys

import pytest
import yaml

from paravg.config import REPO_CONFIG, deep_merge, validate_config
from paravg.layout import Layout
from paravg.plan import EgsGeometry, ExperimentPlan, experiment_plans, job_seed
from paravg.schedule import Schedule, num_jobs

INFO = {"num_archives": 12, "frames_per_eg": 8, "num_frames": 123456}


def config(overrides=None):
    cfg = yaml.safe_load(REPO_CONFIG.read_text())
    return validate_config(deep_merge(cfg, overrides or {}))


def plans(overrides=None):
    return experiment_plans(config(overrides), INFO)


def test_layout_indices_are_kaldis_and_patterns_are_wildcards():
    L = Layout("res")
    assert L.job_model("e", 5, 2) == "res/exp/e/5/job2.pt"
    assert L.job_model("{exp}", "{t}", "{j}") == "res/exp/{exp}/{t}/job{j}.pt"
    assert L.model("e", 0) == L.init_model("e") == "res/exp/e/0.pt"
    assert L.egs_prefix(3) == "res/egs/egs.3"
    # every per-iteration pattern has {exp} before {t}: the frontier regex relies on it
    for kind in ("model", "sync_summary", "bmuf_global", "consensus_model", "ema_model", "diag"):
        pattern = getattr(L, kind)("{exp}", "{t}")
        assert pattern.index("{exp}") < pattern.index("{t}")


def test_layout_of_the_stages_before_training_is_kaldis():
    L = Layout("res")
    assert L.feats_split("test", 4, 2, "ark") == "res/feats/test/split4/feats.2.ark"
    assert L.feats_split("{set}", "{nj}", "{j}", "utt2num_frames") == (
        "res/feats/{set}/split{nj}/utt2num_frames.{j}"
    )
    assert L.data_file("train", "targets.scp") == "res/data/train/targets.scp"
    assert L.ubm(0) == "res/ivector/ubm.0.npz" and L.extractor("{it}", "json").endswith(
        ".{it}.json"
    )
    assert L.ivector_split("test", 1, "scp") == "res/ivector/test/ivector_online.1.scp"
    assert L.egs_list("job.{j}") == "res/egs/lists/job.{j}"
    assert L.graph_file("words", "HCLG.fst") == "res/graph/words/HCLG.fst"


def test_the_rules_spell_no_results_or_log_path_themselves():
    """Every path of a run comes from the layout: no rule file composes one."""
    rules = sorted((REPO_CONFIG.parents[1] / "rules").glob("*.smk"))
    assert rules
    literal = re.compile(r"""(RESULTS|_DIR)\}/|["']logs/|["']results/""")
    offenders = [
        f"{p.name}:{n}: {line.strip()}"
        for p in rules
        for n, line in enumerate(p.read_text().splitlines(), 1)
        if literal.search(line) and not line.lstrip().startswith("#")
    ]
    assert not offenders, "\n".join(offenders)


def test_job_params_follow_the_schedule_and_the_bmuf_factor():
    p = plans({"experiments": {"a": {}, "b": {"sync": {"method": "bmuf"}}}})
    a, b = p["a"], p["b"]
    s = a.schedule
    for t in (0, 3, a.num_iters - 1):
        n = s.num_jobs(t)
        for j in range(n):
            params = a.job_params(t, j)
            archive, frame = s.archive_and_frame(t, j)
            assert params["archive"] == a.layout.egs_prefix(archive) and params["frame"] == frame
            assert params["learning_rate"] == pytest.approx(n * s.effective_lrate(t))
            # BMUF's per-job rate: N·ε·(1 − bm)/η_b with bm = 1 − 1/N → ε
            assert b.job_params(t, j)["learning_rate"] == pytest.approx(s.effective_lrate(t))


def test_the_report_plans_the_rate_the_jobs_get():
    """BMUF's jobs train at N·ε·(1 − bm)/η_b: the planned curve is that, not N·ε."""
    b = plans({"sync": {"method": "bmuf"}})["default"]
    planned = b.planned()
    for t in range(b.num_iters):
        assert planned.learning_rate(t) == b.job_params(t, 0)["learning_rate"]
        assert planned.effective_lrate(t) == b.schedule.effective_lrate(t)
    assert planned.models_to_combine() == b.combine_indices()


def test_benchmarking_and_execution_knobs_are_not_params():
    base = plans()["default"].job_params(2, 0)
    slow = plans({"simulate": {"straggler": {"job": 0, "factor": 3.0}}})["default"]
    assert slow.job_params(2, 0) == base and slow.straggler_factor(2, 0) == 3.0
    assert plans({"trainer": {"device": "cpu"}})["default"].job_params(2, 0) == base
    assert "device" not in base


def test_seeds_are_distinct_per_iteration_and_job():
    seeds = {job_seed(0, t, j) for t in range(200) for j in range(16)}
    assert len(seeds) == 200 * 16


def test_fingerprint_changes_only_from_the_first_affected_iteration():
    p = plans()["default"]
    n = p.num_iters
    lr_changed = ExperimentPlan(
        "default", {**p.experiment, "trainer": {**p.trainer}}, p.egs, p.layout, p.combine
    )
    # same settings: the same chain
    assert [lr_changed.fingerprint(i) for i in range(n + 1)] == [
        p.fingerprint(i) for i in range(n + 1)
    ]
    q = plans({"trainer": {"final_effective_lrate": 0.0002}})["default"]
    changed = [i for i in range(n + 1) if q.fingerprint(i) != p.fingerprint(i)]
    # the final rate moves every rate after iteration 0 (exponential schedule)
    assert changed == list(range(2, n + 1))
    other_egs = ExperimentPlan(
        "default", p.experiment, EgsGeometry(12, 8, "other"), p.layout, p.combine
    )
    assert other_egs.fingerprint(0) != p.fingerprint(0)


def test_num_jobs_step_ramp_worked_by_hand():
    # J0 = 2, J1 = 10, T = 8: ideal(t) = 2 + t; int(0.5 + ideal/2)·2
    assert [num_jobs(t, 8, 2, 10, step=2) for t in range(8)] == [2, 4, 4, 6, 6, 8, 8, 10]
    # below the step the ideal is rounded to the nearest integer: J0 = 1, step 4
    assert [num_jobs(t, 8, 1, 9, step=4) for t in range(5)] == [1, 2, 3, 4, 4]
    sched = Schedule.from_config(
        {**config()["trainer"], "num_jobs_initial": 2, "num_jobs_final": 10, "num_jobs_step": 2},
        num_archives=40,
        frames_per_eg=8,
    )
    assert set(sched.jobs_per_iter) <= {2, 4, 6, 8, 10}
    p = plans({"trainer": {"num_jobs_initial": 2, "num_jobs_final": 10, "num_jobs_step": 2}})
    assert set(p["default"].schedule.jobs_per_iter) <= {2, 4, 6, 8, 10}


def test_blocks_cover_every_index_once():
    p = plans({"run": {"block_jobs": 20}})["default"]
    h = p.block_iterations
    assert h == 20 // max(p.schedule.jobs_per_iter)
    covered = [t for b in range(p.num_blocks) for t in range(1, p.num_iters + 1)
               if p.block_of(t) == b]  # fmt: skip
    assert covered == list(range(1, p.num_iters + 1))
    assert p.block_end(p.num_blocks - 1) == p.num_iters


def test_parsing_the_snakefile_imports_no_torch(tmp_path):
    """The Snakefile is parsed twice per cluster job: it must stay torch-free."""
    code = (
        "import sys, runpy\n"
        "from snakemake.cli import main\n"
        "sys.argv = ['snakemake', '-s', sys.argv[1], '--directory', sys.argv[2], '--list-rules']\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "print('TORCH', 'torch' in sys.modules)\n"
    )
    repo = REPO_CONFIG.parents[1]
    out = subprocess.run(
        [sys.executable, "-c", code, str(repo / "Snakefile"), str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert re.search(r"TORCH False", out.stdout), out.stdout[-2000:] + out.stderr[-2000:]


def test_ema_decay_per_iteration_or_per_archive_processed():
    base = yaml.safe_load(REPO_CONFIG.read_text())
    for per, expect in (("iteration", lambda n: 0.9), ("archive", lambda n: 0.9**n)):
        cfg = validate_config(
            deep_merge(
                base,
                {
                    "trainer": {"num_jobs_initial": 1, "num_jobs_final": 4},
                    "sync": {"ema": {"enabled": True, "decay": 0.9, "decay_per": per}},
                },
            )
        )
        p = experiment_plans(cfg, {"num_archives": 40, "frames_per_eg": 8, "num_frames": 1})[
            "default"
        ]
        jobs = [p.num_jobs(t) for t in range(p.num_iters)]
        assert jobs[0] == 1 and jobs[-1] == 4
        for t in range(1, p.num_iters + 1):
            assert p.ema_decay(t) == pytest.approx(expect(jobs[t - 1]))
