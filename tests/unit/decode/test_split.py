"""A decode split job's memory follows its longest utterance (issue 34, R4)."""

from __future__ import annotations

import pytest

from paravg.decode.split import (
    BASE_MB,
    check_split_fits,
    read_num_frames,
    split_mem_mb,
    split_utterances,
    utterance_mem_mb,
)
from paravg.errors import DataError

# sorted: a, b go to split 0 of 2, c, d to split 1
FRAMES = {"a": 600, "b": 60_000, "c": 3_000, "d": 1_200}


def test_mem_mb_is_the_base_plus_the_rate_times_the_longest_utterances_minutes():
    assert split_utterances(list(FRAMES), 2, 0) == ["a", "b"]
    assert split_mem_mb(FRAMES, 2, 0, 1000) == BASE_MB + 10_000  # b: 10 minutes
    assert split_mem_mb(FRAMES, 2, 1, 1000) == BASE_MB + 500  # c: half a minute
    assert split_mem_mb(FRAMES, 2, 1, 300) == BASE_MB + 150
    assert split_mem_mb(FRAMES, 1, 0, 1000) == BASE_MB + 10_000
    assert split_mem_mb({}, 1, 0, 1000) == BASE_MB
    assert utterance_mem_mb(1, 1000) == BASE_MB + 1  # rounded up


def test_a_split_whose_longest_utterance_needs_more_than_the_limit_is_refused_by_name():
    check_split_fits(FRAMES, 2, 1, 1000, max_mem_mb=BASE_MB + 500)  # fits exactly
    check_split_fits(FRAMES, 2, 0, 1000, max_mem_mb=BASE_MB + 10_000)
    with pytest.raises(DataError) as err:
        check_split_fits(
            FRAMES,
            2,
            0,
            1000,
            max_mem_mb=8000,
            where=lambda u: f"data/t/wav.scp:7: utterance {u!r}",
        )
    msg = str(err.value)
    assert msg.startswith("data/t/wav.scp:7: utterance 'b': 10.0 minutes, too long to decode")
    assert "decode.max_mem_mb = 8000 MB" in msg and f"about {BASE_MB + 10_000} MB" in msg
    assert "decode.mem_mb_per_minute = 1000" in msg and "segment" in msg


def test_utt2num_frames_is_read_as_the_feature_stage_writes_it(tmp_path):
    path = tmp_path / "utt2num_frames"
    path.write_text("".join(f"{u} {n}\n" for u, n in FRAMES.items()))
    assert read_num_frames(path) == FRAMES
