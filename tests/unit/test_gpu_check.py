"""tools/gpu_check.sh (benchmarks/bench_gpu.py): the GPU check runs on the CPU in its
reduced mode and prints every figure, so that it still works the day a GPU is lent; it
stops with a message when CUDA is asked for and torch sees no GPU; its reading of the
training jobs' logs (who held a GPU when) counts overlaps right."""

import importlib
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "tools" / "gpu_check.sh"
FIGURES = (
    r"\(b\) max \|θ_dev − θ_cpu\| after one job",
    r"\(b\) max \|θ_cpu − θ_0\|",
    r"\(c\) NG-SGD step ms, cpu",
    r"\(c\) speed-up",
    r"\(d\) job frames/s, cpu",
    r"\(d\) speed-up",
)


def run_check(*args: str) -> subprocess.CompletedProcess:
    env = {"PATH": "/usr/bin:/bin", "PY": sys.executable, "PYTHONPATH": str(REPO)}
    return subprocess.run(
        ["bash", str(SCRIPT), *args], capture_output=True, text=True, env=env, timeout=300
    )


def figures(out: str, label: str) -> list[float]:
    """The two numbers (TDNN, TDNN-F) of the table row starting with ``label``."""
    line = next(line for line in out.splitlines() if re.match(label, line))
    return [float(x) for x in line.split()[-2:]]


def test_cpu_quick_prints_every_figure():
    proc = run_check("--device", "cpu", "--quick", "--num-egs", "400")
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = proc.stdout
    for label in FIGURES:
        values = figures(out, label)
        assert all(v == v and v >= 0 for v in values), (label, values)  # finite, not NaN
    # both jobs on the CPU from the same start: a training job is deterministic
    assert figures(out, FIGURES[0]) == [0.0, 0.0]
    assert all(v > 0 for v in figures(out, FIGURES[1]))  # the job moved the model
    assert all(v > 0 for v in figures(out, FIGURES[4]))
    assert "(a) tiny pipeline: skipped (--quick)" in out


@pytest.mark.skipif(torch.cuda.is_available(), reason="this host has a GPU")
def test_cuda_without_gpu_stops_with_a_message():
    proc = run_check()  # the wrapper's default: --device cuda
    assert proc.returncode != 0
    assert "--device cuda, but torch sees no GPU" in proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.fixture
def bench_gpu(monkeypatch):
    monkeypatch.syspath_prepend(str(REPO / "benchmarks"))
    return importlib.import_module("bench_gpu")


def test_lock_evidence_from_job_logs(bench_gpu, tmp_path):
    """Jobs that took the one GPU one after another overlap at most once; the count of
    jobs on a GPU and of jobs that waited for a lock come from their log lines."""
    logs = tmp_path / "train_job" / "default" / "1"
    logs.mkdir(parents=True)

    def write(name, lines):
        (logs / name).write_text("".join(f"2026-12-06 01:00:{s} INFO x: {m}\n" for s, m in lines))

    write("job0.log", [("00,000", "using cuda:0 (GPU 0 of 1 visible)"), ("10,000", "done")])
    write(
        "job1.log",
        [
            ("00,100", "all 1 GPUs are in use (locks in /x); waiting"),
            ("10,000", "GPU 0 became free after 9.9 s"),
            ("10,000", "using cuda:0 (GPU 0 of 1 visible)"),
            ("20,000", "done"),
        ],
    )
    write("job2.log", [("00,000", "using the CPU"), ("05,000", "done")])
    intervals, on_gpu, waited = bench_gpu.job_intervals(tmp_path / "train_job")
    assert (on_gpu, waited) == (2, 1)
    assert bench_gpu.max_overlap(intervals) == 1
    assert bench_gpu.max_overlap([(0, 10), (5, 20), (6, 7)]) == 3
