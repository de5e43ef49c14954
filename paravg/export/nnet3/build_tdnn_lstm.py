"""The TDNN-LSTM's nnet3 network (``family: tdnn_lstm``, :mod:`paravg.nnet.lstm`).

The network kaldi-asr/kaldi ``steps/libs/nnet3/xconfig/lstm.py``
(``XconfigFastLstmpLayer._generate_lstm_config``) and ``basic_layers.py``
(``relu-renorm-layer``, ``output-layer`` with ``output-delay``) make: relu-renorm layers as
the TDNN's, fast-lstmp layers with their ``IfDefined`` recurrences and dim-range nodes,
the output-delay on the output node; drawn in docs/export-and-vosk.md ("The nnet3
writer"). Its own components: :mod:`.kinds_lstm`.
"""

from __future__ import annotations

import numpy as np

from paravg.errors import ModelFileError
from paravg.export.nnet3.build_parts import arr, lda_part, ng_affine, output_part, relu_renorm
from paravg.export.nnet3.components import Component
from paravg.export.nnet3.descriptors import append, offsets
from paravg.export.nnet3.fields import NgOptions
from paravg.export.nnet3.network import Nnet3


def _lstm_nonlinearity_component(name: str, nonlin, learning_rate: float) -> Component:
    """A ``LstmNonlinearityComponent`` from paravg's :class:`~paravg.nnet.lstm.LstmNonlinearity`:
    its peepholes, and its statistics as Kaldi stores them on disk (the sums over the
    count; the repaired rows over count x C; all zero for a component that saw no data)."""
    from paravg.nnet.lstm import SELF_REPAIR_THRESHOLDS

    C = nonlin.cell_dim
    count = float(nonlin.count)
    value = arr(nonlin.value_sum)
    deriv = arr(nonlin.deriv_sum)
    repaired = arr(nonlin.self_repair_total)
    if count != 0.0:
        value, deriv, repaired = value / count, deriv / count, repaired / (count * C)
    config = np.array([*SELF_REPAIR_THRESHOLDS, *[nonlin.self_repair_scale] * 5], np.float32)
    return Component(
        name,
        "LstmNonlinearityComponent",
        {
            "max_change": float(nonlin.max_change),
            "l2_regularize": float(getattr(nonlin, "l2_regularize", 0.0)),
            "learning_rate": float(learning_rate),
            "params": arr(nonlin.params).astype(np.float32),
            "value_avg": value.astype(np.float32),
            "deriv_avg": deriv.astype(np.float32),
            "self_repair_config": config,
            "self_repair_prob": repaired.astype(np.float32),
            "use_dropout": False,
            "count": count,
        },
    )


def _backprop_truncation_component(name: str, dim: int, trunc) -> Component:
    """A ``BackpropTruncationComponent`` from paravg's
    :class:`~paravg.nnet.lstm.BackpropTruncation` (its statistics zero)."""
    return Component(
        name,
        "BackpropTruncationComponent",
        {
            "dim": int(dim),
            "scale": float(trunc.scale),
            "clipping_threshold": float(trunc.clipping_threshold),
            "zeroing_threshold": float(trunc.zeroing_threshold),
            "zeroing_interval": int(trunc.zeroing_interval),
            "recurrence_interval": int(trunc.recurrence_interval),
            "num_clipped": 0.0,
            "num_zeroed": 0.0,
            "count": 0.0,
            "count_zeroing_boundaries": 0.0,
        },
    )


def tdnn_lstm_nnet3(model, learning_rate: float, ng: NgOptions) -> Nnet3:
    """The TDNN-LSTM's network, parameters copied: relu-renorm layers as the TDNN's,
    fast-lstmp layers as xconfig writes them, the output-delay on the output node."""
    from paravg.nnet.lstm import FastLstmpLayer, ReluRenormLayer

    lines, comps = lda_part(model)

    def node(name: str, component: str, source: str) -> None:
        lines.append(f"component-node name={name} component={component} input={source}")

    def dim_range(name: str, source: str, offset: int, dim: int) -> None:
        lines.append(
            f"dim-range-node name={name} input-node={source} dim-offset={offset} dim={dim}"
        )

    prev = "lda"
    for layer in model.layers:
        name = layer.name
        if isinstance(layer, ReluRenormLayer):
            affine = ng_affine(f"{name}.affine", layer.affine, learning_rate, ng)
            layer_lines, layer_comps = relu_renorm(
                name, append(offsets(prev, layer.splice)), affine, layer.affine.out_dim
            )
            lines += layer_lines
            comps += layer_comps
            prev = f"{name}.renorm"
        elif isinstance(layer, FastLstmpLayer):
            C, R, d = layer.cell_dim, layer.rec_dim, layer.delay
            node(f"{name}.W_all", f"{name}.W_all",
                 f"Append({prev}, IfDefined(Offset({name}.r_trunc, {d})))")  # fmt: skip
            node(f"{name}.lstm_nonlin", f"{name}.lstm_nonlin",
                 f"Append({name}.W_all, IfDefined(Offset({name}.c_trunc, {d})))")  # fmt: skip
            dim_range(f"{name}.c", f"{name}.lstm_nonlin", 0, C)
            dim_range(f"{name}.m", f"{name}.lstm_nonlin", C, C)
            node(f"{name}.rp", f"{name}.W_rp", f"{name}.m")
            dim_range(f"{name}.r", f"{name}.rp", 0, R)
            node(f"{name}.cr_trunc", f"{name}.cr_trunc", f"Append({name}.c, {name}.r)")
            dim_range(f"{name}.c_trunc", f"{name}.cr_trunc", 0, C)
            dim_range(f"{name}.r_trunc", f"{name}.cr_trunc", C, R)
            comps += [
                ng_affine(f"{name}.W_all", layer.W_all, learning_rate, ng),
                _lstm_nonlinearity_component(
                    f"{name}.lstm_nonlin", layer.lstm_nonlin, learning_rate
                ),
                _backprop_truncation_component(f"{name}.cr_trunc", C + R, layer.cr_trunc),
                ng_affine(f"{name}.W_rp", layer.W_rp, learning_rate, ng),
            ]
            prev = f"{name}.rp"
        else:
            raise ModelFileError(f"no nnet3 export for the TDNN-LSTM layer {type(layer).__name__}")
    affine = ng_affine("output.affine", model.output, learning_rate, ng)
    out_lines, out_comps = output_part(prev, affine, int(model.output_delay))
    return Nnet3(lines + out_lines, comps + out_comps)
