"""train_rnn.py's shrinkage: the saturation as get_saturation.pl reads it, the decision of
each iteration, the scaling as ScaleNnet does it, and the LSTM statistics it reads, which
the model files now carry and the sync rules average."""

import pytest
import torch

from paravg.nnet.lstm import LstmNonlinearity
from paravg.nnet.model_file import build_model, model_to_file_dict
from paravg.nnet.ng_affine import make_affine_factory
from paravg.nnet.shrinkage import scale_parameters, shrinkage_value
from paravg.nnet.tdnn import TdnnModel
from paravg.sync.tensors import mean
from tests.unit.dummies import FEAT, IVEC, TARGETS, TINY_LSTM, seeded
from tests.unit.dummies import TINY_TDNN as TDNN_CFG


def model(seed=0):
    """The tiny TDNN-LSTM with natural-gradient affines."""
    return seeded(TINY_LSTM, seed, factory=make_affine_factory({"enabled": True}))


def with_stats(m, deriv_means: list[float], count: float = 10.0):
    """Give every LSTM nonlinearity of ``m`` the mean derivatives ``deriv_means`` (one
    per row: σ(i), σ(f), tanh(c_part), σ(o), tanh(c_t)) over ``count`` rows."""
    for nonlin in m.modules():
        if isinstance(nonlin, LstmNonlinearity):
            C = nonlin.cell_dim
            # units differ, their mean is the row's: ±0.01 alternating around it
            spread = torch.tensor([0.01 * (-1) ** j for j in range(C)], dtype=torch.float64)
            rows = torch.tensor(deriv_means, dtype=torch.float64)[:, None] + spread[None, :]
            nonlin.deriv_sum = rows * count
            nonlin.count = torch.tensor(count, dtype=torch.float64)
    return m


def test_saturation_is_get_saturation_pl():
    # sigmoids' largest derivative 0.25, tanh's 1: saturations 0.2, 0.6, 0.5, 0.8, 0.3
    m = with_stats(model(), [0.2, 0.1, 0.5, 0.05, 0.7])
    assert m.saturation() == pytest.approx((0.2 + 0.6 + 0.5 + 0.8 + 0.3) / 5)
    # no statistics yet (count 0), or no sigmoid/tanh at all: the script's 0.0
    assert model().saturation() == 0.0
    assert TdnnModel(TDNN_CFG, FEAT, IVEC, TARGETS).saturation() == 0.0


@pytest.mark.parametrize(
    "iteration, derivs, expected",
    [
        (0, None, 0.99),  # iteration 0 always shrinks, without looking at the model
        (5, [0.05] * 5, 0.99),  # saturated (0.8, 0.8, 0.95, 0.8, 0.95 > 0.4)
        (5, [0.24, 0.24, 0.9, 0.24, 0.9], 1.0),  # not saturated (0.04 or 0.1 each)
        (5, None, 1.0),  # no statistics: saturation 0
    ],
)
def test_shrink_value_applies_at_iteration_0_and_when_saturated(iteration, derivs, expected):
    m = model() if derivs is None else with_stats(model(), derivs)
    value, sat = shrinkage_value(iteration, 0.002, m, shrink_value=0.99)
    assert value == expected
    assert (sat is None) == (iteration == 0)


def test_proportional_shrink_and_its_interplay_with_shrink_value():
    m = with_stats(model(), [0.24, 0.24, 0.9, 0.24, 0.9])  # not saturated
    # train_dnn.py: s = 1 - p lr, no saturation check
    assert shrinkage_value(3, 0.002, m, proportional_shrink=5.0) == (pytest.approx(0.99), None)
    # train_rnn.py: a shrink-value below 1 - p lr replaces it, and 1 when not saturated
    assert shrinkage_value(3, 0.002, m, 0.95, 0.4, 5.0)[0] == 1.0
    assert shrinkage_value(3, 0.002, m, 0.995, 0.4, 5.0)[0] == pytest.approx(0.99)
    with pytest.raises(ValueError, match=r"above 0\.5"):
        shrinkage_value(3, 0.1, m, proportional_shrink=5.0)


def test_scaling_is_scale_nnet_updatable_parameters_only():
    m = with_stats(model(), [0.1] * 5)
    before = {k: v.clone() for k, v in m.state_dict().items()}
    scale_parameters(m.components(), 0.9)
    after = m.state_dict()
    updatable = {id(p) for c in m.components() for p in c.update_params()}
    scaled = {k for k, v in m.named_parameters() if id(v) in updatable}
    assert scaled and any("lstm_nonlin" in k for k in scaled)  # the peepholes too
    for k in before:
        factor = 0.9 if k in scaled else 1.0  # the LDA, priors and statistics keep theirs
        assert torch.equal(after[k], before[k] * factor), k


def test_statistics_travel_in_the_model_file_and_average_like_nnet3_average():
    a = with_stats(model(), [0.1] * 5, count=10.0)
    b = with_stats(model(), [0.2] * 5, count=30.0)
    fa, fb = model_to_file_dict(a), model_to_file_dict(b)
    keys = [k for k in fa["state_dict"] if k.endswith(("deriv_sum", "count"))]
    assert keys, "the LSTM statistics are not in the model file"
    rebuilt = build_model(fa, make_affine_factory({"enabled": True}))
    assert rebuilt.saturation() == pytest.approx(a.saturation())
    # the average's sums and count are the means: the pooled derivative over 40 rows
    avg = build_model({**fa, "state_dict": mean([fa["state_dict"], fb["state_dict"]])},
                      make_affine_factory({"enabled": True}))  # fmt: skip
    pooled = [(0.1 * 10 + 0.2 * 30) / 40] * 5
    assert avg.saturation() == pytest.approx(with_stats(model(), pooled).saturation())


def test_a_model_file_without_statistics_loads_with_none():
    fa = model_to_file_dict(with_stats(model(), [0.1] * 5))
    old = {k: v for k, v in fa["state_dict"].items() if "lstm_nonlin" not in k or "params" in k}
    m = build_model({**fa, "state_dict": old}, make_affine_factory({"enabled": True}))
    assert m.saturation() == 0.0 and all(
        float(n.count) == 0.0 for n in m.modules() if isinstance(n, LstmNonlinearity)
    )
