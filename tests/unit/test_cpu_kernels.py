"""The CPU kernel pins: set where unset, the user's own values kept, only on a CPU that
runs them; and the installed numpy and its OpenBLAS obey them."""

import json
import os
import platform
import subprocess
import sys

import pytest

from paravg.cpu_kernels import (
    NUMPY_ABOVE_AVX2,
    PINNED_AVX2,
    cpu_flags,
    cpu_supports_pins,
    kernels_in_effect,
    pin_cpu_kernels,
)

X86 = platform.machine().lower() in {"x86_64", "amd64"}
NATIVE_VARIABLES = (*PINNED_AVX2, "NPY_ENABLE_CPU_FEATURES", "OPENBLAS_VERBOSE")


def test_pins_are_set_where_unset_and_a_users_value_wins():
    env = {"MKL_CBWR": "COMPATIBLE", "OPENBLAS_CORETYPE": "Zen", "PATH": "/bin"}
    assert pin_cpu_kernels(env, supported=True) == {
        **PINNED_AVX2,
        "MKL_CBWR": "COMPATIBLE",
        "OPENBLAS_CORETYPE": "Zen",
    }
    assert env["ATEN_CPU_CAPABILITY"] == "avx2" and env["ONEDNN_MAX_CPU_ISA"] == "AVX2"
    assert env["NPY_DISABLE_CPU_FEATURES"] == "X86_V4 AVX512_ICL AVX512_SPR"
    assert env["MKL_CBWR"] == "COMPATIBLE" and env["OPENBLAS_CORETYPE"] == "Zen"
    assert env["PATH"] == "/bin"


def test_a_users_numpy_enable_list_replaces_the_numpy_pin():
    # numpy refuses to import with both NPY_ENABLE_ and NPY_DISABLE_CPU_FEATURES set
    env = {"NPY_ENABLE_CPU_FEATURES": "X86_V3"}
    kernels = pin_cpu_kernels(env, supported=True)
    assert "NPY_DISABLE_CPU_FEATURES" not in env
    assert kernels["NPY_ENABLE_CPU_FEATURES"] == "X86_V3"
    assert kernels["NPY_DISABLE_CPU_FEATURES"] == "" and kernels["OPENBLAS_CORETYPE"] == "Haswell"


def test_a_cpu_without_avx2_and_fma_or_not_x86_gets_no_pins(tmp_path):
    env = {}
    assert pin_cpu_kernels(env, supported=False) == dict.fromkeys(PINNED_AVX2, "")
    assert env == {}
    assert kernels_in_effect({}) == dict.fromkeys(PINNED_AVX2, "")
    haswell = frozenset({"sse4_2", "avx", "avx2", "fma"})
    assert cpu_supports_pins("x86_64", haswell)
    assert not cpu_supports_pins("x86_64", haswell - {"avx2"})  # Sandy/Ivy Bridge
    assert not cpu_supports_pins("x86_64", haswell - {"fma"})
    assert not cpu_supports_pins("aarch64", haswell)
    info = tmp_path / "cpuinfo"
    info.write_text("processor\t: 0\nflags\t\t: fpu sse2 avx2 fma\n\nprocessor\t: 1\n")
    assert cpu_flags(info) == {"fpu", "sse2", "avx2", "fma"}
    assert cpu_flags(tmp_path / "none") == frozenset()


def numpy_in_a_fresh_process(env: dict[str, str], code: str) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if k not in NATIVE_VARIABLES}
    return subprocess.run(
        [sys.executable, "-W", "error::ImportWarning", "-c", code],
        env={**clean, **env},
        capture_output=True,
        text=True,
        check=True,
    )


FEATURES = """
import json
from numpy._core._multiarray_umath import __cpu_dispatch__, __cpu_features__
print(json.dumps({"dispatch": __cpu_dispatch__, "features": __cpu_features__}))
"""


@pytest.mark.skipif(not X86, reason="numpy's x86 dispatch targets")
def test_the_numpy_pin_names_every_dispatch_target_above_avx2_and_numpy_obeys_it():
    """The installed numpy dispatches X86_V3 (AVX2, FMA3) and exactly the targets of
    NUMPY_ABOVE_AVX2 above it; under the pin none of those runs, X86_V3 still does, and
    numpy imports without a warning (-W error::ImportWarning: a name it does not dispatch
    would warn)."""
    native = json.loads(numpy_in_a_fresh_process({}, FEATURES).stdout)
    dispatch = native["dispatch"]
    assert dispatch[dispatch.index("X86_V3") + 1 :] == NUMPY_ABOVE_AVX2.split()
    pinned = json.loads(
        numpy_in_a_fresh_process({"NPY_DISABLE_CPU_FEATURES": NUMPY_ABOVE_AVX2}, FEATURES).stdout
    )
    assert not any(pinned["features"][name] for name in NUMPY_ABOVE_AVX2.split())
    assert pinned["features"]["X86_V3"] == native["features"]["X86_V3"]


@pytest.mark.skipif(not X86, reason="OpenBLAS's x86 core types")
def test_numpys_openblas_runs_the_core_the_pin_names():
    """numpy's bundled OpenBLAS (DYNAMIC_ARCH) says which core's kernels it loaded
    (OPENBLAS_VERBOSE=2): the pinned one, Haswell, whatever this CPU is."""
    proc = numpy_in_a_fresh_process(
        {"OPENBLAS_VERBOSE": "2", "OPENBLAS_CORETYPE": PINNED_AVX2["OPENBLAS_CORETYPE"]},
        "import numpy",
    )
    assert "Core: Haswell" in proc.stdout + proc.stderr
