"""A set added to a finished demo run costs that set's own work (issue 34, item 5).

The demo's sets stay implicit while ``data.sets`` does not name the training set: a
config that names only an extra set adds it beside the demo corpus's (paravg.config
uses_demo). Before, the demo's sets existed only while ``data.sets`` was empty, so adding
a set meant listing the demo's as directories, and Snakemake reran every set's
preparation ("set of input files has changed"), training included.
"""

from __future__ import annotations

import copy
import re
import shutil
from collections import Counter
from pathlib import Path

import pytest

from .conftest import TRAINED_OVERLAY, check_ok, run_snakemake

pytestmark = pytest.mark.pipeline


def added_set(ws: Path, name: str = "t2") -> dict:
    """A copy of the demo's test set as a user data dir ``ws/user/<name>``, and the
    overlay (the trained workspace's) that adds it to data.sets and eval_sets."""
    d = ws / "user" / name
    shutil.copytree(ws / "results/demo/test", d)
    scp = d / "targets.scp"
    scp.write_text(scp.read_text().replace("results/demo/test/", f"user/{name}/"))
    overlay = copy.deepcopy(TRAINED_OVERLAY)
    overlay["data"] = {"sets": {name: str(d)}}
    overlay["eval_sets"] = ["test", name]
    return overlay


def planned(proc) -> Counter:
    """(rule, set wildcard or None) -> jobs of a dry run's plan."""
    jobs: Counter = Counter()
    rule = None
    for line in proc.stdout.splitlines():
        if m := re.match(r"^(?:local)?(?:rule|checkpoint) (\w+):$", line):
            if rule is not None:
                jobs[(rule, None)] += 1
            rule = m.group(1)
        elif (m := re.match(r"^\s+wildcards: (.*)$", line)) and rule:
            wc = dict(kv.split("=", 1) for kv in m.group(1).split(", "))
            jobs[(rule, wc.get("set"))] += 1
            rule = None
        elif line.startswith("Job stats") and rule is not None:
            jobs[(rule, None)] += 1
            rule = None
    return jobs


def test_adding_an_eval_set_to_a_finished_demo_run_plans_only_that_sets_jobs(clone_trained):
    ws = clone_trained("demo_plus_set")
    check_ok(run_snakemake(ws, "--dry-run", overlay=TRAINED_OVERLAY), "dry run as built")
    overlay = added_set(ws)
    proc = run_snakemake(ws, "--dry-run", overlay=overlay)
    check_ok(proc, "dry run with an added eval set")
    jobs = planned(proc)
    assert "data.train_set train is not in data.sets: training on the demo corpus" in proc.stdout
    t2 = {"prepare_data": 1, "compute_features": 2, "merge_features": 1, "extract_ivectors": 2,
          "merge_ivectors": 1, "evaluate": 2, "decode_split": 4, "score": 2}  # fmt: skip
    # results_config: the list of eval sets changed (the table's input, so it is redone)
    setless = ("check_data_sets", "results_config", "results_table", "digests")
    setless += ("report_comparison", "all")
    expected = Counter({(rule, "t2"): n for rule, n in t2.items()})
    expected.update({(rule, None): 1 for rule in setless})
    assert jobs == expected, proc.stdout[-4000:]
