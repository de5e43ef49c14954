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
frames (the model context, :func:`paravg.nnet.context.model_context`).

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
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn

from paravg.errors import DataError
from paravg.nnet.affine import Affine, plain_affine_factory
from paravg.nnet.context import model_context
from paravg.nnet.relu import DEFAULT_SELF_REPAIR_SCALE, RectifiedLinear

MODEL_FORMAT = "paravg.tdnn.v1"
AffineFactory = Callable[[int, int, float], Affine]
Selector = slice | torch.Tensor


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


def _selector(positions: list[int]) -> Selector:
    """Rows ``positions`` of a level as a slice when they are evenly spaced (a view, no
    copy), else an index tensor."""
    if len(positions) == 1:
        return slice(positions[0], positions[0] + 1)
    step = positions[1] - positions[0]
    if step > 0 and all(b - a == step for a, b in itertools.pairwise(positions)):
        return slice(positions[0], positions[-1] + 1, step)
    return torch.tensor(positions, dtype=torch.long)


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
    input_splice: tuple[int, ...], splices: tuple[tuple[int, ...], ...], num_frames: int
) -> ComputationPlan:
    """The plan of a window of ``num_frames`` input frames, all its output frames wanted."""
    hidden = [{"splice": list(offsets)} for offsets in splices]
    left, right = model_context({"input_splice": list(input_splice), "hidden": hidden})
    num_out = num_frames - left - right
    if num_out <= 0:
        raise ValueError(
            f"window of {num_frames} frames is too short for the model context "
            f"({left} left, {right} right)"
        )
    times = required_times(range(left, left + num_out), splices)
    input_rows = tuple(_selector([t + o for t in times[0]]) for o in input_splice)
    layer_rows = []
    for level, offsets in enumerate(splices, start=1):
        where = {t: i for i, t in enumerate(times[level - 1])}
        layer_rows.append(tuple(_selector([where[t + o] for t in times[level]]) for o in offsets))
    return ComputationPlan(num_frames, tuple(times), input_rows, tuple(layer_rows))


def _take(h: torch.Tensor, rows: Selector) -> torch.Tensor:
    """Rows of a (B, T, D) level along the time axis."""
    if isinstance(rows, slice):
        return h[:, rows]
    return h.index_select(1, rows.to(h.device))


def _append(h: torch.Tensor, selectors: Sequence[Selector]) -> torch.Tensor:
    """Kaldi's ``Append`` of the selected rows along the feature axis."""
    parts = [_take(h, rows) for rows in selectors]
    return parts[0] if len(parts) == 1 else torch.cat(parts, dim=-1)


class TdnnModel(nn.Module):
    """The acoustic model. Buffers: ``lda_weight``, ``lda_bias`` (fixed), ``log_priors``."""

    def __init__(
        self,
        model_cfg: dict,
        feat_dim: int,
        ivector_dim: int,
        num_targets: int,
        affine_factory: AffineFactory = plain_affine_factory,
    ) -> None:
        super().__init__()
        self.model_cfg = model_cfg
        self.feat_dim, self.ivector_dim, self.num_targets = feat_dim, ivector_dim, num_targets
        self.input_splice = list(model_cfg["input_splice"])
        self.left_context, self.right_context = model_context(model_cfg)
        lda_dim = feat_dim * len(self.input_splice) + ivector_dim
        self.lda_dim = lda_dim
        self.register_buffer("lda_weight", torch.eye(lda_dim))
        self.register_buffer("lda_bias", torch.zeros(lda_dim))
        self.register_buffer("log_priors", torch.zeros(num_targets))
        self.splices: list[list[int]] = []
        layers = []
        prev = lda_dim
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

    def plan(self, num_frames: int) -> ComputationPlan:
        """The :class:`ComputationPlan` of a window of ``num_frames`` input frames."""
        return computation_plan(
            tuple(self.input_splice), tuple(tuple(s) for s in self.splices), num_frames
        )

    def _lda_rows(
        self, feats: torch.Tensor, ivectors: torch.Tensor | None, plan: ComputationPlan
    ) -> torch.Tensor:
        """The vectors the LDA-like transform sees at the times ``plan.times[0]``."""
        x = _append(feats, plan.input_rows)
        if self.ivector_dim:
            if ivectors is None:
                raise ValueError("this model takes i-vectors but none were given")
            if ivectors.dim() == 2:
                ivectors = ivectors[:, None, :].expand(-1, x.shape[1], -1)
            else:
                # per-frame i-vectors: for every spliced frame or for the whole window
                times = plan.times[0]
                lo = -min(self.input_splice)
                spliced = plan.num_frames - lo - max(self.input_splice)
                first = times[0] - lo if ivectors.shape[1] == spliced else times[0]
                if ivectors.shape[1] not in (spliced, plan.num_frames):
                    raise ValueError(
                        f"per-frame i-vectors for {ivectors.shape[1]} frames; expected "
                        f"{plan.num_frames} (the window) or {spliced} (its spliced frames)"
                    )
                rows = _selector([t - times[0] + first for t in times])
                ivectors = _take(ivectors, rows)
            x = torch.cat([x, ivectors.to(x.dtype)], dim=-1)
        return x

    def lda_input(self, feats: torch.Tensor, ivectors: torch.Tensor | None) -> torch.Tensor:
        """The vector the LDA-like transform sees at every spliced frame (and the
        i-vector): (B, T − span(input_splice), lda_dim)."""
        plan = computation_plan(tuple(self.input_splice), (), feats.shape[1])
        return self._lda_rows(feats, ivectors, plan)

    def forward(self, feats: torch.Tensor, ivectors: torch.Tensor | None = None) -> torch.Tensor:
        """(B, T, D) features [+ (B, iv) or per-frame i-vectors] → (B, T_out, C) log-probs,
        each layer computed only at the times the outputs need (module docstring)."""
        plan = self.plan(feats.shape[1])
        x = self._lda_rows(feats, ivectors, plan)
        h = nn.functional.linear(x, self.lda_weight, self.lda_bias)
        for rows, comp, relu in zip(plan.layer_rows, self.hidden, self.relus, strict=True):
            h = normalize_rms(relu(comp(_append(h, rows))))
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

    # ------------------------------------------------------------------ persistence
    def header(self) -> dict:
        return {
            "format": MODEL_FORMAT,
            "model": self.model_cfg,
            "feat_dim": self.feat_dim,
            "ivector_dim": self.ivector_dim,
            "num_targets": self.num_targets,
        }


def model_to_file_dict(model: TdnnModel, meta: dict | None = None) -> dict:
    """What a ``.pt`` file holds: the header (to rebuild), the state dict and metadata."""
    return {
        **model.header(),
        "state_dict": {k: v.detach().clone().contiguous() for k, v in model.state_dict().items()},
        "meta": dict(meta or {}),
    }


def load_model_file(path: str | Path) -> dict:
    """Load a model file safely (weights only) and check it is complete and finite.

    A file that cannot be read, is truncated or corrupt, is not a paravg model, or whose
    bytes differ from the sha256 its producer recorded raises a
    :class:`~paravg.errors.ModelFileError` naming the file, the rule that wrote it and
    how to rebuild it (:mod:`paravg.provenance`); non-finite parameters (a diverged
    model, not a damaged file) a :class:`~paravg.errors.DataError` (a ``ValueError``). A
    broken model is never averaged or trained from.
    """
    import io

    from paravg.provenance import check_recorded, damaged

    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise damaged(path, f"cannot be read ({exc.strerror or exc})") from exc
    check_recorded(path, data)
    try:
        obj = torch.load(io.BytesIO(data), map_location="cpu", weights_only=True)
    except Exception as exc:  # truncated zip, wrong pickle, empty file ...
        raise damaged(path, f"not a readable model file ({type(exc).__name__}: {exc})") from exc
    if not isinstance(obj, dict) or obj.get("format") != MODEL_FORMAT:
        raise damaged(path, f"not a {MODEL_FORMAT} model file")
    for name, tensor in obj["state_dict"].items():
        if tensor.is_floating_point() and not torch.isfinite(tensor).all():
            raise DataError(
                f"{path}: parameter {name} has non-finite values (a diverged model; expected "
                "finite parameters)"
            )
    return obj


def build_model(file_dict: dict, affine_factory: AffineFactory = plain_affine_factory) -> TdnnModel:
    """Rebuild a model from a loaded file dict (parameters included)."""
    model = TdnnModel(
        file_dict["model"],
        file_dict["feat_dim"],
        file_dict["ivector_dim"],
        file_dict["num_targets"],
        affine_factory,
    )
    model.load_state_dict(file_dict["state_dict"])
    return model
