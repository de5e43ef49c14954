"""The config files of an exported model (Kaldi option names, one ``--name=value`` a line).

* ``mfcc.conf``: every ``MfccOptions`` field under its ``compute-mfcc-feats`` name, so the
  online MFCC of a Kaldi decoder is the one the network was trained on;
* ``model.conf`` (vosk): only options vosk 0.3.45 registers (decoder: ``--beam``,
  ``--max-active``, ``--min-active``, ``--lattice-beam``; ``--acoustic-scale``,
  ``--frame-subsampling-factor``, ``--frames-per-chunk``; ``--endpoint.*``), anything else
  aborts it with "Invalid option";
* ``ivector_extractor.conf`` + ``online.conf``: what
  ``steps/online/nnet3/prepare_online_decoding.sh`` writes for
  ``online2-wav-nnet3-latgen-faster --config=conf/online.conf``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path

from paravg.errors import ConfigError
from paravg.features import MfccOptions
from paravg.ivector.online import OnlineIvectorOptions

# paravg's MfccOptions fields whose Kaldi name is not the field name with '-' for '_'.
_MFCC_RENAMES = {"frame_length_ms": "frame-length", "frame_shift_ms": "frame-shift"}

# Decoder options model.conf may carry (vosk registers them), Kaldi's defaults.
DECODER_DEFAULTS = {"beam": 13.0, "max-active": 7000, "min-active": 200, "lattice-beam": 6.0}
VOSK_OPTIONS = {
    "beam", "max-active", "min-active", "lattice-beam", "prune-interval", "beam-delta",
    "hash-ratio", "prune-scale", "acoustic-scale", "frame-subsampling-factor",
    "frames-per-chunk", "determinize-lattice", "max-mem",
}  # fmt: skip


def _value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float) and v.is_integer():
        return str(int(v)) if abs(v) < 1e15 else repr(v)
    return str(v)


def mfcc_conf(opts: MfccOptions) -> str:
    """``conf/mfcc.conf`` with every option (``--sample-frequency=16000`` ...)."""
    lines = []
    for f in dataclasses.fields(opts):
        name = _MFCC_RENAMES.get(f.name, f.name.replace("_", "-"))
        lines.append(f"--{name}={_value(getattr(opts, f.name))}")
    return "\n".join(lines) + "\n"


def model_conf(
    acoustic_scale: float,
    silence_phones: str,
    decoder: Mapping[str, float] | None = None,
    frame_subsampling_factor: int = 1,
    chain: bool = False,
) -> str:
    """vosk's ``conf/model.conf``: the network's frame subsampling f
    (``--frame-subsampling-factor``: 1, an output every 10-ms frame, or f, an output
    every f frames, the decoder seeing ⌈T/f⌉ frames), the acoustic scale (``acoustic_scale``
    is that of a 10-ms frame; at f > 1 the file gets f × it, the scale paravg's own
    decoder searches with: :func:`paravg.decode.search.low_frame_rate_scales`), the
    decoder beams and ``--endpoint.silence-phones`` (vosk aborts without it). A chain
    model's (``chain``) ``acoustic_scale`` is its output frame's, written as it is
    (vosk's chain models: ``--acoustic-scale=1.0 --frame-subsampling-factor=3``)."""
    from paravg.decode.search import low_frame_rate_scales

    opts = dict(DECODER_DEFAULTS)
    for key, value in (decoder or {}).items():
        name = key.replace("_", "-")
        if name not in VOSK_OPTIONS:
            raise ConfigError(
                f"decoder option {key!r}: vosk's model.conf accepts only {sorted(VOSK_OPTIONS)}"
            )
        opts[name] = value
    opts["acoustic-scale"] = (
        acoustic_scale
        if chain
        else low_frame_rate_scales(acoustic_scale, frame_subsampling_factor)[0]
    )
    opts["frame-subsampling-factor"] = frame_subsampling_factor
    lines = [f"--{k}={_value(v)}" for k, v in opts.items()]
    lines.append(f"--endpoint.silence-phones={silence_phones}")
    return "\n".join(lines) + "\n"


def ivector_extractor_conf(ivector_dir: Path, opts: OnlineIvectorOptions) -> str:
    """``conf/ivector_extractor.conf`` (``OnlineIvectorExtractionConfig``), absolute paths."""
    d = Path(ivector_dir).resolve()
    return "".join(
        f"{line}\n"
        for line in (
            f"--splice-config={d / 'splice.conf'}",
            f"--cmvn-config={d / 'online_cmvn.conf'}",
            f"--lda-matrix={d / 'final.mat'}",
            f"--global-cmvn-stats={d / 'global_cmvn.stats'}",
            f"--diag-ubm={d / 'final.dubm'}",
            f"--ivector-extractor={d / 'final.ie'}",
            f"--num-gselect={opts.num_gselect}",
            f"--min-post={_value(opts.min_post)}",
            f"--posterior-scale={_value(opts.posterior_scale)}",
            f"--max-remembered-frames={opts.max_remembered_frames}",
            f"--max-count={_value(opts.max_count)}",
            f"--ivector-period={opts.period}",
            f"--num-cg-iters={opts.num_cg_iters}",
        )
    )


def online_conf(
    conf_dir: Path,
    with_ivectors: bool,
    frame_subsampling_factor: int = 1,
    acoustic_scale: float = 0.1,
    chain: bool = False,
) -> str:
    """``conf/online.conf`` for ``online2-wav-nnet3-latgen-faster --config``; at f > 1
    also the binary's ``--frame-subsampling-factor`` and ``--acoustic-scale`` (f × the
    10-ms ``acoustic_scale``; a ``chain`` model's as given), which Kaldi's
    ``steps/online/nnet3/decode.sh`` would pass from the model directory's
    ``frame_subsampling_factor`` and ``--acwt``."""
    from paravg.decode.search import low_frame_rate_scales

    d = Path(conf_dir).resolve()
    lines = ["--feature-type=mfcc", f"--mfcc-config={d / 'mfcc.conf'}"]
    if with_ivectors:
        lines.append(f"--ivector-extraction-config={d / 'ivector_extractor.conf'}")
    if frame_subsampling_factor > 1 or chain:  # a chain model's scale as given
        scale = (
            acoustic_scale
            if chain
            else low_frame_rate_scales(acoustic_scale, frame_subsampling_factor)[0]
        )
        lines += [
            f"--frame-subsampling-factor={frame_subsampling_factor}",
            f"--acoustic-scale={_value(scale)}",
        ]
    return "\n".join(lines) + "\n"
