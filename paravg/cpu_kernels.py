"""The CPU code paths of PyTorch, MKL, oneDNN, numpy and OpenBLAS, pinned so that a run
computes the same bits on every x86-64 machine with AVX2.

Each library picks its kernels from the CPU it runs on, and the paths round differently:

* torch: ATen's vectorised kernels (``ATEN_CPU_CAPABILITY``: AVX-512 on this project's
  build machine), MKL's BLAS path (``MKL_CBWR``; torch links MKL as its BLAS) and oneDNN's
  ISA (``ONEDNN_MAX_CPU_ISA``). The same training job on an AVX-512 and an AVX2 machine
  writes different models from the first minibatch on (``benchmarks/bench_cpu_paths.py``).
* numpy: its own SIMD dispatch (``np.show_runtime()``'s ``simd_extensions``: baseline
  ``X86_V2``, dispatched ``X86_V3`` (the AVX2/FMA3 level) and the AVX-512 targets above
  it, whose kernels (``exp``, ``log``, sums, ...) may round otherwise), and its BLAS, the
  OpenBLAS of the ``scipy-openblas64`` build bundled in numpy's wheel (``numpy.libs/``),
  built ``DYNAMIC_ARCH``: it picks its kernels by CPU model (``SkylakeX`` on an AVX-512
  Xeon) unless ``OPENBLAS_CORETYPE`` names one. The i-vector stage computes in numpy: its
  models part between two numpy paths (``bench_cpu_paths.py``).

Pinned to AVX2, the arithmetic is the one every AVX2 CPU runs:
``ATEN_CPU_CAPABILITY=avx2 MKL_CBWR=AVX2 ONEDNN_MAX_CPU_ISA=AVX2`` (MKL documents this as
conditional numerical reproducibility), ``NPY_DISABLE_CPU_FEATURES`` naming the dispatch
targets above ``X86_V3`` (:data:`NUMPY_ABOVE_AVX2`) and ``OPENBLAS_CORETYPE=Haswell``
(OpenBLAS's AVX2/FMA3 kernels). numpy disables a named target the CPU lacks silently (no
error, no warning: ``npy__cpu_check_env`` in ``numpy/_core/src/common/npy_cpu_features.c``
only warns for a name its build does not dispatch, and refuses baseline features), so the
same value serves an AVX2-only CPU. The pins apply on x86-64 CPUs with AVX2 and FMA3
(:func:`cpu_supports_pins`): OpenBLAS runs a forced core's kernels without checking the
CPU, so ``Haswell`` on an older CPU would die of an illegal instruction; elsewhere nothing
is set and each library takes its own path (an ARM machine computes otherwise regardless).

The variables must be set before the libraries load (numpy and OpenBLAS read theirs once,
at import), so the Snakefile sets them in its own environment, which every job inherits:
local processes, the warm executor's server (started after the Snakefile is read, so it
imports torch and numpy under the pins), and SLURM jobs and warm worker allocations
through ``sbatch``'s ``--export=ALL``. A variable the user set is left as it is, and
so is numpy's dispatch when the user chose it with ``NPY_ENABLE_CPU_FEATURES`` (numpy
refuses to import with both variables set).
"""

from __future__ import annotations

import platform
from collections.abc import MutableMapping
from pathlib import Path

#: numpy 2.4's x86 dispatch targets above the AVX2 level ``X86_V3`` (its
#: ``__cpu_dispatch__``: ``X86_V3 X86_V4 AVX512_ICL AVX512_SPR``); a unit test checks the
#: installed numpy dispatches exactly these above ``X86_V3``.
NUMPY_ABOVE_AVX2 = "X86_V4 AVX512_ICL AVX512_SPR"

PINNED_AVX2 = {
    "ATEN_CPU_CAPABILITY": "avx2",
    "MKL_CBWR": "AVX2",
    "ONEDNN_MAX_CPU_ISA": "AVX2",
    "NPY_DISABLE_CPU_FEATURES": NUMPY_ABOVE_AVX2,
    "OPENBLAS_CORETYPE": "Haswell",
}

#: numpy's other dispatch variable: set by the user, it replaces the numpy pin.
NUMPY_ENABLE = "NPY_ENABLE_CPU_FEATURES"

#: The CPU flags (``/proc/cpuinfo``) that every pinned path needs.
REQUIRED_FLAGS = frozenset({"avx2", "fma"})


def cpu_flags(cpuinfo: str | Path = "/proc/cpuinfo") -> frozenset[str]:
    """The first processor's ``flags`` in ``cpuinfo`` (empty when unreadable)."""
    try:
        text = Path(cpuinfo).read_text()
    except OSError:
        return frozenset()
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "flags":
            return frozenset(value.split())
    return frozenset()


def cpu_supports_pins(machine: str | None = None, flags: frozenset[str] | None = None) -> bool:
    """Whether this CPU (or the one described) is x86-64 with AVX2 and FMA3."""
    machine = platform.machine() if machine is None else machine
    flags = cpu_flags() if flags is None else flags
    return machine.lower() in {"x86_64", "amd64"} and flags >= REQUIRED_FLAGS


def pin_cpu_kernels(environ: MutableMapping[str, str], supported: bool | None = None) -> dict:
    """Set the AVX2 pins in ``environ`` where unset, when the CPU takes them
    (``supported``, default :func:`cpu_supports_pins`); return :func:`kernels_in_effect`."""
    if cpu_supports_pins() if supported is None else supported:
        for name, value in PINNED_AVX2.items():
            if name == "NPY_DISABLE_CPU_FEATURES" and environ.get(NUMPY_ENABLE):
                continue
            environ.setdefault(name, value)
    return kernels_in_effect(environ)


def kernels_in_effect(environ: MutableMapping[str, str]) -> dict[str, str]:
    """The CPU code-path variables of ``environ`` ("" where unset; ``NPY_ENABLE_CPU_FEATURES``
    only where set), as ``digests.json`` records them."""
    kernels = {name: environ.get(name, "") for name in PINNED_AVX2}
    if environ.get(NUMPY_ENABLE):
        kernels[NUMPY_ENABLE] = environ[NUMPY_ENABLE]
    return kernels
