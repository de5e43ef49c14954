"""TDNN acoustic model: fixed LDA-like input transform, relu-renorm layers, log-softmax.

Mirrors the nnet3 xconfig network of ``local/nnet3/tuning/run_tdnn_1a.sh``:

    input  = Append(feats at input_splice offsets, ivector)   (``Append(-2..2, ivector)``)
    lda    = FixedAffineComponent(lda.mat)                     (not trained)
    layer ℓ = NormalizeComponent(ReLU(Affine(Append(h_{ℓ−1} at splice_ℓ offsets))))
    output = LogSoftmax(Affine(h_L))                           (output affine zero-initialised)

``NormalizeComponent`` (target-rms 1): y = x / sqrt(max(2⁻⁶⁶, ‖x‖² / D)).
Initialisation (``nnet-simple-component.cc``): hidden W ~ N(0, 1/in_dim), b ~ N(0, 1);
output W = 0, b = 0. Max-change: 0.75 hidden, 1.5 output.

A forward pass takes a window of T input frames and produces T − left − right output
frames (the model context, :func:`paravg.nnet.context.model_context`).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import torch
from torch import nn

from paravg.nnet.affine import Affine, plain_affine_factory
from paravg.nnet.context import model_context

MODEL_FORMAT = "paravg.tdnn.v1"
AffineFactory = Callable[[int, int, float], Affine]


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

    def lda_input(self, feats: torch.Tensor, ivectors: torch.Tensor | None) -> torch.Tensor:
        """The vector the LDA-like transform sees: spliced features (and the i-vector)."""
        x = splice(feats, self.input_splice)
        if self.ivector_dim:
            if ivectors is None:
                raise ValueError("this model takes i-vectors but none were given")
            if ivectors.dim() == 2:
                ivectors = ivectors[:, None, :].expand(-1, x.shape[1], -1)
            elif ivectors.shape[1] != x.shape[1]:
                # per-frame i-vectors for the whole input window: keep the spliced frames
                lo = -min(self.input_splice)
                ivectors = ivectors[:, lo : lo + x.shape[1]]
            x = torch.cat([x, ivectors.to(x.dtype)], dim=-1)
        return x

    def forward(self, feats: torch.Tensor, ivectors: torch.Tensor | None = None) -> torch.Tensor:
        """(B, T, D) features [+ (B, iv) or per-frame i-vectors] → (B, T_out, C) log-probs."""
        x = self.lda_input(feats, ivectors)
        h = nn.functional.linear(x, self.lda_weight, self.lda_bias)
        for offsets, comp in zip(self.splices, self.hidden, strict=True):
            h = normalize_rms(torch.relu(comp(splice(h, offsets))))
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

    Raises ``ValueError`` naming the file for a truncated/corrupt file, a foreign format
    or non-finite parameters, so a broken model is never averaged or trained from.
    """
    try:
        obj = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # truncated zip, wrong pickle, empty file ...
        raise ValueError(
            f"{path}: not a readable model file ({type(exc).__name__}: {exc})"
        ) from exc
    if not isinstance(obj, dict) or obj.get("format") != MODEL_FORMAT:
        raise ValueError(f"{path}: not a {MODEL_FORMAT} model file")
    for name, tensor in obj["state_dict"].items():
        if tensor.is_floating_point() and not torch.isfinite(tensor).all():
            raise ValueError(f"{path}: parameter {name} has non-finite values (diverged model)")
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
