"""paravg's TDNN as a Kaldi nnet3 network: build, write, read back, and run.

The network is the one ``steps/nnet3/xconfig_to_configs.py`` makes of
``local/nnet3/tuning/run_tdnn_1a.sh`` (component and node names included)::

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
        if self.kind in AFFINE_TYPES:
            return int(self.params["linear"].shape[1])
        return int(self.params["dim"])

    @property
    def output_dim(self) -> int:
        if self.kind in AFFINE_TYPES:
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


def nnet3_from_model(model, learning_rate: float = 0.0, ng: NgOptions | None = None) -> Nnet3:
    """The nnet3 network of a :class:`paravg.nnet.tdnn.TdnnModel` (parameters copied)."""
    ng = ng or NgOptions()
    lines = [f"input-node name=input dim={model.feat_dim}"]
    lda_parts = _descriptor_offsets("input", model.input_splice)
    if model.ivector_dim:
        lines.append(f"input-node name=ivector dim={model.ivector_dim}")
        lda_parts.append("ReplaceIndex(ivector, t, 0)")
    lines.append(f"component-node name=lda component=lda input={_append(lda_parts)}")

    def arr(t):
        return t.detach().cpu().double().numpy()

    comps = [
        Component(
            "lda",
            "FixedAffineComponent",
            {"linear": arr(model.lda_weight).astype(np.float32), "bias": arr(model.lda_bias)},
        )
    ]
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
                arr(layer.weight),
                arr(layer.bias),
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
            "output.affine", arr(out.weight), arr(out.bias), out.max_change, learning_rate, ng
        ),
        _nonlinear("output.log-softmax", "LogSoftmaxComponent", out.out_dim),
    ]
    return Nnet3(lines, comps)


# ---------------------------------------------------------------------- writing
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
        # WriteUpdatableCommon: optional <MaxChange>, then <LearningRate>
        if p.get("max_change", 0.0) > 0.0:
            w.token("<MaxChange>")
            w.float32(p["max_change"])
        w.token("<LearningRate>")
        w.float32(p.get("learning_rate", 0.0))
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
            w.token("<UpdatePeriod>")
            w.int32(ng.update_period)
            w.token("<NumSamplesHistory>")
            w.float32(ng.num_samples_history)
            w.token("<Alpha>")
            w.float32(ng.alpha)
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
        if name in ("LinearParams",):
            fields["linear"] = r.matrix()
        elif name in ("BiasParams",):
            fields["bias"] = r.vector()
        elif name in ("ValueAvg", "DerivAvg", "OderivRms"):
            r.vector()
        elif name in ("Dim", "InputDim", "BlockDim", "RankIn", "RankOut", "UpdatePeriod"):
            fields[name] = r.int32()
        elif name == "AddLogStddev" or name == "IsGradient":
            fields[name] = r.boolean()
        elif name in (
            "Count",
            "OderivCount",
            "NumDimsSelfRepaired",
            "NumDimsProcessed",
            "TargetRms",
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


def _read_component(r: KaldiReader, name: str) -> Component:
    tag = r.token()
    if not (tag.startswith("<") and tag.endswith(">")):
        raise r.error(f"component {name}: expected a type tag, got {tag!r}")
    kind = tag[1:-1]
    known = (*AFFINE_TYPES, *NONLINEAR_TYPES, "NormalizeComponent")
    if kind not in known:
        raise r.error(f"component {name}: type {kind} is not one paravg reads")
    f = _read_until_end(r, f"</{kind}>", {})
    if kind in AFFINE_TYPES:
        params = {"linear": f["linear"], "bias": f["bias"]}
        if "MaxChange" in f:
            params["max_change"] = f["MaxChange"]
        if "LearningRate" in f:
            params["learning_rate"] = f["LearningRate"]
        if kind == "NaturalGradientAffineComponent":
            params["ng"] = NgOptions(
                f["RankIn"], f["RankOut"], f["UpdatePeriod"], f["NumSamplesHistory"], f["Alpha"]
            )
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
    ('replace_t', d, value)."""
    s = s.strip()
    m = re.fullmatch(r"(\w+)\((.*)\)", s)
    if not m:
        return ("node", s)
    fn, args = m.group(1), _split_args(m.group(2))
    if fn == "Append":
        return ("append", [_parse_descriptor(a) for a in args])
    if fn == "Offset" and len(args) == 2:
        return ("offset", _parse_descriptor(args[0]), int(args[1]))
    if fn == "ReplaceIndex" and len(args) == 3 and args[1] == "t":
        return ("replace_t", _parse_descriptor(args[0]), int(args[2]))
    raise ModelFileError(f"descriptor {s!r}: only Append, Offset, ReplaceIndex(x, t, n)")


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


def _apply_component(c: Component, x: np.ndarray) -> np.ndarray:
    p = c.params
    if c.kind in AFFINE_TYPES:
        return x @ p["linear"].T.astype(np.float64) + p["bias"]
    if c.kind == "RectifiedLinearComponent":
        return np.maximum(x, 0.0)
    if c.kind == "NormalizeComponent":
        rms2 = float(p["target_rms"]) ** 2
        sq = np.maximum(
            (x * x).sum(axis=1, keepdims=True) / (x.shape[1] * rms2), SQUARED_NORM_FLOOR
        )
        return x / np.sqrt(sq)
    if c.kind == "LogSoftmaxComponent":
        m = x.max(axis=1, keepdims=True)
        return x - m - np.log(np.exp(x - m).sum(axis=1, keepdims=True))
    raise ValueError(c.kind)


def compute(nnet: Nnet3, feats: np.ndarray, ivector: np.ndarray | None = None) -> np.ndarray:
    """Run the network (float64) on one utterance: ``feats`` (T, F) at t = 0..T-1 and one
    i-vector (``ReplaceIndex(ivector, t, 0)``: the same for every frame). Returns the node
    ``output`` on every frame whose context lies inside the input (T - left - right rows)."""
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
        parts = [evaluate(a) for a in t[1]]
        ranged = [p for p in parts if not p.constant]
        lo = max(p.start for p in ranged)
        hi = min(p.end for p in ranged)
        return _Signal(lo, np.concatenate([p.at(lo, hi) for p in parts], axis=1))

    out = None
    for line in nnet.config_lines:
        kv = _config_values(line)
        if line.startswith("component-node"):
            s = evaluate(_parse_descriptor(kv["input"]))
            comp = nnet.component(kv["component"])
            values[kv["name"]] = _Signal(s.start, _apply_component(comp, s.at(s.start, s.end)))
        elif line.startswith("output-node") and kv["name"] == "output":
            out = evaluate(_parse_descriptor(kv["input"]))
    if out is None:
        raise ModelFileError("the network has no output-node named 'output'")
    return out.values
