"""NG-SGD (paravg.optim.ngsgd) against Kaldi's own outputs and Kaldi's own test plan.

1. Golden vectors from Kaldi's C++ ``OnlineNaturalGradient`` (tests/fixtures/golden/ngsgd,
   see the README there), compared with the README's rules and tolerances.
2. ``natural-gradient-online-test.cc``'s plan: the fast class against a dense float64
   reference (``OnlineNaturalGradientSimple`` below, which forms F_t, T_t, Y_t, Z_t, G_t
   explicitly) over 100 steps on random small shapes, with all-zero and all-one inputs;
   R Rᵀ = I; tr(F_{t+1}) = tr(T_t) without floors; norm preservation; floors.
3. The natural-gradient affine layer: gradients, the step formula, the identity path,
   determinism, config validation.
"""

from __future__ import annotations

import copy
import math
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml

from paravg.config import validate_config
from paravg.errors import ConfigError
from paravg.nnet.affine import Affine
from paravg.nnet.ng_affine import NaturalGradientAffine, make_affine_factory
from paravg.optim.ngsgd import NgsgdOptions, OnlineNaturalGradient, _orthogonalize_rows

GOLDEN = Path(__file__).resolve().parents[2] / "fixtures" / "golden" / "ngsgd"
CONFIG_YAML = Path(__file__).resolve().parents[3] / "config" / "config.yaml"


@pytest.fixture(autouse=True, scope="module")
def _one_torch_thread():
    """Tiny matrices: one thread is fastest, and on a busy machine a second intra-op
    thread made each small GEMM ~100x slower (waiting for a core)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def rel(a: np.ndarray, b: np.ndarray) -> float:
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.linalg.norm(a - b) / np.linalg.norm(b))


def load_golden(case: str) -> dict:
    with np.load(GOLDEN / f"{case}.npz", allow_pickle=False) as z:
        return {k: z[k] for k in z.files}


def preconditioner_for(g: dict) -> OnlineNaturalGradient:
    return OnlineNaturalGradient(
        rank=int(g["rank"]),
        alpha=float(g["alpha"]),
        num_samples_history=float(g["num_samples_history"]),
        update_period=int(g["update_period"]),
        epsilon=float(g["epsilon"]),
        delta=float(g["delta"]),
    )


# ------------------------------------------------------------------------ 1. Kaldi goldens


@pytest.mark.parametrize("case", ["A", "B", "D", "E", "F"])
def test_reproduces_kaldi_golden_sequence(case):
    g = load_golden(case)
    p = preconditioner_for(g)
    for t in range(int(g["T"])):
        assert p.updating() == bool(g["updating"][t]), f"{case} t={t}: updating"
        before = (
            p.W.clone() if p.W is not None else None,
            p.rho,
            None if p.d is None else p.d.copy(),
        )
        X = torch.from_numpy(g["X"][t])
        Xhat, scale = p.precondition_directions(X)
        assert p.t == g["t_counter"][t]
        assert Xhat.dtype == torch.float32 and Xhat.shape == X.shape
        if not np.any(g["X"][t]):
            assert torch.count_nonzero(Xhat) == 0, f"{case} t={t}: zero batch gives zero Xhat"
            assert float(scale) == 1.0, f"{case} t={t}: zero batch gives scale exactly 1"
        else:
            assert rel(Xhat.numpy(), g["Xhat"][t]) <= 1e-4, f"{case} t={t}: Xhat"
            assert abs(float(scale) / g["scale"][t] - 1) <= 1e-4, f"{case} t={t}: scale"
        assert abs(p.rho / g["rho"][t] - 1) <= 1e-3, f"{case} t={t}: rho"
        assert np.max(np.abs(p.d - g["d"][t])) <= 1e-4 * g["d"][t].max(), f"{case} t={t}: d"
        W, W_ref = p.W.double().numpy(), g["W"][t].astype(np.float64)
        assert rel(W.T @ W, W_ref.T @ W_ref) <= 1e-3, f"{case} t={t}: W^T W"
        if not g["updating"][t]:  # non-updating calls leave the state bitwise unchanged
            assert torch.equal(p.W, before[0]) and p.rho == before[1]
            assert np.array_equal(p.d, before[2])
        p.self_test()
    assert p.W.shape == (int(g["rank_effective"]), int(g["D"]))


@pytest.mark.parametrize("case", ["A", "B", "D", "E", "F"])
def test_init_matches_kaldi_init_state(case):
    g = load_golden(case)
    p = preconditioner_for(g)
    p._init(torch.from_numpy(g["X"][0]))
    assert p.t == 0  # Init does not count as a call
    W, W_ref = p.W.double().numpy(), g["W_init"].astype(np.float64)
    assert rel(W.T @ W, W_ref.T @ W_ref) <= 1e-3
    assert abs(p.rho / g["rho_init"] - 1) <= 1e-3
    assert np.max(np.abs(p.d - g["d_init"])) <= 1e-4 * g["d_init"].max()


@pytest.mark.parametrize("case", ["A", "F"])
def test_single_steps_teacher_forced_from_kaldi_state(case):
    """Each step on its own, starting from Kaldi's state after the previous step."""
    g = load_golden(case)
    for t in range(1, int(g["T"])):
        p = preconditioner_for(g)
        p.W = torch.from_numpy(g["W"][t - 1].copy())
        p.rho, p.d = float(g["rho"][t - 1]), g["d"][t - 1].astype(np.float64)
        p.t, p.dim = int(g["t_counter"][t - 1]), int(g["D"])
        Xhat, scale = p.precondition_directions(torch.from_numpy(g["X"][t]))
        assert rel(Xhat.numpy(), g["Xhat"][t]) <= 1e-5
        assert abs(float(scale) / g["scale"][t] - 1) <= 1e-5
        assert abs(p.rho / g["rho"][t] - 1) <= 1e-4
        assert np.max(np.abs(p.d - g["d"][t])) <= 1e-5 * g["d"][t].max()


def test_golden_floors_eps_on_zero_batches_and_delta_on_spike():
    # D: X[0..4] are all zero, so rho and d sit at epsilon; at t=5 one d is at the delta floor.
    g = load_golden("D")
    p = preconditioner_for(g)
    for t in range(6):
        p.precondition_directions(torch.from_numpy(g["X"][t]))
        if t < 5:
            assert p.rho == p.epsilon and np.all(p.d == p.epsilon)
    assert p.last_update.num_d_floored >= 1 and p.d.min() == p.last_update.floor
    # F: a dominant direction; from t=4 on some d are at delta * max(sqrt(c)), rho never.
    g = load_golden("F")
    p = preconditioner_for(g)
    for t in range(int(g["T"])):
        p.precondition_directions(torch.from_numpy(g["X"][t]))
        info = p.last_update
        assert not info.rho_floored
        if t >= 4:
            assert info.num_d_floored >= 1
            assert info.floor > p.epsilon
            assert np.count_nonzero(p.d == info.floor) == info.num_d_floored
        assert np.all(p.d >= info.floor) and p.rho >= info.floor


def test_float32_and_float64_agree():
    g = load_golden("A")
    p32, p64 = preconditioner_for(g), preconditioner_for(g)
    for t in range(int(g["T"])):
        X = torch.from_numpy(g["X"][t])
        a, sa = p32.precondition_directions(X)
        b, sb = p64.precondition_directions(X.double())
        assert b.dtype == torch.float64 and p64.W.dtype == torch.float64
        assert rel(a.numpy(), b.numpy()) <= 1e-5
        assert abs(float(sa) / float(sb) - 1) <= 1e-5
        assert abs(p32.rho / p64.rho - 1) <= 1e-4


# ------------------------------------------------ 2. dense float64 reference (Kaldi's test)


def orthonormal_special_dense(R: int, D: int) -> np.ndarray:
    M = np.zeros((R, D))
    for r in range(R):
        for i, c in enumerate(range(r, D, R)):
            M[r, c] = 1.1 if i == 0 else 1.0
        M[r] /= np.linalg.norm(M[r])
    return M


class OnlineNaturalGradientSimple:
    """Naive float64 version (as in natural-gradient-online-test.cc): explicit D×D
    matrices F_t, S_t, T_t, G_t, Y_t = R_t T_t, Z_t = Y_t Y_tᵀ; X̂ = β_t X G_t⁻¹."""

    def __init__(
        self,
        rank,
        update_period=1,
        num_samples_history=2000.0,
        alpha=4.0,
        epsilon=1e-10,
        delta=5e-4,
    ):
        self.rank, self.update_period = rank, update_period
        self.num_samples_history, self.alpha = num_samples_history, alpha
        self.epsilon, self.delta = epsilon, delta
        self.t, self.Rt = 0, None
        self.checks = []  # (R Rᵀ error, |tr F_{t+1} − tr T_t| / tr T_t or None)

    def eta(self, N):
        return min(1.0 - math.exp(-N / self.num_samples_history), 0.9)

    def init_default(self, D):
        R = min(self.rank, D - 1)
        self.Rt = orthonormal_special_dense(R, D)
        self.rho, self.d = self.epsilon, np.full(R, self.epsilon)

    def precondition(self, X):
        N, D = X.shape
        if self.t == 0:
            work = copy.deepcopy(self)
            work.init_default(D)
            work.t = 1
            for _ in range(3 if work.Rt.shape[0] < N else 1):
                work.step(X, True)
            self.Rt, self.rho, self.d = work.Rt, work.rho, work.d
        updating = self.t <= 10 or (self.t - 10) % self.update_period == 0
        out = self.step(X, updating)
        self.t += 1
        return out

    def step(self, X, updating):
        N, D = X.shape
        R = self.Rt.shape[0]
        eta = self.eta(N)
        F = self.Rt.T @ np.diag(self.d) @ self.Rt + self.rho * np.eye(D)
        G = F + self.alpha / D * np.trace(F) * np.eye(D)
        beta = self.rho + self.alpha / D * np.trace(F)
        Xhat = beta * X @ np.linalg.inv(G)
        tr_x, tr_xhat = np.sum(X * X), np.sum(Xhat * Xhat)
        gamma = 1.0 if tr_x == 0 else math.sqrt(tr_x / tr_xhat)
        if updating:
            S = X.T @ X / N
            T = eta * S + (1 - eta) * F
            Y = self.Rt @ T
            Z = Y @ Y.T
            c, U = np.linalg.eigh(Z)
            c, U = c[::-1], U[:, ::-1]
            floored = np.any(c < ((1 - eta) * self.rho) ** 2)
            c = np.maximum(c, ((1 - eta) * self.rho) ** 2)
            R1 = np.diag(1 / np.sqrt(c)) @ U.T @ Y
            rho1 = (
                eta * np.trace(S) + (1 - eta) * (D * self.rho + self.d.sum()) - np.sqrt(c).sum()
            ) / (D - R)
            d1 = np.sqrt(c) - rho1
            floor = max(self.epsilon, self.delta * np.sqrt(c).max())
            floored = floored or rho1 < floor or np.any(d1 < floor)
            rho1, d1 = max(rho1, floor), np.maximum(d1, floor)
            F1 = R1.T @ np.diag(d1) @ R1 + rho1 * np.eye(D)
            tr_err = None if floored else abs(np.trace(F1) - np.trace(T)) / np.trace(T)
            self.checks.append((np.max(np.abs(R1 @ R1.T - np.eye(R))), tr_err))
            self.Rt, self.rho, self.d = R1, rho1, d1
        return Xhat, gamma


def random_case(seed):
    """Kaldi's random sizes: R in 1..5, N in [2R, 2R+30), D in [R+1, R+21); a third of
    the cases with all-zero, a third with all-one inputs (whole batches and one column).
    An all-one batch is not used for the initialisation here: rank-1 data with d = ε makes
    the dense reference's R_{t+1} = C^{-½}UᵀY lose orthonormality to rounding (the fast
    class re-orthogonalises); that path has its own test below."""
    rng = np.random.default_rng(seed)
    R = int(rng.integers(1, 6))
    N = int(rng.integers(2 * R, 2 * R + 30))
    D = int(rng.integers(R + 1, R + 21))
    kind = ["randn", "zero", "one"][seed % 3]
    batches = []
    for t in range(100):
        X = rng.standard_normal((N, D)) * np.exp(rng.uniform(-1, 1, D))
        if kind == "zero":
            X[:, 0] = 0.0
            if t % 7 == 0:  # includes t = 0: initialisation on an all-zero minibatch
                X[:] = 0.0
        elif kind == "one":
            X[:, -1] = 1.0
            if t % 7 == 3:
                X[:] = 1.0
        batches.append(X)
    return R, N, D, batches


@pytest.mark.parametrize("update_period", [1, 4])
@pytest.mark.parametrize("seed", range(9))
def test_fast_class_matches_dense_reference(seed, update_period):
    R, _, _, batches = random_case(seed)
    fast = OnlineNaturalGradient(rank=R, update_period=update_period)
    simple = OnlineNaturalGradientSimple(rank=R, update_period=update_period)
    for t, X in enumerate(batches):
        Xhat, gamma = fast.precondition_directions(torch.from_numpy(X))
        Xhat_ref, gamma_ref = simple.precondition(X)
        if np.any(X):
            assert rel(Xhat.numpy(), Xhat_ref) <= 1e-6, f"t={t} Xhat"
        else:
            assert not np.any(Xhat.numpy()) and not np.any(Xhat_ref)
        assert abs(float(gamma) - gamma_ref) <= 1e-6 * gamma_ref, f"t={t} gamma"
        assert abs(fast.rho - simple.rho) <= 1e-6 * max(simple.rho, simple.d.max())
        assert np.max(np.abs(fast.d - simple.d)) <= 1e-6 * simple.d.max()
        fast.self_test(unit_tol=1e-6)
    for rr_err, tr_err in simple.checks:
        assert rr_err <= 1e-3  # the dense reference's own R Rᵀ = I check
        if tr_err is not None:
            assert tr_err <= 1e-9  # tr(F_{t+1}) = tr(T_t) when nothing was floored


@pytest.mark.parametrize("seed", range(6))
def test_invariants_on_random_inputs(seed):
    """Norm preservation, R Rᵀ = I, tr(F_{t+1}) = tr(T_t) without floors, floors."""
    R, _, D, batches = random_case(seed)
    for dtype, tol in ((torch.float64, 1e-12), (torch.float32, 1e-5)):
        p = OnlineNaturalGradient(rank=R, update_period=1)
        for X in batches:
            X = torch.from_numpy(X).to(dtype)
            Xhat, scale = p.precondition_directions(X)
            norm_x = float(torch.linalg.vector_norm(X.double()))
            norm_hat = float(scale) * float(torch.linalg.vector_norm(Xhat.double()))
            assert abs(norm_hat - norm_x) <= 10 * tol * max(norm_x, 1e-30)
            info = p.last_update
            assert p.rho >= info.floor and np.all(p.d >= info.floor)
            assert info.floor >= p.epsilon
            if not (info.num_c_floored or info.rho_floored or info.num_d_floored):
                trace_F1 = D * p.rho + p.d.sum()
                assert abs(trace_F1 - info.trace_T) <= 1e-5 * info.trace_T
            p.self_test(unit_tol=max(1e-4, 100 * tol))


def test_rho_floor_on_low_rank_data():
    """Data in a 2-dim subspace with R = 3: the residual variance ρ decays to the floor
    δ·max √c (η = 0.9 makes it fast); SelfTest's invariants still hold."""
    rng = np.random.default_rng(5)
    basis = rng.standard_normal((2, 12))
    p = OnlineNaturalGradient(rank=3, num_samples_history=10.0, update_period=1)
    hit = False
    for _ in range(30):
        X = torch.from_numpy(rng.standard_normal((40, 2)) @ basis)
        p.precondition_directions(X)
        info = p.last_update
        if info.rho_floored:
            hit = True
            assert p.rho == info.floor >= p.epsilon
        p.self_test()
    assert hit and p.last_update.eta == 0.9


def test_reorthogonalizes_on_ill_conditioned_data_and_still_matches_dense():
    rng = np.random.default_rng(3)
    D, R, N = 16, 5, 30
    scales = np.exp(np.linspace(-9, 9, D))
    fast = OnlineNaturalGradient(rank=R, update_period=1)
    simple = OnlineNaturalGradientSimple(rank=R)
    for _ in range(40):
        X = rng.standard_normal((N, D)) * scales
        Xhat, _ = fast.precondition_directions(torch.from_numpy(X))
        Xhat_ref, _ = simple.precondition(X)
        assert rel(Xhat.numpy(), Xhat_ref) <= 1e-6
        fast.self_test(unit_tol=1e-6)
    assert fast.num_reorthogonalizations > 0


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_init_on_an_all_one_minibatch_reorthogonalizes(dtype):
    """Rank-1 first minibatch: C_t is hugely ill-conditioned, Kaldi re-orthogonalises;
    the state stays valid (SelfTest) and later minibatches are preconditioned normally."""
    p = OnlineNaturalGradient(rank=5, update_period=1)
    Xhat, scale = p.precondition_directions(torch.ones(17, 8, dtype=dtype))
    assert p.num_reorthogonalizations > 0 and torch.isfinite(Xhat).all()
    assert float(scale) * float(torch.linalg.vector_norm(Xhat)) == pytest.approx(
        math.sqrt(17 * 8), rel=1e-5
    )
    p.self_test(unit_tol=1e-4)
    gen = torch.Generator().manual_seed(0)
    for _ in range(20):
        X = torch.randn(17, 8, generator=gen, dtype=dtype)
        Xhat, scale = p.precondition_directions(X)
        assert 1.0 < float(scale) < 10.0
        p.self_test(unit_tol=1e-4)


def _reorth_input(noise, seed=0):
    rng = np.random.default_rng(seed)
    R, D = 4, 9
    Q = np.linalg.qr(rng.standard_normal((D, R)))[0].T
    bad = Q + noise * rng.standard_normal((R, D))
    if noise > 0.01:
        bad[1] = bad[0] + 1e-4 * rng.standard_normal(D)  # nearly dependent rows
    p = OnlineNaturalGradient(rank=R)
    d1, rho1 = np.array([4.0, 2.0, 1.0, 0.5]), 0.1
    beta1 = rho1 * (1 + p.alpha) + p.alpha * d1.sum() / D
    sqrt_e1 = np.sqrt(1 / (beta1 / d1 + 1))
    return p, bad, sqrt_e1, rho1, d1


@pytest.mark.parametrize(("noise", "expect_gram_schmidt"), [(0.01, False), (0.3, True)])
def test_reorthogonalize_cholesky_and_gram_schmidt(noise, expect_gram_schmidt):
    p, bad, sqrt_e1, rho1, d1 = _reorth_input(noise)
    W1 = torch.from_numpy(sqrt_e1[:, None] * bad)
    W_new, used_gs = p._reorthogonalize(W1, rho1, d1)
    assert used_gs == expect_gram_schmidt
    Rn = W_new.numpy() / sqrt_e1[:, None]
    assert np.allclose(Rn @ Rn.T, np.eye(4), atol=1e-10)
    # Both methods keep the direction of the leading row (largest eigenvalue).
    cos = Rn[0] @ bad[0] / np.linalg.norm(bad[0])
    assert cos == pytest.approx(1.0, abs=1e-12)


def test_gram_schmidt_randomizes_zero_rows_deterministically():
    M = np.array([[1.0, 0.0, 0.0, 0.0], [2.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0]])
    a, b = _orthogonalize_rows(M, seed=7), _orthogonalize_rows(M, seed=7)
    assert np.array_equal(a, b)
    assert np.allclose(a @ a.T, np.eye(3), atol=1e-12)


# ------------------------------------------------------------ schedule, init, edge cases


def test_updating_rule_and_eta():
    p = OnlineNaturalGradient(rank=2, update_period=3)
    X = torch.randn(10, 6, generator=torch.Generator().manual_seed(0))
    pattern = []
    for _ in range(25):
        pattern.append(p.updating())
        p.precondition_directions(X)
    assert pattern == [t <= 10 or (t - 10) % 3 == 0 for t in range(25)]
    assert p.eta(512) == pytest.approx(1 - math.exp(-512 / 2000))
    assert OnlineNaturalGradient(num_samples_history=1.0).eta(512) == 0.9
    assert OnlineNaturalGradient(num_minibatches_history=8.0).eta(512) == 0.125
    frozen = OnlineNaturalGradient(rank=2)
    frozen.precondition_directions(X)
    frozen.frozen = True
    W = frozen.W.clone()
    frozen.precondition_directions(X * 3)
    assert torch.equal(frozen.W, W)


@pytest.mark.parametrize(("N", "passes"), [(3, 1), (4, 1), (5, 3)])
def test_init_uses_one_pass_when_minibatch_not_larger_than_rank(N, passes):
    X = torch.randn(N, 9, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    p = OnlineNaturalGradient(rank=4)
    p._init(X)
    manual = OnlineNaturalGradient(rank=4)
    manual._init_default(9, X.device, X.dtype)
    manual.t = 1
    for _ in range(passes):
        manual._precondition(X, updating=True, inplace=False)
        manual.t += 1
    assert torch.equal(p.W, manual.W) and p.rho == manual.rho
    assert np.array_equal(p.d, manual.d)


def test_init_default_special_matrix():
    p = OnlineNaturalGradient(rank=3, alpha=4.0)
    p._init_default(7, torch.device("cpu"), torch.float64)
    R0 = p.W.numpy() / math.sqrt(1 / (2 + (7 + 3) * 4.0 / 7))
    assert np.allclose(R0 @ R0.T, np.eye(3))
    assert R0[0, 0] / R0[0, 3] == pytest.approx(1.1) and R0[0, 1] == 0
    assert p.rho == 1e-10 and np.all(p.d == 1e-10)
    assert not np.allclose(np.ones(7) @ np.linalg.pinv(R0) @ R0, np.ones(7))


def test_rank_clamped_and_dimension_one_is_noop():
    p = OnlineNaturalGradient(rank=10)
    p.precondition_directions(torch.randn(20, 6))
    assert p.W.shape == (5, 6)
    one = OnlineNaturalGradient(rank=10)
    X = torch.randn(8, 1)
    Xhat, scale = one.precondition_directions(X)
    assert torch.equal(Xhat, X) and float(scale) == 1.0 and one.t == 0
    with pytest.raises(ValueError, match="dimension 6"):
        p.precondition_directions(torch.randn(20, 7))
    with pytest.raises(ValueError, match="N x D"):
        p.precondition_directions(torch.randn(20))
    with pytest.raises(TypeError, match="float32"):
        p.precondition_directions(torch.ones(3, 6, dtype=torch.int64))


def test_inplace_writes_xhat_into_the_input():
    g = load_golden("A")
    a, b = preconditioner_for(g), preconditioner_for(g)
    for t in range(14):
        X = torch.from_numpy(g["X"][t].copy())
        Xhat, scale = a.precondition_directions(X)
        Y = X.clone()
        Yhat, scale_b = b.precondition_directions(Y, inplace=True)
        assert Yhat is Y and torch.equal(Yhat, Xhat) and torch.equal(scale, scale_b)


def test_non_finite_minibatch_does_not_poison_the_estimate():
    gen = torch.Generator().manual_seed(6)
    p = OnlineNaturalGradient(rank=3, update_period=1)
    for _ in range(3):
        p.precondition_directions(torch.randn(20, 8, generator=gen))
    W, rho, d = p.W.clone(), p.rho, p.d.copy()
    bad = torch.randn(20, 8, generator=gen)
    bad[3, 2] = float("nan")
    Xhat, _ = p.precondition_directions(bad)
    assert torch.isnan(Xhat).any() and p.num_nonfinite_skipped == 1
    assert torch.equal(p.W, W) and p.rho == rho and np.array_equal(p.d, d)
    Xhat, scale = p.precondition_directions(torch.randn(20, 8, generator=gen))
    assert torch.isfinite(Xhat).all() and math.isfinite(float(scale))


def test_precondition_is_deterministic_and_leaves_input_alone():
    g = load_golden("E")
    outs = []
    for _ in range(2):
        p = preconditioner_for(g)
        res = []
        for t in range(int(g["T"])):
            X = torch.from_numpy(g["X"][t].copy())
            Xhat, scale = p.precondition_directions(X)
            assert np.array_equal(X.numpy(), g["X"][t])
            res.append((Xhat.numpy().tobytes(), scale.numpy().tobytes()))
        outs.append(res)
    assert outs[0] == outs[1]


@pytest.mark.parametrize(
    ("kwargs", "key"),
    [
        ({"rank": 0}, "rank"),
        ({"alpha": -1.0}, "alpha"),
        ({"num_samples_history": 0.0}, "num_samples_history"),
        ({"num_minibatches_history": 1.0}, "num_minibatches_history"),
        ({"update_period": 0}, "update_period"),
        ({"epsilon": 0.0}, "epsilon"),
        ({"delta": 0.5}, "delta"),
        ({"delta": float("nan")}, "delta"),
    ],
)
def test_constructor_rejects_nonsense(kwargs, key):
    with pytest.raises(ConfigError, match=key):
        OnlineNaturalGradient(**kwargs)


# ------------------------------------------------------------------------ 3. the layer


def make_pair(in_dim=7, out_dim=5, ngsgd=None, seed=0):
    gen = torch.Generator().manual_seed(seed)
    plain = Affine(in_dim, out_dim)
    plain.init_kaldi(gen)
    ng = NaturalGradientAffine(in_dim, out_dim, ngsgd=ngsgd)
    ng.load_state_dict(plain.state_dict())
    return plain, ng


def objective(y, targets):
    """loss = −F, Kaldi's summed (not averaged) log-likelihood."""
    return torch.nn.functional.cross_entropy(y, targets, reduction="sum")


def run_batch(layer, x, targets):
    x = x.clone().requires_grad_(True)
    y = layer(x)
    objective(y.reshape(-1, y.shape[-1]), targets.reshape(-1)).backward()
    return y, x.grad


def test_layer_is_interchangeable_with_affine():
    plain, ng = make_pair()
    assert list(ng.state_dict()) == list(plain.state_dict()) == ["weight", "bias"]
    assert isinstance(ng, Affine) and ng.max_change == 0.0
    assert NaturalGradientAffine(3, 2, max_change=0.75).max_change == 0.75
    x = torch.randn(4, 6, 7)
    assert torch.equal(ng(x), plain(x))


def test_layer_input_gradient_equals_plain_linear_and_weight_grad_is_skipped():
    plain, ng = make_pair()
    gen = torch.Generator().manual_seed(2)
    x = torch.randn(3, 8, 7, generator=gen)
    targets = torch.randint(0, 5, (3, 8), generator=gen)
    y_p, gx_p = run_batch(plain, x, targets)
    y_n, gx_n = run_batch(ng, x, targets)
    assert torch.equal(y_p, y_n)
    torch.testing.assert_close(gx_n, gx_p, rtol=1e-6, atol=1e-7)
    assert ng.weight.grad is None and ng.bias.grad is None
    # and the same against torch.nn.functional.linear directly
    xr = x.clone().requires_grad_(True)
    objective(
        torch.nn.functional.linear(xr, plain.weight, plain.bias).reshape(-1, 5), targets.reshape(-1)
    ).backward()
    torch.testing.assert_close(gx_n, xr.grad, rtol=1e-6, atol=1e-7)


def test_identity_path_gives_the_plain_sgd_step():
    plain, ng = make_pair(ngsgd={"enabled": False})
    gen = torch.Generator().manual_seed(3)
    for _ in range(3):
        x = torch.randn(16, 7, generator=gen)
        targets = torch.randint(0, 5, (16,), generator=gen)
        plain.weight.grad = plain.bias.grad = None
        run_batch(plain, x, targets)
        run_batch(ng, x, targets)
        for a, b in zip(ng.delta(0.01), plain.delta(0.01), strict=True):
            torch.testing.assert_close(a, b, rtol=1e-6, atol=1e-8)


def test_ng_step_formula_and_descent_direction():
    _, ng = make_pair(in_dim=9, out_dim=6, ngsgd={"rank_in": 3, "rank_out": 2})
    assert (ng.rank_in, ng.rank_out) == (3, 2)
    P_in, P_out = OnlineNaturalGradient(rank=3), OnlineNaturalGradient(rank=2)
    gen = torch.Generator().manual_seed(4)
    lr = 0.003
    for _ in range(14):
        x = torch.randn(32, 9, generator=gen, dtype=torch.float32)
        targets = torch.randint(0, 6, (32,), generator=gen)
        w, b = ng.weight.detach().clone().requires_grad_(True), ng.bias.detach().clone()
        b.requires_grad_(True)
        y = torch.nn.functional.linear(x, w, b)
        y.retain_grad()
        objective(y, targets).backward()
        run_batch(ng, x, targets)
        dW, db = ng.delta(lr)
        xh, s_in = P_in.precondition_directions(torch.cat([x, torch.ones(32, 1)], 1))
        gh, s_out = P_out.precondition_directions(y.grad)
        expect = -lr * float(s_in) * float(s_out) * (gh.t() @ xh)
        torch.testing.assert_close(dW, expect[:, :9], rtol=1e-5, atol=1e-9)
        torch.testing.assert_close(db, expect[:, 9], rtol=1e-5, atol=1e-9)
        # NG preconditions with positive definite A⁻¹ ⊗ B⁻¹: still a descent direction.
        assert float((dW * w.grad).sum() + (db * b.grad).sum()) < 0
        with torch.no_grad():
            ng.weight.add_(dW)
            ng.bias.add_(db)


def test_repeated_application_preconditions_all_rows_together():
    _, ng2 = make_pair(ngsgd={"rank_in": 2, "rank_out": 2})
    _, ng1 = make_pair(ngsgd={"rank_in": 2, "rank_out": 2})
    gen = torch.Generator().manual_seed(5)
    x1, x2 = torch.randn(10, 7, generator=gen), torch.randn(12, 7, generator=gen)
    t1, t2 = torch.randint(0, 5, (10,), generator=gen), torch.randint(0, 5, (12,), generator=gen)
    (objective(ng2(x1), t1) + objective(ng2(x2), t2)).backward()
    run_batch(ng1, torch.cat([x2, x1]), torch.cat([t2, t1]))
    for a, b in zip(ng2.delta(0.1), ng1.delta(0.1), strict=True):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-8)


def test_delta_needs_a_backward_and_no_grad_stashes_nothing():
    _, ng = make_pair()
    with pytest.raises(RuntimeError, match="backward"):
        ng.delta(0.1)
    with torch.no_grad():
        ng(torch.randn(4, 7))
    assert ng._stash == []
    run_batch(ng, torch.randn(4, 7), torch.zeros(4, dtype=torch.long))
    ng.delta(0.1)
    with pytest.raises(RuntimeError, match="once per backward"):
        ng.delta(0.1)


def test_reset_state_restarts_like_a_new_job_and_is_deterministic():
    def run(layer, seed):
        gen = torch.Generator().manual_seed(seed)
        out = []
        for _ in range(13):
            x = torch.randn(20, 7, generator=gen)
            run_batch(layer, x, torch.randint(0, 5, (20,), generator=gen))
            out.append([d.clone() for d in layer.delta(0.05)])
        return out

    _, a = make_pair()
    _, b = make_pair()
    run(a, 10)  # a has history now
    a.reset_state()
    assert a.preconditioner_in.t == 0 and a.preconditioner_out.t == 0
    got, expect = run(a, 11), run(b, 11)
    for da, db in zip(got, expect, strict=True):
        for x, y in zip(da, db, strict=True):
            assert x.numpy().tobytes() == y.numpy().tobytes()


def test_factory_and_options():
    plain_factory = make_affine_factory({"enabled": False})
    layer = plain_factory(10, 4, 0.75)
    assert type(layer) is Affine and layer.max_change == 0.75
    factory = make_affine_factory({"rank_in": 8, "rank_out": 30, "update_period": 2})
    layer = factory(301, 256, 0.75)
    assert isinstance(layer, NaturalGradientAffine) and layer.max_change == 0.75
    assert (layer.rank_in, layer.rank_out) == (8, 30)
    assert layer.preconditioner_in.update_period == 2
    default = make_affine_factory(None)(300, 40)
    assert (default.rank_in, default.rank_out) == (20, 20)  # min(80, (40+1)//2)
    assert NgsgdOptions.from_config({}) == NgsgdOptions()


@pytest.mark.parametrize(
    ("cfg", "key"),
    [
        ({"rank_in": 0}, "rank_in"),
        ({"rank_out": 2.5}, "rank_out"),
        ({"delta": 1.5}, "delta"),
        ({"epsilon": -1.0}, "epsilon"),
        ({"update_period": 0}, "update_period"),
        ({"enabled": "yes"}, "enabled"),
        ({"rnak_in": 3}, "rnak_in"),
    ],
)
def test_factory_rejects_bad_config(cfg, key):
    with pytest.raises(ConfigError, match=key):
        make_affine_factory(cfg)


@pytest.mark.parametrize(
    ("key", "value"), [("delta", 0.5), ("epsilon", 0.2), ("rank_out", 0), ("update_period", 0)]
)
def test_schema_rejects_bad_ngsgd_values(key, value):
    with open(CONFIG_YAML) as f:
        config = yaml.safe_load(f)
    config["trainer"]["ngsgd"][key] = value
    with pytest.raises(ConfigError, match=f"ngsgd.{key}"):
        validate_config(config)
    # the shipped values pass, and match the options' defaults (Kaldi's)
    with open(CONFIG_YAML) as f:
        ok = validate_config(yaml.safe_load(f))
    assert NgsgdOptions.from_config(ok["trainer"]["ngsgd"]) == NgsgdOptions()
