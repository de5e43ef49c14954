"""Kaldi's RectifiedLinearComponent statistics and self-repair (paravg.nnet.relu)."""

import pytest
import torch

from paravg.nnet.relu import RectifiedLinear
from paravg.nnet.tdnn import TdnnModel
from tests.unit.dummies import tdnn_config


class Draws:
    """Stands in for the component's generator: fixed RandInt / RandUniform answers."""

    def __init__(self, ints, uniforms):
        self.ints, self.uniforms = list(ints), list(uniforms)

    def integers(self, lo, hi):
        return self.ints.pop(0)

    def random(self):
        return self.uniforms.pop(0)


def _x():
    # unit 0 never active, unit 1 always active, unit 2 active on half the rows
    rows = torch.tensor([[-1.0, 2.0, 1.0], [-2.0, 1.0, -1.0], [-0.5, 3.0, 0.5], [-1.0, 1.0, -3.0]])
    return rows.reshape(2, 2, 3).requires_grad_(True)


def test_stats_and_the_repair_term_of_kaldis_formula():
    scale = 1e-5
    relu = RectifiedLinear(3, scale)
    relu.reset_stats(seed=0)
    relu._rng = Draws(ints=[0], uniforms=[0.3])  # first minibatch: stored even on a 0
    x = _x()
    y = relu(x)
    assert relu.count == 4 and relu.deriv_sum.tolist() == [0.0, 4.0, 2.0]
    g = torch.randn(2, 2, 3, generator=torch.Generator().manual_seed(0))
    y.backward(g)
    # d loss/dx = g·[y > 0] − r,  r = (σ/0.5)([≤ 5% active] − [> 95% active]) = 2σ(1, −1, 0)
    r = torch.tensor([2 * scale, -2 * scale, 0.0])
    torch.testing.assert_close(x.grad, g * (y > 0) - r)
    assert relu.num_repairs == 1


def test_repair_runs_on_about_half_the_minibatches_and_stats_on_about_half():
    relu = RectifiedLinear(3, 1e-5)
    relu.reset_stats(seed=0)
    relu._rng = Draws(ints=[1, 0, 1], uniforms=[0.7, 0.2])
    x = _x()
    relu(x).backward(torch.ones(2, 2, 3))  # RandUniform 0.7 > 0.5: no repair
    torch.testing.assert_close(x.grad, (x > 0).float())
    x2 = _x()
    relu(x2)  # RandInt 0 and count != 0: this minibatch is not stored
    assert relu.count == 4
    relu(x2).sum().backward()  # RandInt 1: stored; uniform 0.2: repaired
    assert relu.count == 8 and relu.num_repairs == 1


def test_plain_relu_outside_a_training_job():
    relu = RectifiedLinear(3, 1e-5)
    x = _x()
    relu(x).sum().backward()  # never reset: no statistics, no repair
    torch.testing.assert_close(x.grad, (x > 0).float())
    assert relu.count == 0
    relu.reset_stats(seed=0)
    with torch.no_grad():
        relu(_x())
    relu.eval()
    relu(_x())
    assert relu.count == 0


def test_scale_zero_is_a_plain_relu_and_out_of_range_is_an_error():
    relu = RectifiedLinear(3, 0.0)
    relu.reset_stats(seed=0)
    x = _x()
    relu(x).sum().backward()
    torch.testing.assert_close(x.grad, (x > 0).float())
    with pytest.raises(ValueError, match="self_repair_scale"):
        RectifiedLinear(3, 0.2)


def test_model_seeds_its_relus_per_job_and_repair_is_reproducible():
    cfg = tdnn_config((8, [-1, 0, 1]), (8, [0]), input_splice=[0], self_repair_scale=0.01)

    def grads(seed):
        model = TdnnModel(cfg, 4, 0, 5)
        model.init_parameters(seed=1)
        with torch.no_grad():
            model.output.weight.normal_(generator=torch.Generator().manual_seed(2))
        model.reset_nonlinearity_stats(seed)
        feats = torch.randn(16, 3, 4, generator=torch.Generator().manual_seed(3))
        for _ in range(4):
            model.zero_grad()
            (-model(feats)[:, 0, 0].sum()).backward()
        return [p.grad.clone() for p in model.parameters()], model

    a, model = grads(7)
    b, _ = grads(7)
    assert all(torch.equal(x, y) for x, y in zip(a, b, strict=True))
    assert sum(r.num_repairs for r in model.relus) > 0
    assert "relus" not in "".join(model.state_dict())  # statistics are not saved
