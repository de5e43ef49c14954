"""EMA: closed form after k identical updates; first update copies; files."""

import pytest
import torch

from paravg.io import save_torch_atomic
from paravg.nnet.model_file import load_model_file, model_to_file_dict
from paravg.nnet.tdnn import TdnnModel
from paravg.sync.ema import ema_update, update_ema_file
from tests.unit.dummies import tdnn_config

CFG = tdnn_config((6, [0]), input_splice=[0])


def test_k_identical_updates_closed_form():
    e0 = {"w": torch.randn(5, 3, generator=torch.Generator().manual_seed(0), dtype=torch.float64)}
    w = {"w": torch.randn(5, 3, generator=torch.Generator().manual_seed(1), dtype=torch.float64)}
    alpha = 0.9
    e = e0
    for k in range(1, 31):
        e = ema_update(e, w, alpha)
        expected = alpha**k * e0["w"] + (1 - alpha**k) * w["w"]
        assert torch.allclose(e["w"], expected, atol=1e-12), k


def test_float32_model_stays_float32_and_decay_is_checked():
    e = ema_update({"w": torch.zeros(3)}, {"w": torch.ones(3)}, 0.75)
    assert e["w"].dtype == torch.float32 and torch.allclose(e["w"], torch.full((3,), 0.25))
    with pytest.raises(ValueError, match="decay"):
        ema_update({"w": torch.zeros(3)}, {"w": torch.ones(3)}, 1.0)


def test_ema_files_first_copies_then_averages(tmp_path):
    models = []
    for t in (1, 2, 3):
        m = TdnnModel(CFG, 3, 0, 4)
        m.init_parameters(t)
        d = model_to_file_dict(m, {"iteration": t})
        save_torch_atomic(tmp_path / f"{t}.pt", d)
        models.append(m.state_dict())
    update_ema_file(None, tmp_path / "1.pt", 0.5, tmp_path / "ema/1.pt", 1)
    update_ema_file(tmp_path / "ema/1.pt", tmp_path / "2.pt", 0.5, tmp_path / "ema/2.pt", 2)
    update_ema_file(tmp_path / "ema/2.pt", tmp_path / "3.pt", 0.5, tmp_path / "ema/3.pt", 3)
    e1 = load_model_file(tmp_path / "ema/1.pt")
    e3 = load_model_file(tmp_path / "ema/3.pt")
    assert e3["meta"]["ema_iteration"] == 3 and e3["model"] == CFG
    k = "hidden.0.weight"
    assert torch.equal(e1["state_dict"][k], models[0][k])
    expected = 0.25 * models[0][k] + 0.25 * models[1][k] + 0.5 * models[2][k]
    assert torch.allclose(e3["state_dict"][k], expected, atol=1e-6)


def test_an_update_is_returned_as_the_model_is_stored():
    """The pipeline's EMA file and the benchmark's offline sweep both rely on it: a float64
    running EMA is cast back to the synced model's dtype at every step."""
    e = {"w": torch.tensor([0.1, 0.2], dtype=torch.float64)}
    m = {"w": torch.tensor([1.0, 3.0], dtype=torch.float32)}
    out = ema_update(e, m, 0.9)
    assert out["w"].dtype == torch.float32
    assert out["w"].tolist() == torch.tensor([0.19, 0.48], dtype=torch.float32).tolist()
