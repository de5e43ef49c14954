"""Speakers, pseudo-speakers (modify_speaker_info.sh) and job splits."""

import numpy as np
import pytest

from paravg.ivector.data import (
    DataError,
    FeatureSource,
    SequentialFeatureSource,
    even_subset,
    job_features,
    pseudo_speakers,
    read_job_spk2utt,
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


def test_a_job_reads_its_own_spk2utt_lines_as_the_split_gives_them(tmp_path):
    """read_job_spk2utt (two passes, the job's lines held) gives each job the speakers
    split_speakers gives it from the whole table, with the same checks."""
    spk2utt = {f"s{k:02d}": [f"s{k:02d}-u{i}" for i in range(1 + k % 4)] for k in range(13)}
    p = tmp_path / "spk2utt"
    p.write_text("".join(f"{s} {' '.join(us)}\n" for s, us in spk2utt.items()))
    for nj in (1, 2, 3, 5, 20):
        blocks = split_speakers(spk2utt, nj)
        for job in range(nj):
            assert read_job_spk2utt(p, job, nj) == {s: spk2utt[s] for s in blocks[job]}
    p.write_text("a u1\na u2\n")
    with pytest.raises(DataError, match="spk2utt:2: speaker 'a' appears twice"):
        read_job_spk2utt(p, 0, 2)
    with pytest.raises(ValueError, match=r"job 2 is outside 0\.\.1"):
        read_job_spk2utt(p, 2, 2)


def test_job_features_read_in_step_when_in_order_else_by_index(tmp_path, caplog):
    """A job whose utterances come in feats.scp's order reads the file in step
    (SequentialFeatureSource: nothing held per utterance); out of order (a speaker whose
    ids do not sort with the others) it keeps the indexed reader; both give the same
    matrices, and utterances without features are dropped with a warning."""
    import kaldiio

    rng = np.random.default_rng(0)
    mats = {
        f"{s}-{i}": rng.normal(size=(3 + i, 2)).astype(np.float32) for s in "ab" for i in range(3)
    }
    with kaldiio.WriteHelper(f"ark,scp:{tmp_path}/f.ark,{tmp_path}/f.scp") as w:
        for k in sorted(mats):
            w(k, mats[k])
    in_order = {"a": ["a-0", "a-1", "a-2", "a-9"], "b": ["b-0", "b-1", "b-2"]}
    source, speakers = job_features(tmp_path / "f.scp", in_order, 0, "spk2utt")
    assert isinstance(source, SequentialFeatureSource)
    assert speakers == {"a": ["a-0", "a-1", "a-2"], "b": ["b-0", "b-1", "b-2"]}
    assert "1 utterances of job 0 have no features" in caplog.text
    for utts in speakers.values():
        for u in utts:
            np.testing.assert_array_equal(source[u], mats[u])
    with pytest.raises(DataError, match=r"f\.scp: no features for utterance 'c-0'"):
        source["c-0"]
    out_of_order = {"b": ["b-0", "b-1"], "a": ["a-2", "a-0"]}
    source, speakers = job_features(tmp_path / "f.scp", out_of_order, 0, "spk2utt")
    assert isinstance(source, FeatureSource)
    assert speakers == out_of_order
    for utts in speakers.values():
        for u in utts:
            np.testing.assert_array_equal(source[u], mats[u])
