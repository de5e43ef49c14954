"""nnet3 components and THE table of the kinds paravg writes, reads and runs.

:data:`COMPONENTS` maps Kaldi's component type (``<Type>`` in the file) to its
:class:`ComponentKind`: how its fields are written and read, how it is applied to rows of
frames, and its dimensions. Kaldi gives each component class its own ``Write``,
``Read`` and ``Propagate`` (``src/nnet3/nnet-component-itf.h``); a new kind is one entry
here, its functions in a ``kinds_*`` module beside the Kaldi file it mirrors.
``Component`` is one component of a network (:mod:`.network`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

import paravg.export.nnet3.kinds_lstm as lstm
import paravg.export.nnet3.kinds_normalize as norm
import paravg.export.nnet3.kinds_simple as simple
import paravg.export.nnet3.kinds_tdnn as tdnn
from paravg.export.kaldi_stream import KaldiReader, KaldiWriter
from paravg.export.nnet3.fields import read_fields


@dataclass(frozen=True)
class ComponentKind:
    """One Kaldi component type.

    ``write(w, params)``: the fields between ``<Type>`` and ``</Type>``;
    ``read(fields, r, name)``: the params of the fields :func:`~.fields.read_fields` read
    (``r`` and ``name`` for errors); ``apply(params, x)``: rows (one frame each, float64)
    in, rows out; ``dims(params)``: (input dim, output dim). A kind with
    ``time_offsets(params)`` reads its input at several times: ``apply`` then gets a list,
    the input rows at each offset. ``averages_are_matrices``: its ``<ValueAvg>`` and
    ``<DerivAvg>`` are matrices (vectors elsewhere)."""

    write: Callable[[KaldiWriter, dict], None]
    read: Callable[[dict, KaldiReader, str], dict]
    apply: Callable
    dims: Callable[[dict], tuple[int, int]]
    time_offsets: Callable[[dict], list[int]] | None = None
    averages_are_matrices: bool = False


COMPONENTS: dict[str, ComponentKind] = {
    "FixedAffineComponent": ComponentKind(
        simple.write_fixed_affine, simple.read_affine, simple.apply_affine, simple.matrix_dims
    ),
    "AffineComponent": ComponentKind(
        simple.write_affine, simple.read_affine, simple.apply_affine, simple.matrix_dims
    ),
    "NaturalGradientAffineComponent": ComponentKind(
        simple.write_ng_affine, simple.read_ng_affine, simple.apply_affine, simple.matrix_dims
    ),
    "LinearComponent": ComponentKind(
        simple.write_linear, simple.read_linear, simple.apply_linear, simple.matrix_dims
    ),
    "TdnnComponent": ComponentKind(
        tdnn.write_tdnn, tdnn.read_tdnn, tdnn.apply_tdnn, tdnn.tdnn_dims, tdnn.tdnn_time_offsets
    ),
    "BatchNormComponent": ComponentKind(
        norm.write_batchnorm, norm.read_batchnorm, norm.apply_batchnorm, simple.same_dims
    ),
    "NoOpComponent": ComponentKind(
        simple.write_noop, simple.read_noop, simple.apply_noop, simple.same_dims
    ),
    "NormalizeComponent": ComponentKind(
        norm.write_normalize, norm.read_normalize, norm.apply_normalize, simple.same_dims
    ),
    "RectifiedLinearComponent": ComponentKind(
        simple.write_nonlinear, simple.read_nonlinear, simple.apply_relu, simple.same_dims
    ),
    "LogSoftmaxComponent": ComponentKind(
        simple.write_nonlinear, simple.read_nonlinear, simple.apply_log_softmax, simple.same_dims
    ),
    "LstmNonlinearityComponent": ComponentKind(
        lstm.write_lstm_nonlinearity,
        lstm.read_lstm_nonlinearity,
        lstm.apply_lstm_nonlinearity,
        lstm.lstm_nonlinearity_dims,
        averages_are_matrices=True,
    ),
    "BackpropTruncationComponent": ComponentKind(
        lstm.write_backprop_truncation,
        lstm.read_backprop_truncation,
        lstm.apply_backprop_truncation,
        simple.same_dims,
    ),
}
KNOWN_TYPES = tuple(COMPONENTS)


@dataclass
class Component:
    """One nnet3 component: ``kind`` is Kaldi's type name; ``params`` its fields."""

    name: str
    kind: str
    params: dict = field(default_factory=dict)

    @property
    def input_dim(self) -> int:
        return COMPONENTS[self.kind].dims(self.params)[0]

    @property
    def output_dim(self) -> int:
        return COMPONENTS[self.kind].dims(self.params)[1]

    @property
    def time_offsets(self) -> list[int] | None:
        """The times (relative to the output's) it reads its input at; None: the
        output's own time only."""
        offsets = COMPONENTS[self.kind].time_offsets
        return None if offsets is None else offsets(self.params)


def write_component(w: KaldiWriter, c: Component) -> None:
    """``<Type> fields </Type>`` (``Component::Write`` of the kind)."""
    kind = COMPONENTS.get(c.kind)
    if kind is None:
        raise ValueError(f"cannot write component type {c.kind}")
    w.token(f"<{c.kind}>")
    kind.write(w, c.params)
    w.token(f"</{c.kind}>")


def read_component(r: KaldiReader, name: str) -> Component:
    """The component after ``<ComponentName> name``: its type tag, fields and end tag."""
    tag = r.token()
    if not (tag.startswith("<") and tag.endswith(">")):
        raise r.error(f"component {name}: expected a type tag, got {tag!r}")
    kind = tag[1:-1]
    if kind not in COMPONENTS:
        raise r.error(f"component {name}: type {kind} is not one paravg reads")
    entry = COMPONENTS[kind]
    fields = read_fields(r, f"</{kind}>", entry.averages_are_matrices)
    return Component(name, kind, entry.read(fields, r, name))


def apply_component(c: Component, x: np.ndarray | list[np.ndarray]) -> np.ndarray:
    """The component on rows (float64): ``x`` the input rows, or for a component with
    time offsets the input rows at each offset."""
    return COMPONENTS[c.kind].apply(c.params, x)
