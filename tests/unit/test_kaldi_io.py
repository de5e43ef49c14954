"""Kaldi rxfilenames, tables and objects (paravg.kaldi_io): Kaldi's rules, never a command
or a pickle where Kaldi reads a file."""

from __future__ import annotations

import os
import pickle
import shutil
from pathlib import Path

import kaldiio
import numpy as np
import pytest
import soundfile

from paravg import kaldi_io
from paravg.errors import DataError
from paravg.kaldi_io import (
    Place,
    classify_rxfilename,
    iter_int_vectors,
    iter_scp,
    iter_table,
    load_scp,
    merge_scps,
    read_object,
    read_table,
    write_ark_scp,
)
from paravg.prepare_data import prepare_data_dir

from .audio_reading import read_utterance

RATE = 16000


# Kaldi's ClassifyRxfilename (src/util/kaldi-io.cc), case by case.
@pytest.mark.parametrize(
    "value, kind",
    [
        ("", "stdin"),
        ("-", "stdin"),
        ("| gzip -c > x.gz", "invalid"),  # an output pipe
        ("|", "invalid"),  # first character first
        ("gunzip -c a.gz |", "pipe"),
        ("sox a.flac -t wav - |", "pipe"),
        ("cmd |:0", "offset"),  # the file named "cmd |", byte 0
        ("a.ark:1234", "offset"),
        ("/x/y z.ark:12", "offset"),
        ("ark:a.ark", "invalid"),  # an rspecifier where a file was meant
        ("scp,p:a.scp", "invalid"),
        ("a.ark", "file"),
        ("a b.wav", "file"),  # whitespace inside a name is allowed
        ("12", "file"),  # digits without a colon: a file name
        (":12", "offset"),
        ("cat a | sox", "invalid"),  # pipe symbol in the wrong place
        ("a.wav ", "invalid"),  # trailing whitespace
    ],
)
def test_classify_rxfilename_follows_kaldi(value, kind):
    assert classify_rxfilename(value) == kind


def write_wav_ark(path: Path, samples: np.ndarray) -> int:
    """A wav-copy style ark at ``path`` holding one WAV; returns its byte offset."""
    kaldiio.save_ark(str(path), {"r1": (RATE, samples)}, scp=str(path) + ".scp")
    return int((Path(str(path) + ".scp")).read_text().rsplit(":", 1)[1])


def test_cmd_pipe_offset_is_a_file_and_never_runs(tmp_path, monkeypatch):
    """Weak spot 6: 'utt cmd |:0' is byte 0 of the file 'cmd |' (Kaldi), never a command
    (kaldiio's header check ran it)."""
    monkeypatch.chdir(tmp_path)
    marker = tmp_path / "ran"
    src = tmp_path / "src"
    src.mkdir()
    (src / "wav.scp").write_text("u1 touch ran |:0\n")  # run in tmp_path: creates 'ran'

    (src / "utt2spk").write_text("u1 s1\n")
    (src / "targets.txt").write_text("u1 " + " ".join(["0"] * 48) + "\n")
    with pytest.raises(DataError, match=r"wav\.scp:1: .*does not exist"):
        prepare_data_dir(src, tmp_path / "out", RATE, 0.0)
    assert not marker.exists()
    # ... and when a file of that name exists, its WAV is read from the given offset
    samples = (np.arange(8000) % 200 - 100).astype(np.int16)
    name = "touch ran |"
    offset = write_wav_ark(tmp_path / name, samples)
    got = read_utterance(f"{name}:{offset}", sample_rate=RATE)
    np.testing.assert_array_equal(got, samples.astype(np.float32))
    assert not marker.exists()


class _Payload:
    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def test_pickled_objects_are_refused_not_loaded(tmp_path):
    """kaldiio unpickles a 'PKL' object at an ark offset; a wav.scp or scp entry must
    never run a pickle payload."""
    marker = tmp_path / "ran"
    ark = tmp_path / "evil.ark"
    ark.write_bytes(b"r1 PKL" + pickle.dumps(_Payload(marker)))
    with pytest.raises(DataError, match="holds a pickled object, not a Kaldi object; refused"):
        read_object(ark, 3)
    with pytest.raises(DataError, match="pickled object"):
        read_utterance(f"{ark}:3", sample_rate=RATE, where="wav.scp:4")
    (tmp_path / "x.scp").write_text(f"r1 {ark}:3\n")
    with pytest.raises(DataError, match=r"x\.scp:1: utterance 'r1'.*pickled"):
        load_scp(tmp_path / "x.scp")["r1"]
    assert not marker.exists()


def test_scp_table_refuses_pipes_and_reads_what_kaldi_writes(tmp_path):
    rng = np.random.default_rng(0)
    mats = {f"u{i}": rng.standard_normal((5 + i, 3)).astype(np.float32) for i in range(3)}
    mats["v"] = np.arange(7, dtype=np.int32)
    write_ark_scp(mats.items(), tmp_path / "a.ark", tmp_path / "a.scp")
    table = load_scp(tmp_path / "a.scp")
    assert list(table) == list(mats)
    for key, value in mats.items():
        np.testing.assert_array_equal(table[key], value)
    marker = tmp_path / "ran"
    (tmp_path / "p.scp").write_text(f"u0 touch {marker} |\n")
    with pytest.raises(DataError, match=r"p\.scp:1: utterance 'u0'.*only wav\.scp"):
        load_scp(tmp_path / "p.scp")
    assert not marker.exists()


def test_an_scp_read_for_some_keys_holds_only_those_and_reads_them_alike(tmp_path):
    """A split job's ScpTable keeps only its utterances' lines (the corpus's scp streamed),
    and reads them as the whole table does."""
    rng = np.random.default_rng(2)
    mats = {f"u{i:02d}": rng.standard_normal((3 + i, 2)).astype(np.float32) for i in range(12)}
    write_ark_scp(mats.items(), tmp_path / "a.ark", tmp_path / "a.scp")
    mine = {"u03", "u07", "u11", "absent"}
    part, whole = load_scp(tmp_path / "a.scp", keys=mine), load_scp(tmp_path / "a.scp")
    assert list(part) == ["u03", "u07", "u11"] and len(whole) == 12
    for key in part:
        np.testing.assert_array_equal(part[key], whole[key])
        assert part.where(key) == whole.where(key)  # the same line numbers in errors
    assert "u04" not in part


def test_iter_scp_streams_the_wanted_objects_with_their_places(tmp_path):
    """The egs plan's pass over targets and i-vectors: the objects of the wanted keys in
    file order, each with the place an error names, as the whole table gives them; a
    pipe on any line is still refused."""
    rng = np.random.default_rng(3)
    mats = {f"u{i}": rng.standard_normal((2 + i, 2)).astype(np.float32) for i in range(5)}
    write_ark_scp(mats.items(), tmp_path / "a.ark", tmp_path / "a.scp")
    whole = load_scp(tmp_path / "a.scp")
    got = list(iter_scp(tmp_path / "a.scp", {"u1", "u4"}))
    assert [(k, w) for k, w, _ in got] == [(k, whole.where(k)) for k in ("u1", "u4")]
    for key, _, value in got:
        np.testing.assert_array_equal(value, mats[key])
    assert [k for k, _, _ in iter_scp(tmp_path / "a.scp")] == list(mats)
    (tmp_path / "p.scp").write_text((tmp_path / "a.scp").read_text() + "v touch x |\n")
    with pytest.raises(DataError, match=r"p\.scp:6: utterance 'v'.*only wav\.scp"):
        list(iter_scp(tmp_path / "p.scp", {"u0"}))


def test_iter_table_streams_what_read_table_reads_with_its_checks(tmp_path):
    """read_table is iter_table listed: the same lines, and every check named alike, also
    on lines a key filter skips (fields, order) or keeps (duplicates)."""
    t = tmp_path / "t"
    t.write_text("a 1\nb 2 x\nc 3")  # no final newline
    rows = read_table(t, min_fields=2)
    assert [(r.key, r.fields, r.lineno, r.rest) for r in rows] == [
        ("a", ("1",), 1, "1"),
        ("b", ("2", "x"), 2, "2 x"),
        ("c", ("3",), 3, "3"),
    ]
    assert [r.key for r in iter_table(t, keys={"c"})] == ["c"]
    for text, keys, error in [
        ("a 1\n\nb 2\n", {"b"}, r"t:2: empty line"),
        ("b 1\na 2\n", {"b"}, r"t:2: not sorted: key 'a' comes after 'b'"),
        ("a 1\nb\n", {"a"}, r"t:2: expected at least 2 fields"),
        ("a 1\nb 2\na 3\n", {"a"}, r"t:3: duplicate key 'a' \(first on line 1\)"),
    ]:
        t.write_text(text)
        with pytest.raises(DataError, match=error):
            list(iter_table(t, keys=keys))
        with pytest.raises(DataError, match=error):
            read_table(t)
    t.write_text("a 1\nb 2\nb 3\n")
    assert [r.key for r in iter_table(t, keys={"a"})] == ["a"]  # a skipped key's duplicate


@pytest.mark.parametrize("compression_method", [None, 1])  # 1: features.py's method
def test_load_scp_reads_what_kaldiio_reads(tmp_path, compression_method):
    """The decoder, scoring and the phone graph read features, i-vectors and targets with
    load_scp (never kaldiio's openers): the same arrays as kaldiio.load_scp, in file order."""
    rng = np.random.default_rng(1)
    items = {f"u{i}": rng.standard_normal((4 + i, 3)).astype(np.float32) for i in (2, 0, 1)}
    items["iv"] = rng.standard_normal((2, 5))  # float64: a DM matrix
    items["t"] = np.array([3, 0, 7], dtype=np.int32)  # an int32 vector (targets)
    write_ark_scp(items.items(), tmp_path / "a.ark", tmp_path / "a.scp", compression_method)
    ours, theirs = load_scp(tmp_path / "a.scp"), kaldiio.load_scp(str(tmp_path / "a.scp"))
    assert list(ours.keys()) == list(theirs.keys()) == list(items)
    for key in items:
        assert ours[key].dtype == theirs[key].dtype
        np.testing.assert_array_equal(ours[key], theirs[key])


def test_write_ark_scp_writes_the_bytes_of_kaldiios_writers(tmp_path, monkeypatch):
    """The demo's targets, the i-vectors and the synthetic corpus were written with kaldiio
    (save_ark, WriteHelper); through write_ark_scp(absolute=False) the ark and scp are the
    same bytes, the scp naming the ark as given (relative stays relative)."""
    monkeypatch.chdir(tmp_path)
    rng = np.random.default_rng(2)
    items = {
        "t": np.array([3, 0, 7], dtype=np.int32),
        "f": rng.standard_normal((4, 3)).astype(np.float32),
        "d": rng.standard_normal((2, 5)),
    }
    Path("old").mkdir()
    with kaldiio.WriteHelper("ark,scp:old/a.ark,old/a.scp") as writer:
        for key, value in items.items():
            writer(key, value)
    assert write_ark_scp(items.items(), Path("new/a.ark"), "new/a.scp", absolute=False) == 3
    assert Path("new/a.ark").read_bytes() == Path("old/a.ark").read_bytes()
    assert Path("new/a.scp").read_text() == Path("old/a.scp").read_text().replace("old/", "new/")
    write_ark_scp(items.items(), "abs/a.ark", "abs/a.scp")
    assert Path("abs/a.scp").read_text().startswith(f"t {tmp_path.resolve()}/abs/a.ark:")


def test_int_vectors_carry_their_place(tmp_path):
    vecs = {"a": np.array([1, 2, 3], np.int32), "b": np.array([4], np.int32)}
    kaldiio.save_ark(str(tmp_path / "t.ark"), vecs, scp=str(tmp_path / "t.scp"))
    (tmp_path / "t.txt").write_text("a 1 2 3\nb 4\n")
    for name, places in [
        ("t.scp", ["t.scp:1", "t.scp:2"]),
        ("t.txt", ["t.txt:1", "t.txt:2"]),
        ("t.ark", ["t.ark: byte 0", "t.ark: byte 24"]),
    ]:
        got = list(iter_int_vectors(tmp_path / name))
        assert [k for k, _, _ in got] == ["a", "b"]
        assert [str(p).replace(f"{tmp_path}/", "") for _, _, p in got] == places
        np.testing.assert_array_equal(got[0][1], vecs["a"])
    assert Place.from_token("f", Place("f", byte=21).token()) == Place("f", byte=21)


@pytest.mark.parametrize("name", ["t.txt", "t.ark", "t.scp"])
def test_a_byte_order_mark_is_named_not_read_as_part_of_a_key(tmp_path, name):
    """W3: a BOM (some editors write one) made the first key sort last ("not sorted", with
    a sort command that cannot fix it) or match no utterance; targets files (text ark, text
    form, scp) are named as tables are (tests/pipeline/test_documented_checks.py)."""
    ark = tmp_path / "a.ark"
    kaldiio.save_ark(str(ark), {"a": np.array([1], np.int32)})
    body = {"t.txt": "a 1 2\nb 3\n", "t.ark": "a 1 2\nb 3\n", "t.scp": f"a {ark}:2\n"}[name]
    (tmp_path / name).write_bytes(b"\xef\xbb\xbf" + body.encode())
    with pytest.raises(DataError, match=rf"{name}:1: starts with a UTF-8 byte-order mark"):
        list(iter_int_vectors(tmp_path / name))


def test_merge_scps_checks_keys(tmp_path):
    (tmp_path / "1.scp").write_text("a x:1\nc x:2\n")
    (tmp_path / "2.scp").write_text("b y:1\n")
    assert merge_scps([tmp_path / "1.scp", tmp_path / "2.scp"], tmp_path / "m", sort=True) == [
        "a",
        "b",
        "c",
    ]
    with pytest.raises(DataError, match=r"2\.scp:1: key 'b' does not sort after"):
        merge_scps([tmp_path / "1.scp", tmp_path / "2.scp"], tmp_path / "m")
    (tmp_path / "3.scp").write_text("a z:1\n")
    with pytest.raises(DataError, match=r"3\.scp:1: key 'a' is also in"):
        merge_scps([tmp_path / "1.scp", tmp_path / "3.scp"], tmp_path / "m", sort=True)


@pytest.mark.skipif(shutil.which("sox") is None, reason="sox not installed")
def test_pipe_entries_still_run(tmp_path):
    path = tmp_path / "a.wav"
    soundfile.write(str(path), np.zeros(1600, np.int16), RATE, subtype="PCM_16")
    assert read_utterance(f"sox {path} -t wav - |", sample_rate=RATE).size == 1600


def test_a_sorted_table_names_a_duplicate_as_such_holding_one_key(tmp_path):
    """iter_table checks a sorted table holding only the previous key: an adjacent
    duplicate and one that comes back after other keys (out of order) are both named as
    duplicates with the first line, as when every key was held."""
    p = tmp_path / "t"
    p.write_text("a 1\nb 2\nb 3\n")
    with pytest.raises(DataError, match=r"t:3: duplicate key 'b' \(first on line 2\)"):
        list(iter_table(p))
    p.write_text("a 1\nb 2\nc 3\na 4\n")
    with pytest.raises(DataError, match=r"t:4: duplicate key 'a' \(first on line 1\)"):
        list(iter_table(p))
    p.write_text("b 1\nc 2\na 3\n")
    with pytest.raises(DataError, match=r"t:3: not sorted: key 'a' comes after 'c'"):
        list(iter_table(p))
    p.write_text("a 1\nc 2\nb 3\na 4\n")  # with keys: only the kept keys' duplicates
    with pytest.raises(DataError, match=r"t:3: not sorted"):
        list(iter_table(p, keys={"a"}))


def test_an_int_vector_scp_is_read_entry_by_entry(tmp_path):
    """The vectors of an scp are read from their archives at their offsets (binary and
    text forms, several archives), never the archives whole; an offset past the end and a
    truncated vector are named."""
    vecs = {"a": np.array([1, 2, 3], np.int32), "b": np.array([4], np.int32)}
    kaldiio.save_ark(str(tmp_path / "1.ark"), {"a": vecs["a"]}, scp=str(tmp_path / "1.scp"))
    (tmp_path / "2.ark").write_text("b 4\n")
    (tmp_path / "t.scp").write_text(
        (tmp_path / "1.scp").read_text() + f"b {tmp_path / '2.ark'}:2\n"
    )
    got = {k: v for k, v, _ in iter_int_vectors(tmp_path / "t.scp")}
    assert list(got) == ["a", "b"]
    for k in vecs:
        np.testing.assert_array_equal(got[k], vecs[k])
    (tmp_path / "t.scp").write_text(f"a {tmp_path / '1.ark'}:999\n")
    with pytest.raises(DataError, match=r"t\.scp:1: utterance 'a'.*offset past the end"):
        list(iter_int_vectors(tmp_path / "t.scp"))
    data = (tmp_path / "1.ark").read_bytes()
    (tmp_path / "cut.ark").write_bytes(data[:-3])
    (tmp_path / "t.scp").write_text(f"a {tmp_path / 'cut.ark'}:2\n")
    with pytest.raises(DataError, match=r"truncated int32 vector \(length 3\)"):
        list(iter_int_vectors(tmp_path / "t.scp"))


def test_an_in_step_scp_answers_sorted_lookups_and_falls_back_to_an_index(tmp_path):
    """InStepScp (compute_cmvn's reader) reads the file in step with ascending lookups,
    None for a key it lacks; a lookup out of order, and a file out of order, are answered
    from the whole index: the same objects every way."""
    from paravg.kaldi_io import InStepScp

    mats = {k: np.full((2, 2), i, np.float32) for i, k in enumerate("abcdef")}
    write_ark_scp(mats.items(), tmp_path / "a.ark", tmp_path / "a.scp")
    lines = (tmp_path / "a.scp").read_text().splitlines()
    (tmp_path / "r.scp").write_text("\n".join(lines[3:] + lines[:3]) + "\n")
    for scp, asked in (
        ("a.scp", ["a", "b", "bb", "d", "f", "g"]),  # in order, two missing
        ("a.scp", ["b", "e", "a", "f"]),  # "a" after "e": the index answers from there
        ("r.scp", ["a", "c", "e", "z"]),  # the file out of order
    ):
        reader = InStepScp(tmp_path / scp)
        for key in asked:
            got = reader.get(key)
            if key in mats:
                np.testing.assert_array_equal(got, mats[key])
            else:
                assert got is None, key
        reader.close()


def _read_all(path):
    out = []
    try:
        for key, vec, place in kaldi_io.iter_int_vectors(path):
            out.append((key, vec.tolist(), str(place)))
    except DataError as exc:
        out.append(("error", str(exc)))
    return out


def test_an_ark_is_read_through_a_window_of_any_size(tmp_path, monkeypatch):
    """iter_int_vectors reads an ark a chunk at a time (issue 36: never the whole file):
    every chunk size, down to one byte, gives the same keys, vectors, places (byte
    offsets, text lines) and errors as one chunk holding the file."""
    rng = np.random.default_rng(5)
    vecs = {f"u{i:02d}": rng.integers(0, 300, int(rng.integers(1, 90))) for i in range(12)}
    binary = tmp_path / "bin.ark"
    with open(binary, "wb") as f:
        for k, v in vecs.items():
            kaldiio.save_ark(f, {k: v.astype(np.int32)})
    text = "".join(f"{k} {' '.join(map(str, v))}\n" for k, v in list(vecs.items())[:4])
    mixed = tmp_path / "mixed.ark"
    mixed.write_bytes(b"\n " + binary.read_bytes() + b"\n\n" + text.encode())
    truncated = tmp_path / "truncated.ark"
    truncated.write_bytes(binary.read_bytes()[:-9])
    keyless = tmp_path / "keyless.ark"
    keyless.write_bytes(binary.read_bytes() + b"lonely\n")
    whole = {p: _read_all(p) for p in (binary, mixed, truncated, keyless)}
    assert [k for k, *_ in whole[binary]] == list(vecs)
    assert whole[mixed][-1][2] == f"{mixed}:7"  # text entries keep their line numbers
    assert "truncated int32 vector" in whole[truncated][-1][1]
    assert whole[keyless][-1] == ("error", f"{keyless}:1: malformed entry (a key without targets)")
    for chunk in (1, 2, 5, 64):
        monkeypatch.setattr(kaldi_io, "ARK_CHUNK_BYTES", chunk)
        for path, expected in whole.items():
            assert _read_all(path) == expected, (path.name, chunk)


def test_reading_an_ark_holds_one_chunk_not_the_file(tmp_path, monkeypatch):
    import tracemalloc

    path = tmp_path / "big.ark"
    with open(path, "wb") as f:
        for i in range(2000):
            kaldiio.save_ark(f, {f"utt{i:05d}": np.arange(300, dtype=np.int32) % 40})
    assert path.stat().st_size > 2_900_000
    monkeypatch.setattr(kaldi_io, "ARK_CHUNK_BYTES", 1 << 16)
    tracemalloc.start()
    n = sum(1 for _ in kaldi_io.iter_int_vectors(path))
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert n == 2000 and peak < 400_000, peak
