"""Evaluation checks the eval set's target ids against the model before any forward pass."""

from __future__ import annotations

import numpy as np
import pytest

from paravg.errors import DataError
from paravg.evaluate import evaluate_set
from paravg.io import read_json, save_torch_atomic
from paravg.kaldi_io import write_ark_scp
from paravg.nnet.model_file import model_to_file_dict
from paravg.nnet.tdnn import TdnnModel
from tests.unit.dummies import tdnn_config

CFG = tdnn_config((6, [0]), input_splice=[0])


def _set(tmp_path, largest: int):
    rng = np.random.default_rng(0)
    feats = {f"u{i}": rng.standard_normal((20, 4)).astype(np.float32) for i in range(3)}
    targets = {u: (np.arange(20) % 3).astype(np.int32) for u in feats}
    targets["u1"] = targets["u1"].copy()
    targets["u1"][11] = largest
    write_ark_scp(feats.items(), tmp_path / "feats.ark", tmp_path / "feats.scp")
    data = tmp_path / "data"
    write_ark_scp(targets.items(), data / "targets.ark", data / "targets.scp")
    model = tmp_path / "final.pt"
    save_torch_atomic(model, model_to_file_dict(TdnnModel(CFG, 4, 0, 5)))
    return model, tmp_path / "feats.scp", data / "targets.scp"


def test_target_id_beyond_the_model_outputs_is_a_clear_data_error(tmp_path):
    """Bug 3: an eval id >= the model's outputs was a raw 'index 45 is out of bounds'."""
    model, feats, targets = _set(tmp_path, largest=45)
    pattern = (
        r"targets\.scp:2: utterance 'u1': target id 45 at frame 11, but the model .* 5 outputs"
    )
    with pytest.raises(DataError, match=pattern):
        evaluate_set(model, feats, targets, tmp_path / "eval.json")
    assert not (tmp_path / "eval.json").exists()


def test_ids_within_the_outputs_evaluate(tmp_path):
    model, feats, targets = _set(tmp_path, largest=4)
    result = evaluate_set(model, feats, targets, tmp_path / "eval.json")
    assert result["frames"] == 60 and read_json(tmp_path / "eval.json") == result
