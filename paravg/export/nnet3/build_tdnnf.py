"""The TDNN-F's nnet3 network (``family: tdnnf``, :mod:`paravg.nnet.tdnnf`).

The network kaldi-asr/kaldi ``steps/libs/nnet3/xconfig/composite_layers.py``
(``tdnnf-layer``, ``prefinal-layer``), ``basic_layers.py`` (``relu-batchnorm-dropout-layer``,
``output-layer``) and ``trivial_layers.py`` (``linear-component``) make, with the dropout
components removed (a decoder runs them in test mode, where they are the identity);
drawn in docs/export-and-vosk.md ("The nnet3 writer"). Its components:
``TdnnComponent`` (:mod:`.kinds_tdnn`), ``LinearComponent``, ``NoOpComponent``
(:mod:`.kinds_simple`), ``BatchNormComponent`` in test mode (:mod:`.kinds_normalize`).
"""

from __future__ import annotations

import numpy as np

from paravg.errors import ModelFileError
from paravg.export.nnet3.build_parts import (
    arr,
    lda_part,
    ng_affine,
    nonlinear,
    output_part,
    updatable,
)
from paravg.export.nnet3.components import Component
from paravg.export.nnet3.descriptors import scale_text
from paravg.export.nnet3.fields import NgOptions
from paravg.export.nnet3.network import Nnet3


def _linear_component(name: str, part, learning_rate: float, ng: NgOptions) -> Component:
    if part.bias is not None:
        raise ModelFileError(f"{name}: a LinearComponent has no bias")
    params = updatable(part, learning_rate, ng, part.in_dim)
    params["linear"] = arr(part.weight).astype(np.float32)
    params["use_natural_gradient"] = True
    return Component(name, "LinearComponent", params)


def _tdnn_component(name, part, offsets, learning_rate: float, ng: NgOptions) -> Component:
    """A ``TdnnComponent``: paravg's weight over the input spliced at ``offsets`` (column
    block i = offset i), the bias or none (``use-bias=false``)."""
    params = updatable(part, learning_rate, ng, part.in_dim)
    params["linear"] = arr(part.weight).astype(np.float32)
    params["bias"] = (
        np.zeros(0, np.float32) if part.bias is None else arr(part.bias).astype(np.float32)
    )
    params["time_offsets"] = [int(o) for o in offsets]
    params["use_natural_gradient"] = True
    params["alpha_out"] = params["ng"].alpha
    return Component(name, "TdnnComponent", params)


def _batchnorm_component(name: str, bn) -> Component:
    """A ``BatchNormComponent`` in test mode whose statistics give paravg's test-mode
    scale and offset: Kaldi stores the count, the mean and the variance
    (``BatchNormComponent::Write``) and recomputes sums from them when reading. A
    component that never saw data (count 0) is paravg's μ = 0, v = 1: written as count 1
    with that mean and variance (Kaldi would draw random statistics for count 0)."""
    mean, var = bn.test_mean_var()
    count = float(bn.stats_count)
    return Component(
        name,
        "BatchNormComponent",
        {
            "dim": int(bn.dim),
            "block_dim": int(bn.dim),
            "epsilon": float(bn.epsilon),
            "target_rms": float(bn.target_rms),
            "test_mode": True,
            "count": count if count > 0.0 else 1.0,
            "mean": arr(mean),
            "var": arr(var),
        },
    )


def tdnnf_nnet3(model, learning_rate: float, ng: NgOptions) -> Nnet3:
    """The TDNN-F's network, parameters copied: each node that read a ``.dropout`` node
    reads the ``.batchnorm`` node that fed it."""
    from paravg.nnet.tdnnf import (
        LinearLayer,
        PrefinalLayer,
        ReluBatchnormDropoutLayer,
        TdnnfLayer,
    )

    lines, comps = lda_part(model)

    def node(name: str, source: str) -> None:
        lines.append(f"component-node name={name} component={name} input={source}")

    def relu_bn(name: str, bn_name: str, dim: int, bn) -> None:
        node(f"{name}.relu", f"{name}.affine")
        node(bn_name, f"{name}.relu")
        comps.extend(
            [
                nonlinear(f"{name}.relu", "RectifiedLinearComponent", dim),
                _batchnorm_component(bn_name, bn),
            ]
        )

    prev = "lda"
    for layer in model.layers:
        name = layer.name
        if isinstance(layer, ReluBatchnormDropoutLayer):
            node(f"{name}.affine", prev)
            comps.append(ng_affine(f"{name}.affine", layer.affine, learning_rate, ng))
            relu_bn(name, f"{name}.batchnorm", layer.affine.out_dim, layer.batchnorm)
            prev = f"{name}.batchnorm"  # the dropout is removed
        elif isinstance(layer, TdnnfLayer):
            node(f"{name}.linear", prev)
            node(f"{name}.affine", f"{name}.linear")
            comps += [
                _tdnn_component(
                    f"{name}.linear", layer.linear, layer.linear_offsets, learning_rate, ng
                ),
                _tdnn_component(
                    f"{name}.affine", layer.affine, layer.affine_offsets, learning_rate, ng
                ),
            ]
            relu_bn(name, f"{name}.batchnorm", layer.affine.out_dim, layer.batchnorm)
            if layer.bypass_scale != 0.0:
                scale = scale_text(layer.bypass_scale)
                node(f"{name}.noop", f"Sum(Scale({scale}, {prev}), {name}.batchnorm)")
                comps.append(
                    Component(
                        f"{name}.noop",
                        "NoOpComponent",
                        {"dim": int(layer.affine.out_dim), "backprop_scale": 1.0},
                    )
                )
                prev = f"{name}.noop"
            else:
                prev = f"{name}.batchnorm"
        elif isinstance(layer, LinearLayer):
            node(name, prev)
            comps.append(_linear_component(name, layer.linear, learning_rate, ng))
            prev = name
        elif isinstance(layer, PrefinalLayer):
            node(f"{name}.affine", prev)
            comps.append(ng_affine(f"{name}.affine", layer.affine, learning_rate, ng))
            relu_bn(name, f"{name}.batchnorm1", layer.affine.out_dim, layer.batchnorm1)
            node(f"{name}.linear", f"{name}.batchnorm1")
            node(f"{name}.batchnorm2", f"{name}.linear")
            comps += [
                _linear_component(f"{name}.linear", layer.linear, learning_rate, ng),
                _batchnorm_component(f"{name}.batchnorm2", layer.batchnorm2),
            ]
            prev = f"{name}.batchnorm2"
        else:
            raise ModelFileError(f"no nnet3 export for the TDNN-F layer {type(layer).__name__}")
    # a chain model's output has no log-softmax (run_tdnn_1d.sh's output-layer
    # include-log-softmax=false); its output-xent branch is training's only and is not
    # exported (vosk and Kaldi's decoders read the output node "output")
    chain = getattr(model, "objective", "xent") == "chain"
    out_lines, out_comps = output_part(
        prev, ng_affine("output.affine", model.output, learning_rate, ng), log_softmax=not chain
    )
    return Nnet3(lines + out_lines, comps + out_comps)
