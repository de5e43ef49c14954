"""TDNN acoustic model: fixed LDA-like input transform, relu-renorm layers, log-softmax.

Mirrors the nnet3 xconfig network of ``local/nnet3/tuning/run_tdnn_1a.sh``:

    input  = Append(feats at input_splice offsets, ivector)   (``Append(-2..2, ivector)``)
    lda    = FixedAffineComponent(lda.mat)                     (not trained)
    layer ℓ = NormalizeComponent(ReLU(Affine(Append(h_{ℓ−1} at splice_ℓ offsets))))
    output = LogSoftmax(Affine(h_L))                           (output affine zero-initialised)

``NormalizeComponent`` (target-rms 1): y = x / sqrt(max(2⁻⁶⁶, ‖x‖² / D)). The ReLU is
Kaldi's ``RectifiedLinearComponent`` with self-repair (:mod:`paravg.nnet.relu`).
Initialisation (``nnet-simple-component.cc``): hidden W ~ N(0, 1/in_dim), b ~ N(0, 1);
output W = 0, b = 0. Max-change: 0.75 hidden, 1.5 output.

A forward pass takes a window of T input frames and produces T − left − right output
frames (the model context, :func:`paravg.nnet.family_configs.tdnn_context`).

Only the time steps the output needs are computed, as Kaldi's compiler does
(``ComputeNnetComputation`` in ``src/nnet3/nnet-compile.cc``, the dependencies from
``nnet-computation-graph.cc``): with the output at times 𝒯_L (input frame t = time t),
layer ℓ is computed at

    𝒯_{ℓ−1} = { t + o : t ∈ 𝒯_ℓ, o ∈ splice_ℓ },      𝒯_0 = the rows of the LDA layer,

which need the input frames 𝒯_0 + input_splice. For one output frame per eg (a training
minibatch) and the default splicing {0}, {±1}, {±1}, {−3, 0, 3}, tdnn3 is computed at 3
times, not 7: the rows an affine layer sees (and its natural-gradient preconditioners) are
exactly Kaldi's. When every output frame of a window is wanted, every 𝒯_ℓ is a full
range and this is the plain full-window computation. :func:`computation_plan` holds the
sets and the row selections between levels.

With an output stride f (a low frame rate, ``model.frame_subsampling_factor``: Kaldi's
decodable evaluates the network only at output t = 0, f, 2f, …), 𝒯_L is every f-th
output frame of the window, and the walk above computes each layer only where those
outputs need it: with the default splicing and f = 3, tdnn4 and tdnn3 (tdnn4's splice
{−3, 0, 3} keeps the stride) at a third of the frames, tdnn2 and tdnn1 (t + {−1, 0, 1}
of a stride-3 set) at every frame.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
from torch import nn

from paravg.nnet.acoustic import AcousticModel
from paravg.nnet.affine import Affine, plain_affine_factory
from paravg.nnet.family_configs import tdnn_context
from paravg.nnet.relu import DEFAULT_SELF_REPAIR_SCALE, RectifiedLinear
from paravg.nnet.rows import Selector, append, selector

AffineFactory = Callable[..., Affine]


def splice(h: torch.Tensor, offsets: list[int]) -> torch.Tensor:
    """Append frames at ``offsets`` along the feature axis: (B, T, D) → (B, T − span, D·len).

    Output index i holds input times i − min(offsets) + o for each offset o.
    """
    lo, hi = min(offsets), max(offsets)
    out_len = h.shape[1] - (hi - lo)
    if out_len <= 0:
        raise ValueError(f"window of {h.shape[1]} frames is too short for splice {offsets}")
    if len(offsets) == 1:
        return h[:, offsets[0] - lo : offsets[0] - lo + out_len]
    return torch.cat([h[:, o - lo : o - lo + out_len] for o in offsets], dim=-1)


def normalize_rms(x: torch.Tensor) -> torch.Tensor:
    """Kaldi NormalizeComponent with target-rms 1."""
    scale = torch.rsqrt(torch.clamp(x.pow(2).mean(dim=-1, keepdim=True), min=2.0**-66))
    return x * scale


def required_times(
    output_times: Sequence[int], splices: Sequence[Sequence[int]]
) -> list[tuple[int, ...]]:
    """The sorted times 𝒯_0 … 𝒯_L each level is computed at (𝒯_L = ``output_times``;
    level ℓ ≥ 1 is hidden layer ℓ, level 0 the LDA rows), walking the splicing back."""
    levels = [tuple(sorted(set(output_times)))]
    for offsets in reversed(splices):
        levels.append(tuple(sorted({t + o for t in levels[-1] for o in offsets})))
    return levels[::-1]


@dataclass(frozen=True)
class ComputationPlan:
    """Which rows every level of the network is computed at, for a window of T frames.

    ``times[ℓ]``: the times of level ℓ (0 = LDA rows, ℓ = hidden layer ℓ; the output
    layer shares ``times[-1]``); ``input_rows[k]``: the input frames that input-splice
    offset k takes for the LDA rows; ``layer_rows[ℓ−1][k]``: the rows of level ℓ−1 that
    offset k of layer ℓ's splice takes.
    """

    num_frames: int
    times: tuple[tuple[int, ...], ...]
    input_rows: tuple[Selector, ...]
    layer_rows: tuple[tuple[Selector, ...], ...]


@functools.lru_cache(maxsize=64)
def computation_plan(
    input_splice: tuple[int, ...],
    splices: tuple[tuple[int, ...], ...],
    num_frames: int,
    stride: int = 1,
) -> ComputationPlan:
    """The plan of a window of ``num_frames`` input frames, its output frames 0, stride,
    2·stride, … wanted (every one at stride 1): ⌈(T − left − right) / stride⌉ outputs."""
    hidden = [{"splice": list(offsets)} for offsets in splices]
    left, right = tdnn_context({"input_splice": list(input_splice), "hidden": hidden})
    num_out = num_frames - left - right
    if num_out <= 0:
        raise ValueError(
            f"window of {num_frames} frames is too short for the model context "
            f"({left} left, {right} right)"
        )
    if stride < 1:
        raise ValueError(f"output stride must be >= 1, got {stride}")
    times = required_times(range(left, left + num_out, stride), splices)
    input_rows = tuple(selector([t + o for t in times[0]]) for o in input_splice)
    layer_rows = []
    for level, offsets in enumerate(splices, start=1):
        where = {t: i for i, t in enumerate(times[level - 1])}
        layer_rows.append(tuple(selector([where[t + o] for t in times[level]]) for o in offsets))
    return ComputationPlan(num_frames, tuple(times), input_rows, tuple(layer_rows))


class TdnnModel(AcousticModel):
    """The TDNN acoustic model (module docstring); input and buffers from
    :class:`~paravg.nnet.acoustic.AcousticModel`."""

    family = "tdnn"

    def __init__(
        self,
        model_cfg: dict,
        feat_dim: int,
        ivector_dim: int,
        num_targets: int,
        affine_factory: AffineFactory = plain_affine_factory,
    ) -> None:
        super().__init__(model_cfg, feat_dim, ivector_dim, num_targets)
        self.splices: list[list[int]] = []
        layers = []
        prev = self.lda_dim
        for layer in model_cfg["hidden"]:
            offsets = list(layer.get("splice", [0]))
            self.splices.append(offsets)
            layers.append(
                affine_factory(prev * len(offsets), layer["dim"], model_cfg["max_change_hidden"])
            )
            prev = layer["dim"]
        self.hidden = nn.ModuleList(layers)
        scale = float(model_cfg.get("self_repair_scale", DEFAULT_SELF_REPAIR_SCALE))
        self.relus = nn.ModuleList(
            RectifiedLinear(layer["dim"], scale) for layer in model_cfg["hidden"]
        )
        self.output = affine_factory(prev, num_targets, model_cfg["max_change_output"])

    def components(self) -> list[Affine]:
        """Updatable components in order (Kaldi's component list)."""
        return [*self.hidden, self.output]

    def component_names(self) -> list[str]:
        return [f"tdnn{i + 1}.affine" for i in range(len(self.hidden))] + ["output.affine"]

    def init_parameters(self, seed: int) -> None:
        """Kaldi's initialisation, seeded."""
        gen = torch.Generator().manual_seed(seed)
        for comp in self.hidden:
            comp.init_kaldi(gen)
        with torch.no_grad():
            self.output.weight.zero_()
            self.output.bias.zero_()

    def reset_nonlinearity_stats(self, seed: int) -> None:
        """Zero the ReLU statistics and seed their draws (Kaldi's ``ZeroComponentStats``
        at the start of every training job)."""
        for k, relu in enumerate(self.relus):
            relu.reset_stats(seed=[seed, k])

    def plan(self, num_frames: int, stride: int = 1) -> ComputationPlan:
        """The :class:`ComputationPlan` of a window of ``num_frames`` input frames (every
        ``stride``-th output frame)."""
        return computation_plan(
            tuple(self.input_splice), tuple(tuple(s) for s in self.splices), num_frames, stride
        )

    def forward(
        self, feats: torch.Tensor, ivectors: torch.Tensor | None = None, stride: int = 1
    ) -> torch.Tensor:
        """(B, T, D) features [+ (B, iv) or per-frame i-vectors] → (B, T_out, C) log-probs
        at the window's output frames 0, stride, 2·stride, … (T_out = ⌈(T − left − right) /
        stride⌉), each layer computed only at the times those outputs need (module
        docstring)."""
        plan = self.plan(feats.shape[1], stride)
        x = self.lda_rows(feats, ivectors, plan.times[0], plan.input_rows)
        h = self.lda(x)
        for rows, comp, relu in zip(plan.layer_rows, self.hidden, self.relus, strict=True):
            h = normalize_rms(relu(comp(append(h, rows))))
        return torch.log_softmax(self.output(h), dim=-1)

    def forward_full_window(
        self, feats: torch.Tensor, ivectors: torch.Tensor | None = None
    ) -> torch.Tensor:
        """The same log-probs with every layer computed at every position of the window
        (what this model did before it followed Kaldi's compiler): the baseline of
        ``benchmarks/bench_training.py`` and ``bench_ngsgd.py``. Its natural-gradient
        layers see rows that carry no derivative."""
        x = self.lda_input(feats, ivectors)
        h = nn.functional.linear(x, self.lda_weight, self.lda_bias)
        for offsets, comp, relu in zip(self.splices, self.hidden, self.relus, strict=True):
            h = normalize_rms(relu(comp(splice(h, offsets))))
        return torch.log_softmax(self.output(h), dim=-1)
