"""Speed and volume perturbation of the training set (rule ``perturb_data``).

Kaldi's ``local/nnet3/run_ivector_common.sh`` trains on copies of ``data/train`` made
before any feature is computed:

1. ``utils/data/perturb_data_dir_speed_3way.sh data/train data/train_sp`` (with
   ``--always-include-prefix true``): for each factor ``f`` of ``0.9 1.0 1.1`` a copy whose
   utterance, speaker and recording ids are prefixed ``sp<f>-`` (``sp0.9-``, ``sp1.0-``,
   ``sp1.1-``: the prefix on the unchanged copy too, so that every table stays sorted in
   speaker order), audio through sox ``speed f`` (:func:`paravg.resample.speed_perturb`),
   ``segments`` times divided by ``f`` (``-1``, "to the end", kept), ``utt2uniq`` mapping
   each copy to its source's unique id (the source's ``utt2uniq`` entry, else the source
   utterance), ``text`` and ``reco2file_and_channel`` copied under the new ids;
2. ``utils/data/perturb_data_dir_volume.sh data/train_sp_hires``: every recording of the
   copies gets one random gain, uniform in ``[0.125, 2]``
   (:func:`paravg.resample.volume_gain`, seeded by ``(data.perturb.srand, new recording
   id)``; ``reco2vol`` records it as Kaldi's script does). Without speed factors the
   volume copy keeps the source's ids (Kaldi perturbs the dir in place).

The copies' audio is written once, as 16-bit WAVs in one archive ``wav.ark`` (``wav-copy``
output: ``wav.scp`` names ``<abs path of wav.ark>:<byte offset>``), so the feature jobs
read it like any WAV, and the i-vector models are trained on the copies (they read the
training set's features, which are now the copies': ``run_ivector_common.sh`` trains them
on ``train_sp_hires``).

Targets: Kaldi re-aligns the perturbed copies with its GMM; paravg holds the alignment of
the source, so :func:`map_targets` carries it over. Copy frame ``i`` (``i = 0 .. T'−1``)
covers the copy's frames ``[i, i+1)``, i.e. the source's ``[i·f, (i+1)·f)``; it takes the
target of the source frame that holds its centre, ``j = ⌊(i + ½)·f⌋`` (clamped to the
source's last frame ``T−1``), which is the nearest-frame mapping of an alignment stretched
by ``1/f``. ``T'`` is the copy's number of feature frames (Kaldi's ``NumFrames`` of the
copy's samples, :func:`paravg.features.num_frames`), exactly the length an alignment of the
copy has; the copy at ``f = 1`` keeps the source's targets unchanged (same audio, same
frames, whatever tolerance the source had).

Every copy of an utterance has the same ``utt2uniq`` value, so the egs stage holds out all
copies of a held-out utterance together (:mod:`paravg.egs.subsets`). The perturbed set
lives beside the source as ``results/data/<train>_sp`` (``<train>_vp`` with volume only,
:func:`paravg.config.perturbed_train_set`) with every file of a prepared dir, its
``origin`` naming the user's lines of the source utterance.
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from paravg.audio import Segment, check_audio_format, read_recording
from paravg.data import Origin, read_data_dir, read_origin
from paravg.errors import DataError
from paravg.features import MfccOptions, num_frames, utterance_seed
from paravg.io import read_json, write_json_atomic
from paravg.kaldi_io import iter_int_vectors, load_scp, write_ark_scp, write_table
from paravg.resample import speed_perturb, to_int16, volume_gain

log = logging.getLogger(__name__)


# ------------------------------------------------------------------------------ options
@dataclass(frozen=True)
class PerturbOptions:
    """``data.perturb``: the speed factors (empty: no speed copies), the volume gain and
    its range (Kaldi's ``--scale-low``/``--scale-high``), the seed of the gains."""

    speed: tuple[float, ...] = ()
    volume: bool = False
    scale_low: float = 0.125
    scale_high: float = 2.0
    srand: int = 0

    @classmethod
    def from_config(cls, perturb: Mapping) -> PerturbOptions:
        return cls(
            speed=tuple(float(f) for f in perturb.get("speed", ())),
            volume=bool(perturb.get("volume", False)),
            scale_low=float(perturb.get("scale_low", 0.125)),
            scale_high=float(perturb.get("scale_high", 2.0)),
            srand=int(perturb.get("srand", 0)),
        )

    @property
    def enabled(self) -> bool:
        return bool(self.speed) or self.volume

    def copies(self) -> list[tuple[str, float]]:
        """``(id prefix, speed factor)`` of each copy: ``sp<f>-`` per factor, or one
        copy with the source's ids when only the volume is perturbed."""
        if not self.speed:
            return [("", 1.0)]
        return [(speed_prefix(f), f) for f in self.speed]


def speed_prefix(factor: float) -> str:
    """Kaldi's id prefix of a speed copy: ``sp0.9-``, ``sp1.0-``, ``sp1.1-``."""
    return f"sp{float(factor)!r}-"


# ------------------------------------------------------------------------------ targets
def map_targets(targets: np.ndarray, factor: float, new_frames: int) -> np.ndarray:
    """The per-frame targets of a copy at speed ``factor`` with ``new_frames`` frames:
    copy frame ``i`` takes source frame ``min(⌊(i + ½)·factor⌋, T − 1)`` (module
    docstring). ``factor == 1`` with ``new_frames == T`` is the identity."""
    targets = np.asarray(targets)
    if targets.size == 0:
        raise ValueError("no targets to map")
    i = np.arange(max(int(new_frames), 0), dtype=np.float64)
    j = np.minimum(np.floor((i + 0.5) * factor).astype(np.int64), targets.size - 1)
    return targets[j]


def perturb_frame_labels(
    labels_scp: str | os.PathLike,
    copies_targets_scp: str | os.PathLike,
    options: PerturbOptions,
    ark: str | os.PathLike,
    scp: str | os.PathLike,
) -> dict:
    """Per-frame labels of the source set (``labels_scp``: the GMM alignment's phones a
    chain model reads) carried to the copies exactly as their targets were: copy
    ``<prefix><utt>`` at speed ``f`` gets :func:`map_targets` of ``utt``'s labels with
    its own frame count (the length of its targets in ``copies_targets_scp``, the
    perturbed set's), so label and target of a copy frame come from the same source
    frame. Written as ``ark`` / ``scp``; returns the counts. Every copy must have its
    source's labels (an error names the copy and the file)."""
    labels = load_scp(labels_scp)
    copies = sorted(options.copies(), key=lambda c: -len(c[0]))  # longest prefix first
    rows = []
    for key, vec, _ in iter_int_vectors(copies_targets_scp):
        prefix, factor = next(((p, f) for p, f in copies if key.startswith(p)), ("", 1.0))
        utt = key[len(prefix) :]
        if utt not in labels:
            raise DataError(
                f"{labels_scp}: no labels for utterance {utt!r}, the source of the perturbed "
                f"copy {key!r} of {copies_targets_scp}"
            )
        src = np.asarray(labels[utt])
        new = src if factor == 1 else map_targets(src, factor, vec.size)
        if new.size != vec.size:
            raise DataError(
                f"{labels_scp}: utterance {utt!r} has {src.size} labels but its copy {key!r} "
                f"{vec.size} targets in {copies_targets_scp}"
            )
        rows.append((key, new.astype(np.int32)))
    n = write_ark_scp(rows, ark, scp)
    return {"utterances": n, "frames": int(sum(v.size for _, v in rows))}


# ------------------------------------------------------------------------------ data dir
def _scaled_segment(seg: Segment, factor: float, recording: str, duration: float) -> Segment:
    """The segment of a copy at speed ``factor``: times ÷ factor (6 decimals), an end past
    the copy's ``duration`` (the source's end overshot its recording) cut to it."""
    start = round(seg.start / factor, 6)
    end = seg.end if seg.end == -1 else min(round(seg.end / factor, 6), duration)
    text = f"{recording} {start} {'-1' if end == -1 else end}"
    return Segment(recording, start, end, seg.lineno, text)


def perturb_data_dir(
    src: str | os.PathLike,
    dst: str | os.PathLike,
    options: PerturbOptions,
    sample_rate: int,
    snip_edges: bool = True,
) -> dict:
    """Write ``dst``, the perturbed copies of the prepared dir ``src`` (module docstring),
    atomically (built in a temporary dir beside ``dst`` that replaces it). ``snip_edges``
    is ``features.snip_edges``: the copies' target counts are their feature frame counts.
    Returns the report (also ``dst/report.json``)."""
    if not options.enabled:
        raise ValueError("data.perturb asks for no perturbation")
    src, dst = Path(src), Path(dst)
    dst.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{dst.name}.", suffix=".tmp", dir=dst.parent))
    try:
        report = _perturb_into(src, tmp, dst, options, sample_rate, snip_edges)
        if dst.exists():
            shutil.rmtree(dst)
        os.replace(tmp, dst)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return report


def _perturb_into(
    src: Path, out: Path, dst: Path, options: PerturbOptions, sample_rate: int, snip_edges: bool
) -> dict:
    data = read_data_dir(src)
    data.origin = origin = read_origin(src)
    if origin is None:
        raise DataError(f"{src}: not a prepared data dir (no origin and report.json)")
    source_report = read_json(src / "report.json")
    targets = {key: vec for key, vec, _ in iter_int_vectors(src / "targets.scp")}
    uniq = data.utt2uniq or {}
    frames = MfccOptions(sample_frequency=float(sample_rate), snip_edges=snip_edges)
    copies = options.copies()

    utts_of: dict[str, list[str]] = {}
    for utt in data.utterances:
        utts_of.setdefault(data.recording(utt), []).append(utt)

    wav_rows: list[tuple[str, str]] = []
    gains: dict[str, float] = {}
    new_targets: dict[str, np.ndarray] = {}
    new_segments: dict[str, Segment] = {}
    stats = {"clipped_samples": 0, "source_samples": 0, "copy_samples": 0}
    ark_named = (dst / "wav.ark").resolve()
    with open(out / "wav.ark", "wb") as fd:
        for reco, utts in sorted(utts_of.items()):
            where = data.where(utts[0])
            rate, x = read_recording(data.wav[reco], where)
            check_audio_format(rate, x.shape[1] if x.ndim == 2 else 1, sample_rate, where)
            stats["source_samples"] += x.shape[0]
            for prefix, factor in copies:
                new_reco = prefix + reco
                y = speed_perturb(x, factor, rate)
                if options.volume:
                    seed = utterance_seed(options.srand, new_reco)
                    gains[new_reco] = volume_gain(seed, options.scale_low, options.scale_high)
                    y *= gains[new_reco]
                pcm, clipped = to_int16(y)
                stats["clipped_samples"] += clipped
                stats["copy_samples"] += pcm.size
                fd.write(new_reco.encode("utf-8") + b" ")
                wav_rows.append((new_reco, f"{ark_named}:{fd.tell()}"))
                _write_wav(fd, rate, pcm)
                for utt in utts:
                    n = pcm.size
                    if data.segments is not None:
                        seg = _scaled_segment(data.segments[utt], factor, new_reco, pcm.size / rate)
                        new_segments[prefix + utt] = seg
                        a, b = seg.sample_range(pcm.size, rate, data.where(utt))
                        n = b - a
                    new_targets[prefix + utt] = (
                        targets[utt]
                        if factor == 1
                        else map_targets(targets[utt], factor, max(num_frames(n, frames), 1))
                    )

    def renamed(table: Mapping[str, str]) -> list[tuple[str, str]]:
        return sorted((p + k, v) for p, _ in copies for k, v in table.items())

    utt2spk = sorted((p + u, p + s) for p, _ in copies for u, s in data.utt2spk.items())
    spk2utt: dict[str, list[str]] = {}
    for utt, spk in utt2spk:
        spk2utt.setdefault(spk, []).append(utt)
    write_table(out / "wav.scp", sorted(wav_rows))
    write_table(out / "utt2spk", utt2spk)
    write_table(out / "spk2utt", ((s, " ".join(us)) for s, us in sorted(spk2utt.items())))
    write_table(
        out / "utt2uniq",
        sorted((p + u, uniq.get(u, u)) for p, _ in copies for u in data.utterances),
    )
    if data.segments is not None:
        write_table(out / "segments", sorted((u, s.text) for u, s in new_segments.items()))
    if data.text is not None:
        write_table(out / "text", renamed(data.text))
    if data.reco2file_and_channel is not None:
        write_table(out / "reco2file_and_channel", renamed(data.reco2file_and_channel))
    if options.volume:
        write_table(out / "reco2vol", ((r, f"{g:.6f}") for r, g in sorted(gains.items())))
    utts = sorted(new_targets)
    write_ark_scp(
        ((u, new_targets[u]) for u in utts),
        out / "targets.ark",
        out / "targets.scp",
        scp_ark_path=dst / "targets.ark",
    )
    _mapped_origin(origin, copies, data.utterances).write(out, utts)

    num_target_frames = int(sum(v.size for v in new_targets.values()))
    report = {
        "source": source_report.get("source"),
        "source_files": origin.files(),
        "perturbed_from": str(src.resolve()),
        "perturb": {
            "speed": list(options.speed),
            "volume": options.volume,
            "scale_low": options.scale_low,
            "scale_high": options.scale_high,
            "srand": options.srand,
        },
        "id_prefixes": [p for p, _ in copies],
        "sample_rate": sample_rate,
        "num_recordings": len(wav_rows),
        "num_utterances": len(utts),
        "num_utterances_kept": len(utts),
        "num_speakers": len(spk2utt),
        "num_source_target_frames": int(sum(targets[u].size for u in data.utterances)),
        "num_target_frames": num_target_frames,
        "source_duration_s": round(stats["source_samples"] / sample_rate, 3),
        "duration_s": round(stats["copy_samples"] / sample_rate, 3),
        # a prepared set's key (prepare_data's audio check): the copies are written here,
        # so their length is known; the resource formulas read it (paravg/dag/core.py)
        "duration_s_checked": round(stats["copy_samples"] / sample_rate, 3),
        "clipped_samples": stats["clipped_samples"],
        "gain_min": round(min(gains.values()), 6) if gains else None,
        "gain_max": round(max(gains.values()), 6) if gains else None,
        "has_segments": data.segments is not None,
        "has_text": data.text is not None,
        "has_utt2uniq": True,
        "warnings": [],
    }
    if stats["clipped_samples"]:
        msg = (
            f"{stats['clipped_samples']} samples clipped to 16 bits by the volume gains "
            f"(sox clips too); {report['duration_s']} s of audio in all"
        )
        log.warning("%s", msg)
        report["warnings"].append(msg)
    write_json_atomic(out / "report.json", report)
    log.info(
        "perturbed %s -> %s: %d copies (%s), %d utterances, %.1f s of audio from %.1f s",
        src,
        dst,
        len(copies),
        ", ".join(p or "volume only" for p, _ in copies),
        len(utts),
        report["duration_s"],
        report["source_duration_s"],
    )
    return report


def _write_wav(fd, rate: int, pcm: np.ndarray) -> None:
    """One 16-bit mono WAV at the current position of ``fd`` (``wav-copy``'s ark entry)."""
    from kaldiio.wavio import write_wav

    write_wav(fd, rate, pcm)


def _mapped_origin(origin: Origin, copies: Iterable[tuple[str, float]], utts) -> Origin:
    """The source's :class:`Origin` under the copies' ids: each copy names the user's
    lines of the utterance it was made from."""
    copies = list(copies)

    def mapped(table: Mapping) -> dict:
        return {p + u: table[u] for p, _ in copies for u in utts if u in table}

    return Origin(
        origin.wav_scp,
        origin.segments,
        origin.targets,
        mapped(origin.wav_line),
        mapped(origin.segment_line),
        mapped(origin.targets_place),
    )
