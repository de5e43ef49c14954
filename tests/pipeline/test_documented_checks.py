"""Every check the docs promise fires in a real run (issue 34): one ``snakemake`` call per
row of docs/own-data.md's "Errors you may meet" table and per start-up check of
docs/decoding.md and docs/export-and-vosk.md, on a config or a data dir that breaks it.
Each asserts the exit status, the one line that names the user's file or key, and that
nothing was written.

A check that only a unit test calls guards nothing in a run: the graph/decode checks were
called by nothing for a release (d9df26e) while their unit tests passed.

Rows tested elsewhere, through Snakemake as here: a missing ``data.sets`` dir and a missing
wav (tests/pipeline/test_data_edits.py), ``num_jobs_final`` above the number of archives
(test_failures.py), a damaged export (test_pipeline.py), results that would mix two
configs (test_config_mixing.py).

One workspace for the module: a clone of the shared upstream one, with the demo corpus's
sets copied as the user's data dirs (their tables; the audio and the targets ark stay where
the demo wrote them) and the training set prepared once. Each data case copies the test
set's tables to a dir of its own, breaks one thing and runs rule ``check_data_sets``'s
target (the gate every feature job waits for): only the broken set's preparation runs.
"""

from __future__ import annotations

import shutil
import subprocess
import wave
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from paravg.kaldi_io import iter_int_vectors

from .conftest import check_ok, run_snakemake

pytestmark = pytest.mark.pipeline

GATE = "results/data/sets_checked.json"
TABLES = ("wav.scp", "utt2spk", "spk2utt", "text", "targets.scp")


def copy_tables(src: Path, dst: Path) -> Path:
    """The Kaldi tables of a demo set (paths in them stay relative to the workspace)."""
    dst.mkdir(parents=True)
    for name in TABLES:
        shutil.copy2(src / name, dst / name)
    return dst


def user_sets(ws: Path, test: str = "test") -> dict:
    sets = {"train": str(ws / "user" / "train"), "test": str(ws / "user" / test)}
    return {"data": {"sets": sets}}


def written(ws: Path) -> dict[str, int]:
    """Every file under results/ and its mtime: what a failed run must leave as it was."""
    return {str(p.relative_to(ws)): p.stat().st_mtime_ns for p in (ws / "results").rglob("*")
            if p.is_file()}  # fmt: skip


def one_line(output: str, *parts: str) -> str:
    """The line of ``output`` holding every one of ``parts`` (the message is one line)."""
    lines = [line for line in output.splitlines() if all(p in line for p in parts)]
    assert lines, f"no line with {parts}:\n{output[-3000:]}"
    return lines[0]


@pytest.fixture(scope="module")
def ws(clone_upstream) -> Path:
    ws = clone_upstream("documented_checks")
    for name in ("train", "test"):
        copy_tables(ws / "results/demo" / name, ws / "user" / name)
    proc = run_snakemake(ws, "--cores", "1", "results/data/train/report.json",
                         overlay=user_sets(ws))  # fmt: skip
    check_ok(proc, "preparing the user's training set")
    shutil.rmtree(ws / "results/data/test")
    (ws / GATE).unlink()
    return ws


# ------------------------------------------------------------------ data dirs (prepare_data)
def _lines(path: Path) -> list[str]:
    return path.read_text().splitlines()


def _write_lines(path: Path, lines: list[str]) -> None:
    path.write_text("\n".join(lines) + "\n")


def _replace_wav(d: Path, make: Callable[[Path, Path], None]) -> str:
    """Line 3 of wav.scp points at a new wav made by ``make(original, new)``."""
    lines = _lines(d / "wav.scp")
    key, original = lines[2].split(maxsplit=1)
    new = d / "bad.wav"
    make(d.parents[1] / original, new)
    lines[2] = f"{key} {new}"
    _write_lines(d / "wav.scp", lines)
    return "/wav.scp:3"


def _truncated(original: Path, new: Path) -> None:
    data = original.read_bytes()
    new.write_bytes(data[: len(data) // 2])


def _wav(rate: int, channels: int) -> Callable[[Path, Path], None]:
    def make(original: Path, new: Path) -> None:
        with wave.open(str(new), "wb") as w:
            w.setnchannels(channels)
            w.setsampwidth(2)
            w.setframerate(rate)
            w.writeframes(np.zeros(rate * channels, dtype=np.int16).tobytes())

    return make


def _segments(start: float, end: float) -> Callable[[Path], str]:
    """A segments file, each utterance its whole recording except line 2's."""

    def make(d: Path) -> str:
        keys = [line.split()[0] for line in _lines(d / "utt2spk")]
        rows = [f"{k} {k} 0 -1" for k in keys]
        rows[1] = f"{keys[1]} {keys[1]} {start} {end}"
        _write_lines(d / "segments", rows)
        return "/segments:2"

    return make


def _drop_text_lines(d: Path) -> str:
    _write_lines(d / "text", _lines(d / "text")[3:])
    return "/text"


def _unknown_text_utterance(d: Path) -> str:
    _write_lines(d / "text", [*_lines(d / "text"), "zzz-not-an-utterance HELLO"])
    return "/text"


def _no_targets(d: Path) -> str:
    (d / "targets.scp").unlink()
    return ":"


def _targets_txt(d: Path, edit: Callable[[dict[str, np.ndarray]], None]) -> None:
    """The set's targets as ``targets.txt`` (text form), after ``edit``."""
    ws = d.parents[1]
    scp = (d / "targets.scp").read_text().replace(" results/", f" {ws}/results/")
    (d / "targets.scp").write_text(scp)
    vecs = {k: v.copy() for k, v, _ in iter_int_vectors(d / "targets.scp")}
    (d / "targets.scp").unlink()
    edit(vecs)
    _write_lines(d / "targets.txt", [f"{k} {' '.join(map(str, v))}" for k, v in vecs.items()])


def _negative_target(d: Path) -> str:
    def edit(vecs):
        vecs[sorted(vecs)[3]][5] = -1

    _targets_txt(d, edit)
    return "/targets.txt:4"


def _byte_order_mark(name: str) -> Callable[[Path], str]:
    def add(d: Path) -> str:
        (d / name).write_bytes(b"\xef\xbb\xbf" + (d / name).read_bytes())
        return f"/{name}:1"

    return add


# case -> (break the copied test dir, returning what the message puts after the dir; its words)
DATA_CASES: dict[str, tuple[Callable[[Path], str], str]] = {
    "truncated wav": (lambda d: _replace_wav(d, _truncated), "is truncated: header declares"),
    "8 kHz": (lambda d: _replace_wav(d, _wav(8000, 1)),
              "sample rate 8000 Hz, expected 16000 Hz (data.sample_rate)"),
    "stereo": (lambda d: _replace_wav(d, _wav(16000, 2)), "2 channels, expected mono"),
    "segment start > end": (_segments(2.0, 1.0), "invalid segment 2.0 .. 1.0"),
    "segment past the end": (_segments(0.0, 60.0), "past the end of recording"),
    "text misses utterances": (_drop_text_lines, "3 of 20 utterances of"),
    "text of unknown utterances": (_unknown_text_utterance, "utterances not in"),
    "no targets file": (_no_targets, "no targets file; expected one of targets.scp"),
    "target id out of range": (_negative_target, "target id -1 at frame 5 is outside [0, 2^31)"),
    "BOM in text": (_byte_order_mark("text"), "starts with a UTF-8 byte-order mark"),
    "BOM in wav.scp": (_byte_order_mark("wav.scp"), "starts with a UTF-8 byte-order mark"),
}  # fmt: skip


@pytest.mark.parametrize("case", list(DATA_CASES))
def test_a_bad_data_dir_stops_at_its_preparation_naming_the_file(ws, case):
    breaks, words = DATA_CASES[case]
    name = case.replace(" ", "_")
    d = copy_tables(ws / "user" / "test", ws / "user" / name)
    place = breaks(d)
    before = written(ws)
    proc = run_snakemake(ws, "--cores", "1", GATE, overlay=user_sets(ws, name))
    assert proc.returncode == 1, proc.stdout[-3000:]
    line = one_line(proc.stdout, "DataError: ", f"{d}{place}", words)
    assert "results/data" not in line.split("DataError: ")[1]  # the user's file, not the copy
    assert "Traceback" not in proc.stdout
    assert written(ws) == before  # no gate, no prepared file of the set


def test_targets_longer_than_the_features_stop_before_the_set_has_features(ws):
    d = copy_tables(ws / "user" / "test", ws / "user" / "long_targets")

    def longer(vecs):
        k = sorted(vecs)[2]
        vecs[k] = np.concatenate([vecs[k], np.zeros(10, dtype=vecs[k].dtype)])

    _targets_txt(d, longer)
    key = sorted(line.split()[0] for line in _lines(d / "utt2spk"))[2]
    proc = run_snakemake(ws, "--cores", "1", "results/feats/test/feats.scp",
                         overlay=user_sets(ws, "long_targets"))  # fmt: skip
    assert proc.returncode == 1, proc.stdout[-3000:]
    one_line(proc.stdout, "DataError: ", f"{d}/targets.txt:3: utterance {key!r}:",
             "targets but", "feature frames")  # fmt: skip
    assert "Traceback" not in proc.stdout
    feats = ws / "results/feats/test"
    assert not (feats / "feats.scp").exists() and not (feats / "utt2num_frames").exists()
    shutil.rmtree(ws / "results/data/test")  # as the module's other cases expect it
    (ws / GATE).unlink()
    shutil.rmtree(feats)


# ------------------------------------------------------------------ the config (start-up)
def _no_text_set(ws: Path) -> dict:
    d = copy_tables(ws / "user" / "test", ws / "user" / "no_text")
    (d / "text").unlink()
    return {**user_sets(ws, "no_text"), "decode": {"tune_set": "test"}}


# case -> (overlay of the tiny config, or a function of the workspace making it; the line)
CONFIG_CASES: dict[str, tuple[dict | Callable[[Path], dict], str]] = {
    "tune_set not an eval set": (
        {"decode": {"tune_set": "dev"}},
        "ConfigError: decode.tune_set 'dev' is not in eval_sets ['test']",
    ),
    "tune_set without text": (
        _no_text_set,
        "ConfigError: decode.tune_set 'test': {ws}/user/no_text/text does not exist",
    ),
    "decode min_active > max_active": (
        {"decode": {"min_active": 300, "max_active": 10}},
        "ConfigError: decode.min_active (300) must not exceed decode.max_active (10)",
    ),
    "export min_active > max_active": (
        {"export": {"min_active": 300, "max_active": 10}},
        "ConfigError: export.min_active (300) must not exceed export.max_active (10)",
    ),
    "lmwt_min > lmwt_max": (
        {"decode": {"lmwt_min": 12, "lmwt_max": 8}},
        "ConfigError: decode.lmwt_min (12) must not exceed decode.lmwt_max (8)",
    ),
    "per_lmwt_min > per_lmwt_max": (
        {"decode": {"per_lmwt_min": 9, "per_lmwt_max": 3}},
        "ConfigError: decode.per_lmwt_min (9) must not exceed decode.per_lmwt_max (3)",
    ),
    "hclg without hclg_dir": (
        {"graph": {"source": "hclg", "final_mdl": "final.mdl"}},
        "ConfigError: graph.source hclg needs graph.hclg_dir",
    ),
    "lang without lm": (
        {"graph": {"source": "lang", "lang_dir": "lang", "final_mdl": "final.mdl"}},
        "ConfigError: graph.source lang needs graph.lm",
    ),
    "eval set the demo lacks": (
        {"eval_sets": ["test", "dev"]},
        "ConfigError: eval_sets names ['dev'], but the demo corpus has the sets ['train', 'test']",
    ),
}


@pytest.mark.parametrize("case", list(CONFIG_CASES))
def test_a_bad_config_stops_at_start_up_with_one_line(ws, case):
    overlay, expected = CONFIG_CASES[case]
    overlay = overlay(ws) if callable(overlay) else overlay
    before = written(ws)
    proc = run_snakemake(ws, "-n", "--cores", "1", GATE, overlay=overlay)
    assert proc.returncode == 1, proc.stdout[-3000:]
    # the message alone, last: no Snakemake frame ("... in file ..., line ...", stack lines)
    last = proc.stdout.rstrip().splitlines()[-1]
    assert last.startswith(expected.format(ws=ws)), proc.stdout[-3000:]
    assert "Traceback" not in proc.stdout and " in file " not in proc.stdout
    assert written(ws) == before


# ------------------------------------------------------------------ a user graph (graph_hclg)
def test_a_truncated_user_hclg_stops_its_import_naming_the_file(ws):
    """decoding.md: a user's graph is checked before decoding, the file named."""
    proc = run_snakemake(ws, "--cores", "1", "results/graph/words/HCLG.fst")
    check_ok(proc, "the demo word graph")
    graph = ws / "user" / "graph"
    shutil.move(ws / "results/graph/words", graph)
    shutil.rmtree(ws / "results/graph")
    hclg = graph / "HCLG.fst"
    hclg.write_bytes(hclg.read_bytes()[:3000])
    mdl = graph / "transition.mdl"
    overlay = {
        **user_sets(ws),
        "graph": {"source": "hclg", "hclg_dir": str(graph), "final_mdl": str(mdl)},
    }
    before = written(ws)
    proc = run_snakemake(ws, "--cores", "1", "results/graph/words/HCLG.fst", overlay=overlay)
    assert proc.returncode == 1, proc.stdout[-3000:]
    one_line(proc.stdout, f"{hclg}: cannot be read as an OpenFst VectorFst")
    assert "Traceback" not in proc.stdout
    assert written(ws) == before


# ------------------------------------------------------------------ the run's own files
def test_an_initial_model_of_another_config_is_named_with_its_rebuild(clone_upstream):
    """0.pt and init.json made by another config (here srand 7; or copied from another
    run): the start-up check names the initial model and the command that rebuilds it (it
    cited "iteration -1" and an absent job0.json, W6), and the command works."""
    ws = clone_upstream("init_of_another_config")
    final = "results/exp/default/final.pt"
    proc = run_snakemake(ws, "--cores", "1", "results/exp/default/0.pt",
                         overlay={"trainer": {"srand": 7}})  # fmt: skip
    check_ok(proc, "the initial model of srand 7")
    before = written(ws)
    proc = run_snakemake(ws, "-n", "--cores", "1", final)
    assert proc.returncode == 1, proc.stdout[-3000:]
    assert "ConfigError: experiment 'default': the initial model results/exp/default/0.pt " \
        "was made by another config" in proc.stdout, proc.stdout[-3000:]  # fmt: skip
    rebuild = "rm results/exp/default/0.pt results/exp/default/init.json"
    assert rebuild in proc.stdout
    assert "iteration -1" not in proc.stdout and "job0.json" not in proc.stdout
    assert "Traceback" not in proc.stdout and " in file " not in proc.stdout
    assert written(ws) == before
    subprocess.run(rebuild.split(), cwd=ws, check=True)
    proc = run_snakemake(ws, "-n", "--cores", "1", final)
    check_ok(proc, "the dry run after the rebuild the message gives")
    assert "init_model" in proc.stdout


def test_a_finished_run_with_a_tune_set_outside_eval_sets_stops_at_start_up(clone_trained):
    """R1 on a finished run: the results table's "would mix two configs ... run the same
    command again" came instead, and the same command failed the same way forever."""
    ws = clone_trained("finished_tune_set")
    before = written(ws)
    proc = run_snakemake(ws, "--cores", "1", overlay={"decode": {"tune_set": "dev"}})
    assert proc.returncode == 1, proc.stdout[-3000:]
    last = proc.stdout.rstrip().splitlines()[-1]
    assert last.startswith("ConfigError: decode.tune_set 'dev' is not in eval_sets ['test']")
    assert "would mix two configs" not in proc.stdout
    assert written(ws) == before
