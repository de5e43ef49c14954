"""The ``export_kaldi`` rule's function: an experiment's ``final.pt`` -> ``kaldi/``.

With no graph given, the export uses the demo's monophone transition model (pdf = target
id) and a phone-loop graph over the demo's phones (a phone recogniser), so every
experiment gets a directory that Kaldi's decoders and vosk load; the recognition stage's
word graph (``HCLG.fst`` + its ``final.mdl``) replaces it where it exists.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from paravg.export.layout import IvectorSystem, export_model
from paravg.features import MfccOptions
from paravg.ivector.online import OnlineIvectorOptions

PHONE_LOOP_PENALTY = 2.0  # per phone, in graph cost; keeps near-tied phone strings apart


def export_experiment(
    model: str | os.PathLike,
    out_dir: str | os.PathLike,
    features: Mapping[str, Any],
    sample_rate: int,
    ivector_files: Mapping[str, str] | None = None,
    ivector_options: Mapping[str, Any] | None = None,
    graph_dir: str | os.PathLike | None = None,
    transition_model: str | os.PathLike | None = None,
    acoustic_scale: float = 0.1,
    binary: bool = True,
    decoder: Mapping[str, float] | None = None,
) -> dict:
    """Export with the config's feature and i-vector options (see :func:`export_model`).

    ``graph_dir`` is a graph of the recognition stage (``HCLG.fst``, ``words.txt``,
    ``transition.mdl``): its transition model is used unless ``transition_model`` is given.
    Without it: the demo's monophone model and a phone loop."""
    from paravg.corpus.phones import PHONES
    from paravg.export.phone_loop import monophone_transition_model, write_phone_loop_graph

    mfcc = MfccOptions.from_config(features, sample_rate)
    ivectors = None
    if ivector_files:
        opts = OnlineIvectorOptions(**dict(ivector_options or {}))
        ivectors = IvectorSystem(
            Path(ivector_files["pca"]), Path(ivector_files["ubm"]),
            Path(ivector_files["extractor"]), opts,
        )  # fmt: skip
    if transition_model is None and graph_dir is not None:
        transition_model = Path(graph_dir) / "transition.mdl"
    tm = transition_model or monophone_transition_model(len(PHONES))[1]
    with tempfile.TemporaryDirectory() as tmp:
        if graph_dir is None:
            graph_dir = write_phone_loop_graph(tm, list(PHONES), Path(tmp), PHONE_LOOP_PENALTY)
            decoder = {**(decoder or {}), "lattice_beam": 1.0}  # phone-loop lattices are dense
        return export_model(
            model, out_dir, tm, mfcc, graph_dir, ivectors, acoustic_scale, decoder,
            binary=binary,
        )  # fmt: skip
