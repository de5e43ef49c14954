"""Model files: what a ``.pt`` holds, loading it safely, and rebuilding the model of its
family.

A file is a dict: the header (:func:`model_header`: ``format``, the ``model`` config,
``feat_dim``, ``ivector_dim``, ``num_targets``), the ``state_dict`` and ``meta``. The model config's
``family`` (``tdnn`` when absent: every file written before TDNN-F) names the class that
rebuilds it (:data:`paravg.nnet.families.FAMILIES`).
"""

from __future__ import annotations

import io
from pathlib import Path

import torch

from paravg.errors import ConfigError, DataError
from paravg.nnet.acoustic import AcousticModel
from paravg.nnet.affine import plain_affine_factory
from paravg.nnet.families import family_of

MODEL_FORMAT = "paravg.tdnn.v1"


def model_class(model_cfg: dict) -> type[AcousticModel]:
    """The class of a model config's family (:data:`paravg.nnet.families.FAMILIES`)."""
    try:
        family = family_of(model_cfg)
    except ConfigError as exc:  # a file naming a family this code does not know
        raise DataError(str(exc)) from None
    return family.model_class()


def new_model(
    model_cfg: dict,
    feat_dim: int,
    ivector_dim: int,
    num_targets: int,
    affine_factory=plain_affine_factory,
) -> AcousticModel:
    """A model of ``model_cfg``'s family (parameters not initialised)."""
    return model_class(model_cfg)(model_cfg, feat_dim, ivector_dim, num_targets, affine_factory)


def model_header(model: AcousticModel) -> dict:
    """The header of ``model``'s file: what :func:`new_model` rebuilds it from."""
    return {
        "format": MODEL_FORMAT,
        "model": model.model_cfg,
        "feat_dim": model.feat_dim,
        "ivector_dim": model.ivector_dim,
        "num_targets": model.num_targets,
    }


def model_to_file_dict(model: AcousticModel, meta: dict | None = None) -> dict:
    """What a ``.pt`` file holds: the header (to rebuild), the state dict and metadata."""
    return {
        **model_header(model),
        "state_dict": {k: v.detach().clone().contiguous() for k, v in model.state_dict().items()},
        "meta": dict(meta or {}),
    }


def load_model_file(path: str | Path) -> dict:
    """Load a model file safely (weights only) and check it is complete and finite.

    A file that cannot be read, is truncated or corrupt, is not a paravg model, or whose
    bytes differ from the sha256 its producer recorded raises a
    :class:`~paravg.errors.ModelFileError` naming the file, the rule that wrote it and
    how to rebuild it (:mod:`paravg.provenance`); non-finite parameters (a diverged
    model, not a damaged file) a :class:`~paravg.errors.DataError` (a ``ValueError``). A
    broken model is never averaged or trained from.
    """
    from paravg.provenance import check_recorded, damaged

    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise damaged(path, f"cannot be read ({exc.strerror or exc})") from exc
    check_recorded(path, data)
    try:
        obj = torch.load(io.BytesIO(data), map_location="cpu", weights_only=True)
    except Exception as exc:  # truncated zip, wrong pickle, empty file ...
        raise damaged(path, f"not a readable model file ({type(exc).__name__}: {exc})") from exc
    if not isinstance(obj, dict) or obj.get("format") != MODEL_FORMAT:
        raise damaged(path, f"not a {MODEL_FORMAT} model file")
    for name, tensor in obj["state_dict"].items():
        if tensor.is_floating_point() and not torch.isfinite(tensor).all():
            raise DataError(
                f"{path}: parameter {name} has non-finite values (a diverged model; expected "
                "finite parameters)"
            )
    return obj


def build_model(file_dict: dict, affine_factory=plain_affine_factory) -> AcousticModel:
    """Rebuild a model from a loaded file dict (parameters included), in eval mode (test
    mode: batch-norm from its stored statistics, no dropout); a training job switches it
    to training mode."""
    model = new_model(
        file_dict["model"],
        file_dict["feat_dim"],
        file_dict["ivector_dim"],
        file_dict["num_targets"],
        affine_factory,
    )
    model.load_state_dict(file_dict["state_dict"])
    return model.eval()
