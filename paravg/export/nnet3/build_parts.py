"""The pieces the per-family builders share: the input nodes and LDA-like transform, the
natural-gradient affine components, the relu-renorm layer, tensors as arrays.

Mirrors the parts of kaldi-asr/kaldi ``egs/wsj/s5/steps/libs/nnet3/xconfig/`` that every
family uses (``basic_layers.py``: ``input``, ``fixed-affine-layer``, ``relu-renorm-layer``,
``output-layer``) and the components' ``InitFromConfig`` (the initial natural-gradient
ranks). The families: :mod:`.build_tdnn`, :mod:`.build_tdnnf`, :mod:`.build_tdnn_lstm`.
"""

from __future__ import annotations

import numpy as np

from paravg.export.nnet3.components import Component
from paravg.export.nnet3.descriptors import append, offsets
from paravg.export.nnet3.fields import NgOptions


def arr(t) -> np.ndarray:
    """A tensor as a float64 array."""
    return t.detach().cpu().double().numpy()


def nonlinear(name: str, kind: str, dim: int) -> Component:
    return Component(name, kind, {"dim": dim})


def lda_part(model) -> tuple[list[str], list[Component]]:
    """The input nodes and the LDA-like ``FixedAffineComponent`` (every family)."""
    lines = [f"input-node name=input dim={model.feat_dim}"]
    lda_parts = offsets("input", model.input_splice)
    if model.ivector_dim:
        lines.append(f"input-node name=ivector dim={model.ivector_dim}")
        lda_parts.append("ReplaceIndex(ivector, t, 0)")
    lines.append(f"component-node name=lda component=lda input={append(lda_parts)}")
    comps = [
        Component(
            "lda",
            "FixedAffineComponent",
            {"linear": arr(model.lda_weight).astype(np.float32), "bias": arr(model.lda_bias)},
        )
    ]
    return lines, comps


def relu_renorm(name: str, source: str, affine: Component, dim: int):
    """A relu-renorm layer reading ``source``: its three component nodes and components
    (``affine`` made by the family: the TDNN's keeps the configured ranks)."""
    lines = [
        f"component-node name={name}.affine component={name}.affine input={source}",
        f"component-node name={name}.relu component={name}.relu input={name}.affine",
        f"component-node name={name}.renorm component={name}.renorm input={name}.relu",
    ]
    comps = [
        affine,
        nonlinear(f"{name}.relu", "RectifiedLinearComponent", dim),
        Component(f"{name}.renorm", "NormalizeComponent", {"dim": dim, "target_rms": 1.0}),
    ]
    return lines, comps


def ranks(ng: NgOptions, in_dim: int, out_dim: int) -> NgOptions:
    """Kaldi's initial natural-gradient ranks of a component: min(rank-in, (in + 1) / 2),
    min(rank-out, (out + 1) / 2) (``InitFromConfig`` of the NG components)."""
    return NgOptions(
        min(ng.rank_in, (in_dim + 1) // 2),
        min(ng.rank_out, (out_dim + 1) // 2),
        ng.update_period,
        ng.num_samples_history,
        ng.alpha,
    )


def updatable(part, learning_rate: float, ng: NgOptions, in_dim: int) -> dict:
    """The fields every updatable component of the TDNN-F and TDNN-LSTM writes:
    max-change, l2, learning rate, the natural-gradient options (Kaldi's initial
    ranks), the orthonormal constraint."""
    return {
        "max_change": float(part.max_change),
        "l2_regularize": float(getattr(part, "l2_regularize", 0.0)),
        "learning_rate": float(learning_rate),
        "ng": ranks(ng, in_dim, part.out_dim),
        "orthonormal_constraint": float(getattr(part, "orthonormal_constraint", 0.0)),
    }


def ng_affine(name: str, part, learning_rate: float, ng: NgOptions) -> Component:
    """A ``NaturalGradientAffineComponent`` of paravg's affine layer ``part``, with
    Kaldi's initial ranks."""
    params = updatable(part, learning_rate, ng, part.in_dim)
    params["linear"] = arr(part.weight).astype(np.float32)
    params["bias"] = arr(part.bias).astype(np.float32)
    return Component(name, "NaturalGradientAffineComponent", params)


def output_part(source: str, affine: Component, delay: int = 0, log_softmax: bool = True):
    """The output layer reading ``source``: ``output.affine`` (made by the family), the
    log-softmax, and the output node, ``delay`` frames late (xconfig's output-delay).

    ``log_softmax=False``: a chain model's output (xconfig's ``output-layer
    include-log-softmax=false``), the output node reading ``output.affine`` itself."""
    top = "output.log-softmax" if log_softmax else "output.affine"
    out = top if delay == 0 else f"Offset({top}, {delay})"
    lines = [f"component-node name=output.affine component=output.affine input={source}"]
    if not log_softmax:
        lines.append(f"output-node name=output input={out} objective=linear")
        return lines, [affine]
    lines += [
        "component-node name=output.log-softmax component=output.log-softmax input=output.affine",
        f"output-node name=output input={out} objective=linear",
    ]
    component = nonlinear("output.log-softmax", "LogSoftmaxComponent", affine.output_dim)
    return lines, [affine, component]
