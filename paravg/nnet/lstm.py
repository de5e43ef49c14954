"""TDNN-LSTM acoustic model: relu-renorm TDNN layers and Kaldi's ``fast-lstmp-layer``.

Mirrors the cross-entropy network of ``egs/wsj/s5/local/nnet3/tuning/run_tdnn_lstm_1a.sh``
as ``steps/libs/nnet3/xconfig/lstm.py`` (``XconfigFastLstmpLayer``) and
``basic_layers.py`` (``relu-renorm-layer``, ``output-layer``) expand it; the component
names are Kaldi's::

    lda      fixed-affine-layer  input=Append(input_splice offsets, ivector)
    tdnnK    relu-renorm-layer dim=D input=Append(splice)       (K.affine → ReLU → renorm)
    lstmK    fast-lstmp-layer cell-dim=C recurrent-projection-dim=R
               non-recurrent-projection-dim=P delay=d decay-time=τ
               (K.W_all, K.lstm_nonlin, K.cr_trunc, K.W_rp)
    output   output-layer output-delay=k (affine, zero-initialised) → LogSoftmax

The fast-lstmp-layer (input x, delay d < 0, |d| the recurrence interval)::

    a_t      = W_all [x_t; r̃_{t+d}] + b_all       (4C rows: i, f, c, o parts; NG affine)
    [c_t; m_t] = LstmNonlinearity([a_t; c̃_{t+d}])  (:class:`LstmNonlinearity`)
    rp_t     = W_rp m_t + b_rp                    (R + P; the layer output)
    r_t      = rp_t[0:R]
    [c̃_t; r̃_t] = BackpropTruncation([c_t; r_t])  (scale s, :class:`BackpropTruncation`)

with c̃ and r̃ zero before the first frame the layer is computed at (``IfDefined``) and
s = 1 − |d|/τ (1 without decay-time). The nonlinearity (``LstmNonlinearityComponent``,
``src/nnet3/nnet-combined-component.cc``; ``ComputeLstmNonlinearity`` in
``src/cudamatrix/cu-math.cc``), per cell unit, with peepholes w_ic, w_fc, w_oc::

    i = σ(i_part + w_ic ⊙ c_prev)          f = σ(f_part + w_fc ⊙ c_prev)
    c_t = f ⊙ c_prev + i ⊙ tanh(c_part)     o = σ(o_part + w_oc ⊙ c_t)   (the current c_t)
    m_t = o ⊙ tanh(c_t)

Which times are computed (Kaldi's compiler, ``nnet-computation-graph.cc``): walking back
from the output times 𝒯 (the output at t reads the last layer at t + k), a TDNN layer of
splice O needs its input at 𝒯 + O; an LSTM layer at t needs its input at t and itself at
t + d *if that is computable* (``IfDefined``): so it runs at 𝒯, 𝒯 + d, 𝒯 + 2d, … down to
the first time its input can be computed from the window (the left edge of the window
less the context below it). Recurrences add no model context; the window's extra left
frames (a chunk's ``chunk-left-context``) only warm up the state. With every output frame
wanted, each level is a range of times; the LSTM runs over it in blocks of ≤ |d| frames
(the frames of one block read only earlier blocks: Kaldi's computation phases).

Derivative truncation (``--optimization.min-deriv-time`` / ``max-deriv-time``;
``DerivativeTimeLimiter`` in ``nnet-optimize-utils.cc``): derivatives of every quantity at
a time t outside [min, max] (t relative to the first output frame, as in Kaldi's egs) are
zero. Here the rows outside are computed without autograd, so no derivative reaches them,
no natural-gradient preconditioner sees them, and no self-repair or statistics come from
them (Kaldi removes their backprop commands).

Initialisation (``nnet-simple-component.cc``, ``nnet-combined-component.cc``): affine
W ~ N(0, 1/in), b ~ N(0, 1); the peepholes N(0, 1) (``param-stddev`` 1.0); the output
layer zero. Max-change: TDNN affines ``model.max_change_hidden`` (0.75), W_all and W_rp
1.5 (the fast-lstmp ``ng-affine-options``), lstm_nonlin 0.75, output 1.5.

Chunked egs and chunk training: :mod:`paravg.egs.chunking`, :mod:`paravg.train_job`; the
nnet3 export: :mod:`paravg.export.nnet3`. Not here (yet): the fast-lstmp
``dropout-proportion`` (DropoutMaskComponent; the WSJ recipe has none), ``lstmp-layer``
(the non-fast variant), backward LSTMs (delay > 0). train_rnn.py's shrinkage reads the
statistics of :class:`LstmNonlinearity`: :mod:`paravg.nnet.shrinkage`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
from torch import nn

from paravg.errors import ConfigError
from paravg.nnet.acoustic import LayerStackModel
from paravg.nnet.affine import Affine, plain_affine_factory
from paravg.nnet.family_configs import check_layers
from paravg.nnet.ng_affine import uses_natural_gradient
from paravg.nnet.relu import DEFAULT_SELF_REPAIR_SCALE, RectifiedLinear
from paravg.nnet.rows import Times, append, by_runs, grad_runs, rows_of, take
from paravg.nnet.tdnn import normalize_rms
from paravg.optim.ngsgd import OnlineNaturalGradient

AffineFactory = Callable[..., Affine]

# LstmNonlinearityComponent::InitFromConfig defaults (nnet-combined-component.cc)
SIGMOID_SELF_REPAIR_THRESHOLD = 0.05
TANH_SELF_REPAIR_THRESHOLD = 0.2
LSTM_SELF_REPAIR_SCALE = 1.0e-5
# the thresholds of the 5 nonlinearities σ(i), σ(f), tanh(c_part), σ(o), tanh(c_t)
SELF_REPAIR_THRESHOLDS = (
    SIGMOID_SELF_REPAIR_THRESHOLD,
    SIGMOID_SELF_REPAIR_THRESHOLD,
    TANH_SELF_REPAIR_THRESHOLD,
    SIGMOID_SELF_REPAIR_THRESHOLD,
    TANH_SELF_REPAIR_THRESHOLD,
)
#: Largest derivative of each of the 5 nonlinearities' functions (get_saturation.pl)
LSTM_MAX_DERIVS = (0.25, 0.25, 1.0, 0.25, 1.0)
# LstmNonlinearityComponent::InitNaturalGradient (hard-coded in Kaldi)
NONLIN_NG_RANK, NONLIN_NG_UPDATE_PERIOD, NONLIN_NG_SAMPLES_HISTORY = 20, 2, 1000.0
# fast-lstmp-layer defaults (xconfig/lstm.py)
LSTM_AFFINE_MAX_CHANGE = 1.5  # ng-affine-options ' max-change=1.5'
LSTM_NONLIN_MAX_CHANGE = 0.75  # lstm-nonlinearity-options ' max-change=0.75'
CLIPPING_THRESHOLD, ZEROING_THRESHOLD, ZEROING_INTERVAL = 30.0, 15.0, 20


# ============================================================================ nonlinearity


def lstm_values(x: torch.Tensor, params: torch.Tensor) -> dict[str, torch.Tensor]:
    """The forward quantities of ``ComputeLstmNonlinearity`` for rows x = [i_part, f_part,
    c_part, o_part, c_prev] (…, 5C) and params [w_ic; w_fc; w_oc] (3, C)."""
    C = params.shape[1]
    i_part, f_part, c_part, o_part, c_prev = x.split(C, dim=-1)
    w_ic, w_fc, w_oc = params[0], params[1], params[2]
    i = torch.sigmoid(i_part + w_ic * c_prev)
    f = torch.sigmoid(f_part + w_fc * c_prev)
    g = torch.tanh(c_part)
    c = f * c_prev + i * g
    o = torch.sigmoid(o_part + w_oc * c)
    h = torch.tanh(c)
    return {"c_prev": c_prev, "i": i, "f": f, "g": g, "c": c, "o": o, "h": h, "m": o * h}


class _LstmNonlinearityFunction(torch.autograd.Function):
    """[c_t, m_t] = LstmNonlinearity(x; params) whose backward is Kaldi's
    ``BackpropLstmNonlinearity`` with self-repair (:class:`LstmNonlinearity`)."""

    @staticmethod
    def forward(ctx, x, params, component):
        v = lstm_values(x, params)
        ctx.save_for_backward(x, params)
        ctx.component = component
        ctx.collect = component.training
        return torch.cat([v["c"], v["m"]], dim=-1)

    @staticmethod
    def backward(ctx, grad_out):
        x, params = ctx.saved_tensors
        comp = ctx.component
        C = params.shape[1]
        v = lstm_values(x, params)
        i, f, g, c, o, h, c_prev = v["i"], v["f"], v["g"], v["c"], v["o"], v["h"], v["c_prev"]
        w_ic, w_fc, w_oc = params[0], params[1], params[2]
        r_i, r_f, r_g, r_o, r_h = comp.repair_scales().to(x).unbind(0)
        gc, gm = grad_out[..., :C], grad_out[..., C:]
        # loss = −F: Kaldi's −r·(2σ − 1) and −r·tanh on dF/dx become + here
        do_in = o * (1 - o) * (h * gm) + (2 * o - 1) * r_o
        dc = (1 - h * h) * (o * gm) + gc + do_in * w_oc + h * r_h
        df_in = f * (1 - f) * (dc * c_prev) + (2 * f - 1) * r_f
        di_in = i * (1 - i) * (dc * g) + (2 * i - 1) * r_i
        dc_part = (1 - g * g) * (i * dc) + g * r_g
        dc_prev = w_ic * di_in + w_fc * df_in + f * dc
        grad_x = torch.cat([di_in, df_in, dc_part, do_in, dc_prev], dim=-1)

        def rows(t: torch.Tensor) -> torch.Tensor:
            return t.reshape(-1, C)

        grad_params = torch.stack(
            [
                (rows(c_prev) * rows(di_in)).sum(0),
                (rows(c_prev) * rows(df_in)).sum(0),
                (rows(c) * rows(do_in)).sum(0),
            ]
        )
        if ctx.collect:
            comp.accumulate_stats([rows(t) for t in (i, f, g, o, h)])
        return grad_x, grad_params, None


class LstmNonlinearity(nn.Module):
    """Kaldi's ``LstmNonlinearityComponent`` (no dropout columns): (…, 5C) → (…, 2C).

    Parameters ``params`` (3, C): rows w_ic, w_fc, w_oc (module docstring's equations).

    Backward (``BackpropLstmNonlinearity``, ``cu-math.cc``), with loss = −F: the plain
    chain rule of the equations plus Kaldi's self-repair. For each of the 5 nonlinearities
    k (σ(i), σ(f), tanh(c_part), σ(o), tanh(c_t)) and cell unit j, with the statistics of
    the job so far (``deriv_sum`` Σ_rows of σ' or tanh', ``count`` rows),

        repair_kj = scale  if deriv_sum_kj / (count + 1) < threshold_k  else 0,

    thresholds 0.05 (sigmoids) and 0.2 (tanh's), scale 1e-5; the derivative w.r.t. the
    nonlinearity's input gets + repair·(2σ(x) − 1) for a sigmoid, + repair·tanh(x) for a
    tanh (Kaldi: − on dF/dx), and it propagates like any derivative (the o-gate term into
    c_t and w_oc, the c_t term into i, f, c_part and c_prev). So with no statistics yet
    (count 0) every unit is repaired, as on the first minibatch of a Kaldi job.

    Statistics (``value_sum``, ``deriv_sum``: 5×C float64; ``count``; the rows repaired,
    ``self_repair_total``) accumulate in backward over the rows of the minibatch and join
    the ones self-repair reads at the end of the minibatch (:meth:`delta`): Kaldi's
    consolidated model update reads the model's statistics and adds the minibatch's to the
    delta, which the update adds to the model. They are zeroed by :meth:`reset_stats` (a
    job's start) and, as in Kaldi's model files, part of the state_dict (float64 buffers):
    a job's model carries its statistics, the sync rules combine them like every tensor
    (``nnet3-average`` averages them), so a synced model's are those of the jobs behind
    it. :meth:`saturations` reads them (train_rnn.py's shrinkage). A model file without
    them (paravg before they were stored) loads with zero statistics.

    Step (:meth:`delta`): the gradient of the 3×C parameters summed over all rows of the
    minibatch (Kaldi consolidates the per-phase backprops into one update), preconditioned
    by its own :class:`~paravg.optim.ngsgd.OnlineNaturalGradient` (rank 20, update period 2,
    num-samples-history 1000, Kaldi's hard-coded ``InitNaturalGradient``) when
    ``natural_gradient``, else the plain SGD step: Δ = −lr·γ·P(∂loss/∂params).
    """

    def __init__(
        self,
        cell_dim: int,
        max_change: float = LSTM_NONLIN_MAX_CHANGE,
        self_repair_scale: float = LSTM_SELF_REPAIR_SCALE,
        natural_gradient: bool = True,
    ) -> None:
        super().__init__()
        if not 0.0 <= self_repair_scale <= 0.1:
            raise ValueError(f"self_repair_scale = {self_repair_scale}; expected in [0, 0.1]")
        self.cell_dim = int(cell_dim)
        self.max_change = float(max_change)
        self.l2_regularize = 0.0
        self.orthonormal_constraint = 0.0
        self.self_repair_scale = float(self_repair_scale)
        self.natural_gradient = bool(natural_gradient)
        self.params = nn.Parameter(torch.zeros(3, self.cell_dim))
        for name, shape in self._stats_shapes().items():
            self.register_buffer(name, torch.zeros(shape, dtype=torch.float64))
        self.reset_state()
        self.reset_stats()

    def _stats_shapes(self) -> dict[str, tuple[int, ...]]:
        C = self.cell_dim
        return {"value_sum": (5, C), "deriv_sum": (5, C), "self_repair_total": (5,), "count": ()}

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs) -> None:
        # statistics absent from the file: a model file written before they were stored
        for name, shape in self._stats_shapes().items():
            state_dict.setdefault(prefix + name, torch.zeros(shape, dtype=torch.float64))
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)

    # ------------------------------------------------------------------ component hooks
    def update_params(self) -> list[nn.Parameter]:
        return [self.params]

    def init_kaldi(self, generator: torch.Generator, param_stddev: float = 1.0) -> None:
        """params ~ N(0, param_stddev²) (Kaldi's ``param-stddev`` default 1.0)."""
        with torch.no_grad():
            self.params.copy_(torch.randn(self.params.shape, generator=generator) * param_stddev)

    def reset_state(self) -> None:
        """A fresh preconditioner (every Kaldi job starts a new one)."""
        self.preconditioner = (
            OnlineNaturalGradient(
                rank=NONLIN_NG_RANK,
                update_period=NONLIN_NG_UPDATE_PERIOD,
                num_samples_history=NONLIN_NG_SAMPLES_HISTORY,
            )
            if self.natural_gradient
            else None
        )

    def reset_stats(self) -> None:
        """Kaldi's ``ZeroStats`` (start of a training job)."""
        device = self.deriv_sum.device
        for name, shape in self._stats_shapes().items():
            setattr(self, name, torch.zeros(shape, dtype=torch.float64, device=device))
        self._pending: list | None = None

    def repair_scales(self) -> torch.Tensor:
        """repair_kj of the class docstring (5, C, float64, on the statistics' device),
        from the committed statistics."""
        if self.self_repair_scale == 0.0:
            return torch.zeros_like(self.deriv_sum)
        thresholds = torch.tensor(SELF_REPAIR_THRESHOLDS, dtype=torch.float64)
        active = self.deriv_sum / (self.count + 1.0) < thresholds.to(self.deriv_sum.device)[:, None]
        return active.double() * self.self_repair_scale

    def accumulate_stats(self, values: Sequence[torch.Tensor]) -> None:
        """Add one backward's rows (the 5 nonlinearity outputs, N × C each) to the
        minibatch's statistics (on the rows' device: no host synchronisation)."""
        i, f, g, o, h = (t.detach().double() for t in values)
        self._to(i.device)
        vals = torch.stack([i, f, g, o, h]).sum(1)
        # σ' = σ(1 − σ), tanh' = 1 − tanh²
        derivs = torch.stack([i * (1 - i), f * (1 - f), 1 - g * g, o * (1 - o), 1 - h * h]).sum(1)
        n = i.shape[0]
        repaired = (self.repair_scales() > 0).sum(1).double() * n
        if self._pending is None:
            self._pending = [vals, derivs, repaired, float(n)]
        else:
            p = self._pending
            self._pending = [p[0] + vals, p[1] + derivs, p[2] + repaired, p[3] + n]

    def _to(self, device: torch.device) -> None:
        if self.deriv_sum.device != device:
            for name in self._stats_shapes():
                setattr(self, name, getattr(self, name).to(device))

    def commit_stats(self) -> None:
        """End of a minibatch: its statistics join the ones self-repair reads."""
        if self._pending is None:
            return
        vals, derivs, repaired, n = self._pending
        self.value_sum = self.value_sum + vals
        self.deriv_sum = self.deriv_sum + derivs
        self.self_repair_total = self.self_repair_total + repaired
        self.count = self.count + n
        self._pending = None

    @torch.no_grad()
    def delta(self, lr: float) -> list[torch.Tensor]:
        """The step for ``params`` after backward of loss = −F (class docstring); also ends
        the minibatch for the statistics."""
        self.commit_stats()
        grad = self.params.grad
        if grad is None:
            return [torch.zeros_like(self.params)]
        if self.preconditioner is None:
            return [-lr * grad]
        xhat, scale = self.preconditioner.precondition_directions(grad.clone(), inplace=True)
        return [xhat * (scale * -lr)]

    # ------------------------------------------------------------------ computation
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if torch.is_grad_enabled() and (x.requires_grad or self.params.requires_grad):
            return _LstmNonlinearityFunction.apply(x, self.params, self)
        v = lstm_values(x, self.params)
        return torch.cat([v["c"], v["m"]], dim=-1)

    def saturations(self) -> list[float]:
        """``get_saturation.pl`` on this component: 1 − (mean derivative / the largest
        derivative its function has) for each of its five nonlinearities, the mean
        derivative Σ_units deriv_sum / count / C; none before it has statistics."""
        count = float(self.count)
        if count <= 0.0:
            return []
        mean_derivs = self.deriv_sum.double().mean(dim=1) / count
        return [1.0 - float(d) / top for d, top in zip(mean_derivs, LSTM_MAX_DERIVS, strict=True)]

    def extra_repr(self) -> str:
        return (
            f"cell_dim={self.cell_dim}, max_change={self.max_change}, "
            f"self_repair_scale={self.self_repair_scale}, ng={self.natural_gradient}"
        )


# ============================================================================ truncation


def zeroing_boundary(times: Sequence[int], num_seqs: int, interval: int, recurrence: int):
    """(num_seqs, |times|) bool: row (n, t) is a zeroing boundary, ⌊(t − n)/interval⌋ ≠
    ⌊(t − recurrence − n)/interval⌋ (``BackpropTruncationComponent::PrecomputeIndexes``)."""
    t = torch.tensor(list(times), dtype=torch.long)[None, :]
    n = torch.arange(num_seqs, dtype=torch.long)[:, None]
    return torch.div(t - n, interval, rounding_mode="floor") != torch.div(
        t - recurrence - n, interval, rounding_mode="floor"
    )


class _TruncationFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, scale, clipping_threshold, zeroing_threshold, boundary):
        ctx.scale = scale
        ctx.clipping_threshold, ctx.zeroing_threshold = clipping_threshold, zeroing_threshold
        ctx.save_for_backward(boundary)
        return x * scale if scale != 1.0 else x.clone()

    @staticmethod
    def backward(ctx, dy):
        (boundary,) = ctx.saved_tensors
        g = dy * ctx.scale if ctx.scale != 1.0 else dy
        norm = torch.linalg.vector_norm(g, dim=-1)
        factor = torch.ones_like(norm)
        if ctx.clipping_threshold > 0:
            factor = torch.where(
                norm > ctx.clipping_threshold, ctx.clipping_threshold / norm, factor
            )
        if ctx.zeroing_threshold > 0:
            zero = (norm > ctx.zeroing_threshold) & boundary.to(norm.device)
            factor = torch.where(zero, torch.zeros_like(factor), factor)
        return g * factor[..., None], None, None, None, None


class BackpropTruncation(nn.Module):
    """Kaldi's ``BackpropTruncationComponent`` (``nnet-general-component.cc``).

    Forward y = s·x. Backward, per row (one frame t of one sequence n): g = s·dy, then
    g ← g · min(1, clipping_threshold/‖g‖) and g ← 0 if ‖g‖ > zeroing_threshold (the
    norm before clipping) and (n, t) is a zeroing boundary (:func:`zeroing_boundary`,
    recurrence interval |d|); a threshold ≤ 0 turns its mechanism off. Not updatable.
    """

    def __init__(
        self,
        scale: float = 1.0,
        clipping_threshold: float = CLIPPING_THRESHOLD,
        zeroing_threshold: float = ZEROING_THRESHOLD,
        zeroing_interval: int = ZEROING_INTERVAL,
        recurrence_interval: int = 1,
    ) -> None:
        super().__init__()
        self.scale = float(scale)
        self.clipping_threshold = float(clipping_threshold)
        self.zeroing_threshold = float(zeroing_threshold)
        self.zeroing_interval = int(zeroing_interval)
        self.recurrence_interval = int(recurrence_interval)

    def forward(self, x: torch.Tensor, times: Sequence[int]) -> torch.Tensor:
        """x (B, |times|, dim) at ``times`` (relative to the first output frame)."""
        if not (torch.is_grad_enabled() and x.requires_grad):
            return x * self.scale if self.scale != 1.0 else x
        boundary = zeroing_boundary(
            times, x.shape[0], self.zeroing_interval, self.recurrence_interval
        )
        return _TruncationFunction.apply(
            x, self.scale, self.clipping_threshold, self.zeroing_threshold, boundary
        )

    def extra_repr(self) -> str:
        return (
            f"scale={self.scale}, clipping_threshold={self.clipping_threshold}, "
            f"zeroing_threshold={self.zeroing_threshold}, "
            f"zeroing_interval={self.zeroing_interval}, "
            f"recurrence_interval={self.recurrence_interval}"
        )


# ============================================================================ layers


class ReluRenormLayer(nn.Module):
    """``relu-renorm-layer``: y(t) = renorm(ReLU(W [x(t + o)]_{o ∈ splice} + b))."""

    def __init__(self, name, in_dim, dim, splice, max_change, repair, factory) -> None:
        super().__init__()
        self.name = name
        self.splice = tuple(int(o) for o in splice)
        self.affine = factory(in_dim * len(self.splice), dim, max_change)
        self.relu = RectifiedLinear(dim, repair)

    def parts(self) -> list[tuple[str, nn.Module]]:
        return [(f"{self.name}.affine", self.affine)]

    def computed_times(self, needed: Times, first: int) -> Times:
        return needed

    def input_times(self, times: Times) -> Times:
        return tuple(sorted({t + o for t in times for o in self.splice}))

    def computable_from(self, first: int) -> int:
        """The first time this layer can be computed at when its input starts at ``first``."""
        return first - min(self.splice)

    def forward(self, h, have: Times, times: Times, runs, offset: int) -> torch.Tensor:
        def compute(ts: Times) -> torch.Tensor:
            x = append(h, [rows_of(have, tuple(t + o for t in ts)) for o in self.splice])
            return normalize_rms(self.relu(self.affine(x)))

        return by_runs(runs, compute)


class FastLstmpLayer(nn.Module):
    """``fast-lstmp-layer`` (module docstring): components ``W_all`` (NG affine,
    dim(x) + R → 4C), ``lstm_nonlin``, ``cr_trunc``, ``W_rp`` (C → R + P)."""

    def __init__(
        self,
        name: str,
        in_dim: int,
        cell_dim: int,
        recurrent_projection_dim: int,
        non_recurrent_projection_dim: int,
        delay: int,
        decay_time: float,
        clipping_threshold: float,
        zeroing_threshold: float,
        zeroing_interval: int,
        max_change: float,
        nonlinearity_max_change: float,
        self_repair_scale: float,
        l2_regularize: float,
        factory: AffineFactory,
        natural_gradient: bool,
    ) -> None:
        super().__init__()
        C, R, P = int(cell_dim), int(recurrent_projection_dim), int(non_recurrent_projection_dim)
        if delay == 0:
            raise ConfigError(f"{name}: delay 0 is not allowed (Kaldi: delay must be nonzero)")
        if delay > 0:
            raise ConfigError(
                f"{name}: delay {delay} > 0 (a backward LSTM) is not supported; use delay < 0"
            )
        if R + P > C:
            raise ConfigError(
                f"{name}: recurrent_projection_dim + non_recurrent_projection_dim "
                f"({R} + {P}) must be <= cell_dim ({C})"
            )
        scale = 1.0 if decay_time < 0 else 1.0 - abs(delay) / decay_time
        if scale <= 0:
            raise ConfigError(f"{name}: decay_time {decay_time} gives recurrence scale {scale}")
        self.name = name
        self.cell_dim, self.rec_dim, self.nonrec_dim = C, R, P
        self.delay = int(delay)
        self.W_all = factory(in_dim + R, 4 * C, max_change)
        self.lstm_nonlin = LstmNonlinearity(
            C, nonlinearity_max_change, self_repair_scale, natural_gradient
        )
        self.cr_trunc = BackpropTruncation(
            scale, clipping_threshold, zeroing_threshold, zeroing_interval, abs(delay)
        )
        self.W_rp = factory(C, R + P, max_change)
        for comp in (self.W_all, self.lstm_nonlin, self.W_rp):
            comp.l2_regularize = float(l2_regularize)

    @property
    def output_dim(self) -> int:
        return self.rec_dim + self.nonrec_dim

    def parts(self) -> list[tuple[str, nn.Module]]:
        return [
            (f"{self.name}.W_all", self.W_all),
            (f"{self.name}.lstm_nonlin", self.lstm_nonlin),
            (f"{self.name}.W_rp", self.W_rp),
        ]

    def computed_times(self, needed: Times, first: int) -> Times:
        """``needed`` and, for every t in it, t + d, t + 2d, … while ≥ ``first`` (the
        ``IfDefined`` recurrence reaches back as far as the input is computable)."""
        step = abs(self.delay)
        out = set()
        for t in needed:
            while t >= first and t not in out:
                out.add(t)
                t -= step
        return tuple(sorted(out))

    def input_times(self, times: Times) -> Times:
        return times

    def computable_from(self, first: int) -> int:
        return first

    def blocks(self, times: Times, runs) -> list[tuple[Times, bool]]:
        """The times cut into blocks computed together: a block never holds t and
        t − |d| both, nor crosses the edge of the derivative window."""
        step = abs(self.delay)
        out: list[tuple[Times, bool]] = []
        for run, grad in runs:
            block: list[int] = []
            for t in run:
                if block and t - step >= block[0]:
                    out.append((tuple(block), grad))
                    block = []
                block.append(t)
            if block:
                out.append((tuple(block), grad))
        return out

    def forward(self, x, have: Times, times: Times, runs, offset: int) -> torch.Tensor:
        """x: the layer's input at ``have`` (= ``times``), (B, |times|, D) → (B, |times|,
        R + P). ``offset``: window time − ``offset`` = Kaldi's t (for the zeroing
        boundaries)."""
        C, R, step = self.cell_dim, self.rec_dim, abs(self.delay)
        B = x.shape[0]
        state: dict[int, torch.Tensor] = {}  # t → [c̃_t; r̃_t] (B, C + R)
        zeros = x.new_zeros(B, C + R)
        outputs = []
        for block, grad in self.blocks(times, runs):
            with torch.set_grad_enabled(grad and torch.is_grad_enabled()):
                prev = torch.stack([state.get(t - step, zeros) for t in block], dim=1)
                xb = take(x, rows_of(have, block))
                a = self.W_all(torch.cat([xb, prev[..., C:]], dim=-1))
                cm = self.lstm_nonlin(torch.cat([a, prev[..., :C]], dim=-1))
                rp = self.W_rp(cm[..., C:])
                cr = self.cr_trunc(
                    torch.cat([cm[..., :C], rp[..., :R]], dim=-1), [t - offset for t in block]
                )
            state.update(zip(block, cr.unbind(1), strict=True))
            outputs.append(rp)
        return outputs[0] if len(outputs) == 1 else torch.cat(outputs, dim=1)


# ============================================================================ the model


class TdnnLstmModel(LayerStackModel):
    """The TDNN-LSTM acoustic model (module docstring), configured by
    ``model.tdnn_lstm``::

        model:
          family: tdnn_lstm
          input_splice: [-2, -1, 0, 1, 2]
          max_change_hidden: 0.75          # the relu-renorm layers
          max_change_output: 1.5
          tdnn_lstm:
            output_delay: 5                # output-layer output-delay (label delay)
            layers:
              - {type: tdnn, dim: 520}                        # splice [0] by default
              - {type: tdnn, dim: 520, splice: [-1, 0, 1]}
              - {type: lstm, cell_dim: 520, recurrent_projection_dim: 130,
                 non_recurrent_projection_dim: 130, delay: -3, decay_time: 20}
              …

    lstm keys (Kaldi's fast-lstmp-layer options, defaults as Kaldi's):
    ``recurrent_projection_dim`` (C/4), ``non_recurrent_projection_dim`` (= R), ``delay``
    (−1), ``decay_time`` (−1: off), ``clipping_threshold`` (30), ``zeroing_threshold``
    (15), ``zeroing_interval`` (20), ``max_change`` (1.5, W_all and W_rp),
    ``nonlinearity_max_change`` (0.75), ``self_repair_scale_nonlinearity`` (1e-5),
    ``l2_regularize`` (0). Layers are named tdnn1, tdnn2, … and lstm1, lstm2, … in order
    (or by ``name``).
    """

    family = "tdnn_lstm"

    def __init__(
        self,
        model_cfg: dict,
        feat_dim: int,
        ivector_dim: int,
        num_targets: int,
        affine_factory: AffineFactory = plain_affine_factory,
    ) -> None:
        super().__init__(model_cfg, feat_dim, ivector_dim, num_targets)
        cfg = model_cfg["tdnn_lstm"]
        self.output_delay = int(cfg.get("output_delay", 0))
        repair = float(model_cfg.get("self_repair_scale", DEFAULT_SELF_REPAIR_SCALE))
        mc = float(model_cfg["max_change_hidden"])
        ng = uses_natural_gradient(affine_factory)
        layers: list[nn.Module] = []
        prev, counts = self.lda_dim, {"tdnn": 0, "lstm": 0}
        for spec in check_layers(cfg):
            kind = spec["type"]
            counts[kind] += 1
            name = spec.get("name", f"{kind}{counts[kind]}")
            if kind == "tdnn":
                splice = spec.get("splice", [0])
                layers.append(
                    ReluRenormLayer(
                        name, prev, int(spec["dim"]), splice, mc, repair, affine_factory
                    )
                )
                prev = int(spec["dim"])
                continue
            C = int(spec["cell_dim"])
            R = int(spec.get("recurrent_projection_dim", 0)) or C // 4
            P = int(spec.get("non_recurrent_projection_dim", 0)) or R
            layer = FastLstmpLayer(
                name,
                prev,
                C,
                R,
                P,
                int(spec.get("delay", -1)),
                float(spec.get("decay_time", -1.0)),
                float(spec.get("clipping_threshold", CLIPPING_THRESHOLD)),
                float(spec.get("zeroing_threshold", ZEROING_THRESHOLD)),
                int(spec.get("zeroing_interval", ZEROING_INTERVAL)),
                float(spec.get("max_change", LSTM_AFFINE_MAX_CHANGE)),
                float(spec.get("nonlinearity_max_change", LSTM_NONLIN_MAX_CHANGE)),
                float(spec.get("self_repair_scale_nonlinearity", LSTM_SELF_REPAIR_SCALE)),
                float(spec.get("l2_regularize", 0.0)),
                affine_factory,
                ng,
            )
            layers.append(layer)
            prev = layer.output_dim
        self.layers = nn.ModuleList(layers)
        self.output = affine_factory(prev, num_targets, model_cfg["max_change_output"])
        self._levels: dict[tuple, list[Times]] = {}

    # ------------------------------------------------------------------ training hooks
    def relus(self) -> list[RectifiedLinear]:
        return self.modules_of(RectifiedLinear)

    def lstm_nonlinearities(self) -> list[LstmNonlinearity]:
        return self.modules_of(LstmNonlinearity)

    def saturation(self) -> float:
        """``get_saturation.pl``: the mean over every LSTM nonlinearity's five sigmoid and
        tanh functions that have statistics (:meth:`LstmNonlinearity.saturations`; 0.0
        when none has)."""
        values = [v for nonlin in self.lstm_nonlinearities() for v in nonlin.saturations()]
        return sum(values) / len(values) if values else 0.0

    def reset_nonlinearity_stats(self, seed: int) -> None:
        """``ZeroComponentStats``: the ReLUs' (and their draws' seeds) and the LSTM
        nonlinearities' statistics."""
        for k, relu in enumerate(self.relus()):
            relu.reset_stats(seed=[seed, k])
        for nonlin in self.lstm_nonlinearities():
            nonlin.reset_stats()

    # ------------------------------------------------------------------ computation
    def level_times(self, output_times: Times) -> list[Times]:
        """[𝒯_0 (LDA rows), the times of every layer, the output times] in window times
        (module docstring): the output at t reads the last layer at t + output_delay; an
        LSTM layer reaches back to the first time its input is computable."""
        first = -min(self.input_splice)  # first LDA row a window starting at 0 allows
        firsts = []
        for layer in self.layers:
            first = layer.computable_from(first)
            firsts.append(first)
        outs = tuple(sorted(set(output_times)))
        needed = tuple(t + self.output_delay for t in outs)
        levels = [outs]
        for layer, first in zip(reversed(self.layers), reversed(firsts), strict=True):
            times = layer.computed_times(needed, first)
            levels.append(times)
            needed = layer.input_times(times)
        levels.append(needed)
        return levels[::-1]

    def forward(
        self,
        feats: torch.Tensor,
        ivectors: torch.Tensor | None = None,
        stride: int = 1,
        *,
        min_deriv_time: int | None = None,
        max_deriv_time: int | None = None,
        first_output_time: int = 0,
    ) -> torch.Tensor:
        """(B, T, D) features [+ i-vectors] → (B, ⌈(T − left − right)/stride⌉, targets)
        log-probs at the window's output frames 0, stride, 2·stride, …

        Times t are Kaldi's: the window's first output frame (window frame
        ``left_context``) is at t = ``first_output_time`` (0 by default; −c for a chunk eg
        with c frames of extra left context, whose chunk starts at t = 0), so frame k of
        the window is at t = k − left_context + first_output_time. They place the
        truncation components' zeroing boundaries and the derivative window:
        ``min_deriv_time`` / ``max_deriv_time`` (None: unbounded): derivatives at times
        outside [min, max] are zero (Kaldi's ``--optimization.min-deriv-time`` /
        ``max-deriv-time``)."""
        L = self.left_context
        key = (feats.shape[1], stride)
        levels = self._levels.get(key)
        if levels is None:  # one walk per window length and stride
            levels = self.level_times(self.output_times(feats.shape[1], stride))
            self._levels[key] = levels
        offset = L - first_output_time  # window frame − offset = Kaldi's t
        lo = None if min_deriv_time is None else min_deriv_time + offset
        hi = None if max_deriv_time is None else max_deriv_time + offset

        h = self.lda(self.lda_rows(feats, ivectors, levels[0], self.input_rows(levels[0])))
        if lo is not None or hi is not None:
            keep = torch.tensor([inside for ts, inside in grad_runs(levels[0], lo, hi) for _ in ts])
            h = torch.where(keep.to(h.device)[None, :, None], h, h.detach())
        for layer, have, times in zip(self.layers, levels[:-2], levels[1:-1], strict=True):
            h = layer(h, have, times, grad_runs(times, lo, hi), offset)
        last = levels[-2]
        at = tuple(t + self.output_delay for t in levels[-1])
        y = by_runs(grad_runs(at, lo, hi), lambda ts: self.output(take(h, rows_of(last, ts))))
        return torch.log_softmax(y, dim=-1)
