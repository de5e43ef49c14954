"""The exported model directory and :func:`export_model`, which writes it.

Layout (what vosk 0.3.45 reads when ``am/final.mdl`` and ``conf/model.conf`` both exist,
and what ``online2-wav-nnet3-latgen-faster --config=conf/online.conf am/final.mdl
graph/HCLG.fst ...`` reads)::

    am/final.mdl                 TransitionModel + AmNnetSimple (priors floored)
    conf/mfcc.conf               the MFCC options of the training features
    conf/model.conf              vosk: frame subsampling, acoustic scale, beams, endpoint
    conf/ivector_extractor.conf  Kaldi online2: the i-vector options and files
    conf/online.conf             Kaldi online2: --mfcc-config, --ivector-extraction-config
    ivector/                     final.dubm final.ie final.mat global_cmvn.stats
                                 online_cmvn.conf splice_opts splice.conf
    graph/                       HCLG.fst words.txt phones.txt phones/word_boundary.int ...
                                 (phones from the graph dir or its lang/)
    export.json                  what was exported, and where vosk differs from paravg

No ``am/global_cmvn.stats``: vosk would apply CMVN to the network's input, which paravg
does not. Everything is checked before anything is written, and the directory appears
under its final name only when complete.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from paravg.errors import DataError, ModelFileError
from paravg.export import conf
from paravg.export.final_mdl import (
    AmNnetModel,
    check_pdfs_match,
    check_reads_back,
    write_final_mdl,
)
from paravg.export.ivector_files import write_ivector_extractor_dir
from paravg.export.manifest import file_digests
from paravg.export.nnet3 import NgOptions, nnet3_from_model
from paravg.export.transition_model import TransitionModel
from paravg.features import MfccOptions
from paravg.ivector.online import OnlineIvectorOptions

log = logging.getLogger(__name__)

GRAPH_REQUIRED = ("HCLG.fst", "words.txt")
GRAPH_OPTIONAL = (
    "phones.txt",
    "phones/word_boundary.int",
    "phones/silence.csl",
    "phones/nonsilence.csl",
    "phones/disambig.int",
    "phones/align_lexicon.int",
    "num_pdfs",
)
# What vosk 0.3.45 fixes for its online i-vectors (model.cc: max_count = 100, the rest
# OnlineIvectorExtractionConfig's defaults, most recent i-vector per chunk).
VOSK_IVECTOR = {"period": 10, "num_gselect": 5, "min_post": 0.025, "posterior_scale": 0.1,
                "max_remembered_frames": 1000, "num_cg_iters": 15}  # fmt: skip
# vosk's silence weighting (weight 1e-3, frames assumed 3x subsampled) is active for the
# phones of --endpoint.silence-phones; phone 0 (<eps>) is never on a path, so by default
# no frame is down-weighted and the i-vectors are estimated as in training.
NO_SILENCE_PHONES = "0"


@dataclasses.dataclass
class IvectorSystem:
    """paravg's i-vector models (``results/ivector/``)."""

    pca: Path
    ubm: Path
    extractor: Path
    options: OnlineIvectorOptions = dataclasses.field(default_factory=OnlineIvectorOptions)


def _load_model(model_path: Path):
    from paravg.nnet.model_file import build_model, load_model_file

    try:
        file_dict = load_model_file(model_path)
    except ValueError as exc:
        raise ModelFileError(str(exc)) from exc
    model = build_model(file_dict)
    model.eval()
    return model


def _graph_file(graph_dir: Path, name: str) -> Path | None:
    """``name`` in the graph dir, or in its ``lang/`` (paravg's graph stage keeps the lang
    there), or None."""
    for path in (graph_dir / name, graph_dir / "lang" / name):
        if path.is_file():
            return path
    return None


def check_graph_dir(graph_dir: Path, tm: TransitionModel) -> None:
    """The graph's files exist, its HCLG.fst reads, and its phones are the transition
    model's."""
    from paravg.graph.hclg import read_fst

    for name in GRAPH_REQUIRED:
        if not (graph_dir / name).is_file():
            raise DataError(f"{graph_dir}: graph dir has no {name}")
    read_fst(graph_dir / "HCLG.fst")  # a graph cut short is caught here, not by vosk
    phones_txt = _graph_file(graph_dir, "phones.txt")
    if phones_txt is not None:
        ids = set()
        for n, line in enumerate(phones_txt.read_text().splitlines(), 1):
            parts = line.split()
            if len(parts) != 2 or not parts[1].lstrip("-").isdigit():
                raise DataError(f"{phones_txt}:{n}: expected 'phone id', got {line!r}")
            if parts[0] != "<eps>" and not parts[0].startswith("#"):
                ids.add(int(parts[1]))
        missing = sorted(set(tm.phones) - ids)
        if missing:
            raise DataError(
                f"{phones_txt}: the transition model has phones {missing[:10]} that are not "
                "in the graph's phones.txt: the graph and the model use different phone sets"
            )


def _check_ivectors(model, ivectors: IvectorSystem | None, mfcc: MfccOptions):
    from paravg.ivector.extractor import IvectorExtractor
    from paravg.ivector.features import IvectorFeaturePipeline
    from paravg.ivector.ubm import DiagGmm

    if mfcc.num_ceps != model.feat_dim:
        raise DataError(
            f"the MFCC options give {mfcc.num_ceps} cepstra but the network takes "
            f"{model.feat_dim}-dimensional features"
        )
    if not model.ivector_dim:
        return None
    if ivectors is None:
        raise DataError(
            "the network takes i-vectors: give the i-vector system (pca, ubm, extractor), "
            "without it a Kaldi decoder loads the model and fails on the first audio"
        )
    try:
        pipeline = IvectorFeaturePipeline.load(ivectors.pca)
        ubm = DiagGmm.load(ivectors.ubm)
        extractor = IvectorExtractor.load(ivectors.extractor)
    except (OSError, ValueError) as exc:
        raise ModelFileError(f"cannot read the i-vector system: {exc}") from exc
    if extractor.ivector_dim != model.ivector_dim:
        raise DataError(
            f"{ivectors.extractor}: i-vector dim {extractor.ivector_dim}, the network takes "
            f"{model.ivector_dim}"
        )
    if pipeline.input_dim != model.feat_dim:
        raise DataError(
            f"{ivectors.pca}: made for {pipeline.input_dim}-dim features, the network takes "
            f"{model.feat_dim}"
        )
    if ubm.dim != extractor.feat_dim or pipeline.output_dim != ubm.dim:
        raise DataError(
            f"{ivectors.ubm}, {ivectors.extractor}, {ivectors.pca}: not one i-vector system"
        )
    return pipeline, ubm, extractor


def export_model(
    model_path: str | os.PathLike,
    out_dir: str | os.PathLike,
    transition_model: TransitionModel | str | os.PathLike,
    mfcc: MfccOptions,
    graph_dir: str | os.PathLike | None = None,
    ivectors: IvectorSystem | None = None,
    acoustic_scale: float = 0.1,
    decoder: Mapping[str, float] | None = None,
    endpoint_silence_phones: str | None = None,
    binary: bool = True,
    ng: NgOptions | None = None,
) -> dict:
    """Export ``final.pt`` (+ i-vector system, + graph) to ``out_dir``; returns the summary
    that is also written as ``export.json``. All checks come before any write.

    ``acoustic_scale`` is the scale of a 10-ms frame (``decode.acoustic_scale``); a model
    of frame-subsampling-factor f > 1 gets ``--frame-subsampling-factor=f`` and f × it in
    ``conf/model.conf`` (what paravg's decoder searches with), vosk and Kaldi's looped
    decoders then evaluating the network at every f-th frame. vosk 0.3.45's recogniser
    assumes f = 3 for word times (``frame_offset · 3``, 0.03 s per output frame), so its
    times are right at f = 3 only (paravg's own CTM is right at every f).

    A chain model (``model.objective: chain``) is exported as Kaldi's chain
    ``final.mdl``: the output node ``output`` without log-softmax (the ``output-xent``
    branch left out), no priors; ``acoustic_scale`` is then its output frame's (the
    chain recipes' 1.0), written to model.conf as it is, with
    ``--frame-subsampling-factor=f``: vosk's own chain models' ``model.conf``."""
    out = Path(out_dir)
    model = _load_model(Path(model_path))
    tm = (
        transition_model
        if isinstance(transition_model, TransitionModel)
        else TransitionModel.from_file(transition_model)
    )
    nnet = nnet3_from_model(model, ng=ng or NgOptions())
    tm_name = "the transition model" if isinstance(transition_model, TransitionModel) else ""
    where = f"{model_path} with {tm_name or transition_model}"
    check_pdfs_match(tm, nnet, where)
    iv = _check_ivectors(model, ivectors, mfcc)
    graph = Path(graph_dir) if graph_dir is not None else None
    if graph is not None:
        check_graph_dir(graph, tm)
    chain = getattr(model, "objective", "xent") == "chain"
    # a chain model has no priors (AmNnetSimple's <Priors> empty, as Kaldi's chain
    # final.mdl: the decoders subtract nothing)
    priors = np.zeros(0) if chain else np.exp(model.log_priors.double().numpy())
    silence = endpoint_silence_phones or NO_SILENCE_PHONES

    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        am = AmNnetModel(tm, nnet, model.left_context, model.right_context, priors)
        write_final_mdl(tmp / "am" / "final.mdl", am, binary)
        check_reads_back(tmp / "am" / "final.mdl", out / "am" / "final.mdl")
        (tmp / "conf").mkdir()
        (tmp / "conf" / "mfcc.conf").write_text(conf.mfcc_conf(mfcc))
        f = model.frame_subsampling_factor
        (tmp / "conf" / "model.conf").write_text(
            conf.model_conf(acoustic_scale, silence, decoder, f, chain)
        )
        differences = {}
        if iv is not None:
            pipeline, ubm, extractor = iv
            write_ivector_extractor_dir(tmp / "ivector", pipeline, ubm, extractor, binary)
            (tmp / "conf" / "ivector_extractor.conf").write_text(
                conf.ivector_extractor_conf(out / "ivector", ivectors.options)
            )
            opts = dataclasses.asdict(ivectors.options)
            differences = {
                k: {"paravg": opts[k], "vosk": v} for k, v in VOSK_IVECTOR.items() if opts[k] != v
            }
            for k, d in differences.items():
                log.warning("vosk fixes the i-vector option %s = %s (paravg: %s)",
                            k, d["vosk"], d["paravg"])  # fmt: skip
        (tmp / "conf" / "online.conf").write_text(
            conf.online_conf(out / "conf", iv is not None, f, acoustic_scale, chain)
        )
        if graph is not None:
            for name in (*GRAPH_REQUIRED, *GRAPH_OPTIONAL):
                src = _graph_file(graph, name)
                if src is not None:
                    (tmp / "graph" / name).parent.mkdir(parents=True, exist_ok=True)
                    shutil.copyfile(src, tmp / "graph" / name)
        summary = {
            "model": str(model_path),
            "format": "binary" if binary else "text",
            "num_pdfs": tm.num_pdfs,
            "feat_dim": model.feat_dim,
            "ivector_dim": model.ivector_dim,
            "left_context": model.left_context,
            "right_context": model.right_context,
            "acoustic_scale": acoustic_scale,
            "endpoint_silence_phones": silence,
            "graph": str(graph) if graph is not None else None,
            "final_mdl_bytes": (tmp / "am" / "final.mdl").stat().st_size,
            "vosk_ivector_differences": differences,
            "files": file_digests(tmp),  # the manifest (paravg.export.manifest)
        }
        if f > 1:  # model.conf's --frame-subsampling-factor and its --acoustic-scale
            summary["frame_subsampling_factor"] = f
        if chain:  # output without softmax, no priors, model.conf's acoustic scale as given
            summary["objective"] = "chain"
        (tmp / "export.json").write_text(json.dumps(summary, indent=1) + "\n")
        for p in [tmp, *tmp.rglob("*")]:
            os.chmod(p, 0o755 if p.is_dir() else 0o644)
        if out.exists():
            shutil.rmtree(out)
        os.replace(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return summary
