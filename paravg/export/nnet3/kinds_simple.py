"""The simple component kinds: affine, linear, no-op and the non-linearities, each as
write, read, apply and dims (entries of :data:`.components.COMPONENTS`).

Mirrors kaldi-asr/kaldi ``src/nnet3/nnet-simple-component.cc`` (``FixedAffineComponent``,
``AffineComponent``, ``NaturalGradientAffineComponent``, ``LinearComponent``,
``NoOpComponent``, ``RectifiedLinearComponent``, ``LogSoftmaxComponent``: their
``Write``, ``Read`` and ``Propagate``) and ``NonlinearComponent::Write`` in
``nnet-component-itf.cc``. The normalising kinds are in :mod:`.kinds_normalize`.
"""

from __future__ import annotations

import numpy as np

from paravg.export.kaldi_stream import KaldiReader, KaldiWriter
from paravg.export.nnet3.fields import (
    NgOptions,
    updatable_fields,
    write_orthonormal,
    write_updatable_common,
)


# ---------------------------------------------------------------------- dims
def matrix_dims(p: dict) -> tuple[int, int]:
    """(input, output) of a component whose ``linear`` parameters are out x in."""
    return int(p["linear"].shape[1]), int(p["linear"].shape[0])


def same_dims(p: dict) -> tuple[int, int]:
    """(input, output) of a component that keeps its ``dim``."""
    return int(p["dim"]), int(p["dim"])


# ---------------------------------------------------------------------- affine
def write_fixed_affine(w: KaldiWriter, p: dict) -> None:
    """``FixedAffineComponent::Write``."""
    w.token("<LinearParams>")
    w.matrix(p["linear"])
    w.token("<BiasParams>")
    w.vector(p["bias"])


def write_affine(w: KaldiWriter, p: dict) -> None:
    """``AffineComponent::Write``."""
    write_updatable_common(w, p)
    w.token("<LinearParams>")
    w.matrix(p["linear"])
    w.token("<BiasParams>")
    w.vector(p["bias"])
    write_orthonormal(w, p)


def write_ng_affine(w: KaldiWriter, p: dict) -> None:
    """``NaturalGradientAffineComponent::Write``."""
    write_updatable_common(w, p)
    w.token("<LinearParams>")
    w.matrix(p["linear"])
    w.token("<BiasParams>")
    w.vector(p["bias"])
    ng: NgOptions = p.get("ng", NgOptions())
    w.token("<RankIn>")
    w.int32(ng.rank_in)
    w.token("<RankOut>")
    w.int32(ng.rank_out)
    write_orthonormal(w, p)
    w.token("<UpdatePeriod>")
    w.int32(ng.update_period)
    w.token("<NumSamplesHistory>")
    w.float32(ng.num_samples_history)
    w.token("<Alpha>")
    w.float32(ng.alpha)


def read_affine(f: dict, r: KaldiReader, name: str) -> dict:
    return {"linear": f["linear"], "bias": f["bias"], **updatable_fields(f)}


def read_ng_affine(f: dict, r: KaldiReader, name: str) -> dict:
    params = read_affine(f, r, name)
    params["ng"] = NgOptions(
        f["RankIn"], f["RankOut"], f["UpdatePeriod"], f["NumSamplesHistory"], f["Alpha"]
    )
    return params


def apply_affine(p: dict, x: np.ndarray) -> np.ndarray:
    return x @ p["linear"].T.astype(np.float64) + p["bias"]


# ---------------------------------------------------------------------- linear
def write_linear(w: KaldiWriter, p: dict) -> None:
    """``LinearComponent::Write``."""
    ng = p.get("ng", NgOptions())
    write_updatable_common(w, p)
    w.token("<Params>")
    w.matrix(p["linear"])
    write_orthonormal(w, p)
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


def read_linear(f: dict, r: KaldiReader, name: str) -> dict:
    ri, ro = f["RankInOut"]
    return {
        "linear": f["linear"],
        **updatable_fields(f),
        "use_natural_gradient": f["UseNaturalGradient"],
        "ng": NgOptions(ri, ro, f["UpdatePeriod"], f["NumSamplesHistory"], f["Alpha"]),
    }


def apply_linear(p: dict, x: np.ndarray) -> np.ndarray:
    return x @ p["linear"].T.astype(np.float64)


# ---------------------------------------------------------------------- no-op
def write_noop(w: KaldiWriter, p: dict) -> None:
    """``NoOpComponent::Write``."""
    w.token("<Dim>")
    w.int32(p["dim"])
    w.token("<BackpropScale>")
    w.float32(p.get("backprop_scale", 1.0))


def read_noop(f: dict, r: KaldiReader, name: str) -> dict:
    return {"dim": f["Dim"], "backprop_scale": f.get("BackpropScale", 1.0)}


def apply_noop(p: dict, x: np.ndarray) -> np.ndarray:
    return x


# ---------------------------------------------------------------------- non-linearities
def write_nonlinear(w: KaldiWriter, p: dict) -> None:
    """``NonlinearComponent::Write``: ``<Dim>``, then the statistics Kaldi requires
    (``<ValueAvg> <DerivAvg> <Count>``), which paravg writes zero; the optional ones
    (``<OderivRms>`` ...) are left out."""
    dim = p["dim"]
    w.token("<Dim>")
    w.int32(dim)
    w.token("<ValueAvg>")
    w.vector(np.zeros(dim))
    w.token("<DerivAvg>")
    w.vector(np.zeros(dim))
    w.token("<Count>")
    w.float64(0.0)


def read_nonlinear(f: dict, r: KaldiReader, name: str) -> dict:
    return {"dim": f["Dim"]}


def apply_relu(p: dict, x: np.ndarray) -> np.ndarray:
    return np.maximum(x, 0.0)


def apply_log_softmax(p: dict, x: np.ndarray) -> np.ndarray:
    m = x.max(axis=1, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis=1, keepdims=True))
