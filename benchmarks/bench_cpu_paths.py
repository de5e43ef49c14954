"""CPU code paths: why two machines' runs part, and what pinning the kernels costs.

PyTorch picks its ATen kernels (``ATEN_CPU_CAPABILITY``), MKL its BLAS code path
(``MKL_CBWR``) and oneDNN its ISA (``ONEDNN_MAX_CPU_ISA``) from the CPU it runs on. Each
path rounds differently, so the same job on an AVX-512 machine and an AVX2 machine writes
different bits from the first minibatch on, and a demo run's figures depend on the CPU.
Pinning all three to AVX2 makes the arithmetic the same on every CPU that has AVX2
(Intel's "conditional numerical reproducibility" for MKL; ATen and oneDNN dispatch on the
named ISA alone).

Printed side by side, in one run: the same training job (the default demo model, NG-SGD,
one synthetic archive; ``paravg.train_job.train_one_job``) in fresh processes, each
setting run twice:

* the sha256 of the trained parameters: identical within a setting (a rerun reproduces
  its file), different between the native and the pinned path on a machine whose native
  path is not AVX2;
* the training time, and its ratio pinned / native (the cost of pinning).

    .venv/bin/python benchmarks/bench_cpu_paths.py [--num-egs 20000] [--repeats 2]
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

REPO = Path(__file__).resolve().parents[1]
PINNED = {"ATEN_CPU_CAPABILITY": "avx2", "MKL_CBWR": "AVX2", "ONEDNN_MAX_CPU_ISA": "AVX2"}
SETTINGS = {"native": {}, "pinned (AVX2)": PINNED}

JOB = """
import hashlib, json, sys, time
sys.path.insert(0, {bench!r})
import torch
from bench_training import default_model_cfg, fresh_model, spec
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
                   "capability": torch.backends.cpu.get_cpu_capability()}}))
"""


def run_job(prefix: Path, env: dict[str, str]) -> dict:
    clean = {k: v for k, v in os.environ.items() if k not in PINNED}
    code = JOB.format(bench=str(REPO / "benchmarks"), prefix=str(prefix))
    proc = subprocess.run(
        [sys.executable, "-c", code],
        env={**clean, **env},
        capture_output=True,
        text=True,
        check=True,
        cwd=REPO,
    )
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--num-egs", type=int, default=20000)
    ap.add_argument("--repeats", type=int, default=2)
    args = ap.parse_args()
    sys.path.insert(0, str(REPO / "benchmarks"))
    from bench_training import default_model_cfg, write_archive

    from paravg.nnet.context import model_context

    with tempfile.TemporaryDirectory(prefix="bench_cpu_") as tmp:
        prefix = Path(tmp) / "egs.0"
        write_archive(prefix, args.num_egs, *model_context(default_model_cfg()))
        results = {name: [] for name in SETTINGS}
        for _ in range(args.repeats):  # interleaved: load on the machine hits both alike
            for name, env in SETTINGS.items():
                results[name].append(run_job(prefix, env))

    print(f"one training job, {args.num_egs} egs, default model, NG-SGD, 1 thread")
    print(f"{'setting':<16} {'ATen path':<10} {'CPU s (median)':>15}  sha256 of the model")
    for name, runs in results.items():
        seconds = statistics.median(r["seconds"] for r in runs)
        hashes = sorted({r["sha256"][:16] for r in runs})
        print(f"{name:<16} {runs[0]['capability']:<10} {seconds:>15.2f}  {', '.join(hashes)}")
    native, pinned = (results[n] for n in SETTINGS)
    ratio = statistics.median(r["seconds"] for r in pinned) / statistics.median(
        r["seconds"] for r in native
    )
    same = {r["sha256"] for r in native} == {r["sha256"] for r in pinned}
    print(f"pinned / native CPU time: {ratio:.2f}")
    reproduced = all(len({r["sha256"] for r in runs}) == 1 for runs in results.values())
    print(f"each setting reproduces itself: {reproduced}")
    print(f"native and pinned give the same bits: {same}")


if __name__ == "__main__":
    main()
