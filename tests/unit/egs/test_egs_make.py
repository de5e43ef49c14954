"""Building egs from an utterance: padding, labels and weights, the i-vector rule, lengths."""

import numpy as np
import pytest

from paravg.egs.archive import ArchiveMeta
from paravg.egs.chunking import UtteranceChunks
from paravg.egs.inputs import Utterance, check_ivector_rows, fit_targets
from paravg.egs.make import ivector_rows, padded_windows, utterance_egs
from paravg.errors import DataError

META = ArchiveMeta(
    num_egs=0,
    frames_per_eg=4,
    left_context=3,
    right_context=2,
    feat_dim=2,
    ivector_dim=2,
    feats_dtype="float32",
)


def utterance(T=6, ivec_rows=1):
    feats = np.stack([np.arange(T), 100 + np.arange(T)], axis=1).astype(np.float32)
    ivectors = np.stack([np.arange(ivec_rows), -np.arange(ivec_rows)], axis=1).astype(np.float32)
    labels = (np.arange(T) * 10).astype(np.int32)
    return Utterance("spk-u1", feats, labels, np.ones(T, bool), ivectors)


def test_padding_repeats_first_and_last_frame():
    feats = np.arange(6, dtype=np.float32)[:, None]
    win = padded_windows(feats, np.array([-3, 4]), 5)
    assert win[0, :, 0].tolist() == [0, 0, 0, 0, 1]
    assert win[1, :, 0].tolist() == [4, 5, 5, 5, 5]


def test_eg_window_labels_weights_and_key():
    utt = utterance(T=6)
    chunks = UtteranceChunks(
        6,
        np.array([0, 2]),
        np.array([[1, 1, 0.5, 0.5], [0.5, 0.5, 1, 1]], np.float32),
        np.array([0, 0]),
    )
    egs = utterance_egs(utt, chunks, META, ivector_period=10)
    assert egs.feats.shape == (2, 3 + 4 + 2, 2)
    assert egs.feats[0, :, 0].tolist() == [0, 0, 0, 0, 1, 2, 3, 4, 5]  # t = -3 .. 5
    assert egs.feats[1, :, 0].tolist() == [0, 0, 1, 2, 3, 4, 5, 5, 5]  # t = -1 .. 7
    assert egs.labels.tolist() == [[0, 10, 20, 30], [20, 30, 40, 50]]
    assert egs.weights.tolist() == [[1, 1, 0.5, 0.5], [0.5, 0.5, 1, 1]]
    assert egs.keys == ["spk-u1-0", "spk-u1-2"]


def test_ivector_row_rule_floor_divides_and_clamps():
    # r // period, clamped to [0, rows - 1]; r may be negative (start = first - lc < 0)
    r = np.array([-13, -1, 0, 9, 10, 25, 99, 1000])
    assert ivector_rows(r, 10, 5).tolist() == [0, 0, 0, 0, 1, 2, 4, 4]


def test_eg_ivector_is_the_row_of_the_drawn_frame():
    utt = utterance(T=6, ivec_rows=3)
    chunks = UtteranceChunks(
        6, np.array([0, 2, 2]), np.ones((3, 4), np.float32), np.array([-3, 5, 2000])
    )
    egs = utterance_egs(utt, chunks, META, ivector_period=2)
    assert egs.ivectors[:, 0].tolist() == [0, 2, 2]


def test_targets_within_tolerance_are_truncated_or_zero_weighted():
    labels, mask = fit_targets("u", np.arange(8), 6, tolerance=2)
    assert labels.tolist() == [0, 1, 2, 3, 4, 5] and mask.all()
    labels, mask = fit_targets("u", np.arange(4), 6, tolerance=2)
    assert labels.tolist() == [0, 1, 2, 3, 0, 0]
    assert mask.tolist() == [True] * 4 + [False] * 2


def test_missing_targets_give_zero_weight_in_the_eg():
    utt = utterance(T=6)
    labels, mask = fit_targets(utt.utt, utt.labels[:4], 6, tolerance=2)
    utt = Utterance(utt.utt, utt.feats, labels, mask, utt.ivectors)
    chunks = UtteranceChunks(6, np.array([2]), np.ones((1, 4), np.float32), np.array([0]))
    egs = utterance_egs(utt, chunks, META, ivector_period=10)
    assert egs.weights.tolist() == [[1, 1, 0, 0]]


def test_length_mismatch_beyond_tolerance_names_utterance_and_lengths():
    with pytest.raises(DataError, match=r"utterance spk-u7: 9 targets but 6 feature frames"):
        fit_targets("spk-u7", np.arange(9), 6, tolerance=2, where="targets.scp")


def test_ivector_rows_checked_with_tolerance_100_frames():
    check_ivector_rows("u", 10, 100, 10)
    check_ivector_rows("u", 20, 100, 10)  # 200 frames vs 100: exactly the tolerance
    with pytest.raises(DataError, match=r"utterance spk-u9: 21 i-vector rows .* 100 feature"):
        check_ivector_rows("spk-u9", 21, 100, 10)
    with pytest.raises(DataError, match="spk-u9"):
        check_ivector_rows("spk-u9", 0, 5, 10)
