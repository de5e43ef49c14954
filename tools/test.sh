#!/usr/bin/env bash
# Set up everything the test suite needs on a fresh Debian/Ubuntu machine (apt packages,
# .venv, a local single-node SLURM cluster when running as root) and run the whole suite.
# Usage: bash tools/test.sh [pytest args]
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/setup.sh
if [ "$(id -u)" = 0 ] && [ -f tools/local_slurm.sh ]; then
    bash tools/local_slurm.sh start
    trap 'bash tools/local_slurm.sh stop >/dev/null 2>&1 || true' EXIT
fi
.venv/bin/ruff check .
.venv/bin/ruff format --check .
.venv/bin/snakemake --lint --cores 1
.venv/bin/python -m pytest -p no:cacheprovider "$@"
