# The middle of the house: where every file of a run comes from.
#
#   paravg.layout.Layout      the file contract (every path; LAYOUT below)
#   paravg.plan               per experiment: the schedule, each job's archive, frame, seed,
#                             learning rate (with the sync factor), start inputs, synced
#                             model, combined models, fingerprint chain (plan(exp) below)
#   paravg.sync.registry      per sync method: start inputs, off-path node, synced model
#   paravg.resume             per experiment and per-iteration rule: the frontier K (the
#                             files of indices <= K are finished inputs, not DAG jobs)
#
# Rule files call only the get_*/helper functions here; none recomputes a schedule or
# spells a results path.
import json
import re
import sys
from pathlib import Path

from paravg.config import experiment_config
from paravg.layout import Layout
from paravg.nnet.context import model_context

LAYOUT = Layout(config["results"])
EXPERIMENTS = {name: experiment_config(config, name) for name in config["experiments"]}
IVECTORS = bool(config["ivector"]["enabled"])


wildcard_constraints:
    set=r"[A-Za-z0-9_.-]+",
    exp=r"[A-Za-z0-9_.-]+",
    t=r"\d+",
    j=r"\d+",
    it=r"\d+",
    a=r"\d+",
    b=r"\d+",


def layout_param(method, *args):
    """A rule param that is the layout's ``method(*args)`` (a directory a script writes
    into), given as a function: snakemake's linter takes a plain string that prefixes an
    output for a hardcoded path."""

    def param(wildcards):
        return getattr(LAYOUT, method)(*args)

    return param


# ---------------------------------------------------------------- data sets
from paravg.config import demo_set_names  # noqa: E402


def data_sets():
    """Set name -> source Kaldi data dir; the demo corpus when data.sets is empty."""
    if config["data"]["sets"]:
        return dict(config["data"]["sets"])
    return {s: LAYOUT.demo_file(s) for s in demo_set_names(config)}


def uses_demo():
    return not config["data"]["sets"]


def all_sets():
    """The sets that need features: the training set and every eval set."""
    names = [config["data"]["train_set"]] + list(config["eval_sets"])
    return list(dict.fromkeys(names))


def get_source_dir(wildcards):
    from paravg.errors import ConfigError

    sets = data_sets()
    if wildcards.set not in sets:
        raise ConfigError(
            f"data set {wildcards.set!r} is not configured; data.sets has {sorted(sets)}"
        )
    return sets[wildcards.set]


def get_source_inputs(wildcards):
    """Every file of the source dir that prepare_data reads (paravg.data.source_files:
    wav.scp, utt2spk, the optional tables that exist, the targets file and the arks its
    scp names), so an edit of any of them reruns the preparation of that set only.
    The demo corpus is produced by a rule: its wav.scp and done file stand for it."""
    from paravg.data import source_files
    from paravg.errors import DataError

    if uses_demo():
        return [LAYOUT.demo_file(f"{wildcards.set}/wav.scp"), LAYOUT.demo_file("done")]
    src = get_source_dir(wildcards)
    if not Path(src).is_dir():
        raise DataError(
            f"data.sets.{wildcards.set} = {src}: the data directory does not exist"
        )
    return [str(f) for f in source_files(src)]


def get_prepared_reports(wildcards):
    """report.json of every configured set (the inputs of check_data_sets)."""
    return {s: LAYOUT.data_file(s, "report.json") for s in all_sets()}


# ---------------------------------------------------------------- egs geometry
def egs_context():
    """Egs carry the widest context any experiment's model needs."""
    contexts = [model_context(e["model"]) for e in EXPERIMENTS.values()]
    return max(c[0] for c in contexts), max(c[1] for c in contexts)


def egs_info_dict():
    """info.json of the egs checkpoint (the only data-dependent shape in the DAG)."""
    from paravg.io import read_json

    return read_json(checkpoints.egs.get().output.info)


def egs_info():
    from paravg.egs import EgsInfo

    return EgsInfo.load(checkpoints.egs.get().output.info)


def egs_source_files():
    """Inputs of the egs stage (the file contract); i-vectors only when enabled."""
    train = config["data"]["train_set"]
    files = {
        "feats_scp": LAYOUT.feats_scp(train),
        "utt2num_frames": LAYOUT.utt2num_frames(train),
        "targets_scp": LAYOUT.data_file(train, "targets.scp"),
        "utt2spk": LAYOUT.data_file(train, "utt2spk"),
    }
    if IVECTORS:
        files["ivector_scp"] = LAYOUT.ivector_scp(train)
        files["ivector_period"] = LAYOUT.ivector_period(train)
    return files


def egs_fields(prefix):
    """Field -> file of the egs archive ``prefix`` (paravg.egs.archive.archive_files)."""
    from paravg.egs.archive import archive_files

    return archive_files(prefix, IVECTORS)


def egs_prefix(a):
    return LAYOUT.egs_prefix(a)


def egs_subset_prefix(name):
    return LAYOUT.egs_subset_prefix(name)


def egs_split_prefix(j):
    return LAYOUT.egs_split_prefix(j)


def egs_archive_files(a):
    """Files of training archive ``a`` (0-based)."""
    return list(egs_fields(LAYOUT.egs_prefix(a)).values())


def egs_subset_files(name):
    """Files of the ``valid_diag``, ``train_diag`` or ``combine`` egs."""
    return list(egs_fields(LAYOUT.egs_subset_prefix(name)).values())


def egs_split_files(j):
    """Field -> file of split job ``j``: an archive plus each eg's archive index."""
    from paravg.egs.split import assignment_path

    prefix = LAYOUT.egs_split_prefix(j)
    return {**egs_fields(prefix), "assignment": assignment_path(prefix)}


def egs_all_files():
    """Every archive and subset file (needs the egs checkpoint)."""
    archives = [f for a in range(egs_info().num_archives) for f in egs_archive_files(a)]
    subsets = [f for name in ("valid_diag", "train_diag", "combine") for f in egs_subset_files(name)]
    return archives + subsets


# ---------------------------------------------------------------- the plan
def _plans(info):
    from paravg.plan import experiment_plans

    return experiment_plans(config, info)


def _parse_time_plans():
    """Plans from the egs info.json if it exists when the Snakefile is parsed; None
    before the egs exist (then plan() waits for the egs checkpoint). Reading the file
    directly, rather than through the checkpoint in every input function, keeps
    thousands of jobs from each depending on the checkpoint; a job checks at run time
    that the egs are still those it was planned for (paravg.train_job)."""
    from paravg.io import read_json

    path = Path(LAYOUT.egs_info())
    return _plans(read_json(path)) if path.exists() else None


PLANS = _parse_time_plans()
_LATE_PLANS = {}


def plan(exp):
    """paravg.plan.ExperimentPlan of ``exp``."""
    if PLANS is not None:
        return PLANS[exp]
    if not _LATE_PLANS:  # a fresh run: the egs checkpoint has just been written
        _LATE_PLANS.update(_plans(egs_info_dict()))
    return _LATE_PLANS[exp]


def _parse_time_frontiers():
    """paravg.resume frontiers of every experiment, read once when the Snakefile is parsed
    (before the egs exist nothing is finished: every frontier is at the start)."""
    from paravg.resume import Frontiers, restart_iteration, resume_frontiers

    if PLANS is None:
        return {exp: Frontiers(train=0, node=0, ema=0, diag=-1) for exp in EXPERIMENTS}
    on_change = config["run"]["on_plan_change"]
    frontiers = {exp: resume_frontiers(p, on_change) for exp, p in PLANS.items()}
    # A job run by name (--target-jobs: what a cluster executor runs on the node) must be
    # producible even if its own outputs appeared (a retry): cap its experiment's frontiers
    # below its index.
    for w in target_job_wildcards():
        if w.get("exp") in frontiers and str(w.get("t", "")).isdigit():
            frontiers[w["exp"]] = frontiers[w["exp"]].capped(int(w["t"]) - 1)
    # A rewound run whose first jobs' inputs (temporary job models) are gone: those jobs
    # start from the synced model, the same bits (paravg.resume.restart_iteration).
    for exp, p in PLANS.items():
        p.restart_at = restart_iteration(p, frontiers[exp])
    return frontiers


def target_job_wildcards():
    """Wildcards of the jobs named by ``--target-jobs`` on the command line (Snakemake has
    not parsed them into the workflow yet when the Snakefile is read)."""
    import sys

    from snakemake.target_jobs import parse_target_jobs_cli_args

    argv, specs = sys.argv, []
    for i, arg in enumerate(argv):
        if arg == "--target-jobs":
            for value in argv[i + 1 :]:
                if value.startswith("-"):
                    break
                specs.append(value)
    return [spec.wildcards_dict for spec in parse_target_jobs_cli_args(specs)]


FRONTIERS = _parse_time_frontiers()


#: The outputs of each kind of per-iteration rule, as patterns (for index_after_frontier).
PER_ITERATION_OUTPUTS = {
    "train": ("job_model", "job_stats", "job_start"),
    "node": ("model", "sync_summary", "bmuf_global", "bmuf_delta", "consensus_model",
             "consensus_summary"),
    "ema": ("ema_model",),
    "diag": ("diag",),
}  # fmt: skip


def index_after_frontier(kind):
    """Wildcard regex of ``t`` for a per-iteration rule of ``kind`` (train, node, ema,
    diag): for each experiment, only indices above its frontier (paravg.resume). A
    lookbehind on the path between ``{exp}`` and ``{t}`` ties the index to the experiment
    of the same path (Snakemake matches whole paths)."""
    from paravg.resume import indices_above

    patterns = [getattr(LAYOUT, k)("{exp}", "{t}", "{j}")
                if k.startswith("job_") else getattr(LAYOUT, k)("{exp}", "{t}")
                for k in PER_ITERATION_OUTPUTS[kind]]  # fmt: skip
    betweens = sorted({p.split("{exp}", 1)[1].split("{t}", 1)[0] for p in patterns})
    alts = []
    for e in EXPERIMENTS:
        behind = "|".join(f"(?<=/{re.escape(e)}{re.escape(b)})" for b in betweens)
        alts.append(f"(?:{behind}){indices_above(getattr(FRONTIERS[e], kind))}")
    return "(?:" + "|".join(alts) + ")"


def experiments_pattern(names):
    """A wildcard regex matching exactly the experiments ``names`` (or nothing)."""
    return "|".join(re.escape(n) for n in names) if names else "(?!)"


def experiments_with(**properties):
    """Experiments whose sync method has these registry properties (e.g. node="bmuf")."""
    from paravg.sync.registry import get_method

    return [
        e
        for e in EXPERIMENTS
        if all(
            getattr(get_method(EXPERIMENTS[e]["sync"]["method"]), k) == v
            for k, v in properties.items()
        )
    ]


def experiments_with_ema():
    return [e for e in EXPERIMENTS if EXPERIMENTS[e]["sync"]["ema"]["enabled"]]


def job_output(path):
    """Per-job models are temporary, as Kaldi deletes them, unless kept by config."""
    return path if config["run"]["keep_job_models"] else temp(path)


# ---------------------------------------------------------------- training (rules/train.smk)
def _job(wildcards):
    """(plan, iteration, job) of the train job writing ``<t>/job<j>.pt``."""
    return plan(wildcards.exp), int(wildcards.t) - 1, int(wildcards.j)


def dag_edges(files):
    """The DAG inputs among a job's role -> files: all but the ``stats`` JSONs, which
    the same jobs write beside their models (one edge per model is enough, and a
    Kaldi-size iteration has N² of them)."""
    return {role: paths for role, paths in files.items() if role != "stats"}


def egs_archive_mark(a):
    """The completion mark of archive ``a`` (written last): the one DAG edge to it."""
    return egs_fields(LAYOUT.egs_prefix(a))["meta"]


def get_job_inputs(wildcards):
    """The job's archive and exactly the models its start model is formed from (the
    sync method's start inputs: the DAG edges are the communication pattern)."""
    p, t, j = _job(wildcards)
    return {"egs": egs_archive_mark(p.job_archive(t, j)), **dag_edges(p.start_inputs(t, j))}


def get_job_params(wildcards):
    """What changes this job's result (a rerun trigger), its fingerprint, and the
    fingerprint its inputs must carry (checked by the job before it trains)."""
    p, t, j = _job(wildcards)
    return {
        "job": p.job_params(t, j),
        "files": p.start_inputs(t, j),
        "fingerprint": p.fingerprint(t + 1),
        "egs": p.egs.identity,
        "inputs_fingerprint": p.start_inputs_fingerprint(t, j),
        "sync": p.sync_fingerprint_part(),
        "method": p.sync.name,
    }


def get_job_runtime(wildcards):
    """Snakemake/SLURM knobs that change no result (never params): device, straggler."""
    p, t, j = _job(wildcards)
    return {"device": p.trainer["device"], "straggler_factor": p.straggler_factor(t, j)}


def gpu_for_training(wildcards):
    """1 when the experiment trains on a GPU of this host (``resources: gpu``), else 0."""
    device = EXPERIMENTS[wildcards.exp]["trainer"]["device"]
    if device == "cuda":
        return 1
    if device == "auto":
        import shutil  # an NVIDIA driver on this host: nvidia-smi is installed with it

        return int(shutil.which("nvidia-smi") is not None)
    return 0


def get_init_params(wildcards):
    p = plan(wildcards.exp)
    return {
        "archives": [LAYOUT.egs_prefix(a) for a in p.lda_archives()],
        "fingerprint": p.fingerprint(0),
    }


def get_lda_egs(wildcards):
    return [f for a in plan(wildcards.exp).lda_archives() for f in egs_archive_files(a)]


# ---------------------------------------------------------------- blocks (rules/train.smk)
#: The off-path files of index t (diagnostics, EMA) join the DAG with the block of t but
#: are waited for by the block checkpoint only this many indices later, so the DAG grows
#: past a block as soon as its last jobs end (never waiting for the last diagnostics).
OFF_PATH_LAG = 2


def first_block(exp):
    """The first block with an index still to train (the frontier's block)."""
    p = plan(exp)
    return p.block_of(min(FRONTIERS[exp].train + 1, p.num_iters))


def wait_for_block(exp, b):
    """In an input function: raise until block ``b`` of ``exp`` is trained (a checkpoint),
    so that nothing past it is put into the DAG before."""
    if b >= first_block(exp):
        checkpoints.train_block.get(exp=exp, b=b)


def off_path_files(exp, first, last):
    """Diagnostics and EMA models of indices first..last (off the critical path)."""
    files = [LAYOUT.diag(exp, t) for t in range(max(first, 0), last + 1)]
    if exp in experiments_with_ema():
        files += [LAYOUT.ema_model(exp, t) for t in range(max(first, 1), last + 1)]
    return files


def get_block_inputs(wildcards):
    """Block b is trained when the jobs of its last index are; it also waits for the
    off-path files up to OFF_PATH_LAG indices before its end (and so puts those of its
    own iterations into the DAG). Block b − 1 must be done first (a checkpoint chain):
    until then the DAG stops here. The files do not depend on where the run resumed (a
    changed input set would rerun the block and everything after it)."""
    exp, b = wildcards.exp, int(wildcards.b)
    p = plan(exp)
    if b > first_block(exp):
        wait_for_block(exp, b - 1)
    start = 0 if b == 0 else p.block_end(b - 1) - OFF_PATH_LAG + 1
    end = p.block_end(b)
    last_off_path = end if b == p.num_blocks - 1 else end - OFF_PATH_LAG
    return p.job_outputs(end) + off_path_files(exp, start, last_off_path)


def get_block_params(wildcards):
    p, b = plan(wildcards.exp), int(wildcards.b)
    end = p.block_end(b)
    return {"block": b, "end": end, "fingerprint": p.fingerprint(end)}


def trained(exp):
    """In an input function: wait until every block of ``exp`` is trained."""
    wait_for_block(exp, plan(exp).num_blocks - 1)


# ---------------------------------------------------------------- sync nodes (rules/sync.smk)
def get_node_inputs(wildcards):
    """The off-path sync node of index t reads what the jobs of iteration t form their
    start from (the same inputs give the same bits): the jobs of iteration t − 1 (and,
    for BMUF, the block state after t − 1 blocks)."""
    return plan(wildcards.exp).node_inputs(int(wildcards.t))  # N stats edges: cheap here


def get_node_params(wildcards):
    p, t = plan(wildcards.exp), int(wildcards.t)
    return {"iteration": t - 1, "sync": p.sync_cfg, "files": p.node_inputs(t)}


def egs_subset_mark(name):
    """The completion mark of a subset's egs (written last): the one DAG edge to it."""
    return egs_fields(LAYOUT.egs_subset_prefix(name))["meta"]


def get_diag_inputs(wildcards):
    p, t = plan(wildcards.exp), int(wildcards.t)
    inputs = {
        "model": p.synced_model(t),
        "egs": [egs_subset_mark("valid_diag"), egs_subset_mark("train_diag")],
    }
    if t > 0:
        inputs["prev"] = p.synced_model(t - 1)
    return inputs


def all_diagnostics(exp):
    """diag/<t>.json of every model of ``exp``: off the critical path, read by the report."""
    return [LAYOUT.diag(exp, t) for t in range(plan(exp).num_iters + 1)]


def get_ema_inputs(wildcards):
    """e_t from e_{t−1} and the synced model m_t (e_1 = m_1)."""
    p, t = plan(wildcards.exp), int(wildcards.t)
    inputs = {"model": p.synced_model(t)}
    if t > 1:
        inputs["prev"] = LAYOUT.ema_model(wildcards.exp, t - 1)
    return inputs


def final_ema_model(exp):
    return LAYOUT.ema_model(exp, plan(exp).num_iters)


# ---------------------------------------------------------------- the end (rules/final.smk)
def get_combine_inputs(wildcards):
    """Kaldi's candidates (synced models of the last iterations, newest last), the combine
    egs, and the last EMA model when it is enabled and combine.ema is not none (scored as
    one separate candidate: paravg.combine)."""
    exp = wildcards.exp
    trained(exp)
    inputs = {"models": plan(exp).combine_models(), "egs": egs_subset_files("combine")}
    if exp in experiments_with_ema() and config["combine"]["ema"] != "none":
        inputs["ema"] = final_ema_model(exp)
    return inputs


def get_eval_inputs(wildcards):
    inputs = {
        "model": LAYOUT.final_model(wildcards.exp),
        "feats": LAYOUT.feats_scp(wildcards.set),
        "targets": LAYOUT.data_file(wildcards.set, "targets.scp"),
    }
    if EXPERIMENTS[wildcards.exp]["ivector_enabled"]:
        inputs["ivectors"] = LAYOUT.ivector_scp(wildcards.set)
        inputs["period"] = LAYOUT.ivector_period(wildcards.set)
    return inputs


def get_eval_ema_inputs(wildcards):
    """As the final model's evaluation, with the last EMA model."""
    trained(wildcards.exp)
    return {**get_eval_inputs(wildcards), "model": final_ema_model(wildcards.exp)}


def ema_eval_targets():
    return [LAYOUT.eval_ema_result(e, s) for e in experiments_with_ema() for s in config["eval_sets"]]


def get_results_inputs(wildcards):
    for e in EXPERIMENTS:
        trained(e)
    files = [LAYOUT.eval_result(e, s) for e in EXPERIMENTS for s in config["eval_sets"]]
    files += [LAYOUT.final_summary(e) for e in EXPERIMENTS]
    files += [f for e in EXPERIMENTS for f in all_diagnostics(e)]
    return files + ema_eval_targets()


def get_final_targets():
    """The results table, its per-stage digests, the report, and (when the run decodes, so
    a word graph exists) every experiment's model in Kaldi's formats (rules/export.smk).
    A finished export that lost a file or changed size stops the run here, naming it and
    the command that rebuilds it (not in a cluster job's own snakemake: it runs one job)."""
    from paravg.export.manifest import check_finished_export

    targets = [LAYOUT.results_table("md"), LAYOUT.digests("md")] + report_targets()
    if DECODE["enabled"]:
        targets += [LAYOUT.kaldi_dir(e) for e in EXPERIMENTS]
        if not target_job_wildcards():
            for e in EXPERIMENTS:
                check_finished_export(LAYOUT.kaldi_dir(e))
    return targets


def digest_stages():
    """Stage name -> the files and directories of its digest (paravg.digests)."""
    stages = {"corpus (demo)": [LAYOUT.demo_dir()]} if uses_demo() else {}
    for s in all_sets():
        stages[f"data/{s}"] = [LAYOUT.data_dir(s)]
    for s in all_sets():
        stages[f"features/{s}"] = [LAYOUT.feats_dir(s)]
    if IVECTORS:
        stages["i-vector models"] = [LAYOUT.ivector_pca(), final_ubm(), final_extractor()]
        for s in all_sets():
            stages[f"i-vectors/{s}"] = [LAYOUT.ivector_set_dir(s)]
    stages["egs"] = [LAYOUT.egs_dir()]
    for e in EXPERIMENTS:
        stages[f"{e}: final.pt"] = [LAYOUT.final_model(e)]
        scores = [LAYOUT.eval_result(e, s) for s in config["eval_sets"]]
        if DECODE["enabled"]:
            scores += [LAYOUT.decode_scores(e, s) for s in config["eval_sets"]]
        stages[f"{e}: scores"] = scores
    return stages


# ---------------------------------------------------------------- report (rules/report.smk)
def report_targets():
    """Figures and config of every experiment, and the comparison (`snakemake --report`)."""
    from paravg.plots import FIGURES

    per_exp = [LAYOUT.report_figure(e, n) for e in EXPERIMENTS for n in FIGURES]
    per_exp += [LAYOUT.report_config(e, "html") for e in EXPERIMENTS]
    return per_exp + [LAYOUT.report_file("comparison.png"), LAYOUT.report_file("results.html")]


def report_figure(name, subcategory, label):
    """Output ``report/<name>.png`` of an experiment, flagged for ``snakemake --report``."""
    return report(
        LAYOUT.report_figure("{exp}", name),
        caption=f"../report/{name}.rst",
        category="{exp}",
        subcategory=subcategory,
        labels={"figure": label},
    )


def schedule_params(exp):
    """``exp``'s planned schedule as the jobs get it, sync factor included (paravg.plan
    PlannedSchedule, plain values: a rule param, a rerun trigger)."""
    import dataclasses

    return dataclasses.asdict(plan(exp).planned())


def get_report_figure_inputs(wildcards):
    """What the figures of one experiment wait for: every diagnostic (each one requests
    its synced model, so every sync node has run), the last iteration's jobs (the chain
    before them is done) and the combination. The figures then read every per-iteration
    JSON through the layout; listing 12 × 2,500 job files here would make the DAG of a
    Kaldi-size run spend seconds matching inputs that are already there."""
    trained(wildcards.exp)
    p = plan(wildcards.exp)
    return {
        "diags": all_diagnostics(wildcards.exp),
        "last_jobs": p.job_outputs(p.num_iters),
        "combine": LAYOUT.combine_summary(wildcards.exp),
    }


def get_report_comparison_inputs(wildcards):
    """What the comparison reads of every experiment: diagnostics (their synced models'
    nodes wrote the sync summaries), combination, final model, results."""
    files = []
    for exp in EXPERIMENTS:
        trained(exp)
        files += all_diagnostics(exp)
        files += [LAYOUT.combine_summary(exp), LAYOUT.final_summary(exp)]
        files += [LAYOUT.eval_result(exp, s) for s in config["eval_sets"]]
    return files


# ---------------------------------------------------------------- i-vectors
# The i-vector models are trained on data.train_set; jobs are numbered 1..ivector.nj.


def ivector_jobs():
    return range(1, config["ivector"]["nj"] + 1)


def ivector_train_data(wildcards=None):
    """Features and speakers of the set the PCA, UBM and extractor are trained on."""
    train = config["data"]["train_set"]
    return {
        "feats": LAYOUT.feats_scp(train),
        "spk2utt": LAYOUT.data_file(train, "spk2utt"),
    }


def final_ubm():
    return LAYOUT.ubm(config["ivector"]["ubm_num_iters"])


def final_extractor():
    return LAYOUT.extractor(config["ivector"]["extractor_num_iters"])


def get_ubm_est_inputs(wildcards):
    """The UBM of iteration it − 1 and its per-job accumulators (the fan-in)."""
    prev = int(wildcards.it) - 1
    return {
        "ubm": LAYOUT.ubm(prev),
        "accs": [LAYOUT.ubm_acc(prev, j) for j in ivector_jobs()],
    }


def get_extractor_est_inputs(wildcards):
    """The extractor of iteration it − 1 and its per-job accumulators (the fan-in)."""
    prev = int(wildcards.it) - 1
    return {
        "extractor": LAYOUT.extractor(prev),
        "accs": [LAYOUT.extractor_acc(prev, j) for j in ivector_jobs()],
    }


def get_ivector_set_inputs(wildcards):
    return {
        "feats": LAYOUT.feats_scp(wildcards.set),
        "spk2utt": LAYOUT.data_file(wildcards.set, "spk2utt"),
    }


def ivector_utts_per_spk_max(wildcards):
    """Training data: pseudo-speakers of at most utts_per_spk_max utterances; eval sets:
    the real speakers (0), or every utterance alone (1) with ivector.eval_per_utt."""
    if wildcards.set == config["data"]["train_set"]:
        return config["ivector"]["utts_per_spk_max"]
    return 1 if config["ivector"]["eval_per_utt"] else 0


def get_ivector_pieces(wildcards):
    return [LAYOUT.ivector_split(wildcards.set, j, "scp") for j in ivector_jobs()]


# ---- recognition (graph, decode, score)
# Helpers of rules/graph.smk and rules/decode.smk (one block, kept apart for merging).
from paravg.graph.settings import check_recognition_config, decoding_enabled  # noqa: E402

check_recognition_config(config)
_decoding, _why_not = decoding_enabled(config)
if _why_not:
    print(_why_not, file=sys.stderr)
GRAPH_SOURCE = config["graph"]["source"]
DECODE = {**config["decode"], "enabled": _decoding}
PER_ENABLED = bool(DECODE["per"]) and GRAPH_SOURCE == "demo"


def graph_outputs(kind):
    """Files of results/graph/<kind>/ the decoder and the export read."""
    return [LAYOUT.graph_file(kind, n) for n in ("HCLG.fst", "words.txt", "transition.mdl", "graph.json")]


def graph_options():
    g = config["graph"]
    return {"transition_scale": g["transition_scale"], "self_loop_scale": g["self_loop_scale"]}


def get_user_graph_inputs(wildcards):
    """A user's files for graph.source lang/hclg (inputs, so their edits rebuild)."""
    g = config["graph"]
    if GRAPH_SOURCE == "hclg":
        return {
            "hclg": f"{g['hclg_dir']}/HCLG.fst",
            "words": f"{g['hclg_dir']}/words.txt",
            "final_mdl": g["final_mdl"],
        }
    inputs = {"lm": g["lm"], "final_mdl": g["final_mdl"], "lang": f"{g['lang_dir']}/phones.txt"}
    if g["tree"]:
        inputs["tree"] = g["tree"]
    return inputs


def decode_graph_dirs():
    kinds = ["words"] + (["phones"] if PER_ENABLED else [])
    return {k: LAYOUT.graph_dir(k) for k in kinds}


def decode_grids():
    """Each decoded graph's scoring grid: the word graph's (score.sh: LMWT 7-17, WIP 0,
    0.5, 1) and the phone graph's (TIMIT: LMWT 1-10)."""
    grids = {"words": (DECODE["lmwt_min"], DECODE["lmwt_max"], DECODE["word_ins_penalties"])}
    grids["phones"] = (DECODE["per_lmwt_min"], DECODE["per_lmwt_max"], DECODE["per_word_ins_penalties"])
    return {
        kind: {"lmwts": list(range(lo, hi + 1)), "wips": list(wips)}
        for kind, (lo, hi, wips) in grids.items()
        if kind in decode_graph_dirs()
    }


def decode_options():
    keys = ("acoustic_scale", "beam", "lattice_beam", "max_active", "min_active")
    return {k: DECODE[k] for k in keys}


def decode_split_outputs(j):
    """The split's summary JSON and each graph's lattices (paravg.decode.decoder)."""
    outputs = {"summary": LAYOUT.decode_split("{exp}", "{set}", j)}
    for kind in decode_graph_dirs():
        outputs[f"lattices_{kind}"] = LAYOUT.decode_lattices("{exp}", "{set}", kind, j)
    return outputs


def get_decode_inputs(wildcards):
    inputs = get_eval_inputs(wildcards)
    inputs.pop("targets")
    for kind in decode_graph_dirs():
        inputs[f"graph_{kind}"] = LAYOUT.graph_file(kind, "HCLG.fst")
        inputs[f"transitions_{kind}"] = LAYOUT.graph_file(kind, "transition.mdl")
    return inputs


def get_score_inputs(wildcards):
    """Every split's summary and lattices, the graphs' symbol tables, transition models
    and word boundaries (the CTM), and the tuning set's scores."""
    e, s, nj = wildcards.exp, wildcards.set, DECODE["nj"]
    inputs = {"splits": [LAYOUT.decode_split(e, s, j) for j in range(nj)]}
    for kind in decode_graph_dirs():
        inputs[f"lattices_{kind}"] = [LAYOUT.decode_lattices(e, s, kind, j) for j in range(nj)]
        inputs[f"words_{kind}"] = LAYOUT.graph_file(kind, "words.txt")
        inputs[f"transitions_{kind}"] = LAYOUT.graph_file(kind, "transition.mdl")
    tune = DECODE["tune_set"]
    if tune and tune != wildcards.set:
        inputs["tuned"] = LAYOUT.decode_scores(wildcards.exp, tune)
    return inputs


def get_decode_scores():
    """scores.json of every experiment x eval set (results table), when decoding is on."""
    if not DECODE["enabled"]:
        return []
    return [LAYOUT.decode_scores(e, s) for e in EXPERIMENTS for s in config["eval_sets"]]


# ---- export to Kaldi
def get_export_inputs(wildcards):
    """final.pt, the word graph (HCLG.fst, words.txt, transition.mdl, graph.json), and the
    i-vector system when the experiment's model takes i-vectors."""
    inputs = {"model": LAYOUT.final_model(wildcards.exp)}
    inputs.update(zip(("hclg", "words", "transition", "graph_json"), graph_outputs("words")))
    if EXPERIMENTS[wildcards.exp]["ivector_enabled"]:
        inputs.update(pca=LAYOUT.ivector_pca(), ubm=final_ubm(), extractor=final_extractor())
    return inputs


def export_ivector_options():
    """The online i-vector options the eval sets were extracted with (Kaldi's names)."""
    iv = config["ivector"]
    return {
        "period": iv["period"],
        "num_cg_iters": iv["num_cg_iters"],
        "num_gselect": iv["num_gselect_post"],
        "min_post": iv["min_post"],
        "posterior_scale": iv["posterior_scale"],
        "max_remembered_frames": iv["max_remembered_frames"],
    }


def export_decoder_options():
    """The export section's search options, for vosk's conf/model.conf (deployment:
    narrower than decode.sh's beams that paravg's own decoding uses)."""
    return {k: config["export"][k] for k in ("beam", "lattice_beam", "max_active", "min_active")}


# ---- end of export to Kaldi
