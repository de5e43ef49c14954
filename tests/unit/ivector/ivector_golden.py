"""Kaldi's golden i-vector outputs (tests/fixtures/golden/ivector) and loaders."""

from pathlib import Path

import numpy as np

from paravg.ivector.extractor import IvectorExtractor

GOLDEN = Path(__file__).resolve().parents[2] / "fixtures" / "golden" / "ivector"
UTTS = range(4)


def load_golden(name: str) -> dict:
    with np.load(GOLDEN / name) as z:
        return {k: z[k] for k in z.files}


def extractor_from(g: dict, prefix: str = "model_") -> IvectorExtractor:
    return IvectorExtractor(
        g[prefix + "M"], g[prefix + "Sigma_inv"], g[prefix + "w_vec"], g[prefix + "prior_offset"]
    )
