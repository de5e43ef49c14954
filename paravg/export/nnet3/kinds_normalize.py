"""The normalising component kinds, ``NormalizeComponent`` and ``BatchNormComponent`` in
test mode, as write, read and apply (entries of :data:`.components.COMPONENTS`).

Mirrors kaldi-asr/kaldi ``src/nnet3/nnet-normalize-component.cc``: ``NormalizeComponent``
(y = x / sqrt(max(2⁻⁶⁶, ‖x‖² / (D · target-rms²)))) and ``BatchNormComponent`` (the file
holds the count and the mean and variance of the statistics; test mode computes scale and
offset from them, ``ComputeDerived``). Where the statistics come from:
:mod:`paravg.nnet.batchnorm`.
"""

from __future__ import annotations

import numpy as np

from paravg.errors import ModelFileError
from paravg.export.kaldi_stream import KaldiReader, KaldiWriter

SQUARED_NORM_FLOOR = 2.0**-66  # NormalizeComponent's kSquaredNormFloor


# ---------------------------------------------------------------------- Normalize
def write_normalize(w: KaldiWriter, p: dict) -> None:
    """``NormalizeComponent::Write``: ``<InputDim> <TargetRms> <AddLogStddev>``."""
    w.token("<InputDim>")
    w.int32(p["dim"])
    w.token("<TargetRms>")
    w.float32(p.get("target_rms", 1.0))
    w.token("<AddLogStddev>")
    w.boolean(False)


def read_normalize(f: dict, r: KaldiReader, name: str) -> dict:
    if f.get("AddLogStddev"):
        raise r.error(f"component {name}: add-log-stddev is not supported")
    return {"dim": f.get("InputDim", f.get("Dim")), "target_rms": f.get("TargetRms", 1.0)}


def apply_normalize(p: dict, x: np.ndarray) -> np.ndarray:
    rms2 = float(p["target_rms"]) ** 2
    sq = np.maximum((x * x).sum(axis=1, keepdims=True) / (x.shape[1] * rms2), SQUARED_NORM_FLOOR)
    return x / np.sqrt(sq)


# ---------------------------------------------------------------------- BatchNorm
def write_batchnorm(w: KaldiWriter, p: dict) -> None:
    """``BatchNormComponent::Write``; the count is a double, the mean and variance of the
    statistics float vectors."""
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


def read_batchnorm(f: dict, r: KaldiReader, name: str) -> dict:
    return {
        "dim": f["Dim"],
        "block_dim": f["BlockDim"],
        "epsilon": f["Epsilon"],
        "target_rms": f["TargetRms"],
        "test_mode": f["TestMode"],
        "count": f["Count"],
        "mean": f["StatsMean"],
        "var": f["StatsVar"],
    }


def batchnorm_scale_offset(p: dict) -> tuple[np.ndarray, np.ndarray]:
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


def apply_batchnorm(p: dict, x: np.ndarray) -> np.ndarray:
    scale, offset = batchnorm_scale_offset(p)
    return x * scale + offset
