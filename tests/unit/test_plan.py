"""The plan and the layout: one place for every job's numbers and every path."""

import copy
import io
import re
import subprocess
import sys
import tokenize

import pytest
import yaml

from paravg.config import REPO_CONFIG, deep_merge, validate_config
from paravg.errors import ConfigError
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


#: What a results or log path is made from: the layout, the roots, a rule's own files
#: (layout paths), a directory of one. A field of an f-string holding none of these (a
#: wildcard, a name, a user's input directory looked up in the config such as
#: ``g['hclg_dir']``) composes no results path.
_RESULTS_WORD = re.compile(r"results|logs|layout", re.IGNORECASE)
_RESULTS_NAME = re.compile(r"\b(output|input|log)\b|\.parents?\b|(dir|root)\b", re.IGNORECASE)
_CONFIG_KEY = re.compile(r"""\[\s*["'][^"']*["']\s*\]""")


def _from_results(field: str) -> bool:
    """Whether an f-string field names a results or log location (see above)."""
    return bool(_RESULTS_WORD.search(field) or _RESULTS_NAME.search(_CONFIG_KEY.sub("", field)))


#: A path composed in code rather than in a string: a parent directory, a join, a string
#: appended with ``/`` to a call's result, a ``{RESULTS}/`` template.
_COMPOSED_IN_CODE = re.compile(
    r"""\.parents?\b|os\.path\.join|\.joinpath\(|\)\s*/\s*[rbuRBUfF]*["']|(RESULTS|_DIR)\}/"""
)
_FIELD = re.compile(r"(?<!\{)\{([^{}]+)\}")


def _string_offence(token: str) -> str | None:
    """Why a string literal spells a results or log path itself, or None."""
    prefix = re.match(r"[rbufRBUF]*", token).group()
    body = token[len(prefix) :].strip("\"'")
    if re.match(r"(results|logs)/", body) or re.search(r"/(results|logs)/", body):
        return "a results/ or logs/ path in a string"
    if "f" in prefix.lower():
        for m in _FIELD.finditer(body):
            before, after = body[m.start() - 1 : m.start()], body[m.end() : m.end() + 1]
            if "/" in (before, after) and _from_results(m.group(1)):
                return f"an f-string path composed from {{{m.group(1)}}}"
    return None


def composed_paths(source: str) -> list[tuple[int, str]]:
    """(line, why) of every results or log path a rule file composes itself, in an
    f-string, a string or code. Comments and docstrings are not code."""
    tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
    out = []
    statement_start = {tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT, tokenize.NL}
    significant = [t for t in tokens if t.type not in (tokenize.COMMENT, tokenize.NL)]
    for i, t in enumerate(significant):
        if t.type != tokenize.STRING:
            continue
        prev = significant[i - 1].type if i else tokenize.NEWLINE
        nxt = significant[i + 1].type if i + 1 < len(significant) else tokenize.NEWLINE
        if prev in statement_start and nxt == tokenize.NEWLINE:
            continue  # a docstring
        why = _string_offence(t.string)
        if why:
            out.append((t.start[0], why))
    code = [list(line) for line in source.splitlines()]
    for t in tokens:  # the code of each line: comments blanked, strings as ""
        if t.type in (tokenize.STRING, tokenize.COMMENT):
            (r0, c0), (r1, c1) = t.start, t.end
            for r in range(r0, r1 + 1):
                line = code[r - 1]
                lo, hi = (c0 if r == r0 else 0), (c1 if r == r1 else len(line))
                line[lo:hi] = " " * (hi - lo)
            if t.type == tokenize.STRING:
                code[r0 - 1][c0 : c0 + 2] = '""'
    for n, line in enumerate(code, 1):
        if _COMPOSED_IN_CODE.search("".join(line)):
            out.append((n, "a path composed in code"))
    lines = source.splitlines()
    for n, line in enumerate(lines, 1):  # a template in a plain string: "{RESULTS}/x"
        if re.search(r"(RESULTS|_DIR)\}/", line) and not line.lstrip().startswith("#"):
            out.append((n, "a {RESULTS}/ template"))
    return sorted(set(out))


@pytest.mark.parametrize(
    ("code", "offends"),
    [
        ('x = f"{LAYOUT.data_dir(wc.set)}/text"', True),
        ('x = f"{RESULTS}/x"', True),
        ("x = f\"{config['results']}/exp\"", True),
        ('x = f"{root}/results/x.json"', True),
        ('x = f"{wc.exp}/logs/a.log"', True),
        ('x = f"{RESULTS_ROOT}/x/y.txt"', True),
        ('x = f"{out_dir}/x.json"', True),
        ('x = f"{EXP_ROOT}/{wc.exp}/a.pt"', True),
        ('x = f"{Path(output[0]).parent}/x"', True),
        ('x = "results/x.json"', True),
        ("x = 'logs/a.log'", True),
        ('x = "{RESULTS}/x".format(RESULTS=r)', True),
        ("x = lambda wc, output: str(Path(output[0]).parent)", True),
        ("x = lambda wc, input: str(Path(input[0]).parents[2])", True),
        ('x = os.path.join(OUT_DIR, "x")', True),
        ('x = Path(LAYOUT.exp_root()) / "x"', True),
        ('x = LAYOUT.data_file(wc.set, "text")', False),
        ('x = LAYOUT.demo_file(f"{wildcards.set}/wav.scp")', False),
        ("x = f\"{g['hclg_dir']}/HCLG.fst\"", False),  # a user's input directory
        ('x = LAYOUT.log("bmuf", "{exp}/{t}")', False),  # a wildcard pattern
        ('x = f"../report/{name}.rst"', False),  # the workflow's own report templates
        ('x = f"(?<=/{re.escape(e)}{re.escape(b)})"', False),  # a regular expression
        ('def f():\n    """Files of results/graph/<kind>/."""\n    return 1', False),
        ("x = 1  # results/x in a comment, Path(output[0]).parent", False),
    ],
)
def test_the_path_guard_sees_every_way_of_spelling_a_path(code, offends):
    """The guard below flags f-strings, strings and code that compose a results or log
    path, and leaves layout calls, wildcard patterns, user inputs and prose alone."""
    assert bool(composed_paths(code + "\n")) == offends, composed_paths(code + "\n")


def test_the_rules_spell_no_results_or_log_path_themselves():
    """Every path of a run comes from the layout: no rule file composes one (in an
    f-string, a string, or from a rule's own files), so moving a file is one Layout edit."""
    rules = sorted((REPO_CONFIG.parents[1] / "rules").glob("*.smk"))
    assert len(rules) >= 10
    offenders = [
        f"{p.name}:{n}: {why}: {p.read_text().splitlines()[n - 1].strip()}"
        for p in rules
        for n, why in composed_paths(p.read_text())
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


def kaldi_schedule_by_hand():
    """INFO's schedule with the shipped trainer settings, from Kaldi's formulas
    (``train_dnn.py``, ``common.py``) worked out here, not by :mod:`paravg.schedule`:
    A = 12 archives, F = 8 frames, E = 3 epochs, jobs 1 → 4, ε 0.0015 → 0.00015.

    archives to process = int(E·A·F) = 288; iterations T = int(288·2/(1 + 4)) = 115;
    N_t = int(0.5 + 1 + 3t/115): 1 for t < 20, 2 from t = 20 (3t/115 ≥ 0.5), 3 from
    t = 58, 4 from t = 96; ε_t = 0.0015 · 0.1^(P_t/288) with P_t the archives before t,
    and the final rate on the last iteration; combination (get_model_combine_iters):
    min(int(A·F/4/2) + 1, int(T/2)) = 13 ≤ 20 models, so the last min(20, T//2) = 20."""
    jobs = [1] * 20 + [2] * 38 + [3] * 38 + [4] * 19
    processed = [sum(jobs[:t]) for t in range(115)]
    rates = [0.0015 * 0.1 ** (processed[t] / 288) for t in range(114)] + [0.00015]
    return jobs, rates, list(range(96, 116))


def test_the_report_plans_the_rate_the_jobs_get():
    """The planned schedule the report, progress view and config page draw is Kaldi's:
    the jobs per iteration, ε_t, the combined models, and the rate the jobs really train
    at (average: N·ε; BMUF textbook: N·ε·(1 − bm)/η_b; cntk: ε), all against values worked
    out by hand."""
    jobs, rates, combine = kaldi_schedule_by_hand()
    assert len(jobs) == 115 and sum(jobs) == 286 <= 288
    assert rates[20] == pytest.approx(0.0015 * 0.1 ** (20 / 288))
    bmuf = {"method": "bmuf", "bmuf": {"block_momentum": 0.5, "block_lr": 2.0, "form": "textbook"}}
    cntk = {"method": "bmuf", "bmuf": {"block_momentum": 0.5, "block_lr": 2.0, "form": "cntk"}}
    exps = {"avg": {}, "b": {"sync": bmuf}, "c": {"sync": cntk}}
    average, b, c = plans({"experiments": exps}).values()
    by_hand = ((average, lambda n: n), (b, lambda n: n * (1 - 0.5) / 2.0), (c, lambda n: 1.0))
    for plan, factor in by_hand:
        planned = plan.planned()
        assert planned.num_archives_to_process == 288 and planned.num_iters == 115
        assert list(planned.jobs_per_iter) == jobs
        assert planned.models_to_combine() == combine
        for t in range(115):
            assert planned.effective_lrate(t) == pytest.approx(rates[t], rel=1e-12)
            assert planned.learning_rate(t) == pytest.approx(factor(jobs[t]) * rates[t])
            # and that is the rate the jobs get
            assert plan.job_params(t, jobs[t] - 1)["learning_rate"] == planned.learning_rate(t)
    # the default BMUF (bm = 1 − 1/N, η_b = 1) trains every job at ε
    default_bmuf = plans({"sync": {"method": "bmuf"}})["default"].planned()
    assert default_bmuf.learning_rate(100) == pytest.approx(rates[100])


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
    """f_t names everything up to layout index t: equal settings give the same chain however
    the plan is built; a change moves the chain from the first index it affects and every
    index after it (a chain, not per-iteration digests); what changes no start model
    (the EMA, the combination, benchmarking knobs) moves nothing."""
    p = plans()["default"]
    n = p.num_iters
    chain = [p.fingerprint(i) for i in range(n + 1)]
    assert len(set(chain)) == n + 1
    # the same settings, built separately: from a fresh config, and from copies
    again = plans()["default"]
    assert again.experiment is not p.experiment
    assert [again.fingerprint(i) for i in range(n + 1)] == chain
    copied = ExperimentPlan("default", copy.deepcopy(p.experiment), EgsGeometry.from_info(INFO),
                            Layout(p.layout.results), dict(p.combine))  # fmt: skip
    assert [copied.fingerprint(i) for i in range(n + 1)] == chain

    def moved(q):
        return [i for i in range(n + 1) if q.fingerprint(i) != chain[i]]

    # the final rate moves every rate after iteration 0 (exponential schedule): from index 2
    assert moved(plans({"trainer": {"final_effective_lrate": 0.0002}})["default"]) == list(
        range(2, n + 1)
    )
    # the initial rate is iteration 0's rate: from index 1
    assert moved(plans({"trainer": {"initial_effective_lrate": 0.002}})["default"]) == list(
        range(1, n + 1)
    )

    class ChangedAt(ExperimentPlan):
        """What iteration k computes changes (its jobs' rate), nothing else."""

        k = 40

        def job_params(self, iteration, job):
            params = super().job_params(iteration, job)
            if iteration == self.k:
                params["learning_rate"] *= 2
            return params

    changed = ChangedAt("default", p.experiment, p.egs, p.layout, p.combine)
    assert moved(changed) == list(range(41, n + 1))  # its jobs write index 41
    # nothing that changes no start model moves the chain
    for unchanged in (
        {"sync": {"ema": {"enabled": True, "decay": 0.5}}},
        {"combine": {"max_models_combine": 5, "ema": "final"}},
        {"simulate": {"straggler": {"job": 0, "factor": 3.0}}},
    ):
        assert moved(plans(unchanged)["default"]) == [], unchanged
    other_egs = ExperimentPlan(
        "default", p.experiment, EgsGeometry(12, 8, "other"), p.layout, p.combine
    )
    assert moved(other_egs) == list(range(n + 1))


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


def test_blocks_are_bounded_by_the_edges_into_training_jobs():
    """Averaging reads N_t · N_{t−1} models and statistics an iteration: the block holds
    at most run.block_edges of them, and one iteration however many; reading the node's
    <t>.pt instead (run.synced_start_mb) is 2 files a job, and the job bound rules."""
    n = {"trainer": {"num_jobs_initial": 4, "num_jobs_final": 4}}
    p = plans({**n, "run": {"block_jobs": 400, "block_edges": 10 * 2 * 4 * 4}})["default"]
    assert p.max_start_edges == 2 * 4 * 4
    assert p.block_iterations == 10  # not 400 // 4
    assert plans({**n, "run": {"block_edges": 1}})["default"].block_iterations == 1
    ring = plans({**n, "sync": {"method": "ring"}, "run": {"block_edges": 2 * 3 * 4 * 5}})
    assert ring["default"].block_iterations == 5  # 3 neighbours' models and stats a job
    synced = plans({**n, "run": {"block_edges": 10 * 2 * 4, "synced_start_mb": 0}})
    # <t>.pt and the node's summary (which records the plan the N statistics carried)
    assert synced["default"].max_start_edges == (1 + 1) * 4
    # the demo's blocks are the job bound's: the default edge bound leaves them alone
    demo = plans()["default"]
    assert demo.block_iterations == 600 // max(demo.schedule.jobs_per_iter)


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


def test_large_iterations_read_the_synced_model_2n_reads():
    """While N × the model size is at most run.synced_start_mb, every job of average and
    bmuf averages the N job models itself (N² model reads per iteration, the node off the
    critical path); above it, every job reads the node's <t>.pt (2N reads: N by the node,
    one per job, as Kaldi's). Decentralized learners always read their neighbours."""
    dims = {**INFO, "feat_dim": 40, "ivector_dim": 40, "num_targets": 2000}
    over = {"trainer": {"num_jobs_initial": 4, "num_jobs_final": 4}}

    def reads(p, t):
        """Model files read per iteration t: every job's start inputs and the node's."""
        jobs = sum(len(p.start_inputs(t, j).get(r, [])) for j in range(4)
                   for r in ("models", "synced", "global", "delta", "start"))  # fmt: skip
        return jobs + len(p.node_inputs(t)["models"])

    for method in ("average", "bmuf"):
        cfg = deep_merge(over, {"sync": {"method": method}})
        small = experiment_plans(config(cfg), dims)["default"]
        # the default TDNN with 2000 outputs, by hand: LDA 240² + 240, priors 2000, layers
        # (240 + 1)·256 + 3·(3·256 + 1)·256, output (256 + 1)·2000; float32
        values = 240 * 240 + 240 + 2000 + 241 * 256 + 3 * 769 * 256 + 257 * 2000
        assert small.model_mb == 4 * values / 2**20 == pytest.approx(4.677, abs=1e-3)
        assert not small.starts_from_synced(3) and reads(small, 3) >= 4 * 4 + 4
        # 4 jobs × 4.68 MB = 18.7 MB: above a 10-MB threshold
        big = experiment_plans(config(deep_merge(cfg, {"run": {"synced_start_mb": 10}})), dims)
        p = big["default"]
        assert not p.starts_from_synced(0) and p.starts_from_synced(3)
        assert reads(p, 3) == 4 + 4
        assert p.start_inputs(3, 1) == {
            "synced": [p.layout.model("default", 3)],
            "summary": [p.layout.sync_summary("default", 3)],
        }
        # the chain of fingerprints is the same: the start model has the same bits
        assert [p.fingerprint(t) for t in range(5)] == [small.fingerprint(t) for t in range(5)]
    ring = deep_merge(over, {"sync": {"method": "ring"}, "run": {"synced_start_mb": 0}})
    assert not experiment_plans(config(ring), dims)["default"].starts_from_synced(3)


TDNNF = {"model": {"family": "tdnnf", "input_splice": [-1, 0, 1]}}


def test_a_tdnnf_job_gets_the_dropout_schedule_and_one_over_n_l2():
    schedule = "0,0@0.20,0.5@0.50,0"
    p = plans({"experiments": {"f": {**TDNNF, "trainer": {"dropout_schedule": schedule}}}})["f"]
    s = p.schedule
    for t in range(p.num_iters):
        x = s.archives_processed_before[t] / s.num_archives_to_process
        want = 0.0 if x <= 0.2 else (x - 0.2) / 0.3 * 0.5 if x <= 0.5 else 0.5 * (1 - x) / 0.5
        job = p.job(t, 0)
        assert job.dropout_proportion == pytest.approx(want)
        assert job.l2_regularize_factor == pytest.approx(1.0 / s.num_jobs(t))
    assert max(p.job(t, 0).dropout_proportion for t in range(p.num_iters)) > 0.4


def test_a_tdnn_experiments_params_and_model_config_are_unchanged_by_the_families():
    """A TDNN's job params carry neither field, and its model config no family key: the
    rerun triggers and the model files of existing workspaces stay what they were."""
    p = plans({"experiments": {"a": {}}})["a"]
    assert {"dropout_proportion", "l2_regularize_factor"}.isdisjoint(p.job_params(2, 0))
    assert "family" not in p.experiment["model"] and "tdnnf" not in p.experiment["model"]


def test_tdnnf_keys_get_their_defaults_and_wrong_combinations_are_config_errors():
    f = plans({"experiments": {"f": TDNNF}})["f"].experiment["model"]["tdnnf"]
    assert f["bypass_scale"] == 0.66 and f["time_strides"] == [1, 1, 1, 0, 3, 3, 3]
    with pytest.raises(ConfigError, match=r"dropout_schedule.*tdnn has no dropout"):
        config({"experiments": {"a": {"trainer": {"dropout_schedule": "0,0.5,0"}}}})
    with pytest.raises(ConfigError, match="tdnn1_dim"):
        config({"experiments": {"f": {"model": {**TDNNF["model"], "tdnnf": {"tdnn1_dim": 9}}}}})
    with pytest.raises(ConfigError, match="outside"):
        config({"experiments": {"f": {**TDNNF, "trainer": {"dropout_schedule": "0,1.5,0"}}}})


def test_bmuf_keys_of_issue_37_keep_earlier_fingerprints():
    """sync.bmuf.form / warmup_blocks change no other method's start models, and at the
    pre-issue values (textbook, 0) BMUF's runs keep the fingerprint they had before."""
    from paravg.sync.bmuf_params import fingerprint_section

    old = {"block_momentum": None, "block_lr": 1.0, "nesterov": True}
    assert fingerprint_section({**old, "form": "textbook", "warmup_blocks": 0}, True) == old
    assert fingerprint_section({**old, "form": "cntk", "warmup_blocks": None}, False) == old
    assert fingerprint_section({**old, "form": "cntk", "warmup_blocks": 0}, True) == {
        **old,
        "form": "cntk",
    }

    def fp(sync):
        return plans({"sync": sync})["default"].fingerprint(3)

    cntk, textbook = {"form": "cntk"}, {"form": "textbook", "warmup_blocks": 0}
    assert fp({"method": "average", "bmuf": cntk}) == fp({"method": "average", "bmuf": textbook})
    assert fp({"method": "bmuf", "bmuf": cntk}) != fp({"method": "bmuf", "bmuf": textbook})


def test_sync_mixing_enters_the_fingerprint_where_it_changes_the_start_models():
    """ring, random-ring and delay-by-one changed their update in issue 37 under the same
    name: their fingerprint always carries the mixing (runs from before must not count
    as done). d-psgd / gossip-average only off their default (neighbourhood), so their
    runs made before keep their fingerprints; average and bmuf ignore the key."""

    def fp(sync, jobs=2):
        trainer = {"num_jobs_initial": jobs, "num_jobs_final": jobs}
        return plans({"sync": sync, "trainer": trainer})["default"].fingerprint(3)

    def part(sync):
        return plans({"sync": sync, "trainer": {"num_jobs_initial": 2, "num_jobs_final": 2}})[
            "default"
        ].sync_fingerprint_part()

    assert part({"method": "ring"})["mixing"] == "pairwise"
    assert part({"method": "delay-by-one", "mixing": "neighbourhood"})["mixing"] == "neighbourhood"
    assert "mixing" not in part({"method": "d-psgd"})
    assert "mixing" not in part({"method": "d-psgd", "mixing": "neighbourhood"})
    assert part({"method": "gossip-average", "mixing": "pairwise"})["mixing"] == "pairwise"
    assert fp({"method": "ring"}) != fp({"method": "ring", "mixing": "neighbourhood"})
    assert fp({"method": "d-psgd"}) == fp({"method": "d-psgd", "mixing": "neighbourhood"})
    assert fp({"method": "average"}) == fp({"method": "average", "mixing": "pairwise"})
    assert fp({"method": "bmuf"}) == fp({"method": "bmuf", "mixing": "neighbourhood"})
