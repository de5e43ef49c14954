"""Issue 34: with the CPU kernel pins in effect (paravg.cpu_kernels, the default
``run.pin_cpu_kernels: true``), the i-vector models, computed in numpy, are the same bytes
whatever numpy path the CPU offers.

The i-vector models of the tiny config (PCA, diagonal UBM, extractor: the targets, not the
pipeline) are trained twice in one clone of the shared workspace, through the local
profile's executor (paravg-warm: the jobs are forks of a server that loaded numpy), on this
machine as it is and posing as an AVX2-only one:

* as it is: no CPU variable set; numpy dispatches its AVX-512 targets here and its
  OpenBLAS picks its kernels by CPU model (``SkylakeX`` on an AVX-512 CPU);
* AVX2-only: ``NPY_ENABLE_CPU_FEATURES=X86_V3`` (numpy's dispatch stops at the AVX2
  level, as on a CPU without AVX-512; the pins leave numpy's dispatch to a user who sets
  it, so this variable stands for the CPU, below the pins) and ``OPENBLAS_CORETYPE=Haswell``.

Without the pins (``run.pin_cpu_kernels: false``) the two runs write different models on
an AVX-512 machine, from the PCA on (numpy's AVX-512 kernels and OpenBLAS's SkylakeX kernels
round otherwise): see docs/reproducibility.md.
"""

from __future__ import annotations

import hashlib

import pytest
import yaml

from paravg.cpu_kernels import NUMPY_ENABLE, PINNED_AVX2, cpu_supports_pins

from .conftest import TINY, WARM, check_ok, run_snakemake

IV = yaml.safe_load(TINY.read_text())["ivector"]
MODELS = (
    "results/ivector/pca.npz",
    f"results/ivector/ubm.{IV['ubm_num_iters']}.npz",
    f"results/ivector/extractor.{IV['extractor_num_iters']}.npz",
)
MACHINES = {
    "as it is": {},
    "AVX2-only": {NUMPY_ENABLE: "X86_V3", "OPENBLAS_CORETYPE": "Haswell"},
}


def train_ivector_models(ws, env: dict[str, str]) -> dict[str, str]:
    """Retrain the i-vector models in ``ws`` under ``env``; the sha256 of each file."""
    proc = run_snakemake(
        ws, "--cores", "2", *WARM, "--forcerun", "ivector_pca", *MODELS, env=env or None
    )
    check_ok(proc, f"the i-vector models under {env}")
    return {m: hashlib.sha256((ws / m).read_bytes()).hexdigest() for m in MODELS}


@pytest.mark.skipif(not cpu_supports_pins(), reason="the pins apply to x86-64 CPUs with AVX2")
def test_the_ivector_models_are_the_same_bytes_on_every_numpy_path(clone_upstream, monkeypatch):
    for name in (*PINNED_AVX2, NUMPY_ENABLE):  # e.g. a workplace's OPENBLAS_CORETYPE
        monkeypatch.delenv(name, raising=False)
    ws = clone_upstream("cpu_paths")
    digests = {machine: train_ivector_models(ws, env) for machine, env in MACHINES.items()}
    assert digests["as it is"] == digests["AVX2-only"], digests
