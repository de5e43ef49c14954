"""Kaldi's nnet3 ``final.mdl``: a ``TransitionModel`` followed by an ``AmNnetSimple``.

``AmNnetSimple::Write`` (``src/nnet3/am-nnet-simple.cc``): the ``Nnet``, then
``<LeftContext> l <RightContext> r <Priors> Vector``. A decoder divides the network's
posteriors by the priors (adds −log prior), so a zero prior is −∞ for every frame:
Kaldi's own ``nnet3-am-adjust-priors`` floors them at 1e-15 and so do we.

One file, one mode: a binary file has the ``\\0B`` header once, at its start.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from paravg.errors import ModelFileError
from paravg.export.kaldi_stream import KaldiReader, KaldiWriter
from paravg.export.nnet3 import Nnet3, read_nnet3, write_nnet3
from paravg.export.transition_model import TransitionModel
from paravg.io import atomic_path

PRIOR_FLOOR = 1e-15  # nnet3-am-adjust-priors --prior-floor


@dataclass
class AmNnetModel:
    transition_model: TransitionModel
    nnet: Nnet3
    left_context: int
    right_context: int
    priors: np.ndarray


def check_pdfs_match(tm: TransitionModel, nnet: Nnet3, where: str) -> None:
    """The network must score exactly the transition model's pdfs (Kaldi decoders index
    the network's output by pdf id and do not check)."""
    out_dim = nnet.output_dim()
    if out_dim != tm.num_pdfs:
        raise ModelFileError(
            f"{where}: the network has {out_dim} outputs but the transition model has "
            f"{tm.num_pdfs} pdfs; the targets the network was trained on must be the pdfs of "
            "this transition model (the GMM final.mdl/tree behind ali-to-pdf)"
        )


def floor_priors(priors: np.ndarray) -> np.ndarray:
    return np.maximum(np.asarray(priors, np.float64), PRIOR_FLOOR)


def final_mdl_bytes(model: AmNnetModel, binary: bool = True) -> bytes:
    check_pdfs_match(model.transition_model, model.nnet, "final.mdl")
    if len(model.priors) not in (0, model.transition_model.num_pdfs):
        raise ModelFileError(
            f"final.mdl: {len(model.priors)} priors for {model.transition_model.num_pdfs} pdfs"
        )
    w = KaldiWriter(binary)
    model.transition_model.write(w)
    write_nnet3(w, model.nnet)
    w.token("<LeftContext>")
    w.int32(model.left_context)
    w.token("<RightContext>")
    w.int32(model.right_context)
    w.token("<Priors>")
    w.vector(floor_priors(model.priors) if len(model.priors) else model.priors)
    return w.getvalue()


def write_final_mdl(path: str | Path, model: AmNnetModel, binary: bool = True) -> None:
    """Write ``final.mdl`` atomically (checks the pdf count first)."""
    data = final_mdl_bytes(model, binary)
    with atomic_path(path) as tmp:
        tmp.write_bytes(data)


def check_reads_back(path: str | Path, name: str | Path) -> AmNnetModel:
    """Read the ``final.mdl`` just written at ``path`` as Kaldi's ``AmNnetSimple::Read``
    does and check that its network scores its transition model's pdfs, before the export
    is declared complete (vosk aborts the whole process on a model it cannot read; this
    names the file, ``name`` where it is going, instead)."""
    try:
        model = read_final_mdl(path)
    except (ModelFileError, ValueError, EOFError) as exc:
        raise ModelFileError(f"{name}: the written final.mdl does not read back: {exc}") from exc
    check_pdfs_match(model.transition_model, model.nnet, f"{name} (as written)")
    return model


def read_final_mdl(path: str | Path) -> AmNnetModel:
    """Read an nnet3 ``final.mdl`` (text or binary) with the components paravg writes."""
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise ModelFileError(f"{path}: cannot read ({exc})") from exc
    r = KaldiReader(data, str(path))
    tm = TransitionModel.read(r)
    nnet = read_nnet3(r)
    r.expect("<LeftContext>")
    left = r.int32()
    r.expect("<RightContext>")
    right = r.int32()
    r.expect("<Priors>")
    priors = r.vector()
    return AmNnetModel(tm, nnet, left, right, priors)
