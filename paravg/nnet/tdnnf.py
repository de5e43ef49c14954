"""TDNN-F acoustic model: Kaldi's factorised TDNN (``tdnnf-layer``) with batch-norm,
continuous dropout and bypass, a linear bottleneck before a prefinal layer, log-softmax.

Mirrors the cross-entropy network of ``egs/librispeech/s5/local/nnet3/tuning/
run_tdnn_1c.sh`` (the topology of ``egs/swbd/s5c/local/chain/tuning/run_tdnn_7q.sh``;
the options of its ``tdnn_opts``, ``tdnnf_opts``, ``linear_opts``, ``prefinal_opts``,
``output_opts``), as ``steps/libs/nnet3/xconfig/composite_layers.py`` expands it (the
component names are Kaldi's)::

    lda          fixed-affine-layer  input=Append(input_splice offsets, ivector)
    tdnn1        relu-batchnorm-dropout-layer dim=D₁ l2-regularize=λ
                   (affine → ReLU → BatchNorm → GeneralDropout, per-dim continuous)
    tdnnf2 …     tdnnf-layer dim=D bottleneck-dim=B time-stride=s bypass-scale=β
                   l2-regularize=λ dropout-proportion=0
    prefinal-l   linear-component dim=L orthonormal-constraint=-1 l2-regularize=λ
    prefinal     prefinal-layer big-dim=P small-dim=S l2-regularize=λ
                   (affine → ReLU → BatchNorm1 → linear (orthonormal −1) → BatchNorm2)
    output       output-layer (affine, zero-initialised) → LogSoftmax, l2 λ_out

One ``tdnnf-layer`` with stride s > 0 computes, from its input x (``time-offsets``
−s,0 then 0,s; s = 0: both 0):

    h(t) = W_l [x(t − s); x(t)]                   (X.linear: no bias, semi-orthogonal)
    y(t) = β x(t) + Drop(BN(ReLU(W_a [h(t); h(t + s)] + b)))
                                                  (X.affine, X.relu, X.batchnorm,
                                                   X.dropout, X.noop = the sum)

so it adds s frames of context on each side. BatchNorm: :mod:`paravg.nnet.batchnorm`;
dropout: :mod:`paravg.nnet.dropout`; the constraint: :mod:`paravg.nnet.orthonormal`;
l2 and the per-component max-change: :mod:`paravg.train_job`. Every affine and linear
part is a natural-gradient component when ``trainer.ngsgd.enabled``.

Initialisation (``nnet-tdnn-component.cc``, ``nnet-simple-component.cc``): W ~
N(0, 1/in) for in = the spliced input dim, b ~ N(0, 1); the output layer zero.

As for the TDNN (:mod:`paravg.nnet.tdnn`), each layer is computed only at the times the
outputs need (Kaldi's compiler): walking back from the output times 𝒯, a tdnnf layer
needs its linear part at 𝒯 ∪ (𝒯 + s) and its input at those times − s and 0, and at 𝒯
for the bypass. So batch-norm sees exactly the rows Kaldi's computation holds. With an
output stride f (``model.frame_subsampling_factor``), 𝒯 is every f-th output frame and
the same walk computes each layer only where those outputs need it (with f = 3 and the
strides 1, 0, 3, 3: every part from tdnnf2's affine up at about a third of the frames,
tdnnf2's linear part at two thirds, tdnn1 at every frame).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from paravg.nnet.acoustic import LayerStackModel
from paravg.nnet.affine import Affine, plain_affine_factory
from paravg.nnet.batchnorm import BatchNorm
from paravg.nnet.context import model_objective
from paravg.nnet.dropout import GeneralDropout
from paravg.nnet.relu import DEFAULT_SELF_REPAIR_SCALE, RectifiedLinear
from paravg.nnet.rows import Times, append, rows_of, take


def shifted(times: Times, offsets: Sequence[int]) -> Times:
    """The sorted set {t + o : t ∈ times, o ∈ offsets}."""
    return tuple(sorted({t + o for t in times for o in offsets}))


def spliced(h: torch.Tensor, have: Times, times: Times, offsets: Sequence[int]) -> torch.Tensor:
    """``Append`` of the level ``h`` (rows at ``have``) at times + o, o in ``offsets``."""
    return append(h, [rows_of(have, tuple(t + o for t in times)) for o in offsets])


class ReluBatchnormDropoutLayer(nn.Module):
    """``relu-batchnorm-dropout-layer`` (input at the same times): affine → ReLU →
    BatchNorm → GeneralDropout."""

    def __init__(self, name, in_dim, dim, max_change, l2, repair, factory) -> None:
        super().__init__()
        self.name = name
        self.affine = factory(in_dim, dim, max_change)
        self.affine.l2_regularize = l2
        self.relu = RectifiedLinear(dim, repair)
        self.batchnorm = BatchNorm(dim)
        self.dropout = GeneralDropout(dim)

    def parts(self) -> list[tuple[str, Affine]]:
        return [(f"{self.name}.affine", self.affine)]

    def input_times(self, times: Times) -> Times:
        return times

    def forward(self, h: torch.Tensor, have: Times, times: Times) -> torch.Tensor:
        x = take(h, rows_of(have, times))
        return self.dropout(self.batchnorm(self.relu(self.affine(x))))


class TdnnfLayer(nn.Module):
    """``tdnnf-layer`` (module docstring)."""

    def __init__(
        self, name, dim, bottleneck, stride, bypass, max_change, l2, repair, factory
    ) -> None:
        super().__init__()
        self.name, self.stride, self.bypass_scale = name, int(stride), float(bypass)
        s = self.stride
        self.linear_offsets = (-s, 0) if s > 0 else (0,)
        self.affine_offsets = (0, s) if s > 0 else (0,)
        self.linear = factory(
            dim * len(self.linear_offsets), bottleneck, max_change, use_bias=False
        )
        self.linear.l2_regularize = l2
        self.linear.orthonormal_constraint = -1.0
        self.affine = factory(bottleneck * len(self.affine_offsets), dim, max_change)
        self.affine.l2_regularize = l2
        self.relu = RectifiedLinear(dim, repair)
        self.batchnorm = BatchNorm(dim)
        self.dropout = GeneralDropout(dim)

    def parts(self) -> list[tuple[str, Affine]]:
        return [(f"{self.name}.linear", self.linear), (f"{self.name}.affine", self.affine)]

    def linear_times(self, times: Times) -> Times:
        return shifted(times, self.affine_offsets)

    def input_times(self, times: Times) -> Times:
        needed = set(shifted(self.linear_times(times), self.linear_offsets))
        if self.bypass_scale != 0.0:
            needed.update(times)
        return tuple(sorted(needed))

    def forward(self, h: torch.Tensor, have: Times, times: Times) -> torch.Tensor:
        at = self.linear_times(times)
        bottleneck = self.linear(spliced(h, have, at, self.linear_offsets))
        y = self.affine(spliced(bottleneck, at, times, self.affine_offsets))
        y = self.dropout(self.batchnorm(self.relu(y)))
        if self.bypass_scale != 0.0:
            y = y + self.bypass_scale * take(h, rows_of(have, times))
        return y


class LinearLayer(nn.Module):
    """``linear-component`` with ``orthonormal-constraint=-1``: y = W x, no bias."""

    def __init__(self, name, in_dim, dim, max_change, l2, factory) -> None:
        super().__init__()
        self.name = name
        self.linear = factory(in_dim, dim, max_change, use_bias=False)
        self.linear.l2_regularize = l2
        self.linear.orthonormal_constraint = -1.0

    def parts(self) -> list[tuple[str, Affine]]:
        return [(self.name, self.linear)]

    def input_times(self, times: Times) -> Times:
        return times

    def forward(self, h: torch.Tensor, have: Times, times: Times) -> torch.Tensor:
        return self.linear(take(h, rows_of(have, times)))


class PrefinalLayer(nn.Module):
    """``prefinal-layer``: affine → ReLU → BatchNorm1 → linear (orthonormal −1) →
    BatchNorm2."""

    def __init__(self, name, in_dim, big, small, max_change, l2, repair, factory) -> None:
        super().__init__()
        self.name = name
        self.affine = factory(in_dim, big, max_change)
        self.affine.l2_regularize = l2
        self.relu = RectifiedLinear(big, repair)
        self.batchnorm1 = BatchNorm(big)
        self.linear = factory(big, small, max_change, use_bias=False)
        self.linear.l2_regularize = l2
        self.linear.orthonormal_constraint = -1.0
        self.batchnorm2 = BatchNorm(small)

    def parts(self) -> list[tuple[str, Affine]]:
        return [(f"{self.name}.affine", self.affine), (f"{self.name}.linear", self.linear)]

    def input_times(self, times: Times) -> Times:
        return times

    def forward(self, h: torch.Tensor, have: Times, times: Times) -> torch.Tensor:
        x = take(h, rows_of(have, times))
        return self.batchnorm2(self.linear(self.batchnorm1(self.relu(self.affine(x)))))


class TdnnfModel(LayerStackModel):
    """The TDNN-F acoustic model (module docstring), configured by ``model.tdnnf``."""

    family = "tdnnf"

    def __init__(
        self,
        model_cfg: dict,
        feat_dim: int,
        ivector_dim: int,
        num_targets: int,
        affine_factory=plain_affine_factory,
    ) -> None:
        super().__init__(model_cfg, feat_dim, ivector_dim, num_targets)
        cfg = model_cfg["tdnnf"]
        repair = float(model_cfg.get("self_repair_scale", DEFAULT_SELF_REPAIR_SCALE))
        mc, l2 = float(model_cfg["max_change_hidden"]), float(cfg["l2_regularize"])
        dim = int(cfg["dim"])
        layers: list[nn.Module] = [
            ReluBatchnormDropoutLayer(
                "tdnn1", self.lda_dim, int(cfg["tdnn1_dim"]), mc, l2, repair, affine_factory
            )
        ]
        if cfg["time_strides"] and int(cfg["tdnn1_dim"]) != dim and cfg["bypass_scale"]:
            raise ValueError(
                f"model.tdnnf: tdnn1_dim ({cfg['tdnn1_dim']}) must equal dim ({dim}) for the "
                "first tdnnf layer's bypass (or set bypass_scale 0)"
            )
        prev = int(cfg["tdnn1_dim"])
        for k, stride in enumerate(cfg["time_strides"], start=2):
            layers.append(
                TdnnfLayer(
                    f"tdnnf{k}",
                    dim,
                    int(cfg["bottleneck_dim"]),
                    stride,
                    cfg["bypass_scale"],
                    mc,
                    l2,
                    repair,
                    affine_factory,
                )
            )
            prev = dim
        layers.append(
            LinearLayer("prefinal-l", prev, int(cfg["linear_dim"]), mc, l2, affine_factory)
        )
        layers.append(
            PrefinalLayer(
                "prefinal",
                int(cfg["linear_dim"]),
                int(cfg["prefinal_big_dim"]),
                int(cfg["prefinal_small_dim"]),
                mc,
                l2,
                repair,
                affine_factory,
            )
        )
        self.layers = nn.ModuleList(layers)
        self.output = affine_factory(
            int(cfg["prefinal_small_dim"]), num_targets, model_cfg["max_change_output"]
        )
        self.output.l2_regularize = float(cfg["output_l2_regularize"])
        self.objective = model_objective(model_cfg)
        if self.objective == "chain":  # run_tdnn_1d's xent branch from prefinal-l
            self.prefinal_xent = PrefinalLayer(
                "prefinal-xent",
                int(cfg["linear_dim"]),
                int(cfg["prefinal_big_dim"]),
                int(cfg["prefinal_small_dim"]),
                mc,
                l2,
                repair,
                affine_factory,
            )
            self.output_xent = affine_factory(
                int(cfg["prefinal_small_dim"]), num_targets, model_cfg["max_change_output"]
            )
            self.output_xent.l2_regularize = float(cfg["output_l2_regularize"])
        self._levels: dict[tuple[int, int], list[Times]] = {}

    def _named_components(self) -> list[tuple[str, nn.Module]]:
        named = super()._named_components()
        if self.objective == "chain":
            named += [*self.prefinal_xent.parts(), ("output-xent.affine", self.output_xent)]
        return named

    def init_parameters(self, seed: int) -> None:
        """As every layer stack; a chain model's ``output-xent`` is zero too (Kaldi's
        ``output-layer`` default ``param-stddev=0``)."""
        super().init_parameters(seed)
        if self.objective == "chain":
            with torch.no_grad():
                self.output.weight.zero_()
                self.output.bias.zero_()
                self.output_xent.weight.zero_()
                self.output_xent.bias.zero_()

    # ------------------------------------------------------------------ training hooks
    def relus(self) -> list[RectifiedLinear]:
        return self.modules_of(RectifiedLinear)

    def dropouts(self) -> list[GeneralDropout]:
        return self.modules_of(GeneralDropout)

    def batchnorms(self) -> list[BatchNorm]:
        return self.modules_of(BatchNorm)

    def reset_nonlinearity_stats(self, seed: int) -> None:
        """``ZeroComponentStats`` (ReLU and batch-norm statistics) and the job's seeds for
        the ReLUs' and the dropouts' draws."""
        for k, relu in enumerate(self.relus()):
            relu.reset_stats(seed=[seed, k])
        for k, dropout in enumerate(self.dropouts()):
            dropout.reset(seed=[seed, k, 1])
        for bn in self.batchnorms():
            bn.zero_stats()

    def set_dropout_proportion(self, proportion: float) -> None:
        """Kaldi's ``set-dropout-proportion name=* proportion=p`` edit."""
        for dropout in self.dropouts():
            dropout.proportion = float(proportion)

    # ------------------------------------------------------------------ computation
    def level_times(self, output_times: Times) -> list[Times]:
        """The times each level is computed at: [𝒯_0 (the LDA rows), the output times of
        every layer in order, …]; the last entry is ``output_times``."""
        levels = [tuple(sorted(set(output_times)))]
        for layer in reversed(self.layers):
            levels.append(layer.input_times(levels[-1]))
        return levels[::-1]

    def _prefinal_l(self, feats, ivectors, stride):
        """The output of every layer but the prefinal one, and the times of the last
        two levels."""
        key = (feats.shape[1], stride)
        levels = self._levels.get(key)
        if levels is None:  # one walk per window length and stride
            levels = self.level_times(self.output_times(feats.shape[1], stride))
            self._levels[key] = levels
        h = self.lda(self.lda_rows(feats, ivectors, levels[0], self.input_rows(levels[0])))
        for layer, have, times in zip(self.layers[:-1], levels[:-2], levels[1:-1], strict=True):
            h = layer(h, have, times)
        return h, levels[-2], levels[-1]

    def forward(
        self, feats: torch.Tensor, ivectors: torch.Tensor | None = None, stride: int = 1
    ) -> torch.Tensor:
        """(B, T, D) features [+ i-vectors] → (B, ⌈(T − left − right) / stride⌉, C)
        log-probs at the window's output frames 0, stride, 2·stride, …, each layer
        computed only at the times those outputs need. A chain model
        (``model.objective: chain``) gives its ``output`` without softmax."""
        h, have, times = self._prefinal_l(feats, ivectors, stride)
        y = self.output(self.layers[-1](h, have, times))
        return y if self.objective == "chain" else torch.log_softmax(y, dim=-1)

    def chain_forward(
        self, feats: torch.Tensor, ivectors: torch.Tensor | None = None, stride: int = 1
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """A chain model's two outputs: ``output`` (no softmax) and ``output-xent``
        (log-softmax), each (B, frames, C)."""
        if self.objective != "chain":
            raise ValueError("chain_forward needs model.objective: chain")
        h, have, times = self._prefinal_l(feats, ivectors, stride)
        y = self.output(self.layers[-1](h, have, times))
        xent = self.output_xent(self.prefinal_xent(h, have, times))
        return y, torch.log_softmax(xent, dim=-1)
