"""A tiny demo corpus end to end (paravg.corpus.build): two builds, every contract."""

import json
import os
import shutil
from collections import Counter
from pathlib import Path

import kaldiio
import numpy as np
import pytest
import soundfile

from paravg.corpus import build_demo_corpus
from paravg.corpus.engines import ALL_VOICES
from paravg.corpus.espeak import espeak_available
from paravg.corpus.labels import Segment, frame_labels, num_frames
from paravg.corpus.phones import PHONE_IDS, phones_txt

pytestmark = pytest.mark.skipif(
    shutil.which("flite") is None or shutil.which("festival") is None,
    reason="flite and festival are needed for the demo corpus",
)
SETS = ("train", "test")
OUT = "results/demo"  # relative to the working directory, as in the workflow
SOURCE = {v.name: v.source for v in ALL_VOICES}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """(base dir, summary): built twice into base/results/demo; the first copy is moved
    to base/first/demo. The builds differ in the number of worker processes."""
    base = tmp_path_factory.mktemp("demo")
    cwd = os.getcwd()
    os.chdir(base)
    try:
        build_demo_corpus(OUT, minutes=0.5, seed=3, num_workers=2)
        (base / "first").mkdir()
        os.rename(base / OUT, base / "first" / "demo")
        summary = build_demo_corpus(OUT, minutes=0.5, seed=3, num_workers=1)
    finally:
        os.chdir(cwd)
    return base, summary


def _table(path):
    return [line.split(maxsplit=1) for line in Path(path).read_text().splitlines()]


def test_two_builds_are_byte_identical(corpus):
    base, _ = corpus
    first, second = base / "first" / "demo", base / OUT
    files = sorted(p.relative_to(second) for p in second.rglob("*") if p.is_file())
    assert sorted(p.relative_to(first) for p in first.rglob("*") if p.is_file()) == files
    assert len(files) >= 60 + 17  # a wav per utterance and the data dir files
    for rel in files:
        if rel.name == "done":
            a, b = json.loads((first / rel).read_text()), json.loads((second / rel).read_text())
            a.pop("build_seconds"), b.pop("build_seconds")
            assert a == b
        else:
            assert (first / rel).read_bytes() == (second / rel).read_bytes(), rel


def test_done_summary_and_speaker_count(corpus):
    base, summary = corpus
    done = json.loads((base / OUT / "done").read_text())
    assert done == summary
    expected = 60 if espeak_available() else 40
    assert done["speakers"]["train"] + done["speakers"]["test"] >= expected
    for s in SETS:
        utt2spk = _table(base / OUT / s / "utt2spk")
        assert done["utterances"][s] == len(utt2spk)
        assert done["speakers"][s] == len({spk for _, spk in utt2spk})
    assert 0.5 <= sum(done["minutes"].values()) < 10


def test_split_by_voice_and_sentence(corpus):
    base, _ = corpus
    spk = {s: {spk for _, spk in _table(base / OUT / s / "utt2spk")} for s in SETS}
    sources = {s: {SOURCE[x.rsplit("-", 1)[0]] for x in spk[s]} for s in SETS}
    assert sources["train"] and sources["test"] and not sources["train"] & sources["test"]
    text = {s: {t for _, t in _table(base / OUT / s / "text")} for s in SETS}
    assert not text["train"] & text["test"]
    assert all(t == t.upper() and t.replace(" ", "").isalpha() for t in text["train"])


@pytest.mark.parametrize("subset", SETS)
def test_files_sorted_and_consistent(corpus, subset):
    base, _ = corpus
    d = base / OUT / subset
    keys = {}
    for name in ("wav.scp", "utt2spk", "text", "targets.scp"):
        keys[name] = [k for k, _ in _table(d / name)]
        assert keys[name] == sorted(keys[name]), name
        assert len(set(keys[name])) == len(keys[name]), name
    assert keys["wav.scp"] == keys["utt2spk"] == keys["text"] == keys["targets.scp"]
    utt2spk = _table(d / "utt2spk")
    speakers = [spk for _, spk in utt2spk]
    assert speakers == sorted(speakers)  # utt ids are prefixed by speaker ids
    assert all(utt.startswith(spk + "-") for utt, spk in utt2spk)
    spk2utt = {spk: utts.split() for spk, utts in _table(d / "spk2utt")}
    assert list(spk2utt) == sorted(spk2utt)
    assert sorted(u for us in spk2utt.values() for u in us) == keys["utt2spk"]
    ctm_utts = [line.split()[0] for line in (d / "phone_ctm").read_text().splitlines()]
    assert ctm_utts == sorted(ctm_utts)
    assert (d / "phones.txt").read_text() == phones_txt()
    assert (base / OUT / "phones.txt").read_text() == phones_txt()


@pytest.mark.parametrize("subset", SETS)
def test_targets_match_wavs_and_ctm(corpus, subset, monkeypatch):
    base, _ = corpus
    monkeypatch.chdir(base)  # wav.scp and targets.scp paths are relative to it
    d = Path(OUT) / subset
    targets = kaldiio.load_scp(str(d / "targets.scp"))
    wavs = kaldiio.load_scp(str(d / "wav.scp"))  # Kaldi-style reader: (rate, samples)
    ctm: dict[str, list[Segment]] = {}
    for line in (d / "phone_ctm").read_text().splitlines():
        utt, _, start, dur, phone = line.split()
        ctm.setdefault(utt, []).append(Segment(phone, float(start), float(start) + float(dur)))
    paths = dict(_table(d / "wav.scp"))
    assert all(p.startswith(f"{OUT}/wav/") for p in paths.values())
    assert set(targets) == set(wavs) == set(ctm) == set(paths)
    for utt in targets:
        rate, samples = wavs[utt]
        assert rate == 16000 and samples.dtype == np.int16 and samples.ndim == 1
        info = soundfile.info(paths[utt])
        assert (info.samplerate, info.channels, info.subtype) == (16000, 1, "PCM_16")
        labels = targets[utt]
        assert labels.dtype == np.int32
        assert len(labels) == num_frames(len(samples)) > 0
        segs = ctm[utt]
        assert segs[0].start == 0.0 and segs[-1].end == pytest.approx(
            len(samples) / 16000, abs=2e-6
        )
        # labels recomputed from the exact ctm times agree (ctm rounds to 1 us)
        assert np.mean(frame_labels(segs, len(samples)) == labels) > 0.99
        assert 0 < np.abs(samples).max() < 32767  # level -9..-2 dBFS, never clipped
        assert np.count_nonzero(samples == 0) < 0.05 * len(samples)  # noise, no digital zero


def test_targets_ark_reads_in_order_as_int32(corpus):
    base, _ = corpus
    ark = base / OUT / "train" / "targets.ark"
    keys, counts = [], Counter()
    for key, labels in kaldiio.load_ark(str(ark)):
        assert labels.dtype == np.int32 and labels.min() >= 0 and labels.max() < 40
        keys.append(key)
        counts.update(labels.tolist())
    assert keys == sorted(keys)
    assert len(counts) >= 36  # (nearly) every phone label appears even in 30 s of speech
    assert counts[PHONE_IDS["sil"]] < 0.5 * sum(counts.values())
