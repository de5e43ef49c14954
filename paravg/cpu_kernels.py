"""The CPU code paths of PyTorch, MKL and oneDNN, pinned so that a run computes the same
bits on every x86 machine with AVX2.

Each library picks its kernels from the CPU it runs on: ATen's vectorised kernels
(``ATEN_CPU_CAPABILITY``: AVX-512 on this project's build machine), MKL's BLAS path
(``MKL_CBWR``) and oneDNN's ISA (``ONEDNN_MAX_CPU_ISA``). Paths round differently, so the
same training job on an AVX-512 and an AVX2 machine writes different models from the first
minibatch on (``benchmarks/bench_cpu_paths.py``), and the demo's figures follow the CPU.
Pinned to AVX2, the arithmetic is the one every AVX2 CPU runs (MKL documents this as
conditional numerical reproducibility); on this project's machines pinning costs no
measurable time (bench_cpu_paths: pinned / native CPU time 0.97-0.98).

The variables must be set before the libraries load, so the Snakefile sets them in its
own environment, which every job inherits (local processes, and SLURM jobs through
``sbatch``'s default ``--export=ALL``). A variable the user set is left as it is.
"""

from __future__ import annotations

from collections.abc import MutableMapping

PINNED_AVX2 = {"ATEN_CPU_CAPABILITY": "avx2", "MKL_CBWR": "AVX2", "ONEDNN_MAX_CPU_ISA": "AVX2"}


def pin_cpu_kernels(environ: MutableMapping[str, str]) -> dict[str, str]:
    """Set the AVX2 pins in ``environ`` where unset; return the values in effect."""
    for name, value in PINNED_AVX2.items():
        environ.setdefault(name, value)
    return {name: environ[name] for name in PINNED_AVX2}
