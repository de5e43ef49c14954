"""Kaldi framing and frame labels (paravg.corpus.labels)."""

import numpy as np
import pytest

from paravg.corpus.labels import (
    Segment,
    ctm_lines,
    frame_centres,
    frame_labels,
    num_frames,
    tidy_segments,
)
from paravg.corpus.phones import PHONE_IDS


@pytest.mark.parametrize(
    ("samples", "frames"),
    [(0, 0), (399, 0), (400, 1), (559, 1), (560, 2), (16000, 98), (48000, 298)],
)
def test_num_frames_is_kaldi_snip_edges(samples, frames):
    assert num_frames(samples) == frames
    if samples >= 400:
        assert num_frames(samples) == 1 + (samples - 400) // 160


def test_frame_centres():
    assert np.allclose(frame_centres(3), [0.0125, 0.0225, 0.0325])


def test_frame_gets_phone_covering_its_centre():
    segments = [
        Segment("sil", 0.0, 0.0225),  # holds centre 0 (0.0125) only: 0.0225 starts "aa"
        Segment("aa", 0.0225, 0.04),  # centres 0.0225, 0.0325
        Segment("b", 0.04, 0.0526),  # centre 0.0425, 0.0525
        Segment("sil", 0.0526, 0.08),
    ]
    labels = frame_labels(segments, 1200)  # 6 frames
    ids = [PHONE_IDS[p] for p in ("sil", "aa", "aa", "b", "b", "sil")]
    assert labels.dtype == np.int32
    assert labels.tolist() == ids


def test_tidy_segments_covers_duration_contiguously():
    raw = [Segment("aa", 0.1, 0.3), Segment("b", 0.3, 0.3), Segment("sil", 0.3, 0.5)]
    raw.append(Segment("sil", 0.5, 0.6))
    tidy = tidy_segments(raw, 0.7)
    assert tidy == [Segment("sil", 0.0, 0.1), Segment("aa", 0.1, 0.3), Segment("sil", 0.3, 0.7)]
    cut = tidy_segments(raw, 0.2)
    assert cut == [Segment("sil", 0.0, 0.1), Segment("aa", 0.1, 0.2)]


def test_ctm_lines():
    assert ctm_lines("u1", [Segment("aa", 0.5, 0.75)]) == ["u1 1 0.500000 0.250000 aa"]
