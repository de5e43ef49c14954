# Shared helpers (get_* input functions and constants). Every stage's rule file reads the
# config and the schedule through these, never through a second copy of the maths.
import json
from pathlib import Path

from paravg.config import experiment_config
from paravg.nnet.context import model_context

RESULTS = config["results"]
DEMO_DIR = f"{RESULTS}/demo"
EXPERIMENTS = {name: experiment_config(config, name) for name in config["experiments"]}
IVECTORS = bool(config["ivector"]["enabled"])


wildcard_constraints:
    set=r"[A-Za-z0-9_.-]+",
    exp=r"[A-Za-z0-9_.-]+",
    t=r"\d+",
    j=r"\d+",
    it=r"\d+",
    a=r"\d+",


# ---------------------------------------------------------------- data sets
def data_sets():
    """Set name -> source Kaldi data dir; the demo corpus when data.sets is empty."""
    if config["data"]["sets"]:
        return dict(config["data"]["sets"])
    return {"train": f"{DEMO_DIR}/train", "test": f"{DEMO_DIR}/test"}


def uses_demo():
    return not config["data"]["sets"]


def all_sets():
    """The sets that need features: the training set and every eval set."""
    names = [config["data"]["train_set"]] + list(config["eval_sets"])
    return list(dict.fromkeys(names))


def get_source_dir(wildcards):
    sets = data_sets()
    if wildcards.set not in sets:
        raise ValueError(
            f"data set {wildcards.set!r} is not configured; data.sets has {sorted(sets)}"
        )
    return sets[wildcards.set]


def get_source_inputs(wildcards):
    """The demo corpus is produced by a rule; a user's data dir is read (and its edits
    rerun the preparation: its wav.scp and utt2spk are inputs)."""
    if uses_demo():
        return [f"{DEMO_DIR}/{wildcards.set}/wav.scp", f"{DEMO_DIR}/done"]
    src = get_source_dir(wildcards)
    return [f"{src}/wav.scp", f"{src}/utt2spk"]


# ---------------------------------------------------------------- egs geometry
def egs_context():
    """Egs carry the widest context any experiment's model needs."""
    contexts = [model_context(e["model"]) for e in EXPERIMENTS.values()]
    return max(c[0] for c in contexts), max(c[1] for c in contexts)


def egs_info():
    """EgsInfo of the egs checkpoint (the only data-dependent shape in the DAG)."""
    from paravg.egs import EgsInfo

    info_path = checkpoints.egs.get().output.info
    return EgsInfo.load(info_path)


def egs_source_files():
    """Inputs of the egs stage (the file contract); i-vectors only when enabled."""
    train = config["data"]["train_set"]
    files = {
        "feats_scp": f"{RESULTS}/feats/{train}/feats.scp",
        "utt2num_frames": f"{RESULTS}/feats/{train}/utt2num_frames",
        "targets_scp": f"{RESULTS}/data/{train}/targets.scp",
        "utt2spk": f"{RESULTS}/data/{train}/utt2spk",
    }
    if IVECTORS:
        files["ivector_scp"] = f"{RESULTS}/ivector/{train}/ivector_online.scp"
        files["ivector_period"] = f"{RESULTS}/ivector/{train}/ivector_period"
    return files


def egs_fields(prefix):
    """Field -> file of the egs archive ``prefix`` (paravg.egs.archive.archive_files)."""
    from paravg.egs.archive import archive_files

    return archive_files(prefix, IVECTORS)


def egs_archive_files(a):
    """Files of training archive ``a`` (0-based, see egs_prefix)."""
    return list(egs_fields(egs_prefix(a)).values())


def egs_subset_files(name):
    """Files of the ``valid_diag``, ``train_diag`` or ``combine`` egs."""
    return list(egs_fields(egs_subset_prefix(name)).values())


def egs_split_prefix(j):
    """Prefix of the (temporary) egs of split job ``j`` (0-based)."""
    return f"{RESULTS}/egs/split/job.{j}"


def egs_split_files(j):
    """Field -> file of split job ``j``: an archive plus each eg's archive index."""
    from paravg.egs.split import assignment_path

    prefix = egs_split_prefix(j)
    return {**egs_fields(prefix), "assignment": assignment_path(prefix)}


def egs_all_files():
    """Every archive and subset file (needs the egs checkpoint)."""
    archives = [f for a in range(egs_info().num_archives) for f in egs_archive_files(a)]
    subsets = [f for name in ("valid_diag", "train_diag", "combine") for f in egs_subset_files(name)]
    return archives + subsets


# ---------------------------------------------------------------- targets
def get_final_targets():
    return [f"{RESULTS}/results.md"] + report_targets()


# ---------------------------------------------------------------- training schedule
def egs_prefix(a):
    """Prefix of egs archive ``a`` (0-based); its fields are ``<prefix>.<field>.npy``."""
    return f"{RESULTS}/egs/egs.{a}"


def egs_subset_prefix(name):
    """Prefix of the ``valid_diag``, ``train_diag`` or ``combine`` egs."""
    return f"{RESULTS}/egs/{name}"


def exp_schedule(exp):
    """The Kaldi schedule of experiment ``exp`` (needs the egs checkpoint)."""
    from paravg.schedule import Schedule

    info = egs_info()
    return Schedule.from_config(
        EXPERIMENTS[exp]["trainer"],
        info.num_archives,
        info.frames_per_eg,
        config["combine"]["max_models_combine"],
    )


def exp_dir(exp):
    return f"{RESULTS}/exp/{exp}"


def lda_archives():
    """Kaldi accumulates LDA stats (and priors) over at most 10 archives."""
    return range(min(egs_info().num_archives, 10))


def get_lda_egs(wildcards):
    return [f for a in lda_archives() for f in egs_archive_files(a)]


def get_job_egs(wildcards):
    """The archive read by the job that writes ``<t>/job<j>.pt`` (iteration t − 1)."""
    archive, _ = exp_schedule(wildcards.exp).archive_and_frame(int(wildcards.t) - 1, int(wildcards.j))
    return egs_archive_files(archive)


def get_job_params(wildcards):
    """Only what changes this job's result goes into params (rerun triggers)."""
    exp = EXPERIMENTS[wildcards.exp]
    trainer = exp["trainer"]
    sched = exp_schedule(wildcards.exp)
    t, j = int(wildcards.t) - 1, int(wildcards.j)
    archive, frame = sched.archive_and_frame(t, j)
    straggler = config["simulate"]["straggler"]
    return {
        "iteration": t,
        "job": j,
        "learning_rate": job_learning_rate(wildcards.exp, t),
        "minibatch_size": trainer["minibatch_size"],
        "max_param_change": trainer["max_param_change"],
        "frame": frame,
        "archive": egs_prefix(archive),
        "shuffle_buffer_size": trainer["shuffle_buffer_size"],
        "srand": trainer["srand"],
        "ngsgd": trainer["ngsgd"],
        "device": trainer["device"],
        "straggler_factor": (
            straggler["factor"]
            if straggler["job"] == j and straggler["iteration"] in (-1, t)
            else 1.0
        ),
    }


def get_average_inputs(wildcards):
    """All job outputs of iteration t − 1 (the fan-in)."""
    n = exp_schedule(wildcards.exp).num_jobs(int(wildcards.t) - 1)
    d = f"{exp_dir(wildcards.exp)}/{wildcards.t}"
    return {
        "models": [f"{d}/job{j}.pt" for j in range(n)],
        "stats": [f"{d}/job{j}.json" for j in range(n)],
    }


def job_output(path):
    """Per-job models are temporary, as Kaldi deletes them, unless kept by config."""
    return path if config["trainer"]["keep_job_models"] else temp(path)


def gpu_for_training(wildcards):
    """1 when the experiment trains on a GPU of this host (``resources: gpu``), else 0."""
    device = EXPERIMENTS[wildcards.exp]["trainer"]["device"]
    if device == "cuda":
        return 1
    if device == "auto":
        import shutil  # an NVIDIA driver on this host: nvidia-smi is installed with it

        return int(shutil.which("nvidia-smi") is not None)
    return 0


def get_diag_inputs(wildcards):
    t = int(wildcards.t)
    inputs = {
        "model": synced_model(wildcards.exp, t),
        "egs": egs_subset_files("valid_diag") + egs_subset_files("train_diag"),
    }
    if t > 0:
        inputs["prev"] = synced_model(wildcards.exp, t - 1)
    return inputs


def all_diagnostics(exp):
    """diag/<t>.json of every model of ``exp``: off the critical path, read by the report."""
    n = exp_schedule(exp).num_iters
    return [f"{exp_dir(exp)}/diag/{t}.json" for t in range(n + 1)]


def get_combine_models(wildcards):
    """Synced models of the last iterations (newest last), then the EMA model if enabled."""
    exp = wildcards.exp
    models = [synced_model(exp, m) for m in exp_schedule(exp).models_to_combine()]
    return models + ([final_ema_model(exp)] if ema_enabled(exp) else [])


def get_eval_inputs(wildcards):
    inputs = {
        "model": f"{exp_dir(wildcards.exp)}/final.pt",
        "feats": f"{RESULTS}/feats/{wildcards.set}/feats.scp",
        "targets": f"{RESULTS}/data/{wildcards.set}/targets.scp",
    }
    if EXPERIMENTS[wildcards.exp]["ivector_enabled"]:
        inputs["ivectors"] = f"{RESULTS}/ivector/{wildcards.set}/ivector_online.scp"
        inputs["period"] = f"{RESULTS}/ivector/{wildcards.set}/ivector_period"
    return inputs


def get_results_inputs(wildcards):
    return [
        f"{exp_dir(exp)}/eval/{s}.json" for exp in EXPERIMENTS for s in config["eval_sets"]
    ] + [f"{exp_dir(exp)}/final.json" for exp in EXPERIMENTS] + [
        f for exp in EXPERIMENTS for f in all_diagnostics(exp)
    ] + ema_eval_targets()


# ---------------------------------------------------------------- sync strategies (rules/sync.smk)
def sync_method(exp):
    """The registry entry (paravg.sync.registry) of ``exp``'s sync.method."""
    from paravg.sync.registry import get_method

    return get_method(EXPERIMENTS[exp]["sync"]["method"])


def experiments_pattern(fan_in=None, decentralized=None, ema=None):
    """A wildcard regex matching the experiments with these sync properties (or none)."""
    import re

    names = [
        e
        for e in EXPERIMENTS
        if (fan_in is None or sync_method(e).fan_in == fan_in)
        and (decentralized is None or sync_method(e).decentralized == decentralized)
        and (ema is None or EXPERIMENTS[e]["sync"]["ema"]["enabled"] == ema)
    ]
    return "|".join(re.escape(n) for n in names) if names else "(?!)"


def synced_model(exp, t):
    """The model after t iterations for diagnostics, the EMA and the combination:
    ``<t>.pt`` (average), the BMUF global model ``bmuf/<t>.pt``, or the consensus."""
    if t == 0:
        return f"{exp_dir(exp)}/0.pt"
    kind = sync_method(exp).synced_model
    if kind == "bmuf-global":
        return f"{exp_dir(exp)}/bmuf/{t}.pt"
    if kind == "consensus":
        return f"{exp_dir(exp)}/consensus/{t}.pt"
    return f"{exp_dir(exp)}/{t}.pt"


def get_bmuf_inputs(wildcards):
    """The jobs of iteration t − 1, the model they started from (``<t−1>.pt``) and the
    block state (g, delta) after t − 1 blocks."""
    t = int(wildcards.t)
    inputs = get_average_inputs(wildcards)
    inputs["start"] = f"{exp_dir(wildcards.exp)}/{t - 1}.pt"
    if t == 1:
        inputs["global_model"] = f"{exp_dir(wildcards.exp)}/0.pt"
    else:
        inputs["global_model"] = f"{exp_dir(wildcards.exp)}/bmuf/{t - 1}.pt"
        inputs["delta"] = f"{exp_dir(wildcards.exp)}/bmuf/{t - 1}.delta.pt"
    return inputs


def get_start_recipe(wildcards):
    """The registry's StartRecipe of the job that writes ``<t>/job<j>.pt``."""
    exp = wildcards.exp
    t, j = int(wildcards.t) - 1, int(wildcards.j)
    n = exp_schedule(exp).num_jobs(t)
    return sync_method(exp).start_recipe(t, j, n, EXPERIMENTS[exp]["trainer"]["srand"])


def get_decentralized_job_inputs(wildcards):
    """Exactly the files the start recipe names (the DAG edges), plus the job's egs."""
    d = exp_dir(wildcards.exp)
    r = get_start_recipe(wildcards)
    inputs = {"egs": get_job_egs(wildcards)}
    if r.synced is not None:
        inputs["initial"] = f"{d}/{r.synced}.pt"
    else:
        inputs["mix_models"] = [f"{d}/{r.mix_iteration + 1}/job{k}.pt" for k in r.mix_jobs]
        inputs["mix_stats"] = [f"{d}/{r.mix_iteration + 1}/job{k}.json" for k in r.mix_jobs]
    if r.own_iteration is not None:
        inputs["own_end"] = f"{d}/{r.own_iteration + 1}/job{wildcards.j}.pt"
        inputs["own_start"] = f"{d}/{r.own_iteration + 1}/job{wildcards.j}.start.pt"
    return inputs


def job_learning_rate(exp, t):
    """Kaldi's per-job rate N·ε times the sync method's factor (BMUF: (1 − bm)/η_b)."""
    sched = exp_schedule(exp)
    scale = sync_method(exp).learning_rate_scale(EXPERIMENTS[exp]["sync"], sched.num_jobs(t))
    return sched.learning_rate(t) * scale


def ema_enabled(exp):
    return bool(EXPERIMENTS[exp]["sync"]["ema"]["enabled"])


def get_ema_inputs(wildcards):
    """e_t from e_{t−1} and the synced model m_t (e_1 = m_1)."""
    t = int(wildcards.t)
    inputs = {"model": synced_model(wildcards.exp, t)}
    if t > 1:
        inputs["prev"] = f"{exp_dir(wildcards.exp)}/ema/{t - 1}.pt"
    return inputs


def final_ema_model(exp):
    return f"{exp_dir(exp)}/ema/{exp_schedule(exp).num_iters}.pt"


def get_eval_ema_inputs(wildcards):
    """As the final model's evaluation, with the last EMA model."""
    return {**get_eval_inputs(wildcards), "model": final_ema_model(wildcards.exp)}


def ema_eval_targets():
    return [
        f"{exp_dir(e)}/eval/ema/{s}.json"
        for e in EXPERIMENTS
        if ema_enabled(e)
        for s in config["eval_sets"]
    ]


# ---------------------------------------------------------------- report (rules/report.smk)
def report_targets():
    """Figures and config of every experiment, and the comparison (`snakemake --report`)."""
    from paravg.plots import FIGURES

    per_exp = [f"{exp_dir(e)}/report/{n}.png" for e in EXPERIMENTS for n in FIGURES]
    per_exp += [f"{exp_dir(e)}/report/config.html" for e in EXPERIMENTS]
    return per_exp + [f"{RESULTS}/report/comparison.png", f"{RESULTS}/report/results.html"]


def report_figure(name, subcategory, label):
    """Output ``report/<name>.png`` of an experiment, flagged for ``snakemake --report``."""
    return report(
        f"{RESULTS}/exp/{{exp}}/report/{name}.png",
        caption=f"../report/{name}.rst",
        category="{exp}",
        subcategory=subcategory,
        labels={"figure": label},
    )


def schedule_params(exp):
    """The fields of ``exp``'s Schedule (plain values: a rule param, a rerun trigger)."""
    import dataclasses

    return dataclasses.asdict(exp_schedule(exp))


def sync_summaries(exp):
    """Per-iteration sync summaries: ``sync/<t>.json`` of the fan-in (average, bmuf), or
    ``consensus/<t>.json`` of the decentralized methods, which have no fan-in."""
    sched = exp_schedule(exp)
    decentralized = EXPERIMENTS[exp]["sync"]["method"] in ("ring", "random-ring", "delay-by-one")
    sub = "consensus" if decentralized else "sync"
    return [f"{exp_dir(exp)}/{sub}/{t}.json" for t in range(1, sched.num_iters + 1)]


def get_report_figure_inputs(wildcards):
    """Every per-iteration JSON of one experiment: jobs, syncs, diagnostics, combination."""
    exp = wildcards.exp
    sched = exp_schedule(exp)
    jobs = [
        f"{exp_dir(exp)}/{t + 1}/job{j}.json"
        for t in range(sched.num_iters)
        for j in range(sched.num_jobs(t))
    ]
    return {
        "jobs": jobs,
        "syncs": sync_summaries(exp),
        "diags": all_diagnostics(exp),
        "combine": f"{exp_dir(exp)}/combine.json",
    }


def get_report_comparison_inputs(wildcards):
    """What the comparison reads of every experiment: diagnostics, syncs, results."""
    files = []
    for exp in EXPERIMENTS:
        files += all_diagnostics(exp) + sync_summaries(exp)
        files += [f"{exp_dir(exp)}/{n}.json" for n in ("combine", "final")]
        files += [f"{exp_dir(exp)}/eval/{s}.json" for s in config["eval_sets"]]
    return files


# ---------------------------------------------------------------- i-vectors
# The i-vector models are trained on data.train_set; jobs are numbered 1..ivector.nj.
IVECTOR_DIR = f"{RESULTS}/ivector"


def ivector_jobs():
    return range(1, config["ivector"]["nj"] + 1)


def ivector_train_data(wildcards=None):
    """Features and speakers of the set the PCA, UBM and extractor are trained on."""
    train = config["data"]["train_set"]
    return {
        "feats": f"{RESULTS}/feats/{train}/feats.scp",
        "spk2utt": f"{RESULTS}/data/{train}/spk2utt",
    }


def final_ubm():
    return f"{IVECTOR_DIR}/ubm.{config['ivector']['ubm_num_iters']}.npz"


def final_extractor():
    return f"{IVECTOR_DIR}/extractor.{config['ivector']['extractor_num_iters']}.npz"


def get_ubm_est_inputs(wildcards):
    """The UBM of iteration it − 1 and its per-job accumulators (the fan-in)."""
    prev = int(wildcards.it) - 1
    return {
        "ubm": f"{IVECTOR_DIR}/ubm.{prev}.npz",
        "accs": [f"{IVECTOR_DIR}/ubm_acc.{prev}.{j}.npz" for j in ivector_jobs()],
    }


def get_extractor_est_inputs(wildcards):
    """The extractor of iteration it − 1 and its per-job accumulators (the fan-in)."""
    prev = int(wildcards.it) - 1
    return {
        "extractor": f"{IVECTOR_DIR}/extractor.{prev}.npz",
        "accs": [f"{IVECTOR_DIR}/extractor_acc.{prev}.{j}.npz" for j in ivector_jobs()],
    }


def get_ivector_set_inputs(wildcards):
    return {
        "feats": f"{RESULTS}/feats/{wildcards.set}/feats.scp",
        "spk2utt": f"{RESULTS}/data/{wildcards.set}/spk2utt",
    }


def ivector_utts_per_spk_max(wildcards):
    """Training data: pseudo-speakers of at most utts_per_spk_max utterances; else 0 (real)."""
    if wildcards.set == config["data"]["train_set"]:
        return config["ivector"]["utts_per_spk_max"]
    return 0


def get_ivector_pieces(wildcards):
    return [f"{IVECTOR_DIR}/{wildcards.set}/ivector_online.{j}.scp" for j in ivector_jobs()]


# ---- recognition (graph, decode, score)
# Helpers of rules/graph.smk and rules/decode.smk (one block, kept apart for merging).
from paravg.graph.settings import check_recognition_config  # noqa: E402

check_recognition_config(config)
GRAPH_DIR = f"{RESULTS}/graph"
GRAPH_SOURCE = config["graph"]["source"]
DECODE = config["decode"]
PER_ENABLED = bool(DECODE["per"]) and GRAPH_SOURCE == "demo"


def graph_outputs(kind):
    """Files of results/graph/<kind>/ the decoder and the export read."""
    d = f"{GRAPH_DIR}/{kind}"
    return [f"{d}/HCLG.fst", f"{d}/words.txt", f"{d}/transition.mdl", f"{d}/graph.json"]


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
    return {k: f"{GRAPH_DIR}/{k}" for k in kinds}


def decode_lmwts():
    return list(range(DECODE["lmwt_min"], DECODE["lmwt_max"] + 1))


def decode_options():
    keys = ("acoustic_scale", "beam", "lattice_beam", "max_active", "min_active")
    return {k: DECODE[k] for k in keys}


def get_decode_inputs(wildcards):
    inputs = get_eval_inputs(wildcards)
    inputs.pop("targets")
    for kind, d in decode_graph_dirs().items():
        inputs[f"graph_{kind}"] = f"{d}/HCLG.fst"
        inputs[f"transitions_{kind}"] = f"{d}/transition.mdl"
    return inputs


def get_score_inputs(wildcards):
    d = f"{exp_dir(wildcards.exp)}/decode/{wildcards.set}"
    inputs = {
        "splits": [f"{d}/split{j}.json" for j in range(DECODE["nj"])],
        "words": f"{GRAPH_DIR}/words/words.txt",
    }
    tune = DECODE["tune_set"]
    if tune and tune != wildcards.set:
        inputs["tuned"] = f"{exp_dir(wildcards.exp)}/decode/{tune}/scores.json"
    return inputs


def get_decode_scores():
    """scores.json of every experiment x eval set (results table), when decoding is on."""
    if not DECODE["enabled"]:
        return []
    return [f"{exp_dir(e)}/decode/{s}/scores.json" for e in EXPERIMENTS for s in config["eval_sets"]]


# ---- export to Kaldi
def get_export_inputs(wildcards):
    """final.pt, the word graph (HCLG.fst, words.txt, transition.mdl, graph.json), and the
    i-vector system when the experiment's model takes i-vectors."""
    inputs = {"model": f"{RESULTS}/exp/{wildcards.exp}/final.pt"}
    inputs.update(zip(("hclg", "words", "transition", "graph_json"), graph_outputs("words")))
    if EXPERIMENTS[wildcards.exp]["ivector_enabled"]:
        inputs.update(pca=f"{IVECTOR_DIR}/pca.npz", ubm=final_ubm(), extractor=final_extractor())
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
    """The decode section's search options, for vosk's conf/model.conf."""
    return {k: DECODE[k] for k in ("beam", "lattice_beam", "max_active", "min_active")}


# ---- end of export to Kaldi
