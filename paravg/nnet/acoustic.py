"""What every model family shares: the spliced input, the fixed LDA-like transform, the
log-priors, the header of a model file, and the hooks the training loop calls.

The input of every family is Kaldi's ``fixed-affine-layer name=lda
input=Append(<input_splice offsets>, ReplaceIndex(ivector, t, 0))``: the feature frames
at the input-splice offsets and the utterance's (or the frame's) i-vector, through
y = A x + b with A, b estimated once (:mod:`paravg.nnet.lda`, ``lda_weight``,
``lda_bias``: buffers, never trained). A family's network (:mod:`paravg.nnet.tdnn`,
:mod:`paravg.nnet.tdnnf`) says at which times 𝒯_0 it needs the LDA rows, and
:meth:`AcousticModel.lda_rows` forms them.

A low frame rate (``model.frame_subsampling_factor`` f, Kaldi's
``--frame-subsampling-factor``; absent = 1): the network is the same function of its
input window, evaluated only at output times t = 0, f, 2f, … (``forward(…, stride=f)``;
each family computes only the rows those outputs need). Frame *stacking* (Tian et al.:
stack 3 frames, output every third) is the input splice: ``input_splice: [-1, 0, 1]``
appends the frames t − 1, t, t + 1 at the LDA input, so with f = 3 every 10-ms frame
reaches exactly one output through the first layer.
:attr:`AcousticModel.frame_subsampling_factor` is read by the training schedule
(:mod:`paravg.plan`), the eg evaluations (:func:`paravg.nnet.objective.eg_outputs`),
decoding and the export.

Hooks of the training loop (:mod:`paravg.train_job`), each a no-op where a family has
nothing to do: :meth:`~AcousticModel.components` (the updatable components, Kaldi's
order), :meth:`~AcousticModel.reset_nonlinearity_stats` (``ZeroComponentStats`` and the
job's seeds), :meth:`~AcousticModel.set_dropout_proportion`,
:meth:`~AcousticModel.batchnorms` (``ScaleBatchnormStats`` after every minibatch).
"""

from __future__ import annotations

import torch
from torch import nn

from paravg.nnet.context import frame_subsampling_factor, model_context
from paravg.nnet.rows import Selector, selector, take


class AcousticModel(nn.Module):
    """Base of the families. Buffers: ``lda_weight``, ``lda_bias`` (fixed), ``log_priors``."""

    family = ""

    def __init__(self, model_cfg: dict, feat_dim: int, ivector_dim: int, num_targets: int):
        super().__init__()
        self.model_cfg = model_cfg
        self.feat_dim, self.ivector_dim, self.num_targets = feat_dim, ivector_dim, num_targets
        self.input_splice = list(model_cfg["input_splice"])
        self.frame_subsampling_factor = frame_subsampling_factor(model_cfg)
        self.left_context, self.right_context = model_context(model_cfg)
        lda_dim = feat_dim * len(self.input_splice) + ivector_dim
        self.lda_dim = lda_dim
        self.register_buffer("lda_weight", torch.eye(lda_dim))
        self.register_buffer("lda_bias", torch.zeros(lda_dim))
        self.register_buffer("log_priors", torch.zeros(num_targets))

    # ------------------------------------------------------------------ training hooks
    def components(self) -> list[nn.Module]:
        """Updatable components in order (Kaldi's component list)."""
        raise NotImplementedError

    def component_names(self) -> list[str]:
        raise NotImplementedError

    def init_parameters(self, seed: int) -> None:
        raise NotImplementedError

    def reset_nonlinearity_stats(self, seed: int) -> None:
        raise NotImplementedError

    def set_dropout_proportion(self, proportion: float) -> None:
        """Set p on every dropout component (a family without dropout takes only 0)."""
        if proportion != 0.0:
            raise ValueError(f"a {self.family} model has no dropout (proportion {proportion})")

    def batchnorms(self) -> list[nn.Module]:
        """The batch-norm components (none in a family without them)."""
        return []

    def saturation(self) -> float:
        """``steps/nnet3/get_saturation.pl``: the mean saturation of the model's sigmoid and
        tanh nonlinearities that have statistics (:mod:`paravg.nnet.shrinkage` decides on
        it); 0.0, as the script prints, for a family without such nonlinearities."""
        return 0.0

    # ------------------------------------------------------------------ input
    def input_rows(self, times: tuple[int, ...]) -> tuple[Selector, ...]:
        """For each input-splice offset o, the input frames t + o of the LDA rows at
        ``times``."""
        return tuple(selector([t + o for t in times]) for o in self.input_splice)

    def lda_rows(
        self,
        feats: torch.Tensor,
        ivectors: torch.Tensor | None,
        times: tuple[int, ...],
        input_rows: tuple[Selector, ...],
    ) -> torch.Tensor:
        """The vectors the LDA-like transform sees at ``times`` (window frame t = time
        t): the spliced features and the i-vector, (B, |times|, lda_dim)."""
        parts = [take(feats, rows) for rows in input_rows]
        x = parts[0] if len(parts) == 1 else torch.cat(parts, dim=-1)
        if self.ivector_dim:
            if ivectors is None:
                raise ValueError("this model takes i-vectors but none were given")
            if ivectors.dim() == 2:
                ivectors = ivectors[:, None, :].expand(-1, x.shape[1], -1)
            else:
                # per-frame i-vectors: for every spliced frame or for the whole window
                num_frames = feats.shape[1]
                lo = -min(self.input_splice)
                spliced = num_frames - lo - max(self.input_splice)
                first = times[0] - lo if ivectors.shape[1] == spliced else times[0]
                if ivectors.shape[1] not in (spliced, num_frames):
                    raise ValueError(
                        f"per-frame i-vectors for {ivectors.shape[1]} frames; expected "
                        f"{num_frames} (the window) or {spliced} (its spliced frames)"
                    )
                rows = selector([t - times[0] + first for t in times])
                ivectors = take(ivectors, rows)
            x = torch.cat([x, ivectors.to(x.dtype)], dim=-1)
        return x

    def lda_input(self, feats: torch.Tensor, ivectors: torch.Tensor | None) -> torch.Tensor:
        """The vector the LDA-like transform sees at every spliced frame (and the
        i-vector): (B, T − span(input_splice), lda_dim)."""
        lo, hi = max(0, -min(self.input_splice)), max(0, max(self.input_splice))
        times = tuple(range(lo, feats.shape[1] - hi))
        if not times:
            raise ValueError(
                f"window of {feats.shape[1]} frames is too short for input splice "
                f"{self.input_splice}"
            )
        return self.lda_rows(feats, ivectors, times, self.input_rows(times))

    def lda(self, x: torch.Tensor) -> torch.Tensor:
        """y = A x + b of the fixed transform."""
        return nn.functional.linear(x, self.lda_weight, self.lda_bias)

    # ------------------------------------------------------------------ windows
    def output_times(self, num_frames: int, stride: int = 1) -> tuple[int, ...]:
        """The window frames whose outputs a window of ``num_frames`` input frames gives
        at output stride ``stride`` (left, left + stride, … < num_frames − right)."""
        left, right = self.left_context, self.right_context
        if num_frames - left - right <= 0:
            raise ValueError(
                f"window of {num_frames} frames is too short for the model context "
                f"({left} left, {right} right)"
            )
        if stride < 1:
            raise ValueError(f"output stride must be >= 1, got {stride}")
        return tuple(range(left, num_frames - right, stride))


class LayerStackModel(AcousticModel):
    """A family whose network is ``self.layers`` (each layer's ``parts()``: its updatable
    components with Kaldi's names, in order) then ``self.output`` (the output affine,
    zero-initialised): the TDNN-F and the TDNN-LSTM."""

    def _named_components(self) -> list[tuple[str, nn.Module]]:
        named = [part for layer in self.layers for part in layer.parts()]
        return [*named, ("output.affine", self.output)]

    def components(self) -> list[nn.Module]:
        return [comp for _, comp in self._named_components()]

    def component_names(self) -> list[str]:
        return [name for name, _ in self._named_components()]

    def modules_of(self, kind: type) -> list[nn.Module]:
        """Every sub-module of type ``kind``, in order."""
        return [m for m in self.modules() if isinstance(m, kind)]

    def init_parameters(self, seed: int) -> None:
        """Kaldi's initialisation, seeded, components in order; the output layer zero."""
        gen = torch.Generator().manual_seed(seed)
        for comp in self.components()[:-1]:
            comp.init_kaldi(gen)
        with torch.no_grad():
            self.output.weight.zero_()
            self.output.bias.zero_()
