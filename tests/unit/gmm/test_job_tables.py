"""A GMM job's tables streamed one utterance at a time (paravg.gmm.job_tables), the job split
read as the tables come (paravg.gmm.data.job_rows), and the streamed stages giving the
bytes the in-memory library functions give."""

from __future__ import annotations

import numpy as np
import pytest
import soundfile

from paravg.data import scan_data_dir
from paravg.errors import DataError
from paravg.gmm import stages
from paravg.gmm.align import AlignOptions, compile_graphs, graph_compiler, read_transcripts
from paravg.gmm.alignment import read_alignments, write_alignments
from paravg.gmm.data import gmm_mfcc, job_rows, read_feats, read_utt2spk, split_jobs
from paravg.gmm.deltas import gmm_features
from paravg.gmm.job_tables import (
    AlignmentWriter,
    iter_alignments,
    iter_transcripts,
    join_sorted,
)
from paravg.gmm.model import GmmModel
from paravg.gmm.train_mono import align_job, silence_phones
from paravg.kaldi_io import write_ark_scp
from tests.unit.gmm.test_stages import trained  # noqa: F401 (the module's fixture)


def test_join_sorted_keeps_the_keys_of_every_stream_with_their_values():
    a = [("a", 1), ("b", 2), ("d", 4), ("e", 5)]
    b = [("b", "x"), ("c", "y"), ("d", "z")]
    c = [("B", 0), ("b", True), ("d", False)]  # "B" < "b" in LC_ALL=C order
    assert list(join_sorted(("a", a), ("b", b), ("c", c))) == [
        ("b", 2, "x", True),
        ("d", 4, "z", False),
    ]
    assert list(join_sorted(("a", a))) == a


@pytest.mark.parametrize("keys", [["b", "a"], ["a", "a"]])
def test_join_sorted_names_the_stream_out_of_order(keys):
    with pytest.raises(DataError, match=r"feats\.scp: not sorted: 'a' after '(a|b)'"):
        list(join_sorted(("feats.scp", [(k, 0) for k in keys]), ("text", [("a", 1), ("b", 2)])))


def test_alignment_writer_writes_what_write_alignments_writes_and_nothing_on_failure(tmp_path):
    alis = {"u1": np.array([1, 2, 3]), "u2": np.array([4], np.int64)}
    for name in ("ali.ark", "ali.txt"):
        write_alignments(tmp_path / f"ref.{name}", alis)
        with AlignmentWriter(tmp_path / name) as writer:
            for utt, ali in alis.items():
                writer.write(utt, ali)
        assert (tmp_path / name).read_bytes() == (tmp_path / f"ref.{name}").read_bytes()
        assert writer.count == 2
    assert {u: a.tolist() for u, a in iter_alignments(tmp_path / "ali.ark")} == {
        u: a.tolist() for u, a in alis.items()
    }
    before = (tmp_path / "ali.ark").read_bytes()
    with pytest.raises(RuntimeError), AlignmentWriter(tmp_path / "ali.ark") as writer:
        writer.write("u1", np.array([9]))
        raise RuntimeError("the job fails half-way")
    assert (tmp_path / "ali.ark").read_bytes() == before  # the old output intact
    assert not (tmp_path / "ali.ark.tmp").exists()


def _lang(tmp_path, oov: bool):
    lang = tmp_path / ("lang_oov" if oov else "lang")
    lang.mkdir()
    (lang / "words.txt").write_text("<eps> 0\n<unk> 1\nx 2\ny 3\n")
    if oov:
        (lang / "oov.txt").write_text("<unk>\n")
    return lang


def test_transcripts_map_unknown_words_to_the_oov_word_or_name_the_line(tmp_path):
    text = tmp_path / "text"
    text.write_text("u1 x y\nu2\nu3 y zz x\n")
    assert list(iter_transcripts(_lang(tmp_path, True), text)) == [
        ("u1", [2, 3]),
        ("u2", []),
        ("u3", [3, 1, 2]),
    ]
    with pytest.raises(DataError, match=r"text, line 3: utterance u3: words \['zz'\]"):
        list(iter_transcripts(_lang(tmp_path, False), text))


def _data_dir(tmp_path, speakers: dict[str, list[str]], audio: bool = False):
    d = tmp_path / "data"
    (d / "wav").mkdir(parents=True)
    rng = np.random.default_rng(3)
    utt2spk = sorted((u, s) for s, us in speakers.items() for u in us)
    lines = []
    for i, (utt, _spk) in enumerate(utt2spk):
        wav = d / "wav" / f"{utt}.wav"
        if audio:  # 0.2-0.4 s of noise
            n = 3200 + 800 * (i % 3)
            soundfile.write(wav, rng.integers(-3000, 3000, n).astype(np.int16), 16000)
        lines.append(f"{utt} {wav}\n")
    (d / "wav.scp").write_text("".join(lines))
    (d / "utt2spk").write_text("".join(f"{u} {s}\n" for u, s in utt2spk))
    return d


@pytest.mark.parametrize("in_order", [True, False])
def test_a_jobs_rows_are_split_data_shs_part(tmp_path, in_order):
    if in_order:  # speaker ids prefix utterance ids (Kaldi's convention)
        speakers = {f"s{i}": [f"s{i}-{k}" for k in range(i % 3 + 1)] for i in range(7)}
    else:  # utterance order is not speaker order
        speakers = {f"s{i}": [f"u{k}-{i}" for k in range(i % 3 + 1)] for i in range(7)}
    d = _data_dir(tmp_path, speakers)
    scan = scan_data_dir(d)
    assert scan.speakers_in_order == in_order
    u2s = read_utt2spk(d / "utt2spk")
    for nj in (1, 3, 7, 9):
        parts = split_jobs(u2s, nj)
        for j in range(1, nj + 1):
            rows = list(job_rows(scan, nj, j))
            assert [r.utt for r in rows] == sorted(parts[j - 1])
            assert all(u2s[r.utt] == r.speaker for r in rows)


def test_streamed_job_features_are_the_in_memory_pipelines_bytes(tmp_path):
    speakers = {"s1": ["s1-a", "s1-b", "s1-c"], "s2": ["s2-a"], "s3": ["s3-a", "s3-b"]}
    d = _data_dir(tmp_path, speakers, audio=True)
    u2s = read_utt2spk(d / "utt2spk")
    for j in (1, 2):
        utts = split_jobs(u2s, 2)[j - 1]
        # the in-memory pipeline: every utterance's MFCCs, the speakers' CMVN, deltas
        ref = gmm_features(gmm_mfcc(d, utts=utts), u2s)
        write_ark_scp(sorted(ref.items()), tmp_path / f"ref.{j}.ark", tmp_path / f"ref.{j}.scp")
        n = stages.job_feats(d, 2, j, tmp_path / f"f.{j}.ark", tmp_path / f"f.{j}.scp")
        assert n == len(utts)
        assert (tmp_path / f"f.{j}.ark").read_bytes() == (tmp_path / f"ref.{j}.ark").read_bytes()
        assert sorted(p.name for p in tmp_path.glob(f"f.{j}.*")) == [f"f.{j}.ark", f"f.{j}.scp"]


def test_streamed_realignment_is_the_in_memory_aligners(trained, tmp_path):  # noqa: F811
    d = trained["dir"]
    lang, model_path, feats_scp = d / "lang", d / "tri.4.mdl", trained["feats"][0]
    info = stages.realign(lang, model_path, feats_scp, d / "text", tmp_path / "ali.ark",
                          boost_silence=1.25, beam=10.0)  # fmt: skip
    model, feats = GmmModel.load(model_path), read_feats(feats_scp)
    words = {u: w for u, w in read_transcripts(lang, d / "text").items() if u in feats}
    ref = align_job(model, compile_graphs(graph_compiler(model, lang), words), feats,
                    AlignOptions(beam=10.0), silence_phones(lang), 1.25)  # fmt: skip
    got = read_alignments(tmp_path / "ali.ark")
    assert list(got) == sorted(ref.alignments) and info["aligned"] == len(got) > 0
    for utt, ali in ref.alignments.items():
        np.testing.assert_array_equal(got[utt], ali)
    assert info["failed"] == ref.failed
    assert info["avg_like"] == pytest.approx(ref.tot_like / ref.frames, rel=1e-12)
