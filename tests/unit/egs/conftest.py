"""Fixtures of the egs tests (helpers live in egs_synth.py, importable from these tests)."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from egs_synth import default_lengths, loader_archive, make_data


@pytest.fixture
def synth(tmp_path):
    """A 40-utterance data set without i-vectors."""
    return make_data(tmp_path / "data", default_lengths())


@pytest.fixture
def archive(tmp_path):
    """The loader tests' archive (egs_synth.loader_archive)."""
    return loader_archive(tmp_path)
