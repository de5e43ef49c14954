"""A user's data dirs: every edit is seen, every set is checked before heavy work.

The tiny config's demo corpus (in a clone of the shared upstream workspace) is copied
into two user data dirs (``user/train``, ``user/test``, configured through ``data.sets``),
prepared and featurised once. Each test then edits one file and asks Snakemake
(``--dry-run``) exactly which jobs would run: the preparation of the edited set and the
feature jobs downstream of it, nothing of the other set. The failure tests start from
fresh workspaces and check that a bad eval set stops the run before any feature job
starts.
"""

from __future__ import annotations

import re
import shutil
from collections import Counter
from pathlib import Path

import pytest

from .conftest import check_ok, run_snakemake

pytestmark = pytest.mark.pipeline

FEATS = ["results/feats/train/feats.scp", "results/feats/test/feats.scp"]


def user_overlay(ws: Path, test_dir: str = "user/test") -> dict:
    return {"data": {"sets": {"train": str(ws / "user/train"), "test": str(ws / test_dir)}}}


def make_user_dirs(ws: Path) -> None:
    """Copy the demo sets to user/<set>, their targets.scp pointing into the copy."""
    for name in ("train", "test"):
        dst = ws / "user" / name
        shutil.copytree(ws / "results/demo" / name, dst)
        scp = dst / "targets.scp"
        scp.write_text(scp.read_text().replace(f"results/demo/{name}/", f"user/{name}/"))


@pytest.fixture(scope="module")
def prepared(clone_upstream) -> Path:
    """A workspace with both user sets prepared and featurised (a finished run): a clone
    of the shared upstream one (its demo corpus), the sets then read from the user dirs."""
    ws = clone_upstream("data_edits")
    make_user_dirs(ws)
    check_ok(run_snakemake(ws, "--cores", "2", *FEATS, overlay=user_overlay(ws)), "features")
    return ws


def planned_jobs(ws: Path, *targets: str) -> Counter:
    """``(rule, set)`` -> count of the jobs a dry run of ``targets`` would run."""
    proc = run_snakemake(ws, "--dry-run", *targets, overlay=user_overlay(ws))
    check_ok(proc, "dry run")
    jobs: Counter = Counter()
    rule = None
    for line in proc.stdout.splitlines():
        m = re.match(r"^(?:local)?(?:rule|checkpoint) (\w+):$", line)
        if m:
            rule = m.group(1)
        m = re.match(r"^\s+wildcards: (.*)$", line)
        if m and rule:
            wc = dict(kv.split("=", 1) for kv in m.group(1).split(", "))
            jobs[(rule, wc.get("set"))] += 1
            rule = None
    return jobs


def rerun_of(name: str) -> Counter:
    """What an edit of set ``name``'s source must rerun: its preparation and features."""
    return Counter({("prepare_data", name): 1, ("compute_features", name): 2,
                    ("merge_features", name): 1})  # fmt: skip


def test_finished_run_has_nothing_to_do(prepared):
    assert planned_jobs(prepared, *FEATS) == Counter()


def _edit_line(path: Path, edit) -> None:
    """Apply ``edit`` to the first line (Snakemake ignores a new mtime without a change
    of content, so every edit here changes the bytes, keeping the dir valid)."""
    lines = path.read_text().splitlines()
    lines[0] = edit(lines[0])
    path.write_text("\n".join(lines) + "\n")


def _edit_ark(path: Path) -> None:
    """Change one target id of the first utterance (same length: offsets unchanged)."""
    import kaldiio

    vecs = dict(kaldiio.load_ark(str(path)))
    first = next(iter(vecs))
    vecs[first] = vecs[first].copy()
    vecs[first][0] = (vecs[first][0] + 1) % 40
    with open(path, "wb") as f:
        kaldiio.save_ark(f, vecs)


def _utts(d: Path) -> list[str]:
    return [line.split()[0] for line in (d / "utt2spk").read_text().splitlines()]


def _edit_text(d: Path) -> None:
    _edit_line(d / "text", lambda line: line.split()[0] + " CHANGED WORDS")


# (set, what the edit does, how): every file prepare_data reads, existing ones edited,
# optional ones added, and an optional one removed.
EDITS = {
    "wav.scp": ("train", lambda d: _edit_line(d / "wav.scp", lambda x: x.replace(" ", " ./"))),
    "utt2spk": ("train", lambda d: _edit_line(d / "utt2spk", lambda x: x + " ")),
    "spk2utt": ("train", lambda d: _edit_line(d / "spk2utt", lambda x: x + " ")),
    "text": ("train", _edit_text),
    "targets.scp": (
        "train",
        lambda d: _edit_line(d / "targets.scp", lambda x: x.replace(" ", " ./")),
    ),
    "targets.ark": ("train", lambda d: _edit_ark(d / "targets.ark")),
    "new segments": (
        "train",
        lambda d: (d / "segments").write_text("".join(f"{u} {u} 0 -1\n" for u in _utts(d))),
    ),
    "new utt2uniq": (
        "train",
        lambda d: (d / "utt2uniq").write_text("".join(f"{u} {u}\n" for u in _utts(d))),
    ),
    "new reco2file_and_channel": (
        "train",
        lambda d: (d / "reco2file_and_channel").write_text(
            "".join(f"{u} {u} A\n" for u in _utts(d))
        ),
    ),
    "removed text": ("train", lambda d: (d / "text").unlink()),
    "test set text": ("test", _edit_text),
}


@pytest.mark.parametrize("edit", list(EDITS))
def test_every_edit_of_a_data_dir_reruns_exactly_its_preparation(prepared, edit):
    """Bug 1: only wav.scp and utt2spk were inputs; an edit of targets, text, segments,
    spk2utt or utt2uniq gave "Nothing to be done" or repeated a fixed error."""
    name, change = EDITS[edit]
    d = prepared / "user" / name
    backup = prepared / "backup" / name
    shutil.copytree(d, backup, copy_function=shutil.copy2)
    try:
        change(d)
        assert planned_jobs(prepared, *FEATS) == rerun_of(name), edit
    finally:
        shutil.rmtree(d)
        shutil.move(backup, d)
    assert planned_jobs(prepared, *FEATS) == Counter()


def test_adding_an_eval_set_reruns_only_that_sets_work(prepared):
    """Issue 23: every feature job waited for every set's preparation report (an input), so
    a new eval set changed the training set's feature jobs' inputs and reran the whole
    pipeline. Now they wait for one gate file (rules/data.smk check_data_sets)."""
    shutil.copytree(prepared / "user" / "test", prepared / "user" / "dev")
    try:
        overlay = user_overlay(prepared)
        overlay["data"]["sets"]["dev"] = str(prepared / "user" / "dev")
        overlay["eval_sets"] = ["test", "dev"]
        dev_feats = "results/feats/dev/feats.scp"
        proc = run_snakemake(prepared, "--dry-run", *FEATS, dev_feats, overlay=overlay)
        check_ok(proc, "dry run with a new eval set")
        rules = re.findall(r"^(?:local)?(?:rule|checkpoint) (\w+):$", proc.stdout, re.M)
        wildcards = re.findall(r"^\s+wildcards: (.*)$", proc.stdout, re.M)
        assert sorted(rules) == sorted(
            ["prepare_data", "check_data_sets", "compute_features", "compute_features",
             "merge_features"]
        ), proc.stdout[-3000:]  # fmt: skip
        assert all("set=dev" in w for w in wildcards), wildcards
    finally:
        shutil.rmtree(prepared / "user" / "dev")
    assert planned_jobs(prepared, *FEATS) == Counter()


def test_utt2uniq_is_an_input_of_the_egs_plan(prepared):
    proc = run_snakemake(
        prepared, "--dry-run", "results/egs/info.json", overlay=user_overlay(prepared)
    )
    check_ok(proc, "dry run")
    block = proc.stdout[proc.stdout.index("checkpoint egs:") :].split("\n\n")[0]
    assert "results/data/train/utt2uniq" in block.split("output:")[0]


# ------------------------------------------------------------------ every set first
def fresh_user_workspace(prepared: Path, tmp_path: Path) -> Path:
    """A workspace with the user dirs (audio in the finished workspace) and no results."""
    ws = tmp_path / "ws"
    for name in ("train", "test"):
        shutil.copytree(prepared / "user" / name, ws / "user" / name)
        for f in ("wav.scp", "targets.scp"):
            p = ws / "user" / name / f
            text = p.read_text().replace(f"user/{name}/", f"{ws}/user/{name}/")
            p.write_text(re.sub(r" results/demo/", f" {prepared}/results/demo/", text))
    return ws


def feature_jobs_started(ws: Path) -> list[str]:
    return [
        p.name
        for rule in ("compute_features", "ivector_pca", "egs", "demo_corpus")
        for p in (ws / "logs" / rule).glob("*")
    ]


def test_missing_wav_in_the_test_set_fails_before_any_feature_job(prepared, tmp_path):
    """Bug 2: the eval set was checked only after 28 jobs (features, UBM, extractor)."""
    ws = fresh_user_workspace(prepared, tmp_path)
    wav = ws / "user/test/wav.scp"
    lines = wav.read_text().splitlines()
    key = lines[2].split()[0]
    lines[2] = f"{key} {ws}/missing.wav"
    wav.write_text("\n".join(lines) + "\n")
    proc = run_snakemake(ws, "--cores", "2", "egs_all", overlay=user_overlay(ws))
    assert proc.returncode != 0
    log = (ws / "logs/prepare_data/test.log").read_text()
    assert f"{wav}:3: recording '{key}': audio file" in log and "does not exist" in log
    assert feature_jobs_started(ws) == []
    assert not (ws / "results/data/test").exists() or not any((ws / "results/data/test").iterdir())


def test_missing_test_dir_fails_before_any_job(prepared, tmp_path):
    ws = fresh_user_workspace(prepared, tmp_path)
    overlay = user_overlay(ws, test_dir="user/no_such_set")
    proc = run_snakemake(ws, "--cores", "2", "egs_all", overlay=overlay)
    assert proc.returncode == 1
    # one line at start-up (W5: it came in Snakemake's InputFunctionException frame)
    last = proc.stdout.rstrip().splitlines()[-1]
    assert last == (
        f"DataError: data.sets.test = {ws}/user/no_such_set: the data directory does not exist"
    ), proc.stdout[-3000:]
    assert "InputFunctionException" not in proc.stdout and "Traceback" not in proc.stdout
    assert not (ws / "logs").exists() and not (ws / "results").exists()
