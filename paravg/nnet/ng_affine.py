"""Kaldi's ``NaturalGradientAffineComponent``: an affine layer whose step is preconditioned
by online natural gradient on both sides.

Mirrors ``NaturalGradientAffineComponent`` (and the natural-gradient ``LinearComponent`` /
``TdnnComponent`` without bias) in ``src/nnet3/nnet-simple-component.cc``: the forward is
the plain affine map (:class:`~paravg.nnet.affine.Affine`, same parameters and state_dict
keys); the backward hands the input rows and output-derivative rows of the minibatch to
:meth:`NaturalGradientAffine.delta`, which preconditions each side with its own
:class:`~paravg.optim.ngsgd.OnlineNaturalGradient` (``natural-gradient-online.cc``, in
:mod:`paravg.optim.ngsgd` with the maths) and forms the step. The model builders get the
layer through :func:`make_affine_factory` (``trainer.ngsgd``); the LSTM's own
``LstmNonlinearity`` uses the preconditioner directly (:mod:`paravg.nnet.lstm`).

Where next: a component that wants natural gradient on another parameter shape uses
:class:`~paravg.optim.ngsgd.OnlineNaturalGradient` itself, as the LSTM nonlinearity does.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any

import torch
from torch import nn

from paravg.nnet.affine import Affine, plain_affine_factory
from paravg.optim.ngsgd import NgsgdOptions, OnlineNaturalGradient


class _StashingLinear(torch.autograd.Function):
    """y = x Wᵀ + b whose backward computes only the input derivative (from the raw output
    derivative and the current W, as Kaldi's ``Backprop``) and hands (input rows,
    output-derivative rows) to the layer for :meth:`NaturalGradientAffine.delta`; no
    weight/bias gradient is formed (``weight.grad`` stays None)."""

    @staticmethod
    def forward(ctx, x, weight, bias, layer):
        ctx.save_for_backward(x, weight)
        ctx.layer = layer
        return nn.functional.linear(x, weight, bias)

    @staticmethod
    def backward(ctx, grad_out):
        x, weight = ctx.saved_tensors
        grad_in = grad_out.matmul(weight) if ctx.needs_input_grad[0] else None
        ctx.layer._stash.append(
            (x.detach().reshape(-1, x.shape[-1]), grad_out.reshape(-1, grad_out.shape[-1]))
        )
        return grad_in, None, None, None


class NaturalGradientAffine(Affine):
    """Kaldi's ``NaturalGradientAffineComponent``: an :class:`Affine` whose step is
    natural-gradient preconditioned.

    Same parameters and state_dict keys as :class:`Affine` (models are interchangeable);
    the preconditioner state is not part of the state_dict (Kaldi never saves it).

    Forward is the plain affine map through :class:`_StashingLinear`. After
    ``loss.backward()`` (loss = −F, Kaldi's summed objective), :meth:`delta` forms

        X_in = [x | 1] (N × (in+1)),  X_out = ∂loss/∂y (N × out),
        (X̂_in, γ_in) = P_in(X_in),  (X̂_out, γ_out) = P_out(X_out),
        Δ[W | b] = −lr · γ_in · γ_out · X̂_outᵀ X̂_in,

    P_in of rank min(rank_in, (in+1)//2) and dimension in+1, P_out of rank
    min(rank_out, (out+1)//2) and dimension out; the preconditioned ones column drives
    the bias (``nnet-simple-component.cc``, ``NaturalGradientAffineComponent::Update``).
    Without bias (``use_bias=False``: Kaldi's ``LinearComponent`` and the bias-free
    ``TdnnComponent``) X_in = x, of dimension in, and the step is ΔW alone.
    With ``enabled=False`` the same path runs without preconditioning (plain SGD step, a
    test oracle); :func:`make_affine_factory` returns plain :class:`Affine` instead.

    Rows: every (input row, output-derivative row) pair of the minibatch. If the layer is
    applied several times before one ``backward``, the rows of all applications are
    preconditioned together as one N×D batch (one preconditioner call per side per step,
    as Kaldi's TDNN computes each layer once for all its rows). Call :meth:`delta` once
    per backward: it consumes the stashed rows. Under ``torch.no_grad()`` or with frozen
    parameters the forward is a plain ``linear`` and stashes nothing.
    """

    def __init__(
        self,
        in_dim: int,
        out_dim: int,
        max_change: float = 0.0,
        ngsgd: Mapping[str, Any] | NgsgdOptions | None = None,
        use_bias: bool = True,
    ) -> None:
        super().__init__(in_dim, out_dim, max_change, use_bias)
        self.ngsgd = NgsgdOptions.from_config(ngsgd)
        self.rank_in = min(self.ngsgd.rank_in, (self.in_dim + 1) // 2)
        self.rank_out = min(self.ngsgd.rank_out, (self.out_dim + 1) // 2)
        self.reset_state()

    def reset_state(self) -> None:
        """Fresh preconditioners (every Kaldi job starts a new Fisher estimate)."""
        self.preconditioner_in = OnlineNaturalGradient(max(1, self.rank_in), self.ngsgd)
        self.preconditioner_out = OnlineNaturalGradient(max(1, self.rank_out), self.ngsgd)
        self._stash: list[tuple[torch.Tensor, torch.Tensor]] = []
        self._in_buffer: torch.Tensor | None = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if torch.is_grad_enabled() and any(p.requires_grad for p in self.update_params()):
            return _StashingLinear.apply(x, self.weight, self.bias, self)
        return nn.functional.linear(x, self.weight, self.bias)

    def _input_with_ones(self, x: torch.Tensor) -> torch.Tensor:
        """[x | 1] in a buffer reused across minibatches (it is preconditioned in place);
        [x] itself (a copy) for a component without bias."""
        if self.bias is None:
            return x.clone()
        N = x.shape[0]
        buf = self._in_buffer
        if buf is None or buf.shape[0] != N or buf.device != x.device or buf.dtype != x.dtype:
            buf = torch.empty(N, self.in_dim + 1, device=x.device, dtype=x.dtype)
            self._in_buffer = buf
        buf[:, : self.in_dim].copy_(x)
        buf[:, self.in_dim].fill_(1.0)
        return buf

    @torch.no_grad()
    def delta(self, lr: float) -> list[torch.Tensor]:
        """The NG step [ΔW, Δb] for this minibatch (lr included), to be added to
        [weight, bias]. Consumes the rows stashed by the last backward."""
        if not self._stash:
            raise RuntimeError(
                "NaturalGradientAffine.delta() called with no stashed rows: run forward and "
                "loss.backward() first (with grad enabled), and call delta() once per backward"
            )
        if len(self._stash) == 1:
            x, g = self._stash[0]
        else:
            x = torch.cat([s[0] for s in self._stash])
            g = torch.cat([s[1] for s in self._stash])
        self._stash = []
        x_in = self._input_with_ones(x)
        if self.ngsgd.enabled:
            xhat_in, scale_in = self.preconditioner_in.precondition_directions(x_in, inplace=True)
            xhat_out, scale_out = self.preconditioner_out.precondition_directions(g)
            step = torch.mm(xhat_out.t(), xhat_in)
            step.mul_(scale_in * scale_out * (-lr))
        else:
            step = torch.mm(g.t(), x_in)
            step.mul_(-lr)
        if self.bias is None:
            return [step]
        return [step[:, : self.in_dim], step[:, self.in_dim]]

    def extra_repr(self) -> str:
        return (
            f"{super().extra_repr()}, ngsgd={self.ngsgd.enabled}, "
            f"rank_in={self.rank_in}, rank_out={self.rank_out}"
        )


def make_affine_factory(
    ngsgd_cfg: Mapping[str, Any] | NgsgdOptions | None,
) -> Callable[..., Affine]:
    """``callable(in_dim, out_dim, max_change) -> Affine`` for the model builder: the
    natural-gradient layer when ``ngsgd_cfg['enabled']`` (the default), else plain
    :class:`Affine`. The config is validated here, before any model is built."""
    opts = NgsgdOptions.from_config(ngsgd_cfg)
    if not opts.enabled:
        return plain_affine_factory
    return functools.partial(NaturalGradientAffine, ngsgd=opts)


def uses_natural_gradient(factory: Callable[..., Affine]) -> bool:
    """Whether a model builder's affine factory makes natural-gradient components (a
    component with its own preconditioner, such as the LSTM nonlinearity, then
    preconditions its step too)."""
    probe = factory(2, 2, 0.0)
    return isinstance(probe, NaturalGradientAffine) and probe.ngsgd.enabled
