"""Which utterances a decode split job decodes, and the memory it needs for them.

A split (job j of ``decode.nj``) is a contiguous block of the sorted utterances, as Kaldi's
``split_data.sh``. Its memory is set by its **longest utterance**: the search holds that
utterance's lattice as it survives the pruning (:mod:`paravg.decode.search`, every 25
frames), and the lattice it returns is sorted and written while those links are still
there. Both grow with the utterance's frames, at a rate set by the lattice's links per
frame (the model, the graph and ``decode.lattice_beam``), so the job asks for::

    mem_mb = BASE_MB + decode.mem_mb_per_minute · (longest utterance in minutes)

Measured (``benchmarks/bench_decode.py --memory``, a test utterance of the tiny config's
trained model tiled, both graphs, peak RSS at the job's end; docs/decoding.md): about
330 MB at no frames (Python, torch, the model, both graphs as arrays), then about
220 MB a minute at lattice beam 2 (50 links a frame) and 3,600 MB a minute at lattice beam
8, where that untrained model's flat posteriors leave 1,900 links a frame (the demo's
trained model: about 230) — about 300 bytes a link. ``decode.mem_mb_per_minute``
(default 1,000) covers the demo and the tiny config with a margin; a model whose lattices
are denser needs it raised. An utterance whose estimate exceeds ``decode.max_mem_mb`` is
refused before the split's search starts (:func:`check_split_fits`), naming it and its
line in the user's files; Kaldi recipes segment such recordings into utterances of
seconds (``segments``), which is what the message asks; data preparation warns about
utterances of more than 3 minutes already (``paravg.prepare_data.LONG_UTTERANCE_S``).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from paravg.errors import DataError

BASE_MB = 500  # the process at no frames (measured ~330 MB) with a margin
FRAMES_PER_MINUTE = 6000  # 10-ms feature frames


def split_utterances(utts: Sequence[str], nj: int, job: int) -> list[str]:
    """Job ``job`` (0-based) of ``nj``: contiguous blocks of the sorted utterances, as
    Kaldi's ``split_data.sh`` (sizes differ by at most one)."""
    utts = sorted(utts)
    bounds = np.linspace(0, len(utts), nj + 1).round().astype(int)
    return utts[bounds[job] : bounds[job + 1]]


def read_num_frames(utt2num_frames: str | Path) -> dict[str, int]:
    """``utt2num_frames`` (``utt frames`` per line, what the feature stage writes)."""
    out = {}
    for line in Path(utt2num_frames).read_text().splitlines():
        if line.strip():
            utt, frames = line.split()
            out[utt] = int(frames)
    return out


def utterance_mem_mb(frames: int, mb_per_minute: float) -> int:
    """The memory (MB) a decode job needs for an utterance of ``frames`` 10-ms frames."""
    return int(np.ceil(BASE_MB + mb_per_minute * frames / FRAMES_PER_MINUTE))


def split_mem_mb(num_frames: dict[str, int], nj: int, job: int, mb_per_minute: float) -> int:
    """``mem_mb`` of split ``job`` of ``nj``: its longest utterance's
    :func:`utterance_mem_mb` (an empty split: the base)."""
    longest = max((num_frames[u] for u in split_utterances(list(num_frames), nj, job)), default=0)
    return utterance_mem_mb(longest, mb_per_minute)


def check_split_fits(
    num_frames: dict[str, int],
    nj: int,
    job: int,
    mb_per_minute: float,
    max_mem_mb: int,
    where=lambda utt: f"utterance {utt!r}",
) -> None:
    """Refuse the split, before its search, when its longest utterance needs more than
    ``max_mem_mb``: a :class:`DataError` naming the utterance (``where(utt)``: its line in
    the user's files), its length, the estimate and the options to change."""
    utts = split_utterances(list(num_frames), nj, job)
    if not utts:
        return
    utt = max(utts, key=lambda u: num_frames[u])
    need = utterance_mem_mb(num_frames[utt], mb_per_minute)
    if need > max_mem_mb:
        minutes = num_frames[utt] / FRAMES_PER_MINUTE
        raise DataError(
            f"{where(utt)}: {minutes:.1f} minutes, too long to decode in "
            f"decode.max_mem_mb = {max_mem_mb} MB (it needs about {need} MB at "
            f"decode.mem_mb_per_minute = {mb_per_minute:g}): segment the recording into "
            "utterances of under a minute (a segments file, as Kaldi recipes do), or raise "
            "decode.max_mem_mb"
        )
