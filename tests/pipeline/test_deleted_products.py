"""A product of a finished run that is deleted comes back with the next run of the same
command (the probe's W2): final.pt, the word graph, a decode's lattices or its whole
directory, an evaluation. Before, Snakemake said "Nothing to be done" and exited 0 with
the file missing: it rebuilds a missing file only where a requested target needs it, and
these were only inputs of the results table, which was up to date. ``all`` now requests
them itself (paravg.dag.results.ResultsDag.product_targets). An iteration model is not a product: a
finished run whose 8.pt is deleted has nothing to do (docs/reproducibility.md)."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from .conftest import FINAL, TRAINED_OVERLAY, check_ok, run_snakemake

pytestmark = pytest.mark.pipeline

EXP = "results/exp/default"
# what is deleted -> the rule that must rebuild it
PRODUCTS = {
    FINAL: "priors",
    "results/graph/words/HCLG.fst": "graph_demo_words",
    f"{EXP}/decode/test": "decode_split",
    f"{EXP}/decode/test/lat.0.gz": "decode_split",
    f"{EXP}/eval/test.json": "evaluate",
}


@pytest.fixture(scope="module")
def finished(clone_trained) -> Path:
    return clone_trained("deleted_products")


def planned_rules(ws: Path) -> set[str]:
    proc = run_snakemake(ws, "--dry-run", overlay=TRAINED_OVERLAY)
    check_ok(proc, "dry run")
    if "Nothing to be done" in proc.stdout:
        return set()
    return set(re.findall(r"^(?:local)?(?:rule|checkpoint) (\w+):$", proc.stdout, re.M))


def test_a_finished_run_has_nothing_to_do(finished):
    assert planned_rules(finished) == set()


@pytest.mark.parametrize("product", PRODUCTS)
def test_a_deleted_product_is_planned_for_rebuilding(finished, tmp_path, product):
    path = finished / product
    kept = tmp_path / "kept"
    shutil.move(path, kept)
    try:
        planned = planned_rules(finished)
    finally:
        shutil.move(kept, path)
    assert PRODUCTS[product] in planned, planned


def test_a_deleted_iteration_model_is_not_rebuilt(finished, tmp_path):
    path = finished / EXP / "8.pt"
    shutil.move(path, tmp_path / "8.pt")
    try:
        assert planned_rules(finished) == set()
    finally:
        shutil.move(tmp_path / "8.pt", path)
