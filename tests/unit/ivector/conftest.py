"""Fixtures of the i-vector tests: Kaldi's golden outputs and small models."""

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from ivector_golden import load_golden

from paravg.ivector.ubm import DiagGmm


@pytest.fixture(scope="session")
def gmm_data() -> dict:
    return load_golden("gmm_and_data.npz")


@pytest.fixture(scope="session")
def golden_dgmm(gmm_data) -> DiagGmm:
    g = gmm_data
    return DiagGmm(g["dgmm_weights"], g["dgmm_means"], 1.0 / g["dgmm_inv_vars"].astype(np.float64))


@pytest.fixture(scope="session", params=["ivector_init_model.npz", "ivector_em2_model.npz"])
def golden_model(request) -> dict:
    """Each golden extractor file (random init, and after 2 EM iterations)."""
    return load_golden(request.param)


@pytest.fixture(scope="session")
def em_golden() -> dict:
    return load_golden("em_update.npz")
