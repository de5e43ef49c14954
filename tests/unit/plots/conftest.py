"""Fixtures of the plot tests (the synthetic run writer lives in plots_synth.py)."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from plots_synth import JOBS, write_run


@pytest.fixture
def full_run(tmp_path) -> Path:
    """A finished 12-iteration run, jobs ramping 1 -> 4."""
    return write_run(tmp_path / "exp" / "default", JOBS)


@pytest.fixture
def half_run(tmp_path) -> Path:
    """The same run stopped in iteration 8 with 2 of its 4 jobs finished."""
    return write_run(tmp_path / "exp" / "running", JOBS, stop_at=(8, 2), seed=1)
