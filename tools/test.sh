#!/usr/bin/env bash
# Set up everything the test suite needs on a fresh Debian/Ubuntu machine (apt packages,
# .venv, a local single-node SLURM cluster when running as root) and run the whole suite.
# Two pytest workers (pytest-xdist, a test file per worker at a time, the pipeline files
# first: tests/conftest.py); snakemake --lint is a test (tests/pipeline/test_pipeline.py).
# Usage: bash tools/test.sh [pytest args]     (the fast tier alone: pytest -m "not pipeline")
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/setup.sh
if [ "$(id -u)" = 0 ] && [ -f tools/local_slurm.sh ]; then
    bash tools/local_slurm.sh start
    trap 'bash tools/local_slurm.sh stop >/dev/null 2>&1 || true' EXIT
fi
.venv/bin/ruff check .
.venv/bin/ruff format --check .
.venv/bin/python -m pytest -p no:cacheprovider -n 2 --dist loadfile --no-loadscope-reorder "$@"
