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
KNOWN_TYPES = (*AFFINE_TYPES, *LINEAR_TYPES, "TdnnComponent", *DIM_TYPES)
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
        return int(self.params["dim"])

    @property
    def output_dim(self) -> int:
        if self.kind in (*AFFINE_TYPES, *LINEAR_TYPES, "TdnnComponent"):
            return int(self.params["linear"].shape[0])
        return int(self.params["dim"])


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
    :class:`paravg.nnet.tdnn.TdnnModel` or :class:`paravg.nnet.tdnnf.TdnnfModel`."""
    family = getattr(model, "family", "tdnn")
    if family == "tdnn":
        return _tdnn_nnet3(model, learning_rate, ng or NgOptions())
    if family == "tdnnf":
        return _tdnnf_nnet3(model, learning_rate, ng or NgOptions())
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
    """Read ``<Field> value`` pairs until the closing tag (types by field name)."""
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
        elif name in ("ValueAvg", "DerivAvg", "OderivRms"):
            r.vector()
        elif name == "TimeOffsets":
            fields[name] = [int(o) for o in r.int_vector()]
        elif name in ("Dim", "InputDim", "BlockDim", "RankIn", "RankOut", "UpdatePeriod"):
            fields[name] = r.int32()
        elif name == "RankInOut":
            fields[name] = (r.int32(), r.int32())
        elif name == "AlphaInOut":
            fields[name] = (r.float(), r.float())
        elif name in ("AddLogStddev", "IsGradient", "UseNaturalGradient", "TestMode"):
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
    ('replace_t', d, value) | ('sum', [d...]) | ('scale', factor, d)."""
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
    raise ModelFileError(
        f"descriptor {s!r}: only Append, Sum, Scale, Offset, ReplaceIndex(x, t, n)"
    )


def _descriptor_dim(nnet: Nnet3, s: str) -> int:
    tree = _parse_descriptor(s)
    inputs = nnet.input_dims()
    node_comp = {}
    for line in nnet.config_lines:
        if line.startswith("component-node"):
            kv = _config_values(line)
            node_comp[kv["name"]] = kv["component"]

    def dim(t) -> int:
        if t[0] == "node":
            if t[1] in inputs:
                return inputs[t[1]]
            return nnet.component(node_comp[t[1]]).output_dim
        if t[0] == "append":
            return sum(dim(a) for a in t[1])
        if t[0] == "sum":
            return dim(t[1][0])
        if t[0] == "scale":
            return dim(t[2])
        return dim(t[1])

    return dim(tree)


class _Signal:
    """Values of a node on the frames t in [start, start + len) (constant: any t)."""

    def __init__(self, start: int, values: np.ndarray, constant: bool = False) -> None:
        self.start, self.values, self.constant = start, values, constant

    def at(self, lo: int, hi: int) -> np.ndarray:
        if self.constant:
            return np.broadcast_to(self.values, (hi - lo, self.values.shape[-1]))
        return self.values[lo - self.start : hi - self.start]

    @property
    def end(self) -> int:
        return self.start + self.values.shape[0]


def _common_range(parts: list[_Signal]) -> tuple[int, int]:
    ranged = [p for p in parts if not p.constant]
    return max(p.start for p in ranged), min(p.end for p in ranged)


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


def _apply_component(c: Component, x: np.ndarray) -> np.ndarray:
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
    raise ValueError(c.kind)


def _apply_tdnn(c: Component, s: _Signal) -> _Signal:
    """A ``TdnnComponent`` at every t whose inputs t + o (o in its time offsets) all
    exist: bias + Σ_i W_i x(t + o_i), W_i the i-th column block."""
    offsets = c.params["time_offsets"]
    w = np.asarray(c.params["linear"], np.float64)
    d = w.shape[1] // len(offsets)
    lo, hi = s.start - min(offsets), s.end - max(offsets)
    out = np.zeros((max(0, hi - lo), w.shape[0]))
    for i, o in enumerate(offsets):
        out += s.at(lo + o, hi + o) @ w[:, i * d : (i + 1) * d].T
    if len(c.params["bias"]):
        out += np.asarray(c.params["bias"], np.float64)
    return _Signal(lo, out)


def compute(nnet: Nnet3, feats: np.ndarray, ivector: np.ndarray | None = None) -> np.ndarray:
    """Run the network (float64) on one utterance: ``feats`` (T, F) at t = 0..T-1 and one
    i-vector (``ReplaceIndex(ivector, t, 0)``: the same for every frame). Returns the node
    ``output`` on every frame whose context lies inside the input (T - left - right rows).
    Batch-norm components run in test mode (from their stored statistics)."""
    values: dict[str, _Signal] = {"input": _Signal(0, np.asarray(feats, np.float64))}
    if ivector is not None:
        values["ivector"] = _Signal(0, np.asarray(ivector, np.float64)[None, :], constant=True)

    def evaluate(t) -> _Signal:
        kind = t[0]
        if kind == "node":
            if t[1] not in values:
                raise ModelFileError(f"the network reads node {t[1]!r}, which has no value")
            return values[t[1]]
        if kind == "offset":
            s = evaluate(t[1])
            if s.constant:
                return s
            return _Signal(s.start - t[2], s.values)
        if kind == "replace_t":
            s = evaluate(t[1])
            return _Signal(0, s.at(t[2], t[2] + 1), constant=True)
        if kind == "scale":
            s = evaluate(t[2])
            return _Signal(s.start, t[1] * s.values, s.constant)
        parts = [evaluate(a) for a in t[1]]
        lo, hi = _common_range(parts)
        if kind == "sum":
            return _Signal(lo, sum(p.at(lo, hi) for p in parts))
        return _Signal(lo, np.concatenate([p.at(lo, hi) for p in parts], axis=1))

    out = None
    for line in nnet.config_lines:
        kv = _config_values(line)
        if line.startswith("component-node"):
            s = evaluate(_parse_descriptor(kv["input"]))
            comp = nnet.component(kv["component"])
            if comp.kind == "TdnnComponent":
                values[kv["name"]] = _apply_tdnn(comp, s)
            else:
                values[kv["name"]] = _Signal(s.start, _apply_component(comp, s.at(s.start, s.end)))
        elif line.startswith("output-node") and kv["name"] == "output":
            out = evaluate(_parse_descriptor(kv["input"]))
    if out is None:
        raise ModelFileError("the network has no output-node named 'output'")
    return out.values
