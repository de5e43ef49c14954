"""benchmarks/bench_chain_den.py runs and prints its figures (at a tiny size)."""

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]


def test_bench_chain_den_prints_ms_per_frame_and_the_ratio():
    proc = subprocess.run(
        [
            sys.executable,
            str(REPO / "benchmarks" / "bench_chain_den.py"),
            *("--states", "30", "--arcs", "90", "--pdfs", "12"),
            *("--sequences", "2", "--frames", "4", "--repeats", "1"),
        ],
        capture_output=True,
        text=True,
        check=True,
        timeout=300,
    )
    assert "ms per output frame (target <= 1 ms)" in proc.stdout
    assert "ratio denominator / TDNN-F:" in proc.stdout
