"""The recurrent component kinds of a fast-lstmp layer, ``LstmNonlinearityComponent`` and
``BackpropTruncationComponent``, as write, read, apply and dims (entries of
:data:`.components.COMPONENTS`).

Mirrors kaldi-asr/kaldi ``src/nnet3/nnet-combined-component.cc``
(``LstmNonlinearityComponent::Write``, ``Read``), ``src/cudamatrix/cu-math.cc``
(``ComputeLstmNonlinearity``) and ``src/nnet3/nnet-general-component.cc``
(``BackpropTruncationComponent::Write``, ``Read``). The fields are described in
docs/export-and-vosk.md ("The nnet3 writer"); paravg's own components:
:mod:`paravg.nnet.lstm`.
"""

from __future__ import annotations

import numpy as np

from paravg.export.kaldi_stream import KaldiReader, KaldiWriter
from paravg.export.nnet3.fields import updatable_fields, write_updatable_common


# ---------------------------------------------------------------------- LstmNonlinearity
def write_lstm_nonlinearity(w: KaldiWriter, p: dict) -> None:
    """``LstmNonlinearityComponent::Write``."""
    write_updatable_common(w, p)
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


def read_lstm_nonlinearity(f: dict, r: KaldiReader, name: str) -> dict:
    params = {
        **updatable_fields(f),
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
    return params


def lstm_nonlinearity_dims(p: dict) -> tuple[int, int]:
    """In: [i, f, c, o, c_prev] (+ 3 scales with dropout); out: [c_t, m_t]."""
    cell_dim = int(p["params"].shape[1])
    return 5 * cell_dim + (3 if p.get("use_dropout") else 0), 2 * cell_dim


def apply_lstm_nonlinearity(p: dict, x: np.ndarray) -> np.ndarray:
    """``ComputeLstmNonlinearity``: rows [i_part, f_part, c_part, o_part, c_prev (,
    i_scale, f_scale, o_scale)] → [c_t, m_t]; the o-gate's peephole reads the new c_t."""
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


# ---------------------------------------------------------------------- BackpropTruncation
BACKPROP_TRUNCATION_STATS = (
    ("<NumElementsClipped>", "num_clipped"),
    ("<NumElementsZeroed>", "num_zeroed"),
    ("<NumElementsProcessed>", "count"),
    ("<NumZeroingBoundaries>", "count_zeroing_boundaries"),
)


def write_backprop_truncation(w: KaldiWriter, p: dict) -> None:
    """``BackpropTruncationComponent::Write``."""
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
    for tok, key in BACKPROP_TRUNCATION_STATS:
        w.token(tok)
        w.float64(p.get(key, 0.0))


def read_backprop_truncation(f: dict, r: KaldiReader, name: str) -> dict:
    return {
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


def apply_backprop_truncation(p: dict, x: np.ndarray) -> np.ndarray:
    """Forward: the scale only."""
    return float(np.float32(p["scale"])) * x
