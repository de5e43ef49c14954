"""The fields components share: the natural-gradient options, the updatable-component
header, and the reader of a component's ``<Field> value`` pairs.

Mirrors ``UpdatableComponent::WriteUpdatableCommon`` / ``ReadUpdatableCommon``
(kaldi-asr/kaldi ``src/nnet3/nnet-component-itf.cc``). Each component kind's own fields
are in the kind's module; :mod:`.components` is the table of kinds.
"""

from __future__ import annotations

from dataclasses import dataclass

from paravg.export.kaldi_stream import KaldiReader, KaldiWriter


@dataclass(frozen=True)
class NgOptions:
    """``NaturalGradientAffineComponent`` fields (Kaldi's defaults; paravg's config names)."""

    rank_in: int = 20
    rank_out: int = 80
    update_period: int = 4
    num_samples_history: float = 2000.0
    alpha: float = 4.0


def write_updatable_common(w: KaldiWriter, p: dict) -> None:
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


def write_orthonormal(w: KaldiWriter, p: dict) -> None:
    """``<OrthonormalConstraint>``, which the affine and linear components write only
    when it is nonzero."""
    if p.get("orthonormal_constraint", 0.0) != 0.0:
        w.token("<OrthonormalConstraint>")
        w.float32(p["orthonormal_constraint"])


def updatable_fields(f: dict) -> dict:
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


INT_FIELDS = (
    "Dim",
    "InputDim",
    "BlockDim",
    "RankIn",
    "RankOut",
    "UpdatePeriod",
    "ZeroingInterval",
    "RecurrenceInterval",
)
BOOL_FIELDS = ("AddLogStddev", "IsGradient", "UseNaturalGradient", "TestMode", "UseDropout")
FLOAT_FIELDS = (
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
)


def read_fields(r: KaldiReader, end: str, averages_are_matrices: bool = False) -> dict:
    """Read ``<Field> value`` pairs until the closing tag ``end`` (types by field name;
    ``<ValueAvg>`` / ``<DerivAvg>`` are matrices where ``averages_are_matrices``, the
    LstmNonlinearityComponent's, and the NonlinearComponents' vectors, skipped)."""
    fields: dict = {}
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
        elif name in INT_FIELDS:
            fields[name] = r.int32()
        elif name == "RankInOut":
            fields[name] = (r.int32(), r.int32())
        elif name == "AlphaInOut":
            fields[name] = (r.float(), r.float())
        elif name in BOOL_FIELDS:
            fields[name] = r.boolean()
        elif name in FLOAT_FIELDS:
            fields[name] = r.float()
        else:
            raise r.error(f"unexpected field {tok!r} before {end}")
