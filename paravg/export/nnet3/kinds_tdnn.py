"""The ``TdnnComponent`` kind: write, read, apply, dims and its time offsets (an entry of
:data:`.components.COMPONENTS`).

Mirrors kaldi-asr/kaldi ``src/nnet3/nnet-tdnn-component.cc`` (``TdnnComponent::Write``,
``Read``, ``Propagate``): ``linear_params`` are out × (in · #offsets), column block i
multiplying the input at the i-th time offset, as paravg's spliced weights. The
evaluator (:mod:`.compute`) hands :func:`apply_tdnn` the input at each offset.
"""

from __future__ import annotations

import numpy as np

from paravg.export.kaldi_stream import KaldiReader, KaldiWriter
from paravg.export.nnet3.fields import NgOptions, updatable_fields, write_updatable_common

TDNN_UPDATE_PERIOD = 4  # TdnnComponent's preconditioners: not configurable, not written


def write_tdnn(w: KaldiWriter, p: dict) -> None:
    """``TdnnComponent::Write`` (the orthonormal constraint always)."""
    ng = p.get("ng", NgOptions())
    write_updatable_common(w, p)
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


def read_tdnn(f: dict, r: KaldiReader, name: str) -> dict:
    ri, ro = f["RankInOut"]
    alpha_in, alpha_out = f["AlphaInOut"]
    params = {
        "linear": f["linear"],
        "bias": f["bias"],
        "time_offsets": f["TimeOffsets"],
        **updatable_fields(f),
        "use_natural_gradient": f["UseNaturalGradient"],
        "ng": NgOptions(ri, ro, TDNN_UPDATE_PERIOD, f["NumSamplesHistory"], alpha_in),
        "alpha_out": alpha_out,
    }
    if params["linear"].shape[1] % max(1, len(params["time_offsets"])):
        raise r.error(f"component {name}: parameters do not split into the time offsets")
    return params


def tdnn_time_offsets(p: dict) -> list[int]:
    return p["time_offsets"]


def tdnn_dims(p: dict) -> tuple[int, int]:
    return int(p["linear"].shape[1]) // len(p["time_offsets"]), int(p["linear"].shape[0])


def apply_tdnn(p: dict, inputs: list[np.ndarray]) -> np.ndarray:
    """bias + sum_i W_i x(t + o_i), W_i the i-th column block; ``inputs[i]`` the input
    rows at the i-th time offset."""
    w = np.asarray(p["linear"], np.float64)
    d = w.shape[1] // len(p["time_offsets"])
    out = np.zeros((inputs[0].shape[0], w.shape[0]))
    for i, x in enumerate(inputs):
        out += x @ w[:, i * d : (i + 1) * d].T
    if len(p["bias"]):
        out += np.asarray(p["bias"], np.float64)
    return out
