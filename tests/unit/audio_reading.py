"""One wav.scp entry read as the feature stage reads it (:class:`paravg.audio.AudioReader`
over a data dir of one recording and one utterance), for the audio tests."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from paravg.audio import AudioReader, RxFilename, Segment, parse_wav_rxfilename


@dataclass
class OneUtterance:
    """A :class:`paravg.audio.DataDirAudio` of one recording ``r``, one utterance ``u``."""

    rx: RxFilename
    seg: Segment | None
    place: str
    path: Path = Path(".")
    wav_lines: dict[str, int] = field(default_factory=lambda: {"r": 1})
    utt2spk: dict[str, str] = field(default_factory=lambda: {"u": "s"})

    @property
    def wav(self) -> dict[str, RxFilename]:
        return {"r": self.rx}

    @property
    def utterances(self) -> list[str]:
        return ["u"]

    def recording(self, utt: str) -> str:
        return "r"

    def segment(self, utt: str) -> Segment | None:
        return self.seg

    def where(self, utt: str) -> str:
        return self.place


def read_utterance(
    entry: str | RxFilename,
    segment: Segment | None = None,
    sample_rate: int | None = None,
    where: str = "",
) -> np.ndarray:
    """The samples of the utterance ``segment`` of wav.scp value ``entry`` (the whole
    recording without one), checked against ``sample_rate``; errors name ``where``."""
    rx = entry if isinstance(entry, RxFilename) else parse_wav_rxfilename(entry, where)
    return AudioReader(OneUtterance(rx, segment, where), sample_rate)("u")
