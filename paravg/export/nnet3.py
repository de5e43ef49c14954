"""paravg's networks as Kaldi nnet3 networks: build, write, read back, and run.

**TDNN** (``family: tdnn``). The network is the one ``steps/nnet3/xconfig_to_configs.py``
makes of ``local/nnet3/tuning/run_tdnn_1a.sh`` (component and node names included)::

    input-node name=input dim=F
    input-node name=ivector dim=I                                   (with i-vectors)
    component-node name=lda component=lda
        input=Append(Offset(input, -2), ..., input, ..., ReplaceIndex(ivector, t, 0))
    component-node name=tdnnℓ.affine  input=Append(Offset(h, o) for o in splice_ℓ)
    component-node name=tdnnℓ.relu    input=tdnnℓ.affine
    component-node name=tdnnℓ.renorm  input=tdnnℓ.relu
    component-node name=output.affine input=tdnnL.renorm
    component-node name=output.log-softmax input=output.affine
    output-node name=output input=output.log-softmax objective=linear

Components (``src/nnet3/nnet-simple-component.cc``, ``nnet-normalize-component.cc``):
``FixedAffineComponent`` (paravg's LDA-like transform, y = A x + b),
``NaturalGradientAffineComponent`` (the trained layers; the NG-SGD options are written
but only matter to a trainer), ``RectifiedLinearComponent``, ``NormalizeComponent``
(target-rms 1: y = x / sqrt(max(2⁻⁶⁶, ‖x‖²/D))) and ``LogSoftmaxComponent``. The two
non-linearities are Kaldi ``NonlinearComponent``s, whose statistics fields
(``<ValueAvg> <DerivAvg> <Count>``) Kaldi requires; paravg writes them zero.

**TDNN-F** (``family: tdnnf``, :mod:`paravg.nnet.tdnnf`). The network
``steps/libs/nnet3/xconfig/composite_layers.py`` (``tdnnf-layer``, ``prefinal-layer``),
``basic_layers.py`` (``relu-batchnorm-dropout-layer``, ``output-layer``) and
``trivial_layers.py`` (``linear-component``) make, with the dropout components removed
(a decoder runs them in test mode, where they are the identity: each node that read a
``.dropout`` node reads the ``.batchnorm`` node that fed it)::

    component-node name=lda ...                                     (as the TDNN's)
    component-node name=tdnn1.affine input=lda                      NaturalGradientAffine
    component-node name=tdnn1.relu / tdnn1.batchnorm                ReLU, BatchNorm
    per tdnnf-layer k of time stride s, input x:
    component-node name=tdnnfK.linear input=x                       TdnnComponent,
        time-offsets -s,0 (s = 0: 0), no bias, orthonormal-constraint -1
    component-node name=tdnnfK.affine input=tdnnfK.linear           TdnnComponent,
        time-offsets 0,s (s = 0: 0), with bias
    component-node name=tdnnfK.relu / tdnnfK.batchnorm
    component-node name=tdnnfK.noop                                 NoOpComponent
        input=Sum(Scale(β, x), tdnnfK.batchnorm)      (β = 0: no noop, the layer's
                                                       output is tdnnfK.batchnorm)
    component-node name=prefinal-l                                 LinearComponent (−1)
    component-node name=prefinal.affine / .relu / .batchnorm1
    component-node name=prefinal.linear                             LinearComponent (−1)
    component-node name=prefinal.batchnorm2
    component-node name=output.affine / output.log-softmax

More components: ``TdnnComponent`` (``src/nnet3/nnet-tdnn-component.cc``; its
``linear_params`` are out × (in · #offsets), column block i multiplying the input at the
i-th time offset, as paravg's spliced weights), ``LinearComponent`` and ``NoOpComponent``
(``nnet-simple-component.cc``), ``BatchNormComponent`` in test mode
(``nnet-normalize-component.cc``: the file holds the count and the mean and variance
of the statistics; Kaldi's test mode computes scale = target-rms · (var + ε)^(−½),
offset = −mean · scale from them, which are paravg's ``BatchNorm.test_scale_offset``).
Every updatable component is written as ``UpdatableComponent::WriteUpdatableCommon``
(``nnet-component-itf.cc``) writes it: ``<MaxChange>`` and ``<L2Regularize>`` when
positive, then ``<LearningRate>``. The natural-gradient ranks of the TDNN-F's components
are Kaldi's initial ones, min(rank-in, (in + 1) / 2) and min(rank-out, (out + 1) / 2),
and the orthonormal constraint is the component's.

**TDNN-LSTM** (``family: tdnn_lstm``, :mod:`paravg.nnet.lstm`). The network
``steps/libs/nnet3/xconfig/lstm.py`` (``XconfigFastLstmpLayer._generate_lstm_config``) and
``basic_layers.py`` (``relu-renorm-layer``, ``output-layer`` with ``output-delay``) make;
the relu-renorm layers' nodes are written as the TDNN's, and per fast-lstmp-layer L of delay d
and input descriptor X::

    component-node name=L.W_all component=L.W_all
        input=Append(X, IfDefined(Offset(L.r_trunc, d)))            NaturalGradientAffine
    component-node name=L.lstm_nonlin component=L.lstm_nonlin
        input=Append(L.W_all, IfDefined(Offset(L.c_trunc, d)))      LstmNonlinearity
    dim-range-node name=L.c input-node=L.lstm_nonlin dim-offset=0 dim=C
    dim-range-node name=L.m input-node=L.lstm_nonlin dim-offset=C dim=C
    component-node name=L.rp component=L.W_rp input=L.m             (the layer output)
    dim-range-node name=L.r input-node=L.rp dim-offset=0 dim=R
    component-node name=L.cr_trunc component=L.cr_trunc input=Append(L.c, L.r)
    dim-range-node name=L.c_trunc input-node=L.cr_trunc dim-offset=0 dim=C
    dim-range-node name=L.r_trunc input-node=L.cr_trunc dim-offset=C dim=R
    ...
    output-node name=output input=Offset(output.log-softmax, k) objective=linear  (k > 0)

with the components in xconfig's order W_all, lstm_nonlin, cr_trunc, W_rp.
``LstmNonlinearityComponent`` (``src/nnet3/nnet-combined-component.cc``,
``LstmNonlinearityComponent::Write``): WriteUpdatableCommon, ``<Params>`` (3 x C: w_ic,
w_fc, w_oc), ``<ValueAvg>`` and ``<DerivAvg>`` (5 x C float matrices, the sums over the
count), ``<SelfRepairConfig>`` (10 floats: the 5 thresholds 0.05 0.05 0.2 0.05 0.2, the 5
scales), ``<SelfRepairProb>`` (5 floats, the repaired rows over count x C),
``<UseDropout>`` only when true, ``<Count>`` (double). ``BackpropTruncationComponent``
(``src/nnet3/nnet-general-component.cc``, ``BackpropTruncationComponent::Write``):
``<Dim>`` (int), ``<Scale>``, ``<ClippingThreshold>``, ``<ZeroingThreshold>`` (floats),
``<ZeroingInterval>``, ``<RecurrenceInterval>`` (ints), then the doubles
``<NumElementsClipped>``, ``<NumElementsZeroed>``, ``<NumElementsProcessed>``,
``<NumZeroingBoundaries>`` (paravg keeps no such statistics: written 0). The
natural-gradient ranks of the affine components are Kaldi's initial ones, as the
TDNN-F's.

Context (Kaldi's ``ComputeSimpleNnetContext``, ``nnet-utils.cc``): an output-delay k moves
the output k frames earlier against its inputs, so Kaldi's left context of such a network
is max(0, L - k) and its right context R + k, L and R the TDNN splices' sums; paravg's
``model_context`` says (L, R + k). On the same input frames the two compute the same
values (:func:`compute` gives min(L, k) more frames at the start); decoding an utterance,
Kaldi pads (and starts the recurrence) min(L, k) frames later than paravg's whole-utterance
forward on a window padded with L frames. :func:`nnet_context` computes Kaldi's contexts
from a network.

File layout of ``Nnet::Write``: token ``<Nnet3>``, a newline, the config lines (text in
both modes), an empty line, ``<NumComponents>`` N, then per component
``<ComponentName> name <Type> ... </Type>``, then ``</Nnet3>``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np

from paravg.errors import ModelFileError
from paravg.export.kaldi_stream import KaldiReader, KaldiWriter

NONLINEAR_TYPES = ("RectifiedLinearComponent", "LogSoftmaxComponent")
AFFINE_TYPES = ("FixedAffineComponent", "NaturalGradientAffineComponent", "AffineComponent")
# components whose parameters are one matrix "linear" (no bias), out x in
LINEAR_TYPES = ("LinearComponent",)
DIM_TYPES = ("BatchNormComponent", "NoOpComponent", "NormalizeComponent", *NONLINEAR_TYPES)
LSTM_TYPES = ("LstmNonlinearityComponent", "BackpropTruncationComponent")
KNOWN_TYPES = (*AFFINE_TYPES, *LINEAR_TYPES, "TdnnComponent", *DIM_TYPES, *LSTM_TYPES)
TDNN_UPDATE_PERIOD = 4  # TdnnComponent's preconditioners: not configurable, not written
SQUARED_NORM_FLOOR = 2.0**-66  # NormalizeComponent's kSquaredNormFloor


@dataclass(frozen=True)
class NgOptions:
    """``NaturalGradientAffineComponent`` fields (Kaldi's defaults; paravg's config names)."""

    rank_in: int = 20
    rank_out: int = 80
    update_period: int = 4
    num_samples_history: float = 2000.0
    alpha: float = 4.0


@dataclass
class Component:
    """One nnet3 component: ``kind`` is Kaldi's type name; ``params`` its fields."""

    name: str
    kind: str
    params: dict = field(default_factory=dict)

    @property
    def input_dim(self) -> int:
        if self.kind in (*AFFINE_TYPES, *LINEAR_TYPES):
            return int(self.params["linear"].shape[1])
        if self.kind == "TdnnComponent":
            return int(self.params["linear"].shape[1]) // len(self.params["time_offsets"])
        if self.kind == "LstmNonlinearityComponent":  # [i, f, c, o, c_prev] (+ 3 scales)
            return 5 * self.cell_dim + (3 if self.params.get("use_dropout") else 0)
        return int(self.params["dim"])

    @property
    def output_dim(self) -> int:
        if self.kind in (*AFFINE_TYPES, *LINEAR_TYPES, "TdnnComponent"):
            return int(self.params["linear"].shape[0])
        if self.kind == "LstmNonlinearityComponent":  # [c_t, m_t]
            return 2 * self.cell_dim
        return int(self.params["dim"])

    @property
    def cell_dim(self) -> int:
        return int(self.params["params"].shape[1])


@dataclass
class Nnet3:
    """A network: its config lines (nodes) and its components, in file order."""

    config_lines: list[str]
    components: list[Component]

    def component(self, name: str) -> Component:
        for c in self.components:
            if c.name == name:
                return c
        raise KeyError(name)

    def input_dims(self) -> dict[str, int]:
        dims = {}
        for line in self.config_lines:
            kv = _config_values(line)
            if line.startswith("input-node"):
                dims[kv["name"]] = int(kv["dim"])
        return dims

    def output_dim(self) -> int:
        """Dimension of the node ``output`` (the number of pdfs the net scores)."""
        for line in self.config_lines:
            kv = _config_values(line)
            if line.startswith("output-node") and kv["name"] == "output":
                return _descriptor_dim(self, kv["input"])
        raise ModelFileError("the network has no output-node named 'output'")


# ---------------------------------------------------------------------- building
def _descriptor_offsets(node: str, offsets: list[int]) -> list[str]:
    return [node if o == 0 else f"Offset({node}, {o})" for o in offsets]


def _append(parts: list[str]) -> str:
    return parts[0] if len(parts) == 1 else "Append(" + ", ".join(parts) + ")"


def _nonlinear(name: str, kind: str, dim: int) -> Component:
    return Component(name, kind, {"dim": dim})


def _ng_affine(name: str, w, b, max_change: float, lr: float, ng: NgOptions) -> Component:
    return Component(
        name,
        "NaturalGradientAffineComponent",
        {
            "linear": np.asarray(w, dtype=np.float32),
            "bias": np.asarray(b, dtype=np.float32),
            "max_change": float(max_change),
            "learning_rate": float(lr),
            "ng": ng,
        },
    )


def _arr(t) -> np.ndarray:
    return t.detach().cpu().double().numpy()


def _lda_part(model) -> tuple[list[str], list[Component]]:
    """The input nodes and the LDA-like ``FixedAffineComponent`` (both families)."""
    lines = [f"input-node name=input dim={model.feat_dim}"]
    lda_parts = _descriptor_offsets("input", model.input_splice)
    if model.ivector_dim:
        lines.append(f"input-node name=ivector dim={model.ivector_dim}")
        lda_parts.append("ReplaceIndex(ivector, t, 0)")
    lines.append(f"component-node name=lda component=lda input={_append(lda_parts)}")
    comps = [
        Component(
            "lda",
            "FixedAffineComponent",
            {"linear": _arr(model.lda_weight).astype(np.float32), "bias": _arr(model.lda_bias)},
        )
    ]
    return lines, comps


def nnet3_from_model(model, learning_rate: float = 0.0, ng: NgOptions | None = None) -> Nnet3:
    """The nnet3 network of a paravg model (parameters copied), by ``model.family``:
    :class:`paravg.nnet.tdnn.TdnnModel`, :class:`paravg.nnet.tdnnf.TdnnfModel` or
    :class:`paravg.nnet.lstm.TdnnLstmModel`."""
    family = getattr(model, "family", "tdnn")
    if family == "tdnn":
        return _tdnn_nnet3(model, learning_rate, ng or NgOptions())
    if family == "tdnnf":
        return _tdnnf_nnet3(model, learning_rate, ng or NgOptions())
    if family == "tdnn_lstm":
        return _tdnn_lstm_nnet3(model, learning_rate, ng or NgOptions())
    raise ModelFileError(f"no nnet3 export for the model family {family!r}")


def _tdnn_nnet3(model, learning_rate: float, ng: NgOptions) -> Nnet3:
    lines, comps = _lda_part(model)
    prev = "lda"
    for i, (offsets, layer) in enumerate(zip(model.splices, model.hidden, strict=True), 1):
        name = f"tdnn{i}"
        src = _append(_descriptor_offsets(prev, offsets))
        lines += [
            f"component-node name={name}.affine component={name}.affine input={src}",
            f"component-node name={name}.relu component={name}.relu input={name}.affine",
            f"component-node name={name}.renorm component={name}.renorm input={name}.relu",
        ]
        dim = layer.out_dim
        comps += [
            _ng_affine(
                f"{name}.affine",
                _arr(layer.weight),
                _arr(layer.bias),
                layer.max_change,
                learning_rate,
                ng,
            ),
            _nonlinear(f"{name}.relu", "RectifiedLinearComponent", dim),
            Component(f"{name}.renorm", "NormalizeComponent", {"dim": dim, "target_rms": 1.0}),
        ]
        prev = f"{name}.renorm"
    out = model.output
    lines += [
        f"component-node name=output.affine component=output.affine input={prev}",
        "component-node name=output.log-softmax component=output.log-softmax input=output.affine",
        "output-node name=output input=output.log-softmax objective=linear",
    ]
    comps += [
        _ng_affine(
            "output.affine", _arr(out.weight), _arr(out.bias), out.max_change, learning_rate, ng
        ),
        _nonlinear("output.log-softmax", "LogSoftmaxComponent", out.out_dim),
    ]
    return Nnet3(lines, comps)


# ---------------------------------------------------------------------- TDNN-F
def _ranks(ng: NgOptions, in_dim: int, out_dim: int) -> NgOptions:
    """Kaldi's initial natural-gradient ranks of a component: min(rank-in, (in + 1) / 2),
    min(rank-out, (out + 1) / 2) (``InitFromConfig`` of the NG components)."""
    return NgOptions(
        min(ng.rank_in, (in_dim + 1) // 2),
        min(ng.rank_out, (out_dim + 1) // 2),
        ng.update_period,
        ng.num_samples_history,
        ng.alpha,
    )


def _updatable(part, learning_rate: float, ng: NgOptions, in_dim: int) -> dict:
    """The fields every updatable component of the TDNN-F writes: max-change, l2,
    learning rate, the natural-gradient options, the orthonormal constraint."""
    return {
        "max_change": float(part.max_change),
        "l2_regularize": float(getattr(part, "l2_regularize", 0.0)),
        "learning_rate": float(learning_rate),
        "ng": _ranks(ng, in_dim, part.out_dim),
        "orthonormal_constraint": float(getattr(part, "orthonormal_constraint", 0.0)),
    }


def _tdnnf_ng_affine(name: str, part, learning_rate: float, ng: NgOptions) -> Component:
    params = _updatable(part, learning_rate, ng, part.in_dim)
    params["linear"] = _arr(part.weight).astype(np.float32)
    params["bias"] = _arr(part.bias).astype(np.float32)
    return Component(name, "NaturalGradientAffineComponent", params)


def _linear_component(name: str, part, learning_rate: float, ng: NgOptions) -> Component:
    if part.bias is not None:
        raise ModelFileError(f"{name}: a LinearComponent has no bias")
    params = _updatable(part, learning_rate, ng, part.in_dim)
    params["linear"] = _arr(part.weight).astype(np.float32)
    params["use_natural_gradient"] = True
    return Component(name, "LinearComponent", params)


def _tdnn_component(name, part, offsets, learning_rate: float, ng: NgOptions) -> Component:
    """A ``TdnnComponent``: paravg's weight over the input spliced at ``offsets`` (column
    block i = offset i), the bias or none (``use-bias=false``)."""
    params = _updatable(part, learning_rate, ng, part.in_dim)
    params["linear"] = _arr(part.weight).astype(np.float32)
    params["bias"] = (
        np.zeros(0, np.float32) if part.bias is None else _arr(part.bias).astype(np.float32)
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
            "mean": mean.detach().cpu().double().numpy(),
            "var": var.detach().cpu().double().numpy(),
        },
    )


def _scale_text(scale: float) -> str:
    """A ``Scale()`` factor as Kaldi's ``Descriptor::WriteConfig`` prints it (a float
    with C++'s default 6 significant digits), or with all the digits a float needs
    where 6 would change it."""
    short = f"{float(np.float32(scale)):.6g}"
    if np.float32(float(short)) == np.float32(scale):
        return short
    return f"{float(np.float32(scale)):.9g}"


def _tdnnf_nnet3(model, learning_rate: float, ng: NgOptions) -> Nnet3:
    from paravg.nnet.tdnnf import (
        LinearLayer,
        PrefinalLayer,
        ReluBatchnormDropoutLayer,
        TdnnfLayer,
    )

    lines, comps = _lda_part(model)

    def node(name: str, source: str) -> None:
        lines.append(f"component-node name={name} component={name} input={source}")

    def relu_bn(name: str, bn_name: str, dim: int, bn) -> None:
        node(f"{name}.relu", f"{name}.affine")
        node(bn_name, f"{name}.relu")
        comps.extend(
            [
                _nonlinear(f"{name}.relu", "RectifiedLinearComponent", dim),
                _batchnorm_component(bn_name, bn),
            ]
        )

    prev = "lda"
    for layer in model.layers:
        name = layer.name
        if isinstance(layer, ReluBatchnormDropoutLayer):
            node(f"{name}.affine", prev)
            comps.append(_tdnnf_ng_affine(f"{name}.affine", layer.affine, learning_rate, ng))
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
                scale = _scale_text(layer.bypass_scale)
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
            comps.append(_tdnnf_ng_affine(f"{name}.affine", layer.affine, learning_rate, ng))
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
    node("output.affine", prev)
    node("output.log-softmax", "output.affine")
    lines.append("output-node name=output input=output.log-softmax objective=linear")
    comps += [
        _tdnnf_ng_affine("output.affine", model.output, learning_rate, ng),
        _nonlinear("output.log-softmax", "LogSoftmaxComponent", model.output.out_dim),
    ]
    return Nnet3(lines, comps)


# ---------------------------------------------------------------------- TDNN-LSTM
def _lstm_nonlinearity_component(name: str, nonlin, learning_rate: float) -> Component:
    """A ``LstmNonlinearityComponent`` from paravg's :class:`~paravg.nnet.lstm.LstmNonlinearity`:
    its peepholes, and its statistics as Kaldi stores them on disk (the sums over the
    count; the repaired rows over count x C; all zero for a component that saw no data)."""
    from paravg.nnet.lstm import SELF_REPAIR_THRESHOLDS

    C = nonlin.cell_dim
    count = float(nonlin.count)
    value = nonlin.value_sum.detach().cpu().double().numpy()
    deriv = nonlin.deriv_sum.detach().cpu().double().numpy()
    repaired = nonlin.self_repair_total.detach().cpu().double().numpy()
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
            "params": _arr(nonlin.params).astype(np.float32),
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


def _tdnn_lstm_nnet3(model, learning_rate: float, ng: NgOptions) -> Nnet3:
    """The TDNN-LSTM's network (module docstring): relu-renorm layers as the TDNN's,
    fast-lstmp layers as xconfig writes them, the output-delay on the output node."""
    from paravg.nnet.lstm import FastLstmpLayer, ReluRenormLayer

    lines, comps = _lda_part(model)

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
            node(
                f"{name}.affine", f"{name}.affine", _append(_descriptor_offsets(prev, layer.splice))
            )
            node(f"{name}.relu", f"{name}.relu", f"{name}.affine")
            node(f"{name}.renorm", f"{name}.renorm", f"{name}.relu")
            dim = layer.affine.out_dim
            comps += [
                _tdnnf_ng_affine(f"{name}.affine", layer.affine, learning_rate, ng),
                _nonlinear(f"{name}.relu", "RectifiedLinearComponent", dim),
                Component(f"{name}.renorm", "NormalizeComponent", {"dim": dim, "target_rms": 1.0}),
            ]
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
                _tdnnf_ng_affine(f"{name}.W_all", layer.W_all, learning_rate, ng),
                _lstm_nonlinearity_component(
                    f"{name}.lstm_nonlin", layer.lstm_nonlin, learning_rate
                ),
                _backprop_truncation_component(f"{name}.cr_trunc", C + R, layer.cr_trunc),
                _tdnnf_ng_affine(f"{name}.W_rp", layer.W_rp, learning_rate, ng),
            ]
            prev = f"{name}.rp"
        else:
            raise ModelFileError(f"no nnet3 export for the TDNN-LSTM layer {type(layer).__name__}")
    node("output.affine", "output.affine", prev)
    node("output.log-softmax", "output.log-softmax", "output.affine")
    k = int(model.output_delay)
    out = "output.log-softmax" if k == 0 else f"Offset(output.log-softmax, {k})"
    lines.append(f"output-node name=output input={out} objective=linear")
    comps += [
        _tdnnf_ng_affine("output.affine", model.output, learning_rate, ng),
        _nonlinear("output.log-softmax", "LogSoftmaxComponent", model.output.out_dim),
    ]
    return Nnet3(lines, comps)


# ---------------------------------------------------------------------- writing
def _write_updatable_common(w: KaldiWriter, p: dict) -> None:
    """``UpdatableComponent::WriteUpdatableCommon`` after the opening tag: ``<MaxChange>``
    and ``<L2Regularize>`` only when positive, then ``<LearningRate>``."""
    if p.get("max_change", 0.0) > 0.0:
        w.token("<MaxChange>")
        w.float32(p["max_change"])
    if p.get("l2_regularize", 0.0) > 0.0:
        w.token("<L2Regularize>")
        w.float32(p["l2_regularize"])
    w.token("<LearningRate>")
    w.float32(p.get("learning_rate", 0.0))


def _write_orthonormal(w: KaldiWriter, p: dict) -> None:
    """``<OrthonormalConstraint>``, which the affine and linear components write only
    when it is nonzero."""
    if p.get("orthonormal_constraint", 0.0) != 0.0:
        w.token("<OrthonormalConstraint>")
        w.float32(p["orthonormal_constraint"])


def _write_component(w: KaldiWriter, c: Component) -> None:
    p = c.params
    tag = f"<{c.kind}>"
    w.token(tag)
    if c.kind == "FixedAffineComponent":
        w.token("<LinearParams>")
        w.matrix(p["linear"])
        w.token("<BiasParams>")
        w.vector(p["bias"])
    elif c.kind in ("NaturalGradientAffineComponent", "AffineComponent"):
        # nnet-simple-component.cc: AffineComponent::Write,
        # NaturalGradientAffineComponent::Write
        _write_updatable_common(w, p)
        w.token("<LinearParams>")
        w.matrix(p["linear"])
        w.token("<BiasParams>")
        w.vector(p["bias"])
        if c.kind == "NaturalGradientAffineComponent":
            ng: NgOptions = p.get("ng", NgOptions())
            w.token("<RankIn>")
            w.int32(ng.rank_in)
            w.token("<RankOut>")
            w.int32(ng.rank_out)
            _write_orthonormal(w, p)
            w.token("<UpdatePeriod>")
            w.int32(ng.update_period)
            w.token("<NumSamplesHistory>")
            w.float32(ng.num_samples_history)
            w.token("<Alpha>")
            w.float32(ng.alpha)
        else:
            _write_orthonormal(w, p)
    elif c.kind == "LinearComponent":
        # nnet-simple-component.cc: LinearComponent::Write
        ng = p.get("ng", NgOptions())
        _write_updatable_common(w, p)
        w.token("<Params>")
        w.matrix(p["linear"])
        _write_orthonormal(w, p)
        w.token("<UseNaturalGradient>")
        w.boolean(p.get("use_natural_gradient", True))
        w.token("<RankInOut>")
        w.int32(ng.rank_in)
        w.int32(ng.rank_out)
        w.token("<Alpha>")
        w.float32(ng.alpha)
        w.token("<NumSamplesHistory>")
        w.float32(ng.num_samples_history)
        w.token("<UpdatePeriod>")
        w.int32(ng.update_period)
    elif c.kind == "TdnnComponent":
        # nnet-tdnn-component.cc: TdnnComponent::Write (the orthonormal constraint always)
        ng = p.get("ng", NgOptions())
        _write_updatable_common(w, p)
        w.token("<TimeOffsets>")
        w.int_vector(p["time_offsets"])
        w.token("<LinearParams>")
        w.matrix(p["linear"])
        w.token("<BiasParams>")
        w.vector(p["bias"])
        w.token("<OrthonormalConstraint>")
        w.float32(p.get("orthonormal_constraint", 0.0))
        w.token("<UseNaturalGradient>")
        w.boolean(p.get("use_natural_gradient", True))
        w.token("<NumSamplesHistory>")
        w.float32(ng.num_samples_history)
        w.token("<AlphaInOut>")
        w.float32(ng.alpha)
        w.float32(p.get("alpha_out", ng.alpha))
        w.token("<RankInOut>")
        w.int32(ng.rank_in)
        w.int32(ng.rank_out)
    elif c.kind == "BatchNormComponent":
        # nnet-normalize-component.cc: BatchNormComponent::Write; the count is a double,
        # the mean and variance of the statistics float vectors
        w.token("<Dim>")
        w.int32(p["dim"])
        w.token("<BlockDim>")
        w.int32(p.get("block_dim", p["dim"]))
        w.token("<Epsilon>")
        w.float32(p["epsilon"])
        w.token("<TargetRms>")
        w.float32(p["target_rms"])
        w.token("<TestMode>")
        w.boolean(p["test_mode"])
        w.token("<Count>")
        w.float64(p["count"])
        w.token("<StatsMean>")
        w.vector(p["mean"])
        w.token("<StatsVar>")
        w.vector(p["var"])
    elif c.kind == "NoOpComponent":
        # nnet-simple-component.cc: NoOpComponent::Write
        w.token("<Dim>")
        w.int32(p["dim"])
        w.token("<BackpropScale>")
        w.float32(p.get("backprop_scale", 1.0))
    elif c.kind in NONLINEAR_TYPES:
        dim = p["dim"]
        w.token("<Dim>")
        w.int32(dim)
        w.token("<ValueAvg>")
        w.vector(np.zeros(dim))
        w.token("<DerivAvg>")
        w.vector(np.zeros(dim))
        w.token("<Count>")
        w.float64(0.0)
    elif c.kind == "LstmNonlinearityComponent":
        # nnet-combined-component.cc: LstmNonlinearityComponent::Write
        _write_updatable_common(w, p)
        w.token("<Params>")
        w.matrix(p["params"])
        w.token("<ValueAvg>")
        w.matrix(p["value_avg"])
        w.token("<DerivAvg>")
        w.matrix(p["deriv_avg"])
        w.token("<SelfRepairConfig>")
        w.vector(p["self_repair_config"])
        w.token("<SelfRepairProb>")
        w.vector(p["self_repair_prob"])
        if p.get("use_dropout", False):
            w.token("<UseDropout>")
            w.boolean(True)
        w.token("<Count>")
        w.float64(p["count"])
    elif c.kind == "BackpropTruncationComponent":
        # nnet-general-component.cc: BackpropTruncationComponent::Write
        w.token("<Dim>")
        w.int32(p["dim"])
        w.token("<Scale>")
        w.float32(p["scale"])
        w.token("<ClippingThreshold>")
        w.float32(p["clipping_threshold"])
        w.token("<ZeroingThreshold>")
        w.float32(p["zeroing_threshold"])
        w.token("<ZeroingInterval>")
        w.int32(p["zeroing_interval"])
        w.token("<RecurrenceInterval>")
        w.int32(p["recurrence_interval"])
        for tok, key in (
            ("<NumElementsClipped>", "num_clipped"),
            ("<NumElementsZeroed>", "num_zeroed"),
            ("<NumElementsProcessed>", "count"),
            ("<NumZeroingBoundaries>", "count_zeroing_boundaries"),
        ):
            w.token(tok)
            w.float64(p.get(key, 0.0))
    elif c.kind == "NormalizeComponent":
        w.token("<InputDim>")
        w.int32(p["dim"])
        w.token("<TargetRms>")
        w.float32(p.get("target_rms", 1.0))
        w.token("<AddLogStddev>")
        w.boolean(False)
    else:
        raise ValueError(f"cannot write component type {c.kind}")
    w.token(f"</{c.kind}>")


def write_nnet3(w: KaldiWriter, nnet: Nnet3) -> None:
    """``Nnet::Write``."""
    w.token("<Nnet3>")
    w.raw("\n" + "".join(line + "\n" for line in nnet.config_lines) + "\n")
    w.token("<NumComponents>")
    w.int32(len(nnet.components))
    w.newline()
    for c in nnet.components:
        w.token("<ComponentName>")
        w.token(c.name)
        _write_component(w, c)
        w.newline()
    w.token("</Nnet3>")


# ---------------------------------------------------------------------- reading
def _read_until_end(r: KaldiReader, end: str, fields: dict) -> dict:
    """Read ``<Field> value`` pairs until the closing tag (types by field name; the
    LstmNonlinearityComponent's ``<ValueAvg>`` / ``<DerivAvg>`` are matrices, the
    NonlinearComponents' vectors)."""
    averages_are_matrices = end == "</LstmNonlinearityComponent>"
    while True:
        tok = r.token()
        if tok == end:
            return fields
        name = tok.strip("<>")
        if name in ("LinearParams", "Params"):
            fields["linear"] = r.matrix()
        elif name in ("BiasParams",):
            fields["bias"] = r.vector()
        elif name in ("StatsMean", "StatsVar"):
            fields[name] = r.vector()
        elif name in ("ValueAvg", "DerivAvg") and averages_are_matrices:
            fields[name] = r.matrix()
        elif name in ("SelfRepairConfig", "SelfRepairProb"):
            fields[name] = r.vector()
        elif name in ("ValueAvg", "DerivAvg", "OderivRms"):
            r.vector()
        elif name == "TimeOffsets":
            fields[name] = [int(o) for o in r.int_vector()]
        elif name in (
            "Dim",
            "InputDim",
            "BlockDim",
            "RankIn",
            "RankOut",
            "UpdatePeriod",
            "ZeroingInterval",
            "RecurrenceInterval",
        ):
            fields[name] = r.int32()
        elif name == "RankInOut":
            fields[name] = (r.int32(), r.int32())
        elif name == "AlphaInOut":
            fields[name] = (r.float(), r.float())
        elif name in ("AddLogStddev", "IsGradient", "UseNaturalGradient", "TestMode", "UseDropout"):
            fields[name] = r.boolean()
        elif name in (
            "Count",
            "OderivCount",
            "NumDimsSelfRepaired",
            "NumDimsProcessed",
            "TargetRms",
            "Epsilon",
            "BackpropScale",
            "MaxChange",
            "LearningRate",
            "LearningRateFactor",
            "L2Regularize",
            "NumSamplesHistory",
            "Alpha",
            "SelfRepairLowerThreshold",
            "SelfRepairUpperThreshold",
            "SelfRepairScale",
            "OrthonormalConstraint",
            "Scale",
            "ClippingThreshold",
            "ZeroingThreshold",
            "NumElementsClipped",
            "NumElementsZeroed",
            "NumElementsProcessed",
            "NumZeroingBoundaries",
        ):
            fields[name] = r.float()
        else:
            raise r.error(f"unexpected field {tok!r} before {end}")


def _updatable_fields(f: dict) -> dict:
    """The ``WriteUpdatableCommon`` fields and the orthonormal constraint, as paravg's
    params name them (absent ones left out, as Kaldi's defaults: 0)."""
    params = {}
    for field_name, key in (
        ("MaxChange", "max_change"),
        ("L2Regularize", "l2_regularize"),
        ("LearningRate", "learning_rate"),
        ("OrthonormalConstraint", "orthonormal_constraint"),
    ):
        if field_name in f:
            params[key] = f[field_name]
    return params


def _read_component(r: KaldiReader, name: str) -> Component:
    tag = r.token()
    if not (tag.startswith("<") and tag.endswith(">")):
        raise r.error(f"component {name}: expected a type tag, got {tag!r}")
    kind = tag[1:-1]
    if kind not in KNOWN_TYPES:
        raise r.error(f"component {name}: type {kind} is not one paravg reads")
    f = _read_until_end(r, f"</{kind}>", {})
    if kind in AFFINE_TYPES:
        params = {"linear": f["linear"], "bias": f["bias"], **_updatable_fields(f)}
        if kind == "NaturalGradientAffineComponent":
            params["ng"] = NgOptions(
                f["RankIn"], f["RankOut"], f["UpdatePeriod"], f["NumSamplesHistory"], f["Alpha"]
            )
    elif kind == "LinearComponent":
        ri, ro = f["RankInOut"]
        params = {
            "linear": f["linear"],
            **_updatable_fields(f),
            "use_natural_gradient": f["UseNaturalGradient"],
            "ng": NgOptions(ri, ro, f["UpdatePeriod"], f["NumSamplesHistory"], f["Alpha"]),
        }
    elif kind == "TdnnComponent":
        ri, ro = f["RankInOut"]
        alpha_in, alpha_out = f["AlphaInOut"]
        params = {
            "linear": f["linear"],
            "bias": f["bias"],
            "time_offsets": f["TimeOffsets"],
            **_updatable_fields(f),
            "use_natural_gradient": f["UseNaturalGradient"],
            "ng": NgOptions(ri, ro, TDNN_UPDATE_PERIOD, f["NumSamplesHistory"], alpha_in),
            "alpha_out": alpha_out,
        }
        if params["linear"].shape[1] % max(1, len(params["time_offsets"])):
            raise r.error(f"component {name}: parameters do not split into the time offsets")
    elif kind == "BatchNormComponent":
        params = {
            "dim": f["Dim"],
            "block_dim": f["BlockDim"],
            "epsilon": f["Epsilon"],
            "target_rms": f["TargetRms"],
            "test_mode": f["TestMode"],
            "count": f["Count"],
            "mean": f["StatsMean"],
            "var": f["StatsVar"],
        }
    elif kind == "NoOpComponent":
        params = {"dim": f["Dim"], "backprop_scale": f.get("BackpropScale", 1.0)}
    elif kind == "LstmNonlinearityComponent":
        params = {
            **_updatable_fields(f),
            "params": f["linear"],
            "value_avg": f["ValueAvg"],
            "deriv_avg": f["DerivAvg"],
            "self_repair_config": f["SelfRepairConfig"],
            "self_repair_prob": f["SelfRepairProb"],
            "use_dropout": f.get("UseDropout", False),
            "count": f["Count"],
        }
        C = params["params"].shape[1]
        if params["params"].shape[0] != 3 or params["value_avg"].shape != (5, C):
            raise r.error(f"component {name}: expected 3 x C parameters and 5 x C statistics")
        if len(params["self_repair_config"]) != 10:
            raise r.error(f"component {name}: expected a self-repair config of 10 values")
    elif kind == "BackpropTruncationComponent":
        params = {
            "dim": f["Dim"],
            "scale": f.get("Scale", 1.0),  # absent in old files: 1
            "clipping_threshold": f["ClippingThreshold"],
            "zeroing_threshold": f["ZeroingThreshold"],
            "zeroing_interval": f["ZeroingInterval"],
            "recurrence_interval": f["RecurrenceInterval"],
            "num_clipped": f["NumElementsClipped"],
            "num_zeroed": f["NumElementsZeroed"],
            "count": f["NumElementsProcessed"],
            "count_zeroing_boundaries": f["NumZeroingBoundaries"],
        }
    elif kind == "NormalizeComponent":
        if f.get("AddLogStddev"):
            raise r.error(f"component {name}: add-log-stddev is not supported")
        params = {"dim": f.get("InputDim", f.get("Dim")), "target_rms": f.get("TargetRms", 1.0)}
    else:
        params = {"dim": f["Dim"]}
    return Component(name, kind, params)


def read_nnet3(r: KaldiReader) -> Nnet3:
    """``Nnet::Read`` (the component types above)."""
    r.expect("<Nnet3>")
    r.line()  # the rest of the <Nnet3> line
    lines = []
    while True:
        line = r.line()
        if line.strip() == "":
            break
        lines.append(line.strip())
    r.expect("<NumComponents>")
    n = r.int32()
    comps = []
    for _ in range(n):
        r.expect("<ComponentName>")
        name = r.token()
        comps.append(_read_component(r, name))
    r.expect("</Nnet3>")
    return Nnet3(lines, comps)


# ---------------------------------------------------------------------- computing
def _config_values(line: str) -> dict[str, str]:
    """``key=value`` pairs of a config line; spaces inside parentheses (descriptors such
    as ``Append(input, Offset(input, 1))``) do not split."""
    tokens, depth, cur = [], 0, ""
    for ch in line.strip() + " ":
        if ch.isspace() and depth == 0:
            if cur:
                tokens.append(cur)
            cur = ""
            continue
        depth += ch == "("
        depth -= ch == ")"
        cur += ch
    return dict(tok.split("=", 1) for tok in tokens[1:] if "=" in tok)


def _split_args(s: str) -> list[str]:
    parts, depth, cur = [], 0, ""
    for ch in s:
        if ch == "," and depth == 0:
            parts.append(cur.strip())
            cur = ""
            continue
        depth += ch == "("
        depth -= ch == ")"
        cur += ch
    parts.append(cur.strip())
    return parts


def _parse_descriptor(s: str):
    """A descriptor as a tree: ('node', name) | ('offset', d, o) | ('append', [d...]) |
    ('replace_t', d, value) | ('sum', [d...]) | ('scale', factor, d) |
    ('ifdefined', d)."""
    s = s.strip()
    m = re.fullmatch(r"(\w+)\((.*)\)", s)
    if not m:
        return ("node", s)
    fn, args = m.group(1), _split_args(m.group(2))
    if fn == "Append":
        return ("append", [_parse_descriptor(a) for a in args])
    if fn == "Sum" and len(args) >= 2:
        return ("sum", [_parse_descriptor(a) for a in args])
    if fn == "Scale" and len(args) == 2:
        return ("scale", float(args[0]), _parse_descriptor(args[1]))
    if fn == "Offset" and len(args) == 2:
        return ("offset", _parse_descriptor(args[0]), int(args[1]))
    if fn == "ReplaceIndex" and len(args) == 3 and args[1] == "t":
        return ("replace_t", _parse_descriptor(args[0]), int(args[2]))
    if fn == "IfDefined" and len(args) == 1:
        return ("ifdefined", _parse_descriptor(args[0]))
    raise ModelFileError(
        f"descriptor {s!r}: only Append, Sum, Scale, Offset, ReplaceIndex(x, t, n), IfDefined"
    )


@dataclass
class _Graph:
    """The nodes of a network's config lines: input dims, component nodes (component
    name, descriptor tree), dim-range nodes (input node, offset, dim), in file order."""

    inputs: dict[str, int]
    components: dict[str, tuple[str, tuple]]
    dim_ranges: dict[str, tuple[str, int, int]]
    outputs: dict[str, tuple]

    @classmethod
    def of(cls, nnet: Nnet3) -> _Graph:
        g = cls({}, {}, {}, {})
        for line in nnet.config_lines:
            kv = _config_values(line)
            if line.startswith("input-node"):
                g.inputs[kv["name"]] = int(kv["dim"])
            elif line.startswith("component-node"):
                g.components[kv["name"]] = (kv["component"], _parse_descriptor(kv["input"]))
            elif line.startswith("dim-range-node"):
                g.dim_ranges[kv["name"]] = (
                    kv["input-node"],
                    int(kv["dim-offset"]),
                    int(kv["dim"]),
                )
            elif line.startswith("output-node"):
                g.outputs[kv["name"]] = _parse_descriptor(kv["input"])
        return g

    def resolve(self, name: str) -> tuple[str, int, int | None]:
        """A node as (input or component node, first column, end column or None = all),
        through dim-range nodes."""
        lo, hi = 0, None
        seen = set()
        while name in self.dim_ranges:
            if name in seen:
                raise ModelFileError(f"dim-range-node {name!r} refers to itself")
            seen.add(name)
            src, off, dim = self.dim_ranges[name]
            lo, hi = lo + off, lo + off + dim
            name = src
        if name not in self.inputs and name not in self.components:
            raise ModelFileError(f"the network reads node {name!r}, which it does not define")
        return name, lo, hi


def _node_dim(nnet: Nnet3, g: _Graph, name: str) -> int:
    base, lo, hi = g.resolve(name)
    if hi is not None:
        return hi - lo
    if base in g.inputs:
        return g.inputs[base]
    return nnet.component(g.components[base][0]).output_dim


def _tree_dim(nnet: Nnet3, g: _Graph, t) -> int:
    if t[0] == "node":
        return _node_dim(nnet, g, t[1])
    if t[0] == "append":
        return sum(_tree_dim(nnet, g, a) for a in t[1])
    if t[0] == "sum":
        return _tree_dim(nnet, g, t[1][0])
    if t[0] == "scale":
        return _tree_dim(nnet, g, t[2])
    return _tree_dim(nnet, g, t[1])


def _descriptor_dim(nnet: Nnet3, s: str) -> int:
    return _tree_dim(nnet, _Graph.of(nnet), _parse_descriptor(s))


def _batchnorm_scale_offset(p: dict) -> tuple[np.ndarray, np.ndarray]:
    """Kaldi's test mode (``BatchNormComponent::ComputeDerived``) from the stored count,
    mean and variance: scale = target-rms · (max(0, var) + ε)^(−½), offset = −mean ·
    scale."""
    if not p["test_mode"]:
        raise ModelFileError("a BatchNormComponent in training mode needs a minibatch")
    if p["count"] <= 0.0:
        raise ModelFileError("a BatchNormComponent in test mode without statistics")
    mean = np.asarray(p["mean"], np.float64)
    var = np.maximum(np.asarray(p["var"], np.float64), 0.0)
    scale = p["target_rms"] / np.sqrt(var + p["epsilon"])
    if p["block_dim"] != p["dim"]:
        reps = p["dim"] // p["block_dim"]
        return np.tile(scale, reps), np.tile(-mean * scale, reps)
    return scale, -mean * scale


def _lstm_nonlinearity(p: dict, x: np.ndarray) -> np.ndarray:
    """``ComputeLstmNonlinearity`` (``src/cudamatrix/cu-math.cc``): rows [i_part, f_part,
    c_part, o_part, c_prev (, i_scale, f_scale, o_scale)] → [c_t, m_t]; the o-gate's
    peephole reads the new c_t."""
    w = np.asarray(p["params"], np.float64)
    C = w.shape[1]
    i_part, f_part, c_part, o_part, c_prev = (x[:, k * C : (k + 1) * C] for k in range(5))
    ones = np.ones((x.shape[0], 1))
    i_s, f_s, o_s = (x[:, 5 * C + k : 5 * C + k + 1] if x.shape[1] > 5 * C else ones
                     for k in range(3))  # fmt: skip

    def sigmoid(v):
        return 1.0 / (1.0 + np.exp(-v))

    i = sigmoid(i_part + w[0] * c_prev)
    f = sigmoid(f_part + w[1] * c_prev)
    c = f * f_s * c_prev + i * i_s * np.tanh(c_part)
    o = sigmoid(o_part + w[2] * c)
    return np.concatenate([c, o * o_s * np.tanh(c)], axis=1)


def _apply_component(c: Component, x: np.ndarray) -> np.ndarray:
    """A component on rows (one frame each; not the TdnnComponent)."""
    p = c.params
    if c.kind in AFFINE_TYPES:
        return x @ p["linear"].T.astype(np.float64) + p["bias"]
    if c.kind in LINEAR_TYPES:
        return x @ p["linear"].T.astype(np.float64)
    if c.kind == "RectifiedLinearComponent":
        return np.maximum(x, 0.0)
    if c.kind == "NormalizeComponent":
        rms2 = float(p["target_rms"]) ** 2
        sq = np.maximum(
            (x * x).sum(axis=1, keepdims=True) / (x.shape[1] * rms2), SQUARED_NORM_FLOOR
        )
        return x / np.sqrt(sq)
    if c.kind == "BatchNormComponent":
        scale, offset = _batchnorm_scale_offset(p)
        return x * scale + offset
    if c.kind == "NoOpComponent":
        return x
    if c.kind == "LogSoftmaxComponent":
        m = x.max(axis=1, keepdims=True)
        return x - m - np.log(np.exp(x - m).sum(axis=1, keepdims=True))
    if c.kind == "LstmNonlinearityComponent":
        return _lstm_nonlinearity(p, x)
    if c.kind == "BackpropTruncationComponent":  # forward: the scale only
        return float(np.float32(p["scale"])) * x
    raise ValueError(c.kind)


INF = 1 << 40  # a range without end (a constant input)


def _tree_edges(t, offset: int = 0, optional: bool = False):
    """(node, time offset or None for a fixed time, inside IfDefined) of every node a
    descriptor reads at time t: the node at t + offset."""
    kind = t[0]
    if kind == "node":
        yield t[1], offset, optional
    elif kind == "offset":
        yield from _tree_edges(t[1], offset + t[2], optional)
    elif kind == "replace_t":
        for name, _o, opt in _tree_edges(t[1], 0, optional):
            yield name, None, opt
    elif kind == "ifdefined":
        yield from _tree_edges(t[1], offset, True)
    elif kind == "scale":
        yield from _tree_edges(t[2], offset, optional)
    else:
        for a in t[1]:
            yield from _tree_edges(a, offset, optional)


class _Evaluator:
    """Kaldi's semantics of a network on one utterance (float64): a node is computable
    at t where every input its descriptor needs is (``IfDefined`` parts needed by none:
    zero where not computable); the nodes of a recurrence (a cycle through negative
    offsets) are computed in blocks of as many frames as the shortest delay, in time
    order, so each block reads only earlier blocks (and zeros before the first)."""

    def __init__(self, nnet: Nnet3, inputs: dict[str, np.ndarray], constants: dict) -> None:
        self.nnet, self.g = nnet, _Graph.of(nnet)
        self.ranges: dict[str, tuple[int, int]] = {}
        self.values: dict[str, np.ndarray] = {}
        self.done: dict[str, int] = {}  # computed up to (exclusive)
        for name in self.g.inputs:
            if name in inputs:
                self.values[name] = np.asarray(inputs[name], np.float64)
                self.ranges[name] = (0, self.values[name].shape[0])
                self.done[name] = self.ranges[name][1]
            elif name in constants:
                self.values[name] = np.asarray(constants[name], np.float64)[None, :]
                self.ranges[name] = (-INF, INF)
                self.done[name] = INF
            else:
                self.ranges[name] = (0, 0)
                self.values[name] = np.zeros((0, self.g.inputs[name]))
                self.done[name] = 0
        self._compute_ranges()

    # -------------------------------------------------------------- computability
    def _tree_range(self, t) -> tuple[int, int]:
        kind = t[0]
        if kind == "node":
            return self.ranges[self.g.resolve(t[1])[0]]
        if kind == "offset":
            lo, hi = self._tree_range(t[1])
            if lo <= -INF:
                return lo, hi
            return lo - t[2], hi - t[2]
        if kind == "replace_t":
            lo, hi = self._tree_range(t[1])
            return (-INF, INF) if lo <= t[2] < hi else (0, 0)
        if kind == "ifdefined":
            return -INF, INF
        if kind == "scale":
            return self._tree_range(t[2])
        ranges = [self._tree_range(a) for a in t[1]]
        return max(r[0] for r in ranges), min(r[1] for r in ranges)

    def _component_range(self, name: str) -> tuple[int, int]:
        comp_name, tree = self.g.components[name]
        lo, hi = self._tree_range(tree)
        comp = self.nnet.component(comp_name)
        if comp.kind == "TdnnComponent":
            offsets = comp.params["time_offsets"]
            lo, hi = lo - min(offsets), hi - max(offsets)
        return lo, max(lo, hi)

    def _compute_ranges(self) -> None:
        """The greatest fixed point of 'computable where the needed inputs are' (ranges
        only shrink from everything)."""
        for name in self.g.components:
            self.ranges[name] = (-INF, INF)
        for _ in range(len(self.g.components) + 2):
            changed = False
            for name in self.g.components:
                r = self._component_range(name)
                if r != self.ranges[name]:
                    self.ranges[name], changed = r, True
            if not changed:
                return
        raise ModelFileError(
            "the network's computable frames do not settle (a cycle without IfDefined)"
        )

    # -------------------------------------------------------------- values
    def node(self, name: str, lo: int, hi: int, optional: bool) -> np.ndarray:
        base, c0, c1 = self.g.resolve(name)
        vals = self.values[base]
        c1 = vals.shape[1] if c1 is None else c1
        blo, bhi = self.ranges[base]
        if blo <= -INF:
            return np.broadcast_to(vals[:, c0:c1], (hi - lo, c1 - c0))
        s, e = max(lo, blo), min(hi, bhi)
        if (s > lo or e < hi) and not optional:
            raise ModelFileError(f"node {name!r} is needed at frames {lo}..{hi - 1}, "
                                 f"computable at {blo}..{bhi - 1}")  # fmt: skip
        if s >= e:
            return np.zeros((hi - lo, c1 - c0))
        if e > self.done[base]:
            raise ModelFileError(f"node {name!r} read at frame {e - 1} before it is computed")
        if s == lo and e == hi:
            return vals[s - blo : e - blo, c0:c1]
        out = np.zeros((hi - lo, c1 - c0))
        out[s - lo : e - lo] = vals[s - blo : e - blo, c0:c1]
        return out

    def tree(self, t, lo: int, hi: int, optional: bool = False) -> np.ndarray:
        kind = t[0]
        if kind == "node":
            return self.node(t[1], lo, hi, optional)
        if kind == "offset":
            return self.tree(t[1], lo + t[2], hi + t[2], optional)
        if kind == "replace_t":
            row = self.tree(t[1], t[2], t[2] + 1, optional)
            return np.broadcast_to(row, (hi - lo, row.shape[1]))
        if kind == "ifdefined":
            return self.tree(t[1], lo, hi, True)
        if kind == "scale":
            return t[1] * self.tree(t[2], lo, hi, optional)
        parts = [self.tree(a, lo, hi, optional) for a in t[1]]
        if kind == "sum":
            return sum(parts[1:], parts[0].copy())
        return np.concatenate(parts, axis=1)

    def _apply(self, name: str, lo: int, hi: int) -> np.ndarray:
        comp_name, tree = self.g.components[name]
        comp = self.nnet.component(comp_name)
        if comp.kind != "TdnnComponent":
            return _apply_component(comp, self.tree(tree, lo, hi))
        # bias + sum_i W_i x(t + o_i), W_i the i-th column block
        offsets = comp.params["time_offsets"]
        w = np.asarray(comp.params["linear"], np.float64)
        d = w.shape[1] // len(offsets)
        out = np.zeros((hi - lo, w.shape[0]))
        for i, o in enumerate(offsets):
            out += self.tree(tree, lo + o, hi + o) @ w[:, i * d : (i + 1) * d].T
        if len(comp.params["bias"]):
            out += np.asarray(comp.params["bias"], np.float64)
        return out

    def _sccs(self) -> list[list[str]]:
        """Strongly connected components of the component nodes (edges: node → the
        component nodes it reads), dependencies first (Tarjan)."""
        names = list(self.g.components)
        deps = {n: sorted({self.g.resolve(m)[0] for m, _o, _opt in
                           _tree_edges(self.g.components[n][1])} & set(names))
                for n in names}  # fmt: skip
        index: dict[str, int] = {}
        low: dict[str, int] = {}
        stack: list[str] = []
        on_stack: set[str] = set()
        out: list[list[str]] = []

        def visit(v: str) -> None:
            index[v] = low[v] = len(index)
            stack.append(v)
            on_stack.add(v)
            for w in deps[v]:
                if w not in index:
                    visit(w)
                    low[v] = min(low[v], low[w])
                elif w in on_stack:
                    low[v] = min(low[v], index[w])
            if low[v] == index[v]:
                scc = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    scc.append(w)
                    if w == v:
                        break
                out.append(sorted(scc, key=names.index))

        for v in names:
            if v not in index:
                visit(v)
        return out

    def run(self) -> None:
        for scc in self._sccs():
            inner = set(scc)
            edges = [(n, self.g.resolve(m)[0], o) for n in scc
                     for m, o, _opt in _tree_edges(self.g.components[n][1])]  # fmt: skip
            edges = [(n, m, o) for n, m, o in edges if m in inner]
            if not edges:  # not a recurrence: all frames at once
                (name,) = scc
                lo, hi = self.ranges[name]
                if lo <= -INF or hi >= INF:
                    raise ModelFileError(f"{name} reads no frame of the input")
                dim = self.nnet.component(self.g.components[name][0]).output_dim
                self.values[name] = self._apply(name, lo, hi) if hi > lo else np.zeros((0, dim))
                self.done[name] = hi
                continue
            self._run_recurrence(scc, edges)

    def _run_recurrence(self, scc: list[str], edges) -> None:
        for n, m, o in edges:
            if o is None or o > 0:
                raise ModelFileError(
                    f"{n} reads {m} of its own recurrence at a later or fixed time"
                )
            if self.nnet.component(self.g.components[n][0]).kind == "TdnnComponent":
                raise ModelFileError(f"{n}: a TdnnComponent inside a recurrence")
        lags = [-o for _n, _m, o in edges if o < 0]
        if not lags:
            raise ModelFileError(f"the nodes {scc} read each other at the same time")
        block = min(lags)
        # within a block: each node after the ones it reads at offset 0
        order: list[str] = []
        same = {n: {m for k, m, o in edges if k == n and o == 0 and m != n} for n in scc}
        while len(order) < len(scc):
            ready = [n for n in scc if n not in order and same[n] <= set(order)]
            if not ready:
                raise ModelFileError(f"the nodes {scc} read each other at the same time")
            order.append(ready[0])
        for n in scc:
            lo, hi = self.ranges[n]
            dim = self.nnet.component(self.g.components[n][0]).output_dim
            self.values[n] = np.zeros((max(0, hi - lo), dim))
            self.done[n] = lo
        start = min(self.ranges[n][0] for n in scc)
        end = max(self.ranges[n][1] for n in scc)
        for b in range(start, end, block):
            for n in order:
                lo, hi = self.ranges[n]
                s, e = max(b, lo), min(b + block, hi)
                if s < e:
                    self.values[n][s - lo : e - lo] = self._apply(n, s, e)
                    self.done[n] = e


def nnet_context(nnet: Nnet3, window: int = 400) -> tuple[int, int]:
    """The network's (left, right) context as Kaldi's ``ComputeSimpleNnetContext``
    (``src/nnet3/nnet-utils.cc``) finds it: with input frames 0 .. window - 1 and outputs
    asked for at the same frames, left = the first computable output frame, right = the
    frames after the last one (IfDefined recurrences need none; an output-delay k takes k
    from the left and adds k on the right). The frames' values are not computed."""
    g = _Graph.of(nnet)
    dims = g.inputs
    inputs = {"input": np.zeros((window, dims["input"]))}
    constants = {name: np.zeros(dim) for name, dim in dims.items() if name != "input"}
    ev = _Evaluator(nnet, inputs, constants)
    out = g.outputs.get("output")
    if out is None:
        raise ModelFileError("the network has no output-node named 'output'")
    lo, hi = ev._tree_range(out)
    lo, hi = max(lo, 0), min(hi, window)
    if hi <= lo:
        raise ModelFileError(f"no output frame is computable from {window} input frames")
    return lo, window - hi


def compute(nnet: Nnet3, feats: np.ndarray, ivector: np.ndarray | None = None) -> np.ndarray:
    """Run the network (float64) on one utterance: ``feats`` (T, F) at t = 0..T-1 and one
    i-vector (``ReplaceIndex(ivector, t, 0)``: the same for every frame). Returns the node
    ``output`` on every frame where Kaldi can compute it from these frames (T - left -
    right rows, Kaldi's contexts: see the module docstring for an output-delay). Batch-norm
    components run in test mode (from their stored statistics); recurrences (``IfDefined``
    over negative offsets) start from zero at the first frame their input is computable."""
    constants = {} if ivector is None else {"ivector": ivector}
    ev = _Evaluator(nnet, {"input": feats}, constants)
    ev.run()
    out = ev.g.outputs.get("output")
    if out is None:
        raise ModelFileError("the network has no output-node named 'output'")
    lo, hi = ev._tree_range(out)
    # the frames of the input only (Kaldi's contexts: outputs asked for at input frames)
    lo, hi = max(lo, 0), min(hi, len(feats))
    return np.array(ev.tree(out, lo, max(lo, hi)))
