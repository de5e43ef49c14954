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
# Longest (or longest to wait for) first; files not listed (each under ~15 s) follow, in
# collection order. The seconds: each file's setups and calls on the shared 2-core machine
# at load 2-5 with the local SLURM cluster up, as in tools/test.sh (2026-12-06,
# docs/testing.md), the shared workspaces already built, so the first two files' figures
# leave out the builds they start (upstream 26 s, trained 83 s).
PIPELINE_ORDER = (
    "test_reproducible.py",  # 244 s: a second build from nothing, 1 core: no shared workspace
    "test_vosk.py",  # 63 s, and the first to build the shared upstream and trained ones
    "test_slurm.py",  # 464 s, mostly waiting on the cluster: overlaps the other worker's CPU
    "test_failures.py",  # 179 s
    "test_chain.py",  # 178 s with the chain egs (chain_upstream, 9 s) it builds
    "test_sync_pipeline.py",  # 162 s
    "test_documented_checks.py",  # 128 s
    "test_gmm_targets.py",  # 92 s (at load 1)
    "test_eval_set_edits.py",  # 82 s
    "test_cpu_paths.py",  # 67 s
    "test_data_edits.py",  # 64 s
    "test_tdnnf.py",  # 59 s
    "test_chain_gmm.py",  # 59 s
    "test_config_mixing.py",  # 53 s
    "test_lstm.py",  # 51 s
    "test_chain_biphone.py",  # 44 s, well after test_chain (chain_upstream is built once)
    "test_warm_executor.py",  # 37 s
    "test_decode_memory.py",  # 29 s
    "test_determinized_lattices.py",  # 29 s
    "test_resources.py",  # 28 s
    "test_frame_rate.py",  # 26 s
    "test_pipeline.py",  # 26 s
    "test_lhotse.py",  # 23 s
    "test_perturb.py",  # 20 s
    "test_deleted_products.py",  # 19 s
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
