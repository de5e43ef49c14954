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
    """The demo corpus is produced by a rule; a user's data dir is just read."""
    if uses_demo():
        return [f"{DEMO_DIR}/{wildcards.set}/wav.scp", f"{DEMO_DIR}/done"]
    return []


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


# ---------------------------------------------------------------- targets
def get_final_targets():
    targets = [f"{RESULTS}/results.md"]
    return targets
