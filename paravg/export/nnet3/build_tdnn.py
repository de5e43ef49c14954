"""The TDNN's nnet3 network (``family: tdnn``, :class:`paravg.nnet.tdnn.TdnnModel`).

The network kaldi-asr/kaldi ``steps/nnet3/xconfig_to_configs.py`` makes of
``egs/wsj/s5/local/nnet3/tuning/run_tdnn_1a.sh`` (node and component names included):
the LDA-like transform, relu-renorm layers, the output layer; drawn in
docs/export-and-vosk.md ("The nnet3 writer"). The natural-gradient ranks are the
configured ones (``NgOptions``), as xconfig's ``relu-renorm-layer`` writes them.
"""

from __future__ import annotations

import numpy as np

from paravg.export.nnet3.build_parts import arr, lda_part, output_part, relu_renorm
from paravg.export.nnet3.components import Component
from paravg.export.nnet3.descriptors import append, offsets
from paravg.export.nnet3.fields import NgOptions
from paravg.export.nnet3.network import Nnet3


def _ng_affine(name: str, layer, learning_rate: float, ng: NgOptions) -> Component:
    return Component(
        name,
        "NaturalGradientAffineComponent",
        {
            "linear": np.asarray(arr(layer.weight), dtype=np.float32),
            "bias": np.asarray(arr(layer.bias), dtype=np.float32),
            "max_change": float(layer.max_change),
            "learning_rate": float(learning_rate),
            "ng": ng,
        },
    )


def tdnn_nnet3(model, learning_rate: float, ng: NgOptions) -> Nnet3:
    """The TDNN's network, parameters copied."""
    lines, comps = lda_part(model)
    prev = "lda"
    for i, (times, layer) in enumerate(zip(model.splices, model.hidden, strict=True), 1):
        name = f"tdnn{i}"
        affine = _ng_affine(f"{name}.affine", layer, learning_rate, ng)
        layer_lines, layer_comps = relu_renorm(
            name, append(offsets(prev, times)), affine, layer.out_dim
        )
        lines += layer_lines
        comps += layer_comps
        prev = f"{name}.renorm"
    out_lines, out_comps = output_part(prev, _ng_affine("output.affine", model.output,
                                                         learning_rate, ng))  # fmt: skip
    return Nnet3(lines + out_lines, comps + out_comps)
