"""Kaldi-compatible MFCC extraction (kaldi-native-fbank), split jobs, merge, CMVN stats.

Mirrors ``featbin/compute-mfcc-feats.cc`` (``Mfcc`` = ``OfflineFeatureTpl<MfccComputer>``,
``src/feat/feature-mfcc.{h,cc}``, ``feature-window.{h,cc}``), ``steps/make_mfcc.sh`` (split
jobs, ``utt2num_frames``), ``utils/split_scp.pl`` and ``featbin/compute-cmvn-stats.cc``.

Per frame t (Kaldi's ``ExtractWindow`` + ``ProcessWindow``): take the L = ``frame_length``
samples starting at ``t * shift`` (snip_edges) or ``t * shift + shift/2 - L/2`` with
mirrored edges (index -k -> k-1, N+k -> N-1-k); **dither**: add ``dither * N(0, 1)`` to every
sample of the frame; remove the frame's DC offset; log energy (use_energy, raw_energy);
pre-emphasis x[i] -= 0.97 x[i-1]; povey window; |FFT|^2; mel banks; log; DCT; lifter.

Dither. Kaldi draws fresh noise for every *frame* (samples shared by overlapping frames
get different noise in each), from an unseeded global generator, so Kaldi itself is not
reproducible with ``dither != 0``. We keep Kaldi's per-frame noise but seed it: the frames
of an utterance are cut here, ``dither * N(0, 1)`` (float32, numpy ``PCG64`` seeded by
:func:`utterance_seed` from ``(srand, utterance id)``) is added to each, and the frames,
laid end to end, go through knf with ``frame_shift = frame_length``, ``snip_edges`` and knf's
own dither 0. Every later step of knf works inside one frame, so this equals Kaldi's
``ProcessWindow`` on the same dithered window exactly (tested against the plain knf path
with dither 0). Reruns are bit-identical; two utterances get different noise.

Input samples are at int16 scale (not [-1, 1]); knf's default dither (3e-5) is never used.
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import logging
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import kaldi_native_fbank as knf
import numpy as np

from paravg.audio import AudioReader, Segment
from paravg.data import PreparedUtterance, check_target_lengths, iter_prepared_utterances
from paravg.errors import ConfigError, DataError
from paravg.io import atomic_path, read_json, write_json_atomic, write_text_atomic
from paravg.kaldi_io import (
    InStepScp,
    RxFilename,
    TableLine,
    iter_table,
    write_ark_scp,
)

log = logging.getLogger(__name__)

# Frames per knf call on the dithered path (bounds memory: 2000 x 400 float32 = 3.2 MB).
BLOCK_FRAMES = 2000
# kaldiio / Kaldi CompressionMethod kAutomaticMethod, what `copy-feats --compress` uses.
COMPRESSION_AUTOMATIC = 1


@dataclass(frozen=True)
class MfccOptions:
    """MFCC options, named after Kaldi's ``compute-mfcc-feats`` options (``--num-mel-bins``
    -> ``num_mel_bins``; ``--frame-length``/``--frame-shift`` carry their unit: ``_ms``).

    Defaults are Kaldi's ``conf/mfcc_hires.conf`` (40 bins, 40 cepstra, 20 Hz .. Nyquist -
    400 Hz, no energy) and Kaldi's defaults for everything else, dither 1.0 included.
    """

    sample_frequency: float = 16000.0
    frame_length_ms: float = 25.0
    frame_shift_ms: float = 10.0
    dither: float = 1.0
    preemphasis_coefficient: float = 0.97
    remove_dc_offset: bool = True
    window_type: str = "povey"
    round_to_power_of_two: bool = True
    blackman_coeff: float = 0.42
    snip_edges: bool = True
    num_mel_bins: int = 40
    low_freq: float = 20.0
    high_freq: float = -400.0
    vtln_low: float = 100.0
    vtln_high: float = -500.0
    num_ceps: int = 40
    use_energy: bool = False
    energy_floor: float = 0.0
    raw_energy: bool = True
    cepstral_lifter: float = 22.0
    htk_compat: bool = False

    def __post_init__(self) -> None:
        self.validate()

    # -- construction
    @classmethod
    def from_config(cls, features: Mapping[str, Any], sample_rate: int) -> MfccOptions:
        """Options from the config's ``features`` section (keys that are not MFCC options,
        such as ``nj``, ``srand``, ``compress``, are ignored) and ``data.sample_rate``."""
        names = {f.name for f in dataclasses.fields(cls)}
        kwargs = {k: v for k, v in features.items() if k in names}
        return cls(sample_frequency=float(sample_rate), **kwargs)

    @classmethod
    def from_kaldi_options(cls, options: str, base: str = "kaldi") -> MfccOptions:
        """Parse a ``compute-mfcc-feats`` option string such as ``--dither=0
        --num-mel-bins=40``. ``base`` is ``kaldi`` (the binary's own defaults: 23 bins,
        13 cepstra, energy, high_freq 0) or ``hires`` (this class's defaults)."""
        kwargs: dict[str, Any] = dict(KALDI_BINARY_DEFAULTS) if base == "kaldi" else {}
        fields = {f.name: f for f in dataclasses.fields(cls)}
        for token in options.split():
            if not token.startswith("--") or "=" not in token:
                raise ConfigError(f"option {token!r}: expected --name=value")
            name, value = token[2:].split("=", 1)
            key = {"frame-length": "frame_length_ms", "frame-shift": "frame_shift_ms"}.get(
                name, name.replace("-", "_")
            )
            if key not in fields:
                raise ConfigError(f"option --{name}: not an MFCC option")
            default = fields[key].default
            if isinstance(default, bool):
                if value not in ("true", "false"):
                    raise ConfigError(f"option --{name}: expected true or false")
                kwargs[key] = value == "true"
            else:
                kwargs[key] = type(default)(value)
        return cls(**kwargs)

    # -- derived sizes (Kaldi's FrameExtractionOptions::WindowSize/WindowShift)
    @property
    def window_size(self) -> int:
        return int(self.sample_frequency * 0.001 * self.frame_length_ms)

    @property
    def window_shift(self) -> int:
        return int(self.sample_frequency * 0.001 * self.frame_shift_ms)

    @property
    def dim(self) -> int:
        return self.num_ceps

    def validate(self) -> None:
        """Kaldi's checks (``MelBanks`` constructor, ``MfccComputer``)."""
        nyquist = 0.5 * self.sample_frequency
        high = self.high_freq if self.high_freq > 0 else nyquist + self.high_freq
        if self.window_size < 2 or self.window_shift < 1:
            raise ConfigError(
                f"frame length {self.frame_length_ms} ms / shift {self.frame_shift_ms} ms "
                f"give {self.window_size} / {self.window_shift} samples"
            )
        if not (0 <= self.low_freq < high <= nyquist):
            raise ConfigError(
                f"need 0 <= low_freq < high_freq <= Nyquist: low_freq={self.low_freq}, "
                f"high_freq={self.high_freq} -> {high} Hz, Nyquist {nyquist} Hz"
            )
        if not (1 <= self.num_ceps <= self.num_mel_bins):
            raise ConfigError(
                f"num_ceps={self.num_ceps} must be in [1, num_mel_bins={self.num_mel_bins}]"
            )
        if self.dither < 0:
            raise ConfigError(f"dither={self.dither} must be >= 0")

    # -- knf
    def to_knf(self, framed: bool = False) -> knf.MfccOptions:
        """The knf options; knf's dither is always 0 (dither is applied here, seeded).

        ``framed``: options for frames laid end to end (shift = length, snip_edges).
        """
        o = knf.MfccOptions()
        f = o.frame_opts
        f.samp_freq = float(self.sample_frequency)
        f.frame_length_ms = float(self.frame_length_ms)
        f.frame_shift_ms = float(self.frame_length_ms if framed else self.frame_shift_ms)
        f.dither = 0.0
        f.preemph_coeff = float(self.preemphasis_coefficient)
        f.remove_dc_offset = bool(self.remove_dc_offset)
        f.window_type = self.window_type
        f.round_to_power_of_two = bool(self.round_to_power_of_two)
        f.blackman_coeff = float(self.blackman_coeff)
        f.snip_edges = True if framed else bool(self.snip_edges)
        m = o.mel_opts
        m.num_bins = int(self.num_mel_bins)
        m.low_freq = float(self.low_freq)
        m.high_freq = float(self.high_freq)
        m.vtln_low = float(self.vtln_low)
        m.vtln_high = float(self.vtln_high)
        o.num_ceps = int(self.num_ceps)
        o.use_energy = bool(self.use_energy)
        o.energy_floor = float(self.energy_floor)
        o.raw_energy = bool(self.raw_energy)
        o.cepstral_lifter = float(self.cepstral_lifter)
        o.htk_compat = bool(self.htk_compat)
        return o


# compute-mfcc-feats' own defaults where they differ from mfcc_hires.conf.
KALDI_BINARY_DEFAULTS: dict[str, Any] = {
    "num_mel_bins": 23,
    "num_ceps": 13,
    "use_energy": True,
    "low_freq": 20.0,
    "high_freq": 0.0,
}


# ------------------------------------------------------------------------------ framing
def num_frames(num_samples: int, opts: MfccOptions) -> int:
    """Kaldi's ``NumFrames(num_samples, opts, flush=true)``.

    snip_edges: ``1 + (N - L) // shift`` (0 if N < L); else ``(N + shift/2) // shift``.
    """
    L, shift = opts.window_size, opts.window_shift
    if opts.snip_edges:
        return 0 if num_samples < L else 1 + (num_samples - L) // shift
    return (num_samples + shift // 2) // shift


def frame_signal(
    samples: np.ndarray, opts: MfccOptions, first: int = 0, last: int | None = None
) -> np.ndarray:
    """Frames ``first .. last-1`` as a ``float32 [T, L]`` copy (Kaldi's ``ExtractWindow``
    before ``ProcessWindow``). Without snip_edges frame t starts at
    ``t * shift + shift // 2 - L // 2`` and indices outside [0, N) are mirrored."""
    samples = np.asarray(samples, dtype=np.float32)
    n = samples.shape[0]
    L, shift = opts.window_size, opts.window_shift
    total = num_frames(n, opts)
    last = total if last is None else min(last, total)
    if last <= first:
        return np.zeros((0, L), dtype=np.float32)
    if opts.snip_edges:
        view = np.lib.stride_tricks.sliding_window_view(samples, L)[::shift]
        return np.array(view[first:last], dtype=np.float32)
    starts = np.arange(first, last) * shift + shift // 2 - L // 2
    idx = starts[:, None] + np.arange(L)[None, :]
    while True:
        low, high = idx < 0, idx >= n
        if not (low.any() or high.any()):
            break
        idx = np.where(low, -idx - 1, idx)
        idx = np.where(high, 2 * n - 1 - idx, idx)
    return samples[idx]


# ------------------------------------------------------------------------------ MFCC
def utterance_seed(srand: int, utt: str) -> int:
    """A stable 64-bit seed from ``(srand, utterance id)``: the first 8 bytes (little
    endian) of ``sha256(f"{srand}\\0{utt}")``. Independent of Python's hash randomisation,
    the process, the split and the job count."""
    digest = hashlib.sha256(f"{srand}\0{utt}".encode()).digest()
    return int.from_bytes(digest[:8], "little")


def utterance_rng(srand: int, utt: str) -> np.random.Generator:
    """The dither generator of one utterance (numpy PCG64 seeded by :func:`utterance_seed`)."""
    return np.random.default_rng(utterance_seed(srand, utt))


def _knf_run(signal: np.ndarray, kopts: knf.MfccOptions, rate: float, dim: int) -> np.ndarray:
    extractor = knf.OnlineMfcc(kopts)
    extractor.accept_waveform(rate, np.ascontiguousarray(signal, dtype=np.float32))
    extractor.input_finished()
    n = extractor.num_frames_ready
    if n == 0:
        return np.zeros((0, dim), dtype=np.float32)
    return np.stack([extractor.get_frame(i) for i in range(n)]).astype(np.float32, copy=False)


def compute_mfcc(
    samples: np.ndarray,
    opts: MfccOptions,
    rng: np.random.Generator | None = None,
    block_frames: int = BLOCK_FRAMES,
) -> np.ndarray:
    """MFCC features ``float32 [T, num_ceps]`` of int16-scale ``samples`` (Kaldi's
    ``Mfcc::Compute`` over the whole utterance). With ``opts.dither > 0`` the per-frame
    Gaussian dither is drawn from ``rng`` (required, e.g. :func:`utterance_rng`)."""
    samples = np.asarray(samples, dtype=np.float32)
    if samples.ndim != 1:
        raise ValueError(f"expected mono samples [N], got shape {samples.shape}")
    total = num_frames(samples.shape[0], opts)
    if total == 0:
        return np.zeros((0, opts.dim), dtype=np.float32)
    rate = float(opts.sample_frequency)
    if opts.dither == 0:
        feats = _knf_run(samples, opts.to_knf(), rate, opts.dim)
    else:
        if rng is None:
            raise ValueError("dither > 0 needs a seeded generator (utterance_rng)")
        kopts = opts.to_knf(framed=True)
        dither = np.float32(opts.dither)
        blocks = []
        for first in range(0, total, block_frames):
            frames = frame_signal(samples, opts, first, first + block_frames)
            frames += rng.standard_normal(frames.shape, dtype=np.float32) * dither
            blocks.append(_knf_run(frames.reshape(-1), kopts, rate, opts.dim))
        feats = np.concatenate(blocks)
    if feats.shape[0] != total:  # a knf/Kaldi frame-count disagreement would be a bug here
        raise RuntimeError(f"knf gave {feats.shape[0]} frames, Kaldi's formula {total}")
    return feats


# ------------------------------------------------------------------------------ splitting
def split_utterances(
    utts: list[str], nj: int, utt2spk: Mapping[str, str] | None = None
) -> list[list[str]]:
    """Split sorted utterances into ``nj`` contiguous chunks (``utils/split_scp.pl``).

    With ``utt2spk``, and when every speaker's utterances are contiguous and there are at
    least ``nj`` speakers, chunk boundaries fall between speakers (``split_data.sh``'s
    default), placed where the cumulative utterance count is closest to ``j * U / nj``.
    Otherwise by utterance: the first ``U mod nj`` chunks get one more. Chunks may be empty
    only when there are fewer utterances than jobs (:func:`split_bounds`).
    """
    if nj < 1:
        raise ValueError(f"nj={nj} must be >= 1")
    utts = sorted(utts)
    runs = None
    if utt2spk is not None:
        runs = SpeakerRuns()
        for utt in utts:
            runs.add(utt2spk[utt])
    bounds = split_bounds(runs.lengths() if runs else None, len(utts), nj)
    return [utts[bounds[j] : bounds[j + 1]] for j in range(nj)]


class SpeakerRuns:
    """The runs of consecutive utterances of one speaker in a sorted ``utt2spk``, read
    one utterance at a time: per speaker a count and its name (to see whether a speaker
    comes back), nothing per utterance."""

    def __init__(self) -> None:
        self._counts: list[int] = []
        self._seen: set[str] = set()
        self._last: str | None = None
        self.contiguous = True

    def add(self, speaker: str) -> None:
        if self._counts and speaker == self._last:
            self._counts[-1] += 1
            return
        if speaker in self._seen:
            self.contiguous = False
        self._seen.add(speaker)
        self._last = speaker
        self._counts.append(1)

    def lengths(self) -> list[int] | None:
        """The runs' utterance counts; None when a speaker's utterances are not contiguous."""
        return self._counts if self.contiguous else None


def split_bounds(runs: list[int] | None, num_utts: int, nj: int) -> list[int]:
    """The ``nj + 1`` utterance positions that bound the chunks of
    :func:`split_utterances`: at speaker-run boundaries when ``runs`` (the runs' counts,
    every speaker contiguous) has at least ``nj`` runs, else by utterance."""
    if nj < 1:
        raise ValueError(f"nj={nj} must be >= 1")
    if runs and len(runs) >= nj:
        cum = np.cumsum(runs)
        total = int(cum[-1])
        bounds = [0]
        for j in range(1, nj):
            lo, hi = bounds[-1] + 1, len(runs) - (nj - j)
            cand = np.arange(lo, hi + 1)
            bounds.append(int(cand[np.argmin(np.abs(cum[cand - 1] - j * total / nj))]))
        bounds.append(len(runs))
        return [0] + [int(cum[b - 1]) for b in bounds[1:]]
    if num_utts < nj:
        return [min(j, num_utts) for j in range(nj + 1)]
    base, extra = divmod(num_utts, nj)
    bounds = [0]
    for j in range(nj):
        bounds.append(bounds[-1] + base + (j < extra))
    return bounds


def prepared_split_bounds(data_dir: str | os.PathLike, nj: int) -> list[int]:
    """:func:`split_bounds` of a prepared dir, its ``utt2spk`` read line by line."""
    runs, n = SpeakerRuns(), 0
    for row in iter_table(Path(data_dir) / "utt2spk", num_fields=2):
        runs.add(row.fields[0])
        n += 1
    return split_bounds(runs.lengths(), n, nj)


# ------------------------------------------------------------------------------ jobs
class OneUtteranceAudio:
    """The audio view (:class:`paravg.audio.AudioReader`'s) of the utterance a feature job
    is at (:func:`paravg.data.iter_prepared_utterances`)."""

    utt: PreparedUtterance

    def recording(self, utt: str) -> str:
        return self.utt.recording

    def where(self, utt: str) -> str:
        return self.utt.where

    def segment(self, utt: str) -> Segment | None:
        return self.utt.segment

    @property
    def wav(self) -> dict[str, RxFilename]:
        return {self.utt.recording: self.utt.wav}


def compute_features_split(
    data_dir: str | os.PathLike,
    nj: int,
    job: int,
    opts: MfccOptions,
    srand: int,
    ark: str | os.PathLike,
    scp: str | os.PathLike,
    utt2num_frames: str | os.PathLike,
    report: str | os.PathLike | None = None,
    compress: bool = False,
) -> dict:
    """Features of split ``job`` (1-based, as ``steps/make_mfcc.sh``) of ``nj`` of a prepared
    data dir: ``ark`` + ``scp`` (kaldiio, float32 ``FM``, or Kaldi's compressed matrix with
    ``compress``), ``utt2num_frames`` and a JSON ``report`` (counts, skipped utterances).

    Utterances too short for one frame are skipped with a warning (Kaldi writes nothing
    usable for them either). Audio problems found only now (pipes) raise
    :class:`~paravg.errors.DataError` naming the user's wav.scp line (the prepared dir's
    :class:`~paravg.data.Origin`); no output is then left.
    """
    if not 1 <= job <= nj:
        raise ValueError(f"job {job} is not in 1..{nj}")
    # the split's lines only, read as the job goes (utils/split_data.sh's per-job dirs)
    bounds = prepared_split_bounds(data_dir, nj)
    current = OneUtteranceAudio()
    reader = AudioReader(current, int(opts.sample_frequency))
    counts: dict[str, str | int] = {}
    skipped: list[str] = []
    stats = {"num_samples": 0}

    def items() -> Iterator[tuple[str, np.ndarray]]:
        for one in iter_prepared_utterances(data_dir, bounds[job - 1], bounds[job]):
            current.utt = one
            utt = one.utt
            samples = reader(utt)
            stats["num_samples"] += samples.shape[0]
            rng = utterance_rng(srand, utt) if opts.dither > 0 else None
            feats = compute_mfcc(samples, opts, rng)
            if feats.shape[0] == 0:
                log.warning("%s: too short for one frame (%d samples), skipped",
                            one.where, samples.shape[0])  # fmt: skip
                skipped.append(utt)
                continue
            counts[utt] = feats.shape[0]
            yield utt, feats

    method = COMPRESSION_AUTOMATIC if compress else None
    write_ark_scp(items(), ark, scp, compression_method=method)
    write_text_atomic(utt2num_frames, "".join(f"{u} {n}\n" for u, n in counts.items()))
    summary = {
        "job": job,
        "nj": nj,
        "num_utterances": len(counts),
        "num_frames": int(sum(counts.values())),
        "num_skipped": len(skipped),
        "skipped_utterances": skipped,
        "audio_seconds": round(stats["num_samples"] / opts.sample_frequency, 3),
        "options": dataclasses.asdict(opts),
        "srand": srand,
        "compress": compress,
    }
    if report is not None:
        write_json_atomic(report, summary)
    log.info("split %d/%d: %d utterances, %d frames, %d skipped", job, nj,
             len(counts), summary["num_frames"], len(skipped))  # fmt: skip
    return summary


def merge_feature_splits(
    split_scps: list[str | os.PathLike],
    split_utt2num_frames: list[str | os.PathLike],
    feats_scp: str | os.PathLike,
    utt2num_frames: str | os.PathLike,
    split_reports: list[str | os.PathLike] | None = None,
    report: str | os.PathLike | None = None,
    prepared_dir: str | os.PathLike | None = None,
    targets_length_tolerance: int = 2,
) -> dict:
    """Concatenate split scps (which point into the split arks) into ``feats.scp`` and
    their ``utt2num_frames`` likewise, checking keys are unique, sorted and agree.
    With ``split_reports``/``report``, also sum the split reports into one JSON.

    With ``prepared_dir``, the targets of the set are checked against the feature
    lengths before anything is written (:func:`paravg.data.check_target_lengths`): a
    wrong alignment is reported here, naming the utterance and the user's targets line,
    not after the i-vector training."""
    if len(split_scps) != len(split_utt2num_frames):
        raise ValueError("need one utt2num_frames per split scp")
    counts = {"utterances": 0, "frames": 0}

    def merged() -> Iterator[tuple[TableLine, TableLine]]:
        """The splits' (scp line, utt2num_frames line) pairs in order, checked as read."""
        prev = None
        for scp_path, u2nf_path in zip(split_scps, split_utt2num_frames, strict=True):
            scp_rows = iter_table(scp_path, num_fields=2)
            u2nf_rows = iter_table(u2nf_path, num_fields=2)
            first = True
            for s_row, u_row in itertools.zip_longest(scp_rows, u2nf_rows):
                if s_row is None or u_row is None or s_row.key != u_row.key:
                    raise DataError(f"{scp_path} and {u2nf_path} list different utterances")
                if first and prev is not None and s_row.key <= prev:
                    raise DataError(
                        f"{scp_path}:1: utterance {s_row.key!r} does not sort after the "
                        f"previous split's last {prev!r}"
                    )
                first = False
                prev = s_row.key
                yield s_row, u_row

    def frames_of(rows: Iterator[tuple[TableLine, TableLine]]) -> Iterator[tuple[str, int]]:
        """Write each pair's lines as they pass and give ``(utt, frames)``."""
        for s_row, u_row in rows:
            fs.write(f"{s_row.key} {s_row.fields[0]}\n")
            fu.write(f"{u_row.key} {u_row.fields[0]}\n")
            counts["utterances"] += 1
            frames = int(u_row.fields[0])
            counts["frames"] += frames
            yield u_row.key, frames

    # Streamed (nothing held per utterance): the lines are written to temporary files as
    # they are read and checked, the targets joined with them in the same pass; the
    # files replace feats.scp and utt2num_frames only when everything passed.
    with (
        atomic_path(utt2num_frames) as tmp_u,
        open(tmp_u, "w") as fu,
        atomic_path(feats_scp) as tmp_s,
        open(tmp_s, "w") as fs,
    ):
        rows = frames_of(merged())
        lengths_check = {}
        if prepared_dir is not None:
            lengths_check = check_target_lengths(prepared_dir, rows, targets_length_tolerance)
        for _ in rows:  # the lines after the last utterance with targets
            pass
        if not counts["utterances"]:
            raise DataError(f"{feats_scp}: no utterance has features")
    summary: dict[str, Any] = {
        "num_utterances": counts["utterances"],
        "num_frames": counts["frames"],
        "num_splits": len(split_scps),
        **lengths_check,
    }
    if split_reports:
        parts = [read_json(p) for p in split_reports]
        summary["skipped_utterances"] = [u for p in parts for u in p["skipped_utterances"]]
        summary["num_skipped"] = len(summary["skipped_utterances"])
        summary["audio_seconds"] = round(sum(p["audio_seconds"] for p in parts), 3)
        summary["options"] = parts[0]["options"]
        summary["srand"] = parts[0]["srand"]
        summary["compress"] = parts[0]["compress"]
    if report is not None:
        write_json_atomic(report, summary)
    return summary


# ------------------------------------------------------------------------------ CMVN
def cmvn_stats(feats: np.ndarray) -> np.ndarray:
    """Kaldi's CMVN statistics of ``feats [T, D]`` (``AccCmvnStats``): a float64
    ``2 x (D+1)`` matrix, row 0 = (sum_t x_t, T), row 1 = (sum_t x_t^2, 0)."""
    x = np.asarray(feats, dtype=np.float64)
    stats = np.zeros((2, x.shape[1] + 1), dtype=np.float64)
    stats[0, :-1] = x.sum(axis=0)
    stats[0, -1] = x.shape[0]
    stats[1, :-1] = np.square(x).sum(axis=0)
    return stats


def compute_cmvn(
    feats_scp: str | os.PathLike,
    spk2utt: str | os.PathLike,
    cmvn_ark: str | os.PathLike,
    cmvn_scp: str | os.PathLike,
) -> dict:
    """Per-speaker CMVN stats (``compute-cmvn-stats --spk2utt``): the sum of
    :func:`cmvn_stats` over each speaker's utterances that have features, written as
    float64 ``DM`` matrices. Speakers none of whose utterances have features are skipped
    with a warning, as Kaldi does."""
    # spk2utt and feats.scp read in step (InStepScp: sorted utterance ids that start
    # with their speaker's, Kaldi's convention, keep one line of each in memory; other
    # orders index feats.scp whole)
    feats = InStepScp(feats_scp)
    skipped_spk: list[str] = []
    missing_utts = 0

    def items() -> Iterator[tuple[str, np.ndarray]]:
        nonlocal missing_utts
        for row in iter_table(spk2utt, min_fields=2):
            stats = None
            for utt in row.fields:
                mat = feats.get(utt)
                if mat is None:
                    missing_utts += 1
                    continue
                s = cmvn_stats(mat)
                stats = s if stats is None else stats + s
            if stats is None:
                log.warning("%s:%d: speaker %s has no features, no stats written",
                            spk2utt, row.lineno, row.key)  # fmt: skip
                skipped_spk.append(row.key)
                continue
            yield row.key, stats

    try:
        n = write_ark_scp(items(), cmvn_ark, cmvn_scp)
    finally:
        feats.close()
    if n == 0:
        raise DataError(f"{spk2utt}: no speaker has features in {feats_scp}")
    return {
        "num_speakers": n,
        "skipped_speakers": skipped_spk,
        "utterances_without_features": missing_utts,
    }
