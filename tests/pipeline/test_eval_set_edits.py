"""Editing ``eval_sets`` of a finished run redoes the results table in the same run (the
probe's R2): a set removed from the list left ``results/results.md`` as it was (only the
data gate check_data_sets reran), and the run printed that old table, the removed set and
the old decode options' WERs included, with exit 0.

Why: removing a set changes check_data_sets' input list, so it must run; Snakemake then
checks neither the params nor the input list of any job downstream of it, and reaches
them only through edges that are not ancient (the gate's are). The table now takes
``results/results_config.json`` (rule results_config: no input, its params the
experiments, eval sets and decode options) as an input, a plain edge.

The workspace: a clone of the shared trained one with its sets listed in ``data.sets``
and a second eval set ``t2`` (the first 4 test utterances, a copy as a user's data dir),
run to the end once (every stage reruns there: the demo's sets listed explicitly are new
inputs of their preparation).
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from .conftest import check_ok, copy_workspace, run_snakemake

pytestmark = pytest.mark.pipeline

T2_UTTS = 4


def overlay(eval_sets: list[str], **decode) -> dict:
    sets = {"train": "results/demo/train", "test": "results/demo/test", "t2": "user/t2"}
    # own data decodes on a graph of its own: the tiny demo's word graph, copied (user/graph)
    graph = {"source": "hclg", "hclg_dir": "user/graph", "final_mdl": "user/graph/final.mdl"}
    return {"data": {"sets": sets}, "graph": graph, "eval_sets": eval_sets, "decode": decode}


@pytest.fixture(scope="module")
def two_sets(clone_trained) -> Path:
    ws = clone_trained("eval_set_edits")
    t2 = ws / "user" / "t2"
    t2.mkdir(parents=True)
    for name in ("wav.scp", "utt2spk", "spk2utt", "text", "targets.scp"):
        lines = (ws / "results/demo/test" / name).read_text().splitlines(keepends=True)
        (t2 / name).write_text("".join(lines[:T2_UTTS]))
    graph = ws / "user" / "graph"
    graph.mkdir()
    for name in ("HCLG.fst", "words.txt"):
        shutil.copy2(ws / "results/graph/words" / name, graph / name)
    shutil.copy2(ws / "results/graph/words/transition.mdl", graph / "final.mdl")
    proc = run_snakemake(ws, "--cores", "2", overlay=overlay(["test", "t2"]))
    check_ok(proc, "the run with eval sets test and t2")
    assert table_sets(ws) == ["test", "t2"]
    assert "WER" in (ws / "results" / "results.md").read_text()  # the sets are decoded
    assert "| data/t2 |" in (ws / "results" / "digests.md").read_text()
    return ws


def table_sets(ws: Path) -> list[str]:
    """The eval sets of results/results.md's rows."""
    rows = (ws / "results" / "results.md").read_text().splitlines()[2:]
    return [row.split("|")[2].strip() for row in rows]


def printed_table(stdout: str) -> str:
    """What the run printed as the results table (the Snakefile's onsuccess)."""
    return stdout.split("results/results.md:\n", 1)[1] if "results/results.md:\n" in stdout else ""


def planned_rules(ws: Path, edit: dict) -> set[str]:
    proc = run_snakemake(ws, "--dry-run", overlay=edit)
    check_ok(proc, "dry run")
    return set(re.findall(r"^(?:local)?(?:rule|checkpoint) (\w+):$", proc.stdout, re.M))


def test_removing_a_set_redoes_the_table_and_nothing_of_the_other_sets(two_sets, tmp_path):
    ws = copy_workspace(two_sets, tmp_path / "ws")
    edit = overlay(["test"])
    # that set's own work only (docs/own-data.md): the gate, and what lists the sets
    assert planned_rules(ws, edit) == {
        "check_data_sets", "results_config", "results_table", "report_comparison", "digests",
        "all",
    }  # fmt: skip
    proc = run_snakemake(ws, "--cores", "2", overlay=edit)
    check_ok(proc, "the run without t2")
    assert table_sets(ws) == ["test"]
    assert "| t2 |" not in printed_table(proc.stdout)
    assert "| test |" in printed_table(proc.stdout)
    assert "t2" not in (ws / "results" / "results.tsv").read_text()
    assert "t2" not in (ws / "results" / "report" / "results_by_set.md").read_text()
    digests = (ws / "results" / "digests.md").read_text()
    assert "default: scores" in digests and "t2" not in digests  # data/t2, i-vectors/t2 ...


def test_removing_a_set_and_changing_a_decode_option_never_shows_the_old_wers(two_sets, tmp_path):
    """The decode jobs are downstream of the gate too: they do not rerun in the run that
    reruns the gate, and the table, which now does, refuses scores of another beam. The
    same command again decodes at the new beam."""
    ws = copy_workspace(two_sets, tmp_path / "ws")
    edit = overlay(["test"], beam=13.0)
    first = run_snakemake(ws, "--cores", "2", overlay=edit)
    assert first.returncode != 0, first.stdout[-3000:]
    assert "the results would mix two configs" in first.stdout
    assert "run the same command again" in first.stdout
    assert printed_table(first.stdout) == ""
    assert not (ws / "results" / "results.md").exists()  # the old table is gone
    second = run_snakemake(ws, "--cores", "2", overlay=edit)
    check_ok(second, "the same command again")
    assert table_sets(ws) == ["test"]
    scores = (ws / "results/exp/default/decode/test/scores.json").read_text()
    assert re.search(r'"beam": 13\.0', scores), scores[:2000]
