"""The egs stage as the corpus grows at a fixed archive size: per-job CPU and peak memory.

Writes a synthetic training set (``--utts`` utterances of ``--frames`` frames, 40-dim
features, one target per frame, speakers of 20 utterances) and the same times ``--scale``,
and runs the egs stage's jobs on each, each job in a fresh child process that reports its
own cost at its end:

* ``plan``: the egs checkpoint (:func:`paravg.egs.plan.plan_egs`);
* ``split``: split job 0 of ``nj`` 2 (:func:`paravg.egs.split.write_split_job`);
* ``archive``: the first and the last archive (:func:`paravg.egs.shuffle.merge_archive`).

``samples_per_iter`` is fixed, so the archives keep their size and their number grows
with the corpus (Kaldi's rule). The cost of one archive job should not grow with the
corpus (each eg is read once, by its archive's job: ``steps/nnet3/get_egs.sh``), nor
should a split job's peak memory (it streams its utterances). CPU is the job's own
``time.process_time()`` around the call (imports excluded); peak memory is the child's
``resource.getrusage(RUSAGE_SELF).ru_maxrss`` at its end (exact, resident pages of any
kind, memory-mapped files included), beside that of a child that only imports the same
modules (``imports``).

The code measured is the ``paravg`` the children import: run the script with
``PYTHONPATH`` set to another checkout to measure that one on the same data (the
functions' signatures are those of every release since the egs stage was split).

    .venv/bin/python benchmarks/bench_egs_scale.py [--utts 1500] [--scale 4] [--workdir DIR]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import kaldiio
import numpy as np

FEAT_DIM = 40
UTTS_PER_SPEAKER = 20
NUM_TARGETS = 200

CHILD = """
import json, resource, sys, time
from paravg.egs.plan import EgsOptions, plan_egs
from paravg.egs.shuffle import merge_archive
from paravg.egs.split import write_split_job
kind, args = sys.argv[1], json.loads(sys.argv[2])
t0 = time.process_time()
if kind == "plan":
    options = EgsOptions(**args.pop("options"))
    result = plan_egs(**args, options=options).num_archives
elif kind == "split":
    result = write_split_job(**args)
elif kind == "archive":
    result = merge_archive(**args)
else:
    import paravg
    result = paravg.__file__
cpu = time.process_time() - t0
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps({"result": result, "cpu_s": cpu, "peak_mb": peak}))
"""


def child(kind: str, **args) -> dict:
    """Run one job of ``kind`` in a fresh Python; its result, CPU seconds, peak MB."""
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, kind, json.dumps(args)],
        capture_output=True,
        text=True,
        check=False,
        cwd=tempfile.gettempdir(),  # not the checkout: PYTHONPATH decides the code measured
    )
    if proc.returncode:
        raise RuntimeError(f"{kind} child failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def write_data(root: Path, num_utts: int, frames: int) -> dict[str, str]:
    """A training set of ``num_utts`` utterances in the paravg file contract."""
    root.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(num_utts)
    utts = [f"spk{i // UTTS_PER_SPEAKER:05d}-utt{i:06d}" for i in range(num_utts)]
    with (
        kaldiio.WriteHelper(f"ark,scp:{root}/feats.ark,{root}/feats.scp") as feats,
        kaldiio.WriteHelper(f"ark,scp:{root}/targets.ark,{root}/targets.scp") as targets,
    ):
        for u in utts:
            feats(u, rng.standard_normal((frames, FEAT_DIM)).astype(np.float32))
            targets(u, rng.integers(0, NUM_TARGETS, frames).astype(np.int32))
    (root / "utt2num_frames").write_text("".join(f"{u} {frames}\n" for u in utts))
    (root / "utt2spk").write_text("".join(f"{u} {u.split('-')[0]}\n" for u in utts))
    return {k: str(root / k) for k in ("feats.scp", "targets.scp", "utt2num_frames", "utt2spk")}


def measure(root: Path, num_utts: int, frames: int, samples_per_iter: int) -> dict:
    data = write_data(root / "data", num_utts, frames)
    egs = root / "egs"
    options = {
        "frames_per_eg": 8,
        "left_context": 4,
        "right_context": 4,
        "samples_per_iter": samples_per_iter,
        "num_utts_subset": 20,
        "nj": 2,
    }
    plan = child(
        "plan",
        feats_scp=data["feats.scp"],
        utt2num_frames=data["utt2num_frames"],
        targets_scp=data["targets.scp"],
        utt2spk=data["utt2spk"],
        info_out=str(egs / "info.json"),
        lists_dir=str(egs / "lists"),
        options=options,
    )
    num_archives = plan["result"]
    jobs = [str(egs / "split" / f"job.{j}") for j in range(2)]
    splits = [
        child(
            "split",
            job=j,
            uttlist=str(egs / "lists" / f"job.{j}"),
            info_path=str(egs / "info.json"),
            feats_scp=data["feats.scp"],
            targets_scp=data["targets.scp"],
            out_prefix=jobs[j],
        )
        for j in range(2)
    ]
    archives = [
        child(
            "archive",
            archive=a,
            job_prefixes=jobs,
            info_path=str(egs / "info.json"),
            out_prefix=str(egs / f"egs.{a}"),
        )
        for a in (0, num_archives - 1)
    ]
    return {
        "utts": num_utts,
        "egs": sum(s["result"] for s in splits),
        "archives": num_archives,
        "plan": plan,
        "split": splits[0],
        "archive": {
            "result": max(a["result"] for a in archives),
            "cpu_s": max(a["cpu_s"] for a in archives),
            "peak_mb": max(a["peak_mb"] for a in archives),
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--utts", type=int, default=1500, help="utterances of the small set")
    parser.add_argument("--scale", type=int, default=4, help="the large set is this × larger")
    parser.add_argument("--frames", type=int, default=300, help="frames per utterance")
    parser.add_argument("--samples-per-iter", type=int, default=2500)
    parser.add_argument("--workdir", type=Path, default=None, help="kept (default: a temp dir)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench_egs_scale.") as tmp:
        work = args.workdir or Path(tmp)
        imports = child("imports")
        rows = [
            measure(work / f"n{n}", n, args.frames, args.samples_per_iter)
            for n in (args.utts, args.utts * args.scale)
        ]
    import paravg

    print(f"code: {Path(paravg.__file__).parent.parent} (children: {imports['result']})")
    print(f"fresh child with the imports only: peak {imports['peak_mb']:.0f} MB")
    print(
        "| utterances | egs | archives | job | egs of the job | CPU s | peak MB |\n"
        "|---|---|---|---|---|---|---|"
    )
    for r in rows:
        for job in ("plan", "split", "archive"):
            m = r[job]
            n = "–" if job == "plan" else m["result"]
            print(
                f"| {r['utts']:,} | {r['egs']:,} | {r['archives']} | {job} | {n} | "
                f"{m['cpu_s']:.2f} | {m['peak_mb']:.0f} |"
            )
    small, large = rows
    for job in ("plan", "split", "archive"):
        cpu_ratio = large[job]["cpu_s"] / max(small[job]["cpu_s"], 1e-9)
        print(
            f"{job}: large / small: CPU {cpu_ratio:.2f}, "
            f"peak above imports {(large[job]['peak_mb'] - imports['peak_mb']):.0f} / "
            f"{(small[job]['peak_mb'] - imports['peak_mb']):.0f} MB"
        )


if __name__ == "__main__":
    main()
