"""benchmarks/bench_chain_den.py runs and prints its figures (at a tiny size)."""

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]


def test_bench_chain_den_prints_ms_per_frame_the_ratio_and_the_jobs_frames_per_second():
    proc = subprocess.run(
        [
            sys.executable,
            str(REPO / "benchmarks" / "bench_chain_den.py"),
            *("--states", "30", "--arcs", "90", "--pdfs", "12"),
            *("--sequences", "2", "--frames", "4", "--repeats", "1"),
            *("--chain-egs", "40", "--ce-egs", "512"),
        ],
        capture_output=True,
        text=True,
        check=True,
        timeout=300,
    )
    assert "ms per output frame (target <= 1 ms)" in proc.stdout
    assert "ratio denominator / TDNN-F:" in proc.stdout
    # the whole jobs: a chain job trains one minibatch of 32 chunks x 50 output frames
    assert "| chain TDNN-F (f = 3, 150-frame chunks, minibatch 32) |" in proc.stdout
    assert "| 1600 |" in proc.stdout and "| 512 |" in proc.stdout  # CE: 2 x 256 frames
    assert "chain / CE: output frames/s" in proc.stdout
