"""Model reads per iteration and memory per averaging job, as N grows (average and BMUF).

1. **Reads** (from the plan, nothing trained): the model files an iteration's jobs and its
   sync node read, for N learners and the config's model with ``--targets`` outputs. While
   N × the model size ≤ ``run.synced_start_mb`` every job averages the N job models itself
   (N² + N reads, the node off the critical path); above it the jobs read the node's
   ``<t>.pt`` (2N, Kaldi's count). Printed beside the N² + N of a plan that never switches.
2. **Memory** (measured): how much a process's resident memory grows while it averages N
   model files of the given size, holding them all (the old way: a list, then the mean)
   against the streamed running sum of ``paravg.sync.average.average_jobs``; and whether
   the two are bit-identical.

    .venv/bin/python benchmarks/bench_sync_reads.py
    .venv/bin/python benchmarks/bench_sync_reads.py --jobs 4 16 64 128 --mem-jobs 16 --mem-mb 40
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml
from _harness import REPO

from paravg.config import REPO_CONFIG, deep_merge, validate_config
from paravg.plan import experiment_plans

MODEL_ROLES = ("models", "synced", "global", "delta", "start")


def reads_per_iteration(n: int, args, synced_start_mb: float):
    """(model files read in iteration 3, the model's MB) for N jobs per iteration."""
    cfg = yaml.safe_load(REPO_CONFIG.read_text())
    hidden = [{**layer, "dim": args.hidden_dim} for layer in cfg["model"]["hidden"]]
    cfg = deep_merge(cfg, {
        "model": {"hidden": hidden},
        "trainer": {"num_jobs_initial": n, "num_jobs_final": n},
        "sync": {"method": args.method},
        "run": {"synced_start_mb": synced_start_mb},
        "egs": {"samples_per_iter": 400},
    })  # fmt: skip
    info = {"num_archives": 4 * n, "frames_per_eg": 8, "num_frames": 1,
            "feat_dim": 40, "ivector_dim": 100, "num_targets": args.targets}  # fmt: skip
    p = experiment_plans(validate_config(cfg), info)["default"]
    t = 3
    jobs = sum(len(p.start_inputs(t, j).get(r, [])) for j in range(n) for r in MODEL_ROLES)
    return jobs + len(p.node_inputs(t)["models"]), p.model_mb


CHILD = r"""
import json, os, sys, threading, time, torch
from paravg.nnet.model_file import load_model_file
from paravg.sync.average import average_jobs
from paravg.sync.tensors import mean
paths, stats, how = json.loads(sys.argv[1])
page = os.sysconf("SC_PAGE_SIZE")
def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * page / 2**20
before, peak, done = rss(), [0.0], threading.Event()
def sample():
    while not done.is_set():
        peak[0] = max(peak[0], rss())
        time.sleep(0.002)
watcher = threading.Thread(target=sample)
watcher.start()
if how == "list":
    models = [load_model_file(p) for p in paths]
    sd = mean([m["state_dict"] for m in models])
else:
    sd = average_jobs(paths, stats, iteration=5)[0]["state_dict"]
peak[0] = max(peak[0], rss())
done.set()
watcher.join()
torch.save(sd, sys.argv[2])
print(peak[0] - before)
"""


def peak_memory(n: int, mb: float, scratch: Path) -> list[tuple[str, float]]:
    """How much the resident memory grows (MB) while ``n`` models of ``mb`` MB are averaged
    (sampled every 2 ms): as a list, and streamed."""
    import torch

    from paravg.io import save_torch_atomic
    from paravg.nnet.model_file import model_to_file_dict
    from paravg.nnet.tdnn import TdnnModel

    dim = int((mb * 2**20 / 4 / 3) ** 0.5)  # three dim × dim layers
    cfg = {"input_splice": [0], "hidden": [{"dim": dim}, {"dim": dim}],
           "max_change_hidden": 0.75, "max_change_output": 1.5}  # fmt: skip
    paths, stats = [], []
    for j in range(n):
        m = TdnnModel(cfg, dim, 0, dim)
        m.init_parameters(j)
        paths.append(str(scratch / f"job{j}.pt"))
        save_torch_atomic(paths[-1], model_to_file_dict(m, {}))
        stats.append(str(scratch / f"job{j}.json"))
        Path(stats[-1]).write_text(json.dumps({"objf": -1.0 - j / 1000}))
    size = Path(paths[0]).stat().st_size / 2**20
    out = []
    for how in ("list", "streamed"):
        result = scratch / f"{how}.pt"
        proc = subprocess.run(
            [sys.executable, "-c", CHILD, json.dumps([paths, stats, how]), str(result)],
            capture_output=True, text=True, check=True, cwd=REPO,
        )  # fmt: skip
        out.append((how, float(proc.stdout.split()[-1])))
    a, b = (torch.load(scratch / f"{h}.pt", weights_only=True) for h in ("list", "streamed"))
    same = all(torch.equal(a[k], b[k]) for k in a)
    return out, size, same


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--jobs", type=int, nargs="+", default=[4, 16, 64, 128])
    ap.add_argument("--targets", type=int, default=6000, help="model outputs")
    ap.add_argument("--hidden-dim", type=int, default=1024, help="every hidden layer's dim")
    ap.add_argument("--method", default="average", choices=["average", "bmuf"])
    ap.add_argument("--mem-jobs", type=int, default=16)
    ap.add_argument("--mem-mb", type=float, default=20.0)
    args = ap.parse_args()

    default_mb = validate_config(yaml.safe_load(REPO_CONFIG.read_text()))["run"]["synced_start_mb"]
    print(f"1. model reads per iteration ({args.method}; run.synced_start_mb = {default_mb})")
    print("| N | model MB | N × MB | reads | never switching (N² + N) | ratio |")
    print("|---|---|---|---|---|---|")
    for n in args.jobs:
        reads, mb = reads_per_iteration(n, args, default_mb)
        never, _ = reads_per_iteration(n, args, float(10**12))
        print(f"| {n} | {mb:.1f} | {n * mb:.0f} | {reads} | {never} | {reads / never:.3f} |")

    with tempfile.TemporaryDirectory() as scratch:
        peaks, size, same = peak_memory(args.mem_jobs, args.mem_mb, Path(scratch))
    print(f"\n2. peak memory of averaging {args.mem_jobs} models of {size:.1f} MB")
    print("| how | RSS growth while averaging, MB | in models | ratio |")
    print("|---|---|---|---|")
    for how, grown in peaks:
        print(f"| {how} | {grown:.0f} | {grown / size:.1f} | {grown / peaks[0][1]:.2f} |")
    print(f"bit-identical: {'yes' if same else 'NO'}")


if __name__ == "__main__":
    main()
