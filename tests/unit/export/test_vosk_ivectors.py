"""When and from which frames vosk computes its i-vectors, and which frames use which.

The numbers were read from vosk 0.3.45 itself (``vosk.SetLogLevel(5)`` on a 37,871-sample
test utterance of the tiny pipeline, network context 3 + 3, i-vector splicing ±3): its
``OnlineIvectorFeature`` logs "using iVector from frame L" at every chunk, and its looped
computation printout shows the i-vector indexes each chunk supplies.
"""

from __future__ import annotations

import numpy as np
import pytest

from paravg.export.verify import (
    VOSK_FRAMES_PER_CHUNK,
    vosk_chunk_events,
    vosk_online_ivectors,
)
from paravg.features import MfccOptions, num_frames
from paravg.ivector.online import OnlineIvectorOptions

from .export_models import random_model


def test_chunk_events_are_vosks():
    events = vosk_chunk_events(37871, MfccOptions(), right_context=3, splice_right=3)
    assert len(events) == -(-235 // VOSK_FRAMES_PER_CHUNK) == 10
    # what vosk logged: the i-vector frames at each chunk it computed
    assert [ready for _event, ready in events] == [25, 55, 75, 105, 125, 145, 175, 195, 225, 235]
    # piece k (0.1 s each) is the first after which chunk c's inputs are there
    assert [event for event, _ready in events] == [2, 5, 7, 10, 12, 14, 17, 19, 22, 24]


def test_chunks_left_for_the_end_of_input_use_every_frame():
    n = 400 + 30 * 160  # 31 frames: chunk 0 needs 24 + 3, chunk 1 only comes at the end
    events = vosk_chunk_events(n, MfccOptions(), right_context=3, splice_right=3)
    pieces = -(-n // 1600)
    assert events == [(2, 25), (pieces, num_frames(n, MfccOptions()))]


def test_snip_edges_false_is_refused():
    with pytest.raises(ValueError, match="snip_edges"):
        vosk_chunk_events(16000, MfccOptions(snip_edges=False), 3, 3)


class _Stub:
    """The few parts of the i-vector system ``vosk_online_ivectors`` reads, chosen so that
    the estimate after L frames is readable: every frame adds the same statistics."""

    def __init__(self, dim: int):
        self.context = 3
        self.num_gauss = 1
        self.prior_offset = 2.0
        S = dim
        self.M = np.zeros((1, 1, S))
        self.M[0, 0, :] = 1.0
        self.Sigma_inv_M = self.M.copy()
        self.U = np.eye(S)[None] * 0.5

    # pipeline
    def posterior_stream(self, feats, _stats):
        return feats

    def stats_stream(self, feats):
        return np.ones((feats.shape[0], 1))

    # ubm: one Gaussian, posterior 1 (the options' posterior scale applies)
    def log_likelihoods(self, feats):
        return np.zeros((feats.shape[0], 1))


def test_each_frame_uses_the_ivector_of_the_chunk_that_supplied_its_index():
    model = random_model(ivector_dim=4)
    stub = _Stub(4)
    n = 37871
    T = num_frames(n, MfccOptions())
    feats = np.zeros((T, 40))
    rows = vosk_online_ivectors(
        model, feats, n, MfccOptions(), stub, stub, stub, OnlineIvectorOptions()
    )
    assert rows.shape == (T + model.left_context + model.right_context, 4)
    left = model.left_context
    # frames 0 .. 47 (index 0 and 24, supplied by chunk 0: weighted 1e-3, near the prior)
    chunk0 = rows[left : left + 48]
    assert np.all(chunk0 == chunk0[0]) and np.abs(chunk0[0]).max() < 0.01
    # frames 48 .. 71 read index 48, supplied by chunk 1 (55 frames of statistics)
    assert np.all(rows[left + 48 : left + 72] == rows[left + 48])
    assert np.abs(rows[left + 48]).max() > 0.1
    assert not np.array_equal(rows[left + 72], rows[left + 48])  # chunk 2: 75 frames
    # the padding before and after the utterance: as its first and last frames
    assert np.array_equal(rows[0], chunk0[0])
    assert np.array_equal(rows[-1], rows[left + T - 1])
