"""The TDNN: splicing, context, shapes, Kaldi initialisation, safe model files."""

import pytest
import torch

from paravg.errors import DataError, ModelFileError
from paravg.io import save_torch_atomic
from paravg.nnet.context import model_context
from paravg.nnet.model_file import build_model, load_model_file, model_to_file_dict
from paravg.nnet.tdnn import TdnnModel, normalize_rms, splice
from tests.unit.dummies import TINY_TDNN as CFG


def test_context_adds_up_over_layers():
    assert model_context(CFG) == (2 + 1 + 3, 2 + 1 + 3)
    assert model_context({"input_splice": [0], "hidden": [{"dim": 4, "splice": [-6, -3, 0]}]}) == (
        6,
        0,
    )


def test_splice_appends_offsets_in_order():
    h = torch.arange(10.0).reshape(1, 10, 1)
    out = splice(h, [-1, 0, 2])
    assert out.shape == (1, 7, 3)
    # output index i holds input times i+1-1, i+1, i+1+2
    assert out[0, 0].tolist() == [0.0, 1.0, 3.0]
    assert out[0, -1].tolist() == [6.0, 7.0, 9.0]
    with pytest.raises(ValueError, match="too short"):
        splice(torch.zeros(1, 2, 1), [-3, 0])


def test_forward_consumes_exactly_the_context():
    model = TdnnModel(CFG, feat_dim=5, ivector_dim=3, num_targets=7)
    model.init_parameters(seed=0)
    left, right = model_context(CFG)
    x = torch.randn(4, left + 8 + right, 5)
    out = model(x, torch.randn(4, 3))
    assert out.shape == (4, 8, 7)
    assert torch.allclose(out.exp().sum(-1), torch.ones(4, 8), atol=1e-5)
    # one output frame needs exactly left + 1 + right inputs
    assert model(x[:, : left + 1 + right], torch.randn(4, 3)).shape == (4, 1, 7)


def test_output_frames_depend_only_on_their_window():
    model = TdnnModel(CFG, feat_dim=5, ivector_dim=0, num_targets=7)
    model.init_parameters(seed=1)
    with torch.no_grad():
        model.output.weight.normal_()
    left, right = model_context(CFG)
    x = torch.randn(1, left + 8 + right, 5)
    full = model(x)
    single = model(x[:, 3 : 3 + left + 1 + right])
    assert torch.allclose(full[0, 3], single[0, 0], atol=1e-5)


def test_kaldi_initialisation():
    model = TdnnModel({**CFG, "hidden": [{"dim": 400, "splice": [0]}]}, 40, 0, 5)
    model.init_parameters(seed=3)
    w = model.hidden[0].weight
    assert w.std().item() == pytest.approx(1 / (200**0.5), rel=0.05)  # N(0, 1/in_dim)
    assert model.hidden[0].bias.std().item() == pytest.approx(1.0, rel=0.2)
    assert torch.count_nonzero(model.output.weight) == 0
    assert torch.count_nonzero(model.output.bias) == 0
    again = TdnnModel({**CFG, "hidden": [{"dim": 400, "splice": [0]}]}, 40, 0, 5)
    again.init_parameters(seed=3)
    assert torch.equal(again.hidden[0].weight, w)


def test_normalize_component_target_rms_one():
    x = torch.randn(3, 50) * 7
    y = normalize_rms(x)
    assert torch.allclose(y.pow(2).mean(-1), torch.ones(3), atol=1e-5)
    assert torch.equal(normalize_rms(torch.zeros(2, 4)), torch.zeros(2, 4))


def test_model_file_round_trip_and_corruption(tmp_path):
    model = TdnnModel(CFG, 5, 3, 7)
    model.init_parameters(seed=0)
    path = tmp_path / "0.pt"
    save_torch_atomic(path, model_to_file_dict(model))
    again = build_model(load_model_file(path))
    for (k, a), b in zip(model.state_dict().items(), again.state_dict().values(), strict=True):
        assert torch.equal(a, b), k
    data = path.read_bytes()
    (tmp_path / "trunc.pt").write_bytes(data[: len(data) // 2])
    with pytest.raises(ModelFileError, match=r"trunc\.pt: not a readable model file"):
        load_model_file(tmp_path / "trunc.pt")
    bad = model_to_file_dict(model)
    bad["state_dict"]["hidden.0.weight"][0, 0] = float("nan")
    save_torch_atomic(tmp_path / "nan.pt", bad)
    with pytest.raises(DataError, match="non-finite"):
        load_model_file(tmp_path / "nan.pt")


def test_saving_is_deterministic(tmp_path):
    model = TdnnModel(CFG, 5, 3, 7)
    model.init_parameters(seed=0)
    save_torch_atomic(tmp_path / "a.pt", model_to_file_dict(model))
    save_torch_atomic(tmp_path / "b.pt", model_to_file_dict(model))
    assert (tmp_path / "a.pt").read_bytes() == (tmp_path / "b.pt").read_bytes()
