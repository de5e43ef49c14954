"""One i-vector per output frame across its receptive field (issue 13 item 4), shared by
evaluation and decoding."""

import json

import kaldiio
import numpy as np
import pytest
import torch

from paravg.decode.posteriors import utterance_log_posteriors
from paravg.evaluate import evaluate_set
from paravg.io import save_torch_atomic
from paravg.nnet.model_file import model_to_file_dict
from paravg.nnet.tdnn import TdnnModel
from tests.unit.dummies import frame_by_frame, tdnn_config

CFG = tdnn_config((8, [0]), (8, [-1, 0, 1]))
PERIOD = 4


@pytest.fixture
def model():
    torch.manual_seed(0)
    m = TdnnModel(CFG, feat_dim=3, ivector_dim=2, num_targets=5)
    m.init_parameters(seed=1)
    with torch.no_grad():  # Kaldi's init zeroes the output layer: make every layer matter
        for p in m.parameters():
            p.normal_(0.0, 0.5)
    return m.eval()


def test_each_output_frame_sees_one_ivector(model):
    torch.set_grad_enabled(False)  # restored by the autouse fixture below
    rng = np.random.default_rng(0)
    feats = rng.standard_normal((11, 3))
    ivectors = 5.0 * rng.standard_normal((3, 2))
    got = utterance_log_posteriors(model, feats, ivectors, PERIOD)
    assert got.shape == (11, 5)
    torch.testing.assert_close(
        got, frame_by_frame(model, feats, ivectors, PERIOD), atol=1e-5, rtol=0
    )


def test_a_later_ivector_does_not_reach_earlier_frames(model):
    torch.set_grad_enabled(False)  # restored by the autouse fixture below
    rng = np.random.default_rng(1)
    feats = rng.standard_normal((12, 3))
    ivectors = rng.standard_normal((3, 2))
    base = utterance_log_posteriors(model, feats, ivectors, PERIOD)
    changed = ivectors.copy()
    changed[1] += 10.0  # row 1 serves output frames 4..7 only
    other = utterance_log_posteriors(model, feats, changed, PERIOD)
    torch.testing.assert_close(base[:4], other[:4])
    torch.testing.assert_close(base[8:], other[8:])
    assert not torch.allclose(base[4:8], other[4:8])


def test_evaluate_uses_the_shared_rule(model, tmp_path):
    torch.set_grad_enabled(False)  # restored by the autouse fixture below
    rng = np.random.default_rng(2)
    feats = {"u1": rng.standard_normal((9, 3)).astype(np.float32)}
    ivecs = {"u1": rng.standard_normal((3, 2)).astype(np.float32)}
    labels = {"u1": rng.integers(0, 5, 9).astype(np.int32)}
    for name, table in (("feats", feats), ("ivecs", ivecs), ("targets", labels)):
        kaldiio.save_ark(str(tmp_path / f"{name}.ark"), table, scp=str(tmp_path / f"{name}.scp"))
    (tmp_path / "period").write_text(f"{PERIOD}\n")
    save_torch_atomic(tmp_path / "m.pt", model_to_file_dict(model))
    res = evaluate_set(
        tmp_path / "m.pt",
        tmp_path / "feats.scp",
        tmp_path / "targets.scp",
        tmp_path / "eval.json",
        tmp_path / "ivecs.scp",
        tmp_path / "period",
    )
    logp = frame_by_frame(model, feats["u1"], ivecs["u1"], PERIOD)
    expected = -logp[torch.arange(9), torch.from_numpy(labels["u1"]).long()].mean()
    assert res["cross_entropy"] == pytest.approx(float(expected), abs=1e-5)
    assert json.loads((tmp_path / "eval.json").read_text())["frames"] == 9


@pytest.fixture(autouse=True)
def _restore_grad_mode():
    """These tests switch autograd off; later test modules need it back on."""
    enabled = torch.is_grad_enabled()
    yield
    torch.set_grad_enabled(enabled)
