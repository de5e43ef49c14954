"""Word times and confidences of a best path: a CTM as ``steps/get_ctm.sh`` writes it.

Kaldi: ``lattice-1best | lattice-align-words <lang>/phones/word_boundary.int <model> |
nbest-to-ctm --frame-shift`` (steps/get_ctm.sh), or with confidences
``lattice-to-ctm-conf`` (steps/conf/get_ctm_conf.sh). Here, on the best path's links:

1. **Phones.** Each frame carries one transition-id. In a graph with Kaldi's default
   self-loop reordering (``mkgraph.sh``; paravg's graphs) a state's forward transition
   comes before its self-loops, so a phone instance starts on the frame whose transition
   leaves the phone's first HMM state (Kaldi's ``SplitToPhones`` on a reordered
   alignment), and repeated phones are told apart.
2. **Words** (``lattice-align-words``): a word spans the phones from a ``begin`` phone to
   the next ``end`` phone, or one ``singleton`` phone (``phones/word_boundary.int``);
   ``nonword`` phones (silence) belong to no word. The path's words are given these spans
   in order. A graph whose phones carry no word positions (or a path whose counts
   differ) falls back to the frames at which each word label was emitted: a word runs
   from its label to the next word's.
3. **Confidence**: the posterior of the word at its place, the sum of the lattice
   posteriors (:meth:`paravg.decode.lattice.Lattice.link_posteriors`, at the scoring
   setting) of the links that emit the same word at a frame within its span, at most 1.
   Kaldi's ``lattice-to-ctm-conf`` takes the posterior of the word in a confusion
   network (MBR): the two agree where competing paths place the word inside the same
   span, and this one is lower where they shift it outside.

A line: ``<utt> 1 <start> <duration> <word> <confidence>``, seconds with two decimals
(``nbest-to-ctm``'s format; three when the frame shift is below 10 ms). With ``segments``,
:func:`recording_ctm_lines` makes the times the recording's, as ``utils/convert_ctm.pl``:
``<file> <channel> <segment start + start> ...``, file and channel from
``reco2file_and_channel`` (without it: the recording id and channel 1).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from paravg.decode.lattice import Lattice

BOUNDARY_CLASSES = ("nonword", "begin", "end", "internal", "singleton")


@dataclass(frozen=True)
class WordSpan:
    word: int
    start: int  # first frame
    end: int  # one past the last frame
    confidence: float


def read_word_boundary(path: str | Path) -> dict[int, str]:
    """``phones/word_boundary.int``: phone id -> begin | end | internal | singleton |
    nonword (Kaldi's ``utils/prepare_lang.sh``)."""
    out = {}
    for line in Path(path).read_text().splitlines():
        if line.strip():
            phone, cls = line.split()
            out[int(phone)] = cls
    return out


def path_frames(lattice: Lattice, path: np.ndarray) -> tuple[np.ndarray, list[tuple[int, int]]]:
    """The transition-id of every frame of a path, and each (word, frame of its label)."""
    tids, words = [], []
    for link in path.tolist():
        if lattice.word[link] > 0:
            words.append((int(lattice.word[link]), len(tids)))
        if lattice.tid[link] > 0:
            tids.append(int(lattice.tid[link]))
    return np.array(tids, dtype=np.int64), words


def phone_spans(tids: np.ndarray, tid_to_phone, tid_starts_phone) -> list[tuple[int, int, int]]:
    """(phone, first frame, one past the last frame) of each phone instance."""
    tids = tids.tolist()
    starts = [
        f
        for f, tid in enumerate(tids)
        if f == 0 or tid_starts_phone[tid] or tid_to_phone[tid] != tid_to_phone[tids[f - 1]]
    ]
    ends = [*starts[1:], len(tids)]
    return [(int(tid_to_phone[tids[a]]), a, b) for a, b in zip(starts, ends, strict=True)]


def word_spans_from_phones(
    spans: list[tuple[int, int, int]], boundary: Mapping[int, str]
) -> list[tuple[int, int]] | None:
    """Frame spans of the words the phones spell (None when a phone has no class or the
    classes do not nest)."""
    words, open_at = [], None
    for phone, start, end in spans:
        cls = boundary.get(phone)
        if cls is None:
            return None
        if cls == "singleton" and open_at is None:
            words.append((start, end))
        elif cls == "begin" and open_at is None:
            open_at = start
        elif cls == "end" and open_at is not None:
            words.append((open_at, end))
            open_at = None
        elif (cls == "internal") != (open_at is None):  # inside a word, or silence outside
            continue
        else:
            return None
    return words if open_at is None else None


def align_words(
    lattice: Lattice,
    path: np.ndarray,
    tid_to_phone: np.ndarray,
    tid_starts_phone: np.ndarray,
    boundary: Mapping[int, str] | None,
    posteriors: np.ndarray | None = None,
) -> list[WordSpan]:
    """The words of a best path with their frame spans and confidences."""
    tids, words = path_frames(lattice, path)
    spans = None
    if boundary is not None and len(tids):
        spans = word_spans_from_phones(phone_spans(tids, tid_to_phone, tid_starts_phone), boundary)
    if spans is None or len(spans) != len(words):
        starts = [f for _, f in words]
        spans = list(zip(starts, [*starts[1:], len(tids)], strict=True))
    out = []
    for (word, _), (start, end) in zip(words, spans, strict=True):
        conf = 1.0
        if posteriors is not None:
            at = lattice.frame[lattice.src]
            same = (lattice.word == word) & (at >= start) & (at < max(end, start + 1))
            conf = float(min(1.0, posteriors[same].sum()))
        out.append(WordSpan(word, start, end, conf))
    return out


def ctm_lines(
    utt: str, spans: list[WordSpan], words: Mapping[int, str], frame_shift: float = 0.01
) -> list[str]:
    """``<utt> 1 <start> <duration> <word> <confidence>`` per word (nbest-to-ctm)."""
    digits = 3 if frame_shift < 0.01 else 2
    return [
        f"{utt} 1 {s.start * frame_shift:.{digits}f} {(s.end - s.start) * frame_shift:.{digits}f}"
        f" {words[s.word]} {s.confidence:.2f}"
        for s in spans
    ]


def recording_ctm_lines(
    lines: list[str],
    segments: str | Path,
    reco2file_and_channel: str | Path | None = None,
    frame_shift: float = 0.01,
) -> list[str]:
    """``utils/convert_ctm.pl``: utterance-relative CTM lines to the recording's time
    (``segments``: ``<utt> <recording> <start> <end>``; ``reco2file_and_channel``:
    ``<recording> <file> <channel>``), sorted by file, channel and start."""
    starts = {}
    for line in Path(segments).read_text().splitlines():
        if line.strip():
            utt, reco, start, _end = line.split()
            starts[utt] = (reco, float(start))
    files = {}
    if reco2file_and_channel is not None and Path(reco2file_and_channel).is_file():
        for line in Path(reco2file_and_channel).read_text().splitlines():
            if line.strip():
                reco, file, channel = line.split()
                files[reco] = (file, channel)
    digits = 3 if frame_shift < 0.01 else 2
    out = []
    for line in lines:
        utt, _channel, start, rest = line.split(maxsplit=3)
        reco, offset = starts[utt]
        file, channel = files.get(reco, (reco, "1"))
        out.append((file, channel, offset + float(start), rest))
    out.sort(key=lambda x: (x[0], x[1], x[2]))
    return [f"{f} {c} {t:.{digits}f} {rest}" for f, c, t, rest in out]
