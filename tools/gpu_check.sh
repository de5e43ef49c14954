#!/usr/bin/env bash
# The GPU check (docs/benchmarks.md, "The GPU check"): paravg's GPU path against the CPU in
# one short run: the tiny pipeline with 4 jobs sharing the GPU through the lock files, a
# job's model on the GPU against the CPU, NG-SGD step time and a job's frames/s.
#
#   bash tools/gpu_check.sh                      # a GPU machine: --device cuda, <= 8 min
#   bash tools/gpu_check.sh --device cpu --quick # no GPU: the reduced run the suite checks
#
# Arguments go to benchmarks/bench_gpu.py (--help lists them). The default is --device cuda,
# which stops with a message when torch sees no GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
[[ -x $PY ]] || PY=python3
case " $* " in
*" --device "* | *" --device="*) exec "$PY" benchmarks/bench_gpu.py "$@" ;;
*) exec "$PY" benchmarks/bench_gpu.py --device cuda "$@" ;;
esac
