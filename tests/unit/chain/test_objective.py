"""ComputeChainObjfAndDeriv: the objective, its derivative and the regularisers."""

import pytest
import torch

from paravg.chain.den_graph import DenominatorGraph, normalization_fst
from paravg.chain.denominator import den_forward
from paravg.chain.numerator import NumeratorGraph, num_forward_backward
from paravg.chain.objective import (
    ChainTrainingOptions,
    chain_objective,
    compute_chain_objf_and_deriv,
    xent_objective,
)
from paravg.chain.supervision import alignment_supervision


@pytest.fixture(scope="module")
def batch(chain_models, den_fst):
    ctx_dep, tm = chain_models
    norm = normalization_fst(den_fst)
    sups = [
        alignment_supervision([1, 2, 3], [9, 15, 6], ctx_dep, tm, norm),
        alignment_supervision([3, 3, 1, 2], [6, 6, 12, 6], ctx_dep, tm, norm),
    ]
    num = NumeratorGraph.from_fsts(sups, frames=10, num_pdfs=tm.num_pdfs)
    den = DenominatorGraph.from_fst(den_fst, tm.num_pdfs, torch.float64)
    return den, num


def test_objf_is_numerator_minus_denominator_and_derivs_agree(batch):
    den, num = batch
    opts = ChainTrainingOptions(leaky_hmm_coefficient=0.1, l2_regularize=0.01)
    x = torch.randn(10, 2, 6, dtype=torch.float64, generator=torch.Generator().manual_seed(6))
    x[3, 1, 2] = 35.0  # out of range: penalised
    explicit = compute_chain_objf_and_deriv(opts, den, num, x, supervision_weight=0.5)
    num_logp, num_occ = num_forward_backward(num, x)
    den_logz, _ = den_forward(den, x, 0.1)
    assert explicit.objf == pytest.approx(0.5 * float(num_logp.sum() - den_logz.sum()))
    assert explicit.objf < 0  # the numerator's paths are a subset of the denominator's
    assert explicit.weight == 0.5 * 2 * 10
    assert explicit.l2_term == pytest.approx(-0.5 * 0.5 * 0.01 * float((x * x).sum()))
    assert torch.allclose(explicit.num_post, 0.5 * num_occ)
    # per frame and sequence: Σ_k deriv = w (1 - 1) - w λ Σ_k x - out-of-range
    xr = x.clone().requires_grad_(True)
    auto = chain_objective(opts, den, num, xr, supervision_weight=0.5)
    auto.loss.backward()
    assert auto.objf == pytest.approx(explicit.objf) and auto.l2_term == pytest.approx(
        explicit.l2_term
    )
    assert torch.allclose(-xr.grad, explicit.deriv, atol=1e-12)
    no_oor = compute_chain_objf_and_deriv(
        ChainTrainingOptions(
            leaky_hmm_coefficient=0.1, l2_regularize=0.01, out_of_range_regularize=0
        ),
        den,
        num,
        x,
        supervision_weight=0.5,
    )
    diff = explicit.deriv - no_oor.deriv
    assert diff[3, 1, 2].item() == pytest.approx(-0.01 * 5.0)
    diff[3, 1, 2] = 0
    assert diff.abs().max() < 1e-12


def test_xent_targets_are_numerator_posteriors(batch):
    den, num = batch
    x = torch.randn(10, 2, 6, dtype=torch.float64)
    res = compute_chain_objf_and_deriv(ChainTrainingOptions(), den, num, x)
    assert torch.allclose(res.num_post.sum(-1), torch.ones(10, 2, dtype=torch.float64))
    y = torch.randn(10, 2, 6, dtype=torch.float64, requires_grad=True)
    xent = xent_objective(torch.log_softmax(y, -1), res.num_post)
    xent.backward()
    assert torch.allclose(y.grad, res.num_post - torch.softmax(y, -1).detach())


def test_non_finite_objective_gives_minus_ten_per_frame_and_no_derivative(batch):
    den, num = batch
    x = torch.zeros(10, 2, 6, dtype=torch.float64)
    x[0, 0, 0] = float("nan")
    res = compute_chain_objf_and_deriv(ChainTrainingOptions(), den, num, x)
    assert not res.ok and res.objf == -10.0 * res.weight and (res.deriv == 0).all()
    xr = x.clone().requires_grad_(True)
    auto = chain_objective(ChainTrainingOptions(), den, num, xr)
    assert not auto.ok and auto.objf == -10.0 * auto.weight


def test_denominator_occupancies_off_at_frame_0_abandon_the_minibatch(batch, monkeypatch):
    import paravg.chain.objective as objective

    den, num = batch
    x = torch.randn(10, 2, 6, dtype=torch.float64)
    assert compute_chain_objf_and_deriv(ChainTrainingOptions(), den, num, x).ok
    real = objective.den_backward
    monkeypatch.setattr(objective, "den_backward", lambda *a: 3 * real(*a))  # sums to 6
    res = compute_chain_objf_and_deriv(ChainTrainingOptions(), den, num, x)
    assert not res.ok and res.objf == -10.0 * res.weight and (res.deriv == 0).all()
