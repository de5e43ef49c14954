"""CPU code paths: why two machines' runs part, and what pinning the kernels costs.

PyTorch picks its ATen kernels (``ATEN_CPU_CAPABILITY``), MKL its BLAS code path
(``MKL_CBWR``) and oneDNN its ISA (``ONEDNN_MAX_CPU_ISA``) from the CPU it runs on; numpy
its SIMD dispatch (``NPY_DISABLE_CPU_FEATURES``) and its bundled OpenBLAS its kernels
(``OPENBLAS_CORETYPE``). Each path rounds differently, so the same job on an AVX-512
machine and an AVX2 machine writes different bits, and a demo run's figures depend on the
CPU. Pinning them all to AVX2 (:mod:`paravg.cpu_kernels`) makes the arithmetic the same on
every CPU that has AVX2 (Intel's "conditional numerical reproducibility" for MKL; ATen,
oneDNN, numpy and OpenBLAS dispatch on the named ISA or core alone).

Printed side by side, in one run, for two jobs, each in fresh processes, each setting
(native: no CPU variable set; pinned: the pins of paravg.cpu_kernels) run twice:

* a training job (the default demo model, NG-SGD, one synthetic archive;
  ``paravg.train_job.train_one_job``): torch's path;
* the i-vector models (PCA, diagonal UBM, extractor: the Snakefile's i-vector stage run
  in-process by ``bench_ivector.train`` with the ``ivector`` values of
  ``config/config.yaml``, on bench_ivector's synthetic corpus of 40 speakers): numpy's;

and for each: the sha256 of what it wrote (identical within a setting: a rerun reproduces
its file; different between native and pinned on a machine whose native path is not
AVX2), the CPU time, and its ratio pinned / native (the cost of pinning).

    .venv/bin/python benchmarks/bench_cpu_paths.py [--num-egs 20000] [--repeats 2]
        [--jobs training ivector]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml
from _harness import REPO, default_model_cfg, synthetic_ivector_sets, write_archive

from paravg.cpu_kernels import NUMPY_ENABLE, PINNED_AVX2

SETTINGS = {"native": {}, "pinned (AVX2)": PINNED_AVX2}

JOB = """
import hashlib, json, sys, time
sys.path.insert(0, {bench!r})
import torch
from _harness import default_model_cfg, fresh_model
from _harness import training_spec as spec
from paravg.egs import EgsArchive
from paravg.train_job import train_one_job
torch.set_num_threads(1)
torch.manual_seed(spec(128).seed)  # as paravg.train_job.run_train_job
model = fresh_model(default_model_cfg(), ng=True)
t0 = time.process_time()
train_one_job(model, EgsArchive({prefix!r}), spec(128), torch.device("cpu"))
seconds = time.process_time() - t0
digest = hashlib.sha256()
for name, p in sorted(model.state_dict().items()):
    digest.update(name.encode()); digest.update(p.detach().numpy().tobytes())
print(json.dumps({{"seconds": seconds, "sha256": digest.hexdigest(),
                   "path": torch.backends.cpu.get_cpu_capability()}}))
"""

IVECTOR_JOB = """
import ctypes, hashlib, json, os, sys, time
for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[var] = "1"  # one BLAS thread, as a job of the Snakefile
from pathlib import Path
sys.path.insert(0, {bench!r})
import _harness
import numpy
from numpy._core._multiarray_umath import __cpu_dispatch__, __cpu_features__
out = Path({out!r})
out.mkdir()
t0 = time.process_time()
_harness.train_ivector_models(json.loads({iv!r}),
                              {{k: Path(v) for k, v in json.loads({corpus!r}).items()}},
                              out, _harness.Timer())
seconds = time.process_time() - t0
digest = hashlib.sha256()
for name in ("pca.npz", "ubm.npz", "extractor.npz"):
    digest.update((out / name).read_bytes())
blas = next(Path(numpy.__file__).parent.parent.joinpath("numpy.libs").glob("libscipy_openblas*"))
core = ctypes.CDLL(str(blas)).scipy_openblas_get_corename64_
core.restype = ctypes.c_char_p
top = [f for f in __cpu_dispatch__ if __cpu_features__[f]][-1]
print(json.dumps({{"seconds": seconds, "sha256": digest.hexdigest(),
                   "path": f"{{top}}/{{core().decode()}}"}}))
"""


def run_job(code: str, env: dict[str, str]) -> dict:
    """Run ``code`` in a fresh Python under the CPU variables of ``env`` alone."""
    clean = {k: v for k, v in os.environ.items() if k not in (*PINNED_AVX2, NUMPY_ENABLE)}
    proc = subprocess.run(
        [sys.executable, "-c", code],
        env={**clean, **env},
        capture_output=True,
        text=True,
        check=True,
        cwd=REPO,
    )
    return json.loads(proc.stdout.strip().splitlines()[-1])


def compare(title: str, results: dict[str, list[dict]]) -> None:
    """Print one job's settings side by side (median CPU time, the distinct digests)."""
    print(title)
    print(f"{'setting':<16} {'path':<24} {'CPU s (median)':>15}  sha256 of what it wrote")
    for name, runs in results.items():
        seconds = statistics.median(r["seconds"] for r in runs)
        hashes = sorted({r["sha256"][:16] for r in runs})
        print(f"{name:<16} {runs[0]['path']:<24} {seconds:>15.2f}  {', '.join(hashes)}")
    native, pinned = (results[n] for n in SETTINGS)
    ratio = statistics.median(r["seconds"] for r in pinned) / statistics.median(
        r["seconds"] for r in native
    )
    same = {r["sha256"] for r in native} == {r["sha256"] for r in pinned}
    print(f"pinned / native CPU time: {ratio:.2f}")
    reproduced = all(len({r["sha256"] for r in runs}) == 1 for runs in results.values())
    print(f"each setting reproduces itself: {reproduced}")
    print(f"native and pinned give the same bits: {same}\n")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--num-egs", type=int, default=20000)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument(
        "--jobs", nargs="+", choices=("training", "ivector"), default=["training", "ivector"]
    )
    args = ap.parse_args()
    bench = str(REPO / "benchmarks")
    from paravg.config import validate_config
    from paravg.nnet.context import model_context

    with tempfile.TemporaryDirectory(prefix="bench_cpu_") as tmp:
        codes: dict[str, list[str]] = {}  # job -> one script per run
        if "training" in args.jobs:
            prefix = Path(tmp) / "egs.0"
            write_archive(prefix, args.num_egs, *model_context(default_model_cfg()))
            codes["training"] = [JOB.format(bench=bench, prefix=str(prefix))] * args.repeats
        if "ivector" in args.jobs:
            corpus, _ = synthetic_ivector_sets(Path(tmp) / "corpus")
            config = validate_config(yaml.safe_load((REPO / "config" / "config.yaml").read_text()))
            codes["ivector"] = [
                IVECTOR_JOB.format(
                    bench=bench,
                    out=str(Path(tmp) / f"ivector.{k}"),
                    iv=json.dumps(config["ivector"]),
                    corpus=json.dumps({k: str(v) for k, v in corpus.items()}),
                )
                for k in range(args.repeats * len(SETTINGS))
            ]
        results = {job: {name: [] for name in SETTINGS} for job in codes}
        for k in range(args.repeats):  # interleaved: load on the machine hits both alike
            for job, scripts in codes.items():
                for n, (name, env) in enumerate(SETTINGS.items()):
                    script = scripts[k * len(SETTINGS) + n] if job == "ivector" else scripts[k]
                    results[job][name].append(run_job(script, env))

    if "training" in results:
        compare(
            f"one training job, {args.num_egs} egs, default model, NG-SGD, 1 thread",
            results["training"],
        )
    if "ivector" in results:
        compare(
            "the i-vector models (PCA, UBM, extractor; config.yaml's ivector), 40 synthetic "
            "speakers, 1 thread",
            results["ivector"],
        )


if __name__ == "__main__":
    main()
