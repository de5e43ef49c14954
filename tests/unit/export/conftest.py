"""Fixtures of the export tests: a saved random TDNN and a random i-vector system of
matching dimensions, as paravg writes them."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
import torch

sys.path.insert(0, str(Path(__file__).parent))

from export_models import FEAT_DIM, IVECTOR_DIM, random_model

from paravg.ivector.extractor import IvectorExtractor
from paravg.ivector.features import IvectorFeaturePipeline
from paravg.ivector.ubm import DiagGmm
from paravg.nnet.model_file import model_to_file_dict


@pytest.fixture
def model_file(tmp_path):
    model = random_model()
    path = tmp_path / "final.pt"
    torch.save(model_to_file_dict(model), path)
    return path, model


@pytest.fixture
def ivector_files(tmp_path):
    """pca.npz, ubm.npz, extractor.npz of a random system (40-dim MFCC, splice 3)."""
    rng = np.random.default_rng(0)
    context, pca_dim, num_gauss = 3, 12, 8
    in_dim = FEAT_DIM * (2 * context + 1)
    transform = rng.standard_normal((pca_dim, in_dim + 1)) * 0.01
    global_cmvn = np.zeros((2, FEAT_DIM + 1))
    global_cmvn[0, :FEAT_DIM] = rng.standard_normal(FEAT_DIM) * 100
    global_cmvn[1, :FEAT_DIM] = 1e4
    global_cmvn[0, FEAT_DIM] = 100
    IvectorFeaturePipeline(transform, context, global_cmvn).save(tmp_path / "pca.npz")
    w = rng.random(num_gauss) + 0.5
    ubm = DiagGmm(w / w.sum(), rng.standard_normal((num_gauss, pca_dim)),
                  rng.random((num_gauss, pca_dim)) + 0.5)  # fmt: skip
    ubm.save(tmp_path / "ubm.npz")
    IvectorExtractor.from_ubm(ubm, IVECTOR_DIM, rng).save(tmp_path / "extractor.npz")
    return tmp_path / "pca.npz", tmp_path / "ubm.npz", tmp_path / "extractor.npz"
