"""Writing a Kaldi data directory for the demo corpus.

Files (every one sorted by its first field, C-locale order, as Kaldi's
utils/validate_data_dir.sh requires; utterance ids start with their speaker id, so
sorting ``utt2spk`` by utterance also sorts it by speaker):

    wav.scp      <utt> <path to 16 kHz 16-bit mono wav>
    utt2spk      <utt> <spk>
    spk2utt      <spk> <utt> <utt> ...
    text         <utt> <WORDS>
    targets.ark  Kaldi binary int32 vectors, one per utterance: per-frame phone ids
                 (the format of ``ali-to-pdf``), paravg.kaldi_io.write_ark_scp
    targets.scp  <utt> <targets.ark>:<offset>
    phone_ctm    <utt> 1 <start> <duration> <phone>  (exact segment times)
    phones.txt   <phone> <id>
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from paravg.corpus.labels import Segment, ctm_lines
from paravg.corpus.phones import phones_txt
from paravg.io import write_text_atomic
from paravg.kaldi_io import write_ark_scp


@dataclass
class UtteranceRecord:
    """One finished utterance of the corpus."""

    utt: str
    speaker: str
    wav: str
    text: str
    num_samples: int
    segments: list[Segment]
    targets: np.ndarray


def _lines(rows: Sequence[str]) -> str:
    return "".join(f"{row}\n" for row in rows)


def write_targets(directory: Path, records: Sequence[UtteranceRecord]) -> None:
    """``targets.ark`` (binary int32 vectors) and ``targets.scp`` pointing into it (the
    ark's path as ``directory`` gives it: the demo's tables stay relative to the run)."""
    write_ark_scp(
        ((rec.utt, np.asarray(rec.targets, dtype=np.int32)) for rec in records),
        directory / "targets.ark",
        directory / "targets.scp",
        absolute=False,
    )


def write_data_dir(directory: str | os.PathLike, records: Sequence[UtteranceRecord]) -> None:
    """Write every file of one set; ``records`` may come in any order."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    records = sorted(records, key=lambda r: r.utt)
    utts = [r.utt for r in records]
    if len(set(utts)) != len(utts):
        raise ValueError(f"{directory}: duplicate utterance ids")
    spk2utt: dict[str, list[str]] = {}
    for rec in records:
        if not rec.utt.startswith(rec.speaker + "-"):
            raise ValueError(f"utterance {rec.utt!r} does not start with its speaker id")
        spk2utt.setdefault(rec.speaker, []).append(rec.utt)
    write_text_atomic(directory / "wav.scp", _lines([f"{r.utt} {r.wav}" for r in records]))
    write_text_atomic(directory / "utt2spk", _lines([f"{r.utt} {r.speaker}" for r in records]))
    write_text_atomic(
        directory / "spk2utt",
        _lines([f"{spk} {' '.join(spk2utt[spk])}" for spk in sorted(spk2utt)]),
    )
    write_text_atomic(directory / "text", _lines([f"{r.utt} {r.text}" for r in records]))
    write_text_atomic(
        directory / "phone_ctm",
        _lines([line for r in records for line in ctm_lines(r.utt, r.segments)]),
    )
    write_text_atomic(directory / "phones.txt", phones_txt())
    write_targets(directory, records)
