#!/usr/bin/env bash
# The fast tier under every CPU code path an x86-64 machine with AVX2 may take: a test
# that passes here passes on any such CPU (docs/testing.md, "Any CPU").
#
#   bash tools/cpu_matrix.sh [pytest arguments, e.g. tests/unit/nnet]
#
# 12 runs, one after another, each `pytest -m "not pipeline" -x -q` (one worker):
#   torch's ATen kernels  ATEN_CPU_CAPABILITY = default (no SIMD) | avx2 | native (unset)
#   numpy's kernels       native | AVX2: NPY_DISABLE_CPU_FEATURES = the dispatch targets
#                         above AVX2, OPENBLAS_CORETYPE = Haswell (paravg.cpu_kernels)
#   threads               1 | 2 (OMP_, MKL_, OPENBLAS_NUM_THREADS)
# The other CPU variables (MKL_CBWR, ONEDNN_MAX_CPU_ISA) are left unset: MKL and oneDNN
# take their native paths. Stops at the first failing combination and names it.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=.venv/bin/python
NUMPY_AVX2=$("$PY" -c 'from paravg.cpu_kernels import NUMPY_ABOVE_AVX2; print(NUMPY_ABOVE_AVX2)')
BASETEMP=${TMPDIR:-/tmp}/cpu-matrix-$$
unset ATEN_CPU_CAPABILITY NPY_DISABLE_CPU_FEATURES NPY_ENABLE_CPU_FEATURES OPENBLAS_CORETYPE \
    MKL_CBWR ONEDNN_MAX_CPU_ISA
for aten in default avx2 native; do
    for numpy_path in native avx2; do
        for threads in 1 2; do
            name="ATEN_CPU_CAPABILITY=$aten numpy=$numpy_path threads=$threads"
            env=(OMP_NUM_THREADS="$threads" MKL_NUM_THREADS="$threads"
                OPENBLAS_NUM_THREADS="$threads")
            [[ $aten != native ]] && env+=(ATEN_CPU_CAPABILITY="$aten")
            [[ $numpy_path == avx2 ]] &&
                env+=(NPY_DISABLE_CPU_FEATURES="$NUMPY_AVX2" OPENBLAS_CORETYPE=Haswell)
            echo "== $name"
            start=$SECONDS
            if ! env "${env[@]}" "$PY" -m pytest -p no:cacheprovider -m "not pipeline" \
                --basetemp="$BASETEMP" -x -q "$@"; then
                echo "cpu_matrix: FAILED under $name" >&2
                exit 1
            fi
            echo "== passed in $((SECONDS - start)) s: $name"
        done
    done
done
echo "cpu_matrix: every combination passed"
