"""The suite's two tiers and the order its files run in.

* Every test under ``tests/pipeline/`` runs the real Snakefile (or the local SLURM
  cluster) and carries the ``pipeline`` marker, whether or not its module says so: the fast
  tier ``pytest -m "not pipeline"`` never starts one.
* ``tools/test.sh`` runs the suite on two xdist workers (``--dist loadfile``: a file's tests
  run on one worker, in order, sharing its module fixtures). Workers take files in
  collection order, so the pipeline files come first, the longest first, and the unit
  files fill the gaps; the SLURM file, which mostly waits on the cluster, starts early so
  that its waits overlap the other worker's CPU work.
"""

from __future__ import annotations

from pathlib import Path

import pytest

PIPELINE_DIR = Path(__file__).parent / "pipeline"
# Longest (or longest to wait for) first; files not listed follow, in collection order.
PIPELINE_ORDER = (
    "test_reproducible.py",  # a second build from nothing, 1 core: needs no shared workspace
    "test_vosk.py",
    "test_slurm.py",
    "test_sync_pipeline.py",
    "test_failures.py",
    "test_config_mixing.py",
    "test_data_edits.py",
    "test_pipeline.py",
    "test_report.py",
    "test_disk_full.py",
)


def _rank(item: pytest.Item) -> int:
    path = Path(str(item.path))
    if path.parent != PIPELINE_DIR:
        return len(PIPELINE_ORDER) + 1
    if path.name in PIPELINE_ORDER:
        return PIPELINE_ORDER.index(path.name)
    return len(PIPELINE_ORDER)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if Path(str(item.path)).is_relative_to(PIPELINE_DIR):
            item.add_marker(pytest.mark.pipeline)
    items.sort(key=_rank)  # stable: a file's tests keep their order
