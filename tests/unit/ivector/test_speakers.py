"""Speakers, pseudo-speakers (modify_speaker_info.sh) and job splits."""

import numpy as np
import pytest

from paravg.ivector.data import (
    DataError,
    FeatureSource,
    even_subset,
    pseudo_speakers,
    read_spk2utt,
    split_speakers,
)


def test_pseudo_speakers_group_consecutive_utterances():
    spk2utt = {"a": ["a1", "a2", "a3"], "b": ["b1"], "c": ["c1", "c2", "c3", "c4"]}
    out = pseudo_speakers(spk2utt, 2)
    assert out == {
        "a-1": ["a1", "a2"],
        "a-2": ["a3"],
        "b-1": ["b1"],
        "c-1": ["c1", "c2"],
        "c-2": ["c3", "c4"],
    }
    assert pseudo_speakers(spk2utt, 10) == {f"{k}-1": v for k, v in spk2utt.items()}


def test_split_speakers_is_contiguous_balanced_and_complete():
    spk2utt = {f"s{k}": [f"u{k}.{i}" for i in range(1 + k % 3)] for k in range(11)}
    jobs = split_speakers(spk2utt, 3)
    assert [s for job in jobs for s in job] == list(spk2utt)
    sizes = [sum(len(spk2utt[s]) for s in job) for job in jobs]
    assert max(sizes) - min(sizes) <= 3
    few = split_speakers({"x": ["1"], "y": ["2"]}, 4)
    assert sum(len(j) for j in few) == 2 and len(few) == 4


def test_even_subset():
    items = [str(i) for i in range(10)]
    assert even_subset(items, 5) == ["1", "3", "5", "7", "9"]
    assert even_subset(items, 20) == items


def test_read_spk2utt_errors(tmp_path):
    p = tmp_path / "spk2utt"
    p.write_text("a u1 u2\nb\n")
    with pytest.raises(DataError, match="spk2utt:2"):
        read_spk2utt(p)
    p.write_text("a u1\na u2\n")
    with pytest.raises(DataError, match="appears twice"):
        read_spk2utt(p)


def test_feature_source_names_file_and_utterance(tmp_path):
    import kaldiio

    with kaldiio.WriteHelper(f"ark,scp:{tmp_path}/f.ark,{tmp_path}/f.scp") as w:
        w("u1", np.zeros((3, 2), np.float32))
    src = FeatureSource(tmp_path / "f.scp")
    assert src["u1"].shape == (3, 2)
    with pytest.raises(DataError, match=r"f\.scp: no features for utterance 'u2'"):
        src["u2"]
