"""Phone segments and their per-frame labels in Kaldi's framing.

Kaldi's default framing (``--frame-length=25 --frame-shift=10 --snip-edges=true``,
feat/feature-window.cc ``NumFrames``) gives a wav of ``n`` samples at 16 kHz

    num_frames = 1 + (n - 400) // 160        (0 when n < 400)

frames; frame ``i`` spans samples ``[160 i, 160 i + 400)`` and its centre is at
``0.010 i + 0.0125`` s. A frame's label is the phone whose segment ``[start, end)`` holds
that centre, so labels for another framing can always be recomputed from the exact
segment times kept in the ``phone_ctm``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import NamedTuple

import numpy as np

from paravg.corpus.phones import PHONE_IDS, SILENCE

SAMPLE_RATE = 16000
FRAME_LENGTH = 400  # samples (25 ms)
FRAME_SHIFT = 160  # samples (10 ms)


class Segment(NamedTuple):
    """One phone from ``start`` to ``end`` seconds."""

    phone: str
    start: float
    end: float


def num_frames(num_samples: int) -> int:
    """Kaldi's frame count with snip-edges: ``1 + (n - 400) // 160``, 0 if too short."""
    if num_samples < FRAME_LENGTH:
        return 0
    return 1 + (num_samples - FRAME_LENGTH) // FRAME_SHIFT


def frame_centres(count: int) -> np.ndarray:
    """Centre time (s) of each frame: ``0.010 i + 0.0125``."""
    return (np.arange(count) * FRAME_SHIFT + FRAME_LENGTH / 2) / SAMPLE_RATE


def frame_labels(segments: Sequence[Segment], num_samples: int) -> np.ndarray:
    """int32 phone id per frame: the segment holding each frame centre.

    ``segments`` must be contiguous and sorted; a centre beyond the last segment gets the
    last segment's label.
    """
    count = num_frames(num_samples)
    if not segments:
        raise ValueError("an utterance without phone segments has no labels")
    ends = np.array([s.end for s in segments])
    ids = np.array([PHONE_IDS[s.phone] for s in segments], dtype=np.int32)
    index = np.searchsorted(ends, frame_centres(count), side="right")
    return ids[np.minimum(index, len(ids) - 1)]


def tidy_segments(segments: Iterable[Segment], duration: float) -> list[Segment]:
    """Make segments contiguous over exactly ``[0, duration]``.

    Each segment starts where the previous one ended; segments of zero length, or
    starting at or after ``duration``, are dropped; adjacent silences merge; the last
    segment is stretched or cut to end at ``duration`` (TTS engines leave a few ms of
    audio after, or cut a few ms before, their last label). A gap at the start becomes
    silence.
    """
    segments = list(segments)
    out: list[Segment] = []
    position = 0.0
    if segments and segments[0].start > 0.0:
        segments.insert(0, Segment(SILENCE, 0.0, segments[0].start))
    for seg in segments:
        end = min(seg.end, duration)
        if end <= position:
            continue
        if out and out[-1].phone == SILENCE and seg.phone == SILENCE:
            out[-1] = Segment(SILENCE, out[-1].start, end)
        else:
            out.append(Segment(seg.phone, position, end))
        position = end
    if not out:
        return [Segment(SILENCE, 0.0, duration)]
    last = out[-1]
    out[-1] = Segment(last.phone, last.start, duration)
    return out


def scale_segments(segments: Sequence[Segment], factor: float) -> list[Segment]:
    """Segments with every time multiplied by ``factor``."""
    return [Segment(s.phone, s.start * factor, s.end * factor) for s in segments]


def ctm_lines(utt: str, segments: Sequence[Segment]) -> list[str]:
    """Kaldi phone CTM lines ``<utt> 1 <start> <duration> <phone>`` (times to 1 us)."""
    return [f"{utt} 1 {s.start:.6f} {s.end - s.start:.6f} {s.phone}" for s in segments]
