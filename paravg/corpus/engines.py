"""TTS voices of the demo corpus and one synthesis call per engine.

Every engine returns, per utterance, 16 kHz float samples (full scale 1.0) and contiguous
phone :class:`~paravg.corpus.labels.Segment` s covering the whole audio, in the 40-label
set of :mod:`paravg.corpus.phones`. Timing comes from the engine itself, so the labels are
exact by construction:

* flite 2.2 (BSD-style): one process per utterance,
  ``flite -voice V --setf duration_stretch=S -psdur -t TEXT -o x.wav`` prints
  ``phone:end_time`` tokens on stdout.
* festival 2.5 (X11/BSD-style): one batch Scheme file per call (``festival -b``):
  per utterance ``(Parameter.set 'Duration_Stretch S)``, synth, ``utt.save.wave`` and
  ``utt.save.segs`` (lines ``end_time 100 phone`` after ``#``). The slt HTS voice ignores
  Duration_Stretch; its speaking rate is hts_engine's ``-r`` (= 1 / S). It synthesizes at
  32 kHz and is resampled to 16 kHz.
* espeak-ng (GPL-3+, optional): libespeak-ng through ctypes (:mod:`paravg.corpus.espeak`)
  in a fresh process per call, at 22.05 kHz, resampled to 16 kHz; rate ``175 / S`` words
  per minute.

flite and festival are deterministic (the same call gives the same bytes); so is an
espeak batch run in a fresh process, its noise seeded per utterance (``Request.seed``).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import soundfile

from paravg.corpus.espeak import DEFAULT_RATE, espeak_available
from paravg.corpus.labels import SAMPLE_RATE, Segment, tidy_segments
from paravg.corpus.phones import espeak_labels, festival_label
from paravg.corpus.resample import resample
from paravg.errors import HostError


@dataclass(frozen=True)
class Voice:
    """A base voice. ``source`` names the human (or synthesizer voice) behind it: the
    train/test split keeps all voices of one source on one side."""

    name: str
    engine: str  # "flite" | "festival" | "espeak"
    engine_voice: str
    source: str
    gender: str


@dataclass(frozen=True)
class Request:
    """One utterance to synthesize: ``stretch`` > 1 speaks slower; ``pitch`` is espeak's
    0-100 pitch parameter and ``seed`` (32 bits) seeds espeak's noise (both ignored by
    the other engines, which draw nothing at random)."""

    text: str
    stretch: float = 1.0
    pitch: int = 50
    seed: int = 1


@dataclass
class Synthesis:
    """16 kHz float samples and the phone segments covering them."""

    samples: np.ndarray
    segments: list[Segment]


FLITE_VOICES = (
    Voice("flite_awb", "flite", "awb", "awb", "m"),
    Voice("flite_rms", "flite", "rms", "rms", "m"),
    Voice("flite_slt", "flite", "slt", "slt", "f"),
)
FESTIVAL_VOICES = (
    Voice("fest_kal", "festival", "kal_diphone", "kal", "m"),
    Voice("fest_ked", "festival", "ked_diphone", "ked", "m"),
    Voice("fest_slt", "festival", "cmu_us_slt_arctic_hts", "slt", "f"),
)
ESPEAK_VOICES = tuple(
    Voice(f"espeak_{v}", "espeak", f"en-us+{v}", f"espeak_{v}", g)
    for v, g in (("m1", "m"), ("m3", "m"), ("m7", "m"), ("f2", "f"), ("f4", "f"), ("klatt2", "m"))
)
ALL_VOICES = FLITE_VOICES + FESTIVAL_VOICES + ESPEAK_VOICES


class EngineError(HostError):
    """A TTS engine failed or produced output that cannot be read."""


def _flite_voices() -> set[str]:
    if shutil.which("flite") is None:
        return set()
    out = subprocess.run(["flite", "-lv"], capture_output=True, text=True, check=False)
    return set(out.stdout.split(":", 1)[-1].split())


def _festival_voices() -> set[str]:
    if shutil.which("festival") is None:
        return set()
    out = subprocess.run(
        ["festival", "-b", "(print (voice.list))"], capture_output=True, text=True, check=False
    )
    return set(out.stdout.strip().strip("()").split())


def available_voices(use_espeak: bool) -> list[Voice]:
    """The base voices whose engine and voice data are installed, in :data:`ALL_VOICES`
    order; espeak voices only with ``use_espeak`` and libespeak-ng present."""
    flite, festival = _flite_voices(), _festival_voices()
    voices = [v for v in FLITE_VOICES if v.engine_voice in flite]
    voices += [v for v in FESTIVAL_VOICES if v.engine_voice in festival]
    if use_espeak and espeak_available():
        voices += list(ESPEAK_VOICES)
    return voices


def _to_synthesis(samples: np.ndarray, rate: int, segments: list[Segment]) -> Synthesis:
    """Resample to 16 kHz (times unchanged) and make the segments cover the audio."""
    x = np.asarray(samples, dtype=np.float64)
    if rate != SAMPLE_RATE:
        x = resample(x, rate, SAMPLE_RATE)
    return Synthesis(x, tidy_segments(segments, len(x) / SAMPLE_RATE))


def _read_wav(path: Path) -> tuple[np.ndarray, int]:
    try:
        data, rate = soundfile.read(path, dtype="int16", always_2d=True)
    except (RuntimeError, soundfile.LibsndfileError) as exc:
        raise EngineError(f"{path}: the engine wrote no readable wav ({exc})") from exc
    return data[:, 0].astype(np.float64) / 32768.0, int(rate)


def _segments_from_ends(phones: Sequence[tuple[str, float]]) -> list[Segment]:
    """Contiguous segments from ``(label, end_time)`` pairs, the first starting at 0."""
    segments, start = [], 0.0
    for label, end in phones:
        segments.append(Segment(label, start, end))
        start = end
    return segments


def _run(cmd: list[str], what: str, **kwargs) -> subprocess.CompletedProcess:
    result = subprocess.run(cmd, capture_output=True, text=True, check=False, **kwargs)
    if result.returncode != 0:
        raise EngineError(f"{what} failed ({result.returncode}): {result.stderr[-2000:]}")
    return result


def synthesize_flite(voice: Voice, requests: Sequence[Request], workdir: Path) -> list[Synthesis]:
    """flite, one process per utterance, labels from ``-psdur``."""
    results = []
    for k, req in enumerate(requests):
        wav = workdir / f"flite{k}.wav"
        out = _run(
            [
                "flite", "-voice", voice.engine_voice,
                "--setf", f"duration_stretch={req.stretch:.4f}",
                "-psdur", "-t", req.text, "-o", str(wav),
            ],
            f"flite -voice {voice.engine_voice} on {req.text!r}",
        )  # fmt: skip
        phones = []
        for token in out.stdout.split():
            name, sep, end = token.rpartition(":")
            if not sep:
                raise EngineError(f"flite printed {token!r}, expected phone:end_time")
            phones.append((festival_label(name), float(end)))
        samples, rate = _read_wav(wav)
        results.append(_to_synthesis(samples, rate, _segments_from_ends(phones)))
    return results


def _scheme_string(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def festival_script(voice: Voice, requests: Sequence[Request], workdir: Path) -> str:
    """The Scheme batch that synthesizes ``requests`` into ``workdir/fest<k>.{wav,segs}``."""
    hts = "hts" in voice.engine_voice
    lines = [f"({'voice_' + voice.engine_voice})"]
    if hts:
        lines.append("(set! paravg_hts_params hts_engine_params)")
    for k, req in enumerate(requests):
        if hts:
            rate = 1.0 / req.stretch
            lines.append(
                f'(set! hts_engine_params (append paravg_hts_params (list (list "-r" {rate:.4f}))))'
            )
        else:
            lines.append(f"(Parameter.set 'Duration_Stretch {req.stretch:.4f})")
        lines += [
            f"(set! paravg_utt (eval (list 'Utterance 'Text {_scheme_string(req.text)})))",
            "(utt.synth paravg_utt)",
            f"(utt.save.wave paravg_utt {_scheme_string(str(workdir / f'fest{k}.wav'))} 'riff)",
            f"(utt.save.segs paravg_utt {_scheme_string(str(workdir / f'fest{k}.segs'))})",
        ]
    return "\n".join(lines) + "\n"


def _read_segs(path: Path) -> list[Segment]:
    """festival ``utt.save.segs``: a header up to ``#``, then ``end_time 100 phone``."""
    try:
        text = path.read_text()
    except OSError as exc:
        raise EngineError(f"{path}: festival wrote no segments ({exc})") from exc
    body = text.split("#", 1)[-1]
    phones = []
    for number, line in enumerate(body.splitlines(), 1):
        fields = line.split()
        if not fields:
            continue
        if len(fields) != 3:
            raise EngineError(f"{path}: line {number} after '#' is {line!r}, expected 3 fields")
        phones.append((festival_label(fields[2]), float(fields[0])))
    return _segments_from_ends(phones)


def synthesize_festival(
    voice: Voice, requests: Sequence[Request], workdir: Path
) -> list[Synthesis]:
    """festival, one process for the whole batch, labels from ``utt.save.segs``."""
    script = workdir / "batch.scm"
    script.write_text(festival_script(voice, requests, workdir))
    _run(["festival", "-b", str(script)], f"festival ({voice.engine_voice}, {script})")
    results = []
    for k in range(len(requests)):
        samples, rate = _read_wav(workdir / f"fest{k}.wav")
        results.append(_to_synthesis(samples, rate, _read_segs(workdir / f"fest{k}.segs")))
    return results


def espeak_segments(phonemes: Sequence[tuple[str, int]], num_samples: int, rate: int):
    """Segments from espeak ``(mnemonic, start_sample)`` events.

    A phoneme lasts until the next event starts; one that spans two labels (``e@``) gives
    each half of its duration; a modifier (``;``) extends the phone before it.
    """
    starts: list[tuple[str, float]] = []  # (label, start sample)
    events = [(espeak_labels(m), s) for m, s in phonemes]
    events = [(labels, s) for labels, s in events if labels]  # drop modifiers
    for k, (labels, start) in enumerate(events):
        end = events[k + 1][1] if k + 1 < len(events) else num_samples
        step = max(end - start, 0) / len(labels)
        starts += [(label, start + i * step) for i, label in enumerate(labels)]
    segments = []
    for k, (label, start) in enumerate(starts):
        end = starts[k + 1][1] if k + 1 < len(starts) else num_samples
        segments.append(Segment(label, start / rate, end / rate))
    return segments


def synthesize_espeak(voice: Voice, requests: Sequence[Request], workdir: Path) -> list[Synthesis]:
    """espeak-ng through libespeak-ng, the batch in a fresh Python process."""
    payload = [
        {
            "text": r.text,
            "voice": voice.engine_voice,
            "rate": round(DEFAULT_RATE / r.stretch),
            "pitch": int(r.pitch),
            "seed": int(r.seed),
        }
        for r in requests
    ]
    _run(
        [sys.executable, "-m", "paravg.corpus.espeak", str(workdir)],
        f"espeak-ng ({voice.engine_voice})",
        input=json.dumps(payload),
    )
    results = []
    for k in range(len(requests)):
        samples = np.fromfile(workdir / f"{k}.pcm", dtype=np.int16).astype(np.float64) / 32768.0
        meta = json.loads((workdir / f"{k}.json").read_text())
        rate = int(meta["sample_rate"])
        segments = espeak_segments(meta["phonemes"], len(samples), rate)
        results.append(_to_synthesis(samples, rate, segments))
    return results


_ENGINES = {
    "flite": synthesize_flite,
    "festival": synthesize_festival,
    "espeak": synthesize_espeak,
}


def synthesize(voice: Voice, requests: Sequence[Request]) -> list[Synthesis]:
    """Synthesize ``requests`` with ``voice`` (in a private temporary directory)."""
    if not requests:
        return []
    with tempfile.TemporaryDirectory(prefix=f"paravg-{voice.name}-") as tmp:
        return _ENGINES[voice.engine](voice, requests, Path(tmp))
