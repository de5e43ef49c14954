"""Kaldi data dir reading and validation (paravg.data) and preparation (paravg.prepare_data),
through prepared dirs; reading audio alone is tests/unit/test_audio.py."""

from __future__ import annotations

import json
from pathlib import Path

import kaldiio
import numpy as np
import pytest
import soundfile

from paravg.audio import Segment
from paravg.data import iter_checked_targets, read_data_dir
from paravg.errors import DataError
from paravg.prepare_data import prepare_data_dir

from .audio_reading import read_utterance


def read_targets_with_places(path, num_targets=0):
    """Every entry of a targets file (iter_checked_targets: every check) and its place."""
    out, places = {}, {}
    for key, vec, place in iter_checked_targets(path, num_targets):
        out[key] = vec
        places[key] = place
    return out, places


def targets_of(path, num_targets: int = 0):
    """The targets prepare_data reads from ``path`` (without their places)."""
    return read_targets_with_places(path, num_targets)[0]


RATE = 16000


# ------------------------------------------------------------------ helpers
def noise(seconds: float, seed: int, channels: int = 1) -> np.ndarray:
    rng = np.random.default_rng(seed)
    shape = (int(seconds * RATE), channels) if channels > 1 else (int(seconds * RATE),)
    return np.clip(rng.normal(0, 2000, shape), -32768, 32767).astype(np.int16)


def write_wav(path: Path, samples: np.ndarray, rate: int = RATE) -> Path:
    soundfile.write(str(path), samples, rate, subtype="PCM_16")
    return path


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def make_dir(
    root: Path,
    speakers: int = 2,
    per_speaker: int = 3,
    targets: str = "txt",
    segments: bool = False,
) -> Path:
    """A valid data dir: speakers spkA.., utterances spkA-u0.., 0.5 s of noise each,
    per-frame targets (48 frames: the 25/10 ms frame count of 0.5 s)."""
    d = root / "src"
    (d / "wav").mkdir(parents=True)
    utts = [(f"spk{chr(65 + s)}-u{i}", f"spk{chr(65 + s)}") for s in range(speakers)
            for i in range(per_speaker)]  # fmt: skip
    wav_lines, seg_lines = [], []
    if segments:
        for spk in sorted({s for _, s in utts}):
            mine = [u for u, s in utts if s == spk]
            path = write_wav(d / "wav" / f"{spk}.wav", noise(0.6 * len(mine), seed=len(spk)))
            wav_lines.append(f"{spk} {path}")
            for i, utt in enumerate(mine):
                seg_lines.append(f"{utt} {spk} {0.6 * i:.2f} {0.6 * i + 0.5:.2f}")
        write(d / "segments", "\n".join(seg_lines) + "\n")
    else:
        for k, (utt, _) in enumerate(utts):
            path = write_wav(d / "wav" / f"{utt}.wav", noise(0.5, seed=k))
            wav_lines.append(f"{utt} {path}")
    write(d / "wav.scp", "\n".join(wav_lines) + "\n")
    write(d / "utt2spk", "".join(f"{u} {s}\n" for u, s in utts))
    tg = {u: (np.arange(48) % (5 + k)).astype(np.int32) for k, (u, _) in enumerate(utts)}
    write_targets(d, tg, targets)
    return d


def write_targets(d: Path, tg: dict[str, np.ndarray], form: str, stem: str = "targets") -> None:
    if form == "txt":
        write(d / f"{stem}.txt", "".join(f"{u} {' '.join(map(str, v))}\n" for u, v in tg.items()))
    elif form == "ark":
        kaldiio.save_ark(str(d / f"{stem}.ark"), tg)
    elif form == "ark_text":
        write(d / f"{stem}.ark", "".join(f"{u} {' '.join(map(str, v))}\n" for u, v in tg.items()))
    elif form == "scp":
        (d / "store").mkdir(exist_ok=True)
        kaldiio.save_ark(str(d / "store" / "ali.ark"), tg, scp=str(d / f"{stem}.scp"))
    else:
        raise ValueError(form)


def prepare(src: Path, tmp_path: Path, fraction: float = 0.0, num_targets: int = 0) -> dict:
    return prepare_data_dir(src, tmp_path / "out", RATE, fraction, num_targets)


# ------------------------------------------------------------------ happy paths
def test_prepare_writes_normalised_dir_and_derives_spk2utt(tmp_path):
    src = make_dir(tmp_path)
    report = prepare(src, tmp_path)
    out = tmp_path / "out"
    assert (out / "spk2utt").read_text() == (
        "spkA spkA-u0 spkA-u1 spkA-u2\nspkB spkB-u0 spkB-u1 spkB-u2\n"
    )
    assert (out / "utt2spk").read_text() == (src / "utt2spk").read_text()
    assert report["num_utterances_kept"] == 6 and report["num_speakers"] == 2
    assert report["num_target_frames"] == 6 * 48
    assert report["duration_s_checked"] == pytest.approx(3.0)
    assert json.loads((out / "report.json").read_text()) == report
    # plain paths are made absolute in the prepared wav.scp
    for line in (out / "wav.scp").read_text().splitlines():
        assert Path(line.split(maxsplit=1)[1]).is_absolute()
    assert not (out / "segments").exists()


@pytest.mark.parametrize("form", ["txt", "ark", "ark_text", "scp"])
@pytest.mark.parametrize("stem", ["targets", "ali"])
def test_targets_round_trip_every_format(tmp_path, form, stem):
    src = make_dir(tmp_path, targets="txt")
    tg = targets_of(src / "targets.txt")
    (src / "targets.txt").unlink()
    write_targets(src, tg, form, stem)
    prepare(src, tmp_path)
    ext = {"ark_text": "ark"}.get(form, form)
    assert targets_of(src / f"{stem}.{ext}").keys() == tg.keys()
    for reader in (targets_of, lambda p: dict(kaldiio.load_scp(str(p)))):
        got = reader(tmp_path / "out" / "targets.scp")
        assert got.keys() == tg.keys()
        for u in tg:
            np.testing.assert_array_equal(got[u], tg[u])
            assert got[u].dtype == np.int32
    # the prepared ark is binary Kaldi int32 vectors (what ali-to-pdf writes)
    assert (tmp_path / "out" / "targets.ark").read_bytes()[8:11] == b"\0B\x04"  # after "spkA-u0 "


def test_segments_are_copied_and_cut_like_extract_segments(tmp_path):
    src = make_dir(tmp_path, segments=True)
    report = prepare(src, tmp_path)
    out = tmp_path / "out"
    assert (out / "segments").read_text() == (src / "segments").read_text()
    assert report["num_recordings"] == 2 and report["has_segments"]
    data = read_data_dir(out)
    whole, _ = soundfile.read(str(src / "wav" / "spkA.wav"), dtype="int16")
    seg = data.segment("spkA-u1")
    got = read_utterance(data.wav["spkA"], seg, RATE)
    a, b = int(0.6 * RATE), int(1.1 * RATE)
    np.testing.assert_array_equal(got, whole[a:b].astype(np.float32))
    assert got.dtype == np.float32  # int16 scale, not [-1, 1]


def test_text_is_copied_and_stale_optional_files_removed(tmp_path):
    src = make_dir(tmp_path, speakers=1, per_speaker=2)
    write(src / "text", "spkA-u0 hello world\nspkA-u1 bye\n")
    out = tmp_path / "out"
    out.mkdir()
    write(out / "segments", "stale\n")
    prepare(src, tmp_path)
    assert (out / "text").read_text() == "spkA-u0 hello world\nspkA-u1 bye\n"
    assert not (out / "segments").exists()


def test_consistent_spk2utt_is_accepted(tmp_path):
    src = make_dir(tmp_path)
    write(src / "spk2utt", "spkA spkA-u0 spkA-u1 spkA-u2\nspkB spkB-u0 spkB-u1 spkB-u2\n")
    assert prepare(src, tmp_path)["num_speakers"] == 2


# ------------------------------------------------------------------ missing targets
def test_missing_targets_below_fraction_are_skipped_and_listed(tmp_path):
    src = make_dir(tmp_path, speakers=2, per_speaker=5)
    lines = (src / "targets.txt").read_text().splitlines()
    write(src / "targets.txt", "\n".join(lines[:3] + lines[4:]) + "\n")  # drop spkA-u3
    report = prepare(src, tmp_path, fraction=0.1)
    assert report["skipped_utterances"] == ["spkA-u3"]
    assert report["num_missing_targets"] == 1 and report["num_utterances_kept"] == 9
    assert "spkA-u3" not in (tmp_path / "out" / "utt2spk").read_text()
    assert "spkA-u3" not in (tmp_path / "out" / "spk2utt").read_text()


def test_missing_targets_above_fraction_fail_naming_utterances(tmp_path):
    src = make_dir(tmp_path, speakers=2, per_speaker=5)
    lines = (src / "targets.txt").read_text().splitlines()
    write(src / "targets.txt", "\n".join(lines[2:]) + "\n")  # 2 of 10 missing
    with pytest.raises(DataError, match=r"2 of 10 utterances .*'spkA-u0', 'spkA-u1'"):
        prepare(src, tmp_path, fraction=0.1)
    assert not (tmp_path / "out").exists()  # nothing written before the checks pass


def test_recording_without_kept_utterances_is_dropped(tmp_path):
    src = make_dir(tmp_path, speakers=2, per_speaker=1)
    write(src / "targets.txt", "spkA-u0 0 1 2\n")
    prepare(src, tmp_path, fraction=0.5)
    assert (tmp_path / "out" / "wav.scp").read_text().split()[0] == "spkA-u0"
    assert len((tmp_path / "out" / "wav.scp").read_text().splitlines()) == 1


# ------------------------------------------------------------------ bad input
def _replace(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new, 1))


@pytest.mark.parametrize("name", ["wav.scp", "utt2spk"])
def test_missing_required_file(tmp_path, name):
    src = make_dir(tmp_path)
    (src / name).unlink()
    with pytest.raises(DataError, match=rf"{name}: missing file"):
        prepare(src, tmp_path)


def test_missing_targets_file_explains_the_expected_forms(tmp_path):
    src = make_dir(tmp_path)
    (src / "targets.txt").unlink()
    with pytest.raises(DataError, match=r"no targets file.*targets\.scp.*ali-to-pdf"):
        prepare(src, tmp_path)


def test_missing_data_dir(tmp_path):
    with pytest.raises(DataError, match="does not exist"):
        prepare(tmp_path / "nope", tmp_path)


def test_unsorted_table_names_file_and_line(tmp_path):
    src = make_dir(tmp_path)
    lines = (src / "utt2spk").read_text().splitlines()
    lines[1], lines[2] = lines[2], lines[1]
    write(src / "utt2spk", "\n".join(lines) + "\n")
    with pytest.raises(DataError, match=r"utt2spk:3: not sorted.*LC_ALL=C"):
        prepare(src, tmp_path)


def test_c_locale_order_is_byte_order(tmp_path):
    # Under LC_ALL=C, 'B' (0x42) sorts before 'a' (0x61): a file in that order is valid.
    src = make_dir(tmp_path, speakers=1, per_speaker=1)
    wav = (src / "wav.scp").read_text().split()[1]
    write(src / "wav.scp", f"B {wav}\na {wav}\n")
    write(src / "utt2spk", "B s\na s\n")
    write(src / "targets.txt", "B 1\na 2\n")
    assert read_data_dir(src).utterances == ["B", "a"]
    write(src / "utt2spk", "a s\nB s\n")
    with pytest.raises(DataError, match="utt2spk:2: not sorted"):
        read_data_dir(src)


def test_duplicate_ids(tmp_path):
    src = make_dir(tmp_path)
    _replace(src / "utt2spk", "spkA-u1 spkA\n", "spkA-u0 spkA\n")
    with pytest.raises(DataError, match=r"utt2spk:2: duplicate key 'spkA-u0' \(first on line 1\)"):
        prepare(src, tmp_path)


def test_duplicate_targets(tmp_path):
    src = make_dir(tmp_path)
    with open(src / "targets.txt", "a") as f:
        f.write("spkA-u0 1 2 3\n")
    with pytest.raises(DataError, match=r"targets\.txt:7: duplicate key 'spkA-u0'"):
        prepare(src, tmp_path)


@pytest.mark.parametrize(
    ("name", "old", "new", "pattern"),
    [
        ("utt2spk", "spkA-u1 spkA\n", "spkA-u1 spkA extra\n", r"utt2spk:2: expected 2 fields"),
        ("utt2spk", "spkA-u1 spkA\n", "spkA-u1\n", r"utt2spk:2: expected 2 fields"),
        ("utt2spk", "spkA-u1 spkA\n", "spkA-u1 spkA\n\n", r"utt2spk:3: empty line"),
        ("targets.txt", "spkA-u1 0", "spkA-u1 x", r"targets\.txt:2: targets must be integers"),
        ("targets.txt", "spkA-u1 0", "spkA-u1 -1", r"utterance 'spkA-u1'.*\[0, 2\^31\)"),
        ("segments", "spkA-u1 spkA 0.60", "spkA-u1 spkA zero", r"segments:2: start/end times"),
        ("segments", "spkA-u1 spkA 0.60 1.10", "spkA-u1 spkA 0.60 0.50", r"segments:2: invalid"),
        ("segments", "spkA-u1 spkA", "spkA-u1 spkZ", r"segments:2: recording 'spkZ' is not in"),
        ("segments", "spkA-u1 spkA 0.60 1.10", "spkA-u1 spkA 0.6 1.1 1", r"segments:2: channel"),
    ],
)
def test_malformed_lines(tmp_path, name, old, new, pattern):
    src = make_dir(tmp_path, segments=name == "segments")
    _replace(src / name, old, new)
    with pytest.raises(DataError, match=pattern):
        prepare(src, tmp_path)


def test_inconsistent_spk2utt(tmp_path):
    src = make_dir(tmp_path)
    write(src / "spk2utt", "spkA spkA-u0 spkA-u1\nspkB spkA-u2 spkB-u0 spkB-u1 spkB-u2\n")
    with pytest.raises(DataError, match=r"spk2utt:1: speaker 'spkA' lists"):
        prepare(src, tmp_path)


def test_utterance_lists_disagree(tmp_path):
    src = make_dir(tmp_path)
    _replace(src / "utt2spk", "spkB-u2 spkB\n", "")
    with pytest.raises(DataError, match=r"in .*wav\.scp but not in .*utt2spk: 'spkB-u2'"):
        prepare(src, tmp_path)


def test_utterance_lists_disagree_names_both_sides_and_counts(tmp_path):
    """The message a user fixes a data dir by: each side's first five keys in sorted
    order and its count (the merge-join of the sorted tables gives what the set
    difference gave)."""
    src = make_dir(tmp_path, speakers=2, per_speaker=4)
    write(src / "utt2spk", "spkB-u2 spkB\nspkB-u3 spkB\nspkC-u0 spkC\n")
    wav, u2s = src / "wav.scp", src / "utt2spk"
    expected = (
        f"utterance lists disagree; in {u2s} but not in {wav}: 'spkC-u0'; in {wav} but not "
        f"in {u2s}: 'spkA-u0', 'spkA-u1', 'spkA-u2', 'spkA-u3', 'spkB-u0' ... (6 in all)"
    )
    with pytest.raises(DataError) as err:
        prepare(src, tmp_path)
    assert str(err.value) == expected


def test_text_coverage_names_the_first_untranscribed_and_their_count(tmp_path):
    src = make_dir(tmp_path, speakers=2, per_speaker=4)
    utts = [line.split()[0] for line in (src / "utt2spk").read_text().splitlines()]
    write(src / "text", "".join(f"{u} hello\n" for u in utts[1:4] + utts[7:]))
    first = ", ".join(repr(u) for u in [utts[0], *utts[4:7]])
    with pytest.raises(DataError) as err:
        prepare(src, tmp_path)
    assert str(err.value).startswith(
        f"{src / 'text'}: 4 of 8 utterances of {src / 'utt2spk'} have no transcript: {first}; "
    )


def test_text_with_unknown_utterance(tmp_path):
    src = make_dir(tmp_path)
    write(src / "text", "zzz hello\n")
    with pytest.raises(DataError, match=r"text: utterances not in .*'zzz'"):
        prepare(src, tmp_path)


def test_a_text_covering_part_of_the_utterances_is_rejected(tmp_path):
    """B7: a text of 20 of 30 utterances passed, and WER was scored over those 20."""
    src = make_dir(tmp_path)
    utts = [line.split()[0] for line in (src / "utt2spk").read_text().splitlines()]
    write(src / "text", "".join(f"{u} hello\n" for u in utts[1:]))
    with pytest.raises(
        DataError,
        match=rf"text: 1 of {len(utts)} utterances of .*utt2spk have no transcript: '{utts[0]}'",
    ):
        prepare(src, tmp_path)
    write(src / "text", "".join(f"{u} hello\n" for u in utts))
    prepare(src, tmp_path)  # every utterance transcribed: accepted


def test_missing_audio_file(tmp_path):
    src = make_dir(tmp_path)
    (src / "wav" / "spkA-u1.wav").unlink()
    with pytest.raises(
        DataError, match=r"wav\.scp:2: recording 'spkA-u1': audio file .* does not exist"
    ):
        prepare(src, tmp_path)


def test_corrupt_audio_file(tmp_path):
    src = make_dir(tmp_path)
    write(src / "wav" / "spkA-u1.wav", "this is not audio")
    with pytest.raises(DataError, match=r"wav\.scp:2: recording 'spkA-u1': cannot read audio"):
        prepare(src, tmp_path)


def test_truncated_audio_file(tmp_path):
    src = make_dir(tmp_path)
    path = src / "wav" / "spkB-u0.wav"
    path.write_bytes(path.read_bytes()[:5000])
    with pytest.raises(DataError, match=r"wav\.scp:4: .*truncated: header declares 16000"):
        prepare(src, tmp_path)


def test_wrong_sample_rate(tmp_path):
    src = make_dir(tmp_path)
    write_wav(src / "wav" / "spkA-u2.wav", noise(0.5, 0), rate=8000)
    with pytest.raises(DataError, match=r"wav\.scp:3: .*sample rate 8000 Hz, expected 16000"):
        prepare(src, tmp_path)


def test_stereo_audio(tmp_path):
    src = make_dir(tmp_path)
    write_wav(src / "wav" / "spkA-u0.wav", noise(0.5, 0, channels=2))
    with pytest.raises(DataError, match=r"wav\.scp:1: .*2 channels, expected mono"):
        prepare(src, tmp_path)


def test_segment_out_of_range(tmp_path):
    src = make_dir(tmp_path, segments=True)  # spkA.wav is 1.8 s long
    _replace(src / "segments", "spkA-u2 spkA 1.20 1.70", "spkA-u2 spkA 1.90 2.00")
    with pytest.raises(DataError, match=r"segments:3: utterance 'spkA-u2': segment starts at 1.9s"):
        prepare(src, tmp_path)
    _replace(src / "segments", "spkA-u2 spkA 1.90 2.00", "spkA-u2 spkA 1.20 2.40")
    with pytest.raises(DataError, match=r"segments:3: .*more than 0.5s past the end"):
        prepare(src, tmp_path)


def test_small_overshoot_is_truncated_like_kaldi(tmp_path):
    src = make_dir(tmp_path, segments=True)
    _replace(src / "segments", "spkA-u2 spkA 1.20 1.70", "spkA-u2 spkA 1.20 2.10")
    prepare(src, tmp_path)
    seg = Segment("spkA", 1.2, 2.1)
    assert seg.sample_range(int(1.8 * RATE), RATE) == (int(1.2 * RATE), int(1.8 * RATE))
    assert Segment("r", 0.5, -1).sample_range(RATE, RATE) == (RATE // 2, RATE)


# ------------------------------------------------------------------ pipes
def test_pipes_are_not_run_by_prepare_but_counted(tmp_path):
    src = make_dir(tmp_path)
    marker = tmp_path / "ran"
    _replace(src / "wav.scp", "spkA-u0 ", f"spkA-u0 touch {marker}; cat ")
    _replace(src / "wav.scp", ".wav\n", ".wav |\n")
    report = prepare(src, tmp_path)
    assert report["unchecked_pipe_recordings"] == 1 and not marker.exists()
    assert (tmp_path / "out" / "wav.scp").read_text().splitlines()[0].endswith("|")


# ------------------------------------------------------------------ reliability (issue 14)
def test_failed_preparation_leaves_no_prepared_file(tmp_path):
    """Bug 8: a failed prepare_data leaves nothing of an earlier success (text included)."""
    src = make_dir(tmp_path)
    write(src / "text", "".join(f"{u} HELLO\n" for u in read_data_dir(src).utterances))
    prepare(src, tmp_path)
    out = tmp_path / "out"
    assert (out / "text").exists()
    _replace(src / "utt2spk", "spkA-u1 spkA\n", "spkA-u1 spkA extra\n")
    with pytest.raises(DataError, match=r"utt2spk:2: expected 2 fields"):
        prepare(src, tmp_path)
    assert not out.exists() or sorted(p.name for p in out.iterdir()) == []
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".out.")] == []


def test_preparation_replaces_the_dir_and_its_scp_names_the_final_ark(tmp_path):
    src = make_dir(tmp_path, targets="scp")
    write(src / "segments", "")  # not there next time: a stale copy must go
    (src / "segments").unlink()
    prepare(src, tmp_path)
    out = tmp_path / "out"
    ark = (out / "targets.scp").read_text().split()[1].rsplit(":", 1)[0]
    assert ark == str((out / "targets.ark").resolve())
    assert sorted(p.name for p in out.iterdir()) == sorted(
        ["wav.scp", "utt2spk", "spk2utt", "utt2uniq", "targets.ark", "targets.scp",
         "origin", "report.json"]
    )  # fmt: skip


def test_utt2uniq_is_copied_or_the_identity(tmp_path):
    """Bug 1: utt2uniq reaches the egs stage (always written: identity without one)."""
    src = make_dir(tmp_path)
    utts = read_data_dir(src).utterances
    prepare(src, tmp_path)
    assert (tmp_path / "out" / "utt2uniq").read_text() == "".join(f"{u} {u}\n" for u in utts)
    uniq = "".join(f"{u} {u.split('-')[1]}\n" for u in utts)
    write(src / "utt2uniq", uniq)
    assert prepare(src, tmp_path)["has_utt2uniq"]
    assert (tmp_path / "out" / "utt2uniq").read_text() == uniq
    write(src / "utt2uniq", uniq + "zzz u0\n")
    with pytest.raises(DataError, match=r"utt2uniq: utterances not in .*'zzz'"):
        prepare(src, tmp_path)


def test_source_files_are_every_file_preparation_reads(tmp_path):
    from paravg.data import source_files  # rules/common.smk imports it from here

    src = make_dir(tmp_path, targets="scp")
    names = lambda: [str(p.relative_to(src)) for p in source_files(src)]  # noqa: E731
    assert names() == ["wav.scp", "utt2spk", "targets.scp", "store/ali.ark"]
    for name in ("segments", "text", "spk2utt", "utt2uniq", "reco2file_and_channel"):
        write(src / name, "")
    assert names() == [
        "wav.scp", "utt2spk", "segments", "text", "spk2utt", "utt2uniq",
        "reco2file_and_channel", "targets.scp", "store/ali.ark",
    ]  # fmt: skip


@pytest.mark.parametrize("form", ["txt", "scp", "ark"])
def test_target_ids_are_checked_at_preparation(tmp_path, form):
    """Bug 3 / weak spot 4: an id >= data.num_targets names the user's file, line (or
    byte of a binary ark) and the utterance, at preparation."""
    src = make_dir(tmp_path, targets="txt")
    tg = targets_of(src / "targets.txt")
    (src / "targets.txt").unlink()
    tg["spkB-u0"] = tg["spkB-u0"].copy()
    tg["spkB-u0"][17] = 45
    write_targets(src, tg, form)
    place = {"txt": r"targets\.txt:4", "scp": r"targets\.scp:4", "ark": r"targets\.ark: byte \d+"}
    pattern = place[form] + r": utterance 'spkB-u0': target id 45 at frame 17 .*num_targets = 40"
    with pytest.raises(DataError, match=pattern):
        prepare(src, tmp_path, num_targets=40)
    assert prepare(src, tmp_path, num_targets=46)["max_target"] == 45


def test_origin_maps_prepared_lines_to_the_users_lines(tmp_path):
    """Weak spot 5: the prepared dir knows each utterance's line in the user's files."""
    from paravg.data import read_origin

    src = make_dir(tmp_path, segments=True)
    tg = targets_of(src / "targets.txt")
    del tg["spkA-u0"]  # skipped: every later line of the prepared copy moves up
    write_targets(src, tg, "txt")
    prepare(src, tmp_path, fraction=0.5)
    origin = read_origin(tmp_path / "out")
    assert origin.wav("spkB-u1") == (
        f"{src.resolve()}/wav.scp:2: utterance 'spkB-u1' ({src.resolve()}/segments:5)"
    )
    assert origin.targets_of("spkB-u1") == f"{src.resolve()}/targets.txt:4: utterance 'spkB-u1'"
    data = read_data_dir(tmp_path / "out")
    data.origin = origin
    assert data.where("spkA-u1").startswith(f"{src.resolve()}/wav.scp:1:")


def test_an_utterance_of_more_than_three_minutes_is_warned_about_with_its_line(tmp_path, caplog):
    """Issue 34 (R4): a 10-minute utterance was decoded in 11 GB with no word anywhere.
    Preparation names the longest long one (Kaldi recipes segment recordings)."""
    src = make_dir(tmp_path)
    tg = {u: (np.arange(48) % 5).astype(np.int32) for u in _utts_of(src)}
    tg["spkA-u1"] = np.zeros(18_600, dtype=np.int32)  # 3.1 minutes of 10-ms frames
    tg["spkB-u0"] = np.zeros(18_100, dtype=np.int32)
    write_targets(src, tg, "txt")
    with caplog.at_level("WARNING"):
        report = prepare(src, tmp_path)
    [warning] = [w for w in report["warnings"] if "longer than 3 minutes" in w]
    assert warning.startswith("2 utterance(s) longer than 3 minutes, the longest 3.1 minutes")
    assert f"{src / 'wav.scp'}:2: utterance 'spkA-u1'" in warning
    assert "decode.max_mem_mb" in warning and "segments" in warning
    assert warning in caplog.text
    tg["spkA-u1"] = tg["spkB-u0"] = np.zeros(17_900, dtype=np.int32)  # under 3 minutes
    write_targets(src, tg, "txt")
    assert not any("longer than" in w for w in prepare(src, tmp_path)["warnings"])


def _utts_of(src: Path) -> list[str]:
    return [line.split()[0] for line in (src / "utt2spk").read_text().splitlines()]


# ------------------------------------------------------------------ streamed targets (issue 36)
@pytest.mark.parametrize("form", ["scp", "ark", "txt"])
def test_targets_out_of_order_give_the_same_prepared_dir(tmp_path, form):
    """prepare_data streams the targets in a second pass when the file lists the
    utterances in their sorted order (Kaldi's tables) and holds them when it does not:
    both give the same prepared bytes (targets.ark in utterance order), extra and missing
    entries included."""
    src = make_dir(tmp_path / "a")
    tg = {
        f"spk{c}-u{i}": (np.arange(48) % (3 + i)).astype(np.int32) for c in "AB" for i in range(3)
    }
    del tg["spkA-u1"]  # skipped (no targets)
    tg["zz-extra"] = np.ones(5, np.int32)  # not an utterance: counted
    outs = []
    for name, order in (("sorted", sorted(tg)), ("reversed", sorted(tg, reverse=True))):
        for f in src.glob("targets.*"):
            f.unlink()
        write_targets(src, {u: tg[u] for u in order}, form)
        report = prepare_data_dir(src, tmp_path / name, RATE, 0.5)
        assert report["num_utterances_kept"] == 5 and report["num_targets_without_utterance"] == 1
        assert report["max_target"] == 4
        outs.append({f: (tmp_path / name / f).read_bytes() for f in ("targets.ark", "utt2spk")})
        scp = (tmp_path / name / "targets.scp").read_text()
        outs[-1]["targets.scp"] = scp.replace(str((tmp_path / name).resolve()), "X")
    assert outs[0] == outs[1]
    got = dict(kaldiio.load_scp(str(tmp_path / "reversed" / "targets.scp")))
    assert sorted(got) == sorted(u for u in tg if u != "zz-extra")
    for u, vec in got.items():
        np.testing.assert_array_equal(vec, tg[u])


@pytest.mark.parametrize("segments", [False, True])
def test_a_feature_job_reads_its_split_line_by_line(tmp_path, segments):
    """compute_features reads only its split's lines of the prepared dir
    (iter_prepared_utterances: utt2spk, origin, segments or wav.scp joined as read): every
    utterance's audio is the recording (or the segment) the whole dir gives it, in
    order, each split's part; a prepared table that disagrees is named."""
    from paravg.data import iter_prepared_utterances
    from paravg.features import prepared_split_bounds, split_utterances

    src = make_dir(tmp_path, speakers=3, per_speaker=3, segments=segments)
    prepare(src, tmp_path)
    out = tmp_path / "out"
    data = read_data_dir(out)
    for nj in (1, 2, 3):
        bounds = prepared_split_bounds(out, nj)
        chunks = split_utterances(data.utterances, nj, data.utt2spk)
        for j in range(nj):
            got = list(iter_prepared_utterances(out, bounds[j], bounds[j + 1]))
            assert [g.utt for g in got] == chunks[j]
            for g in got:
                assert g.recording == data.recording(g.utt)
                assert g.wav == data.wav[g.recording] and g.segment == data.segment(g.utt)
                assert g.where.startswith(f"{(src / 'wav.scp').resolve()}:")
    lines = (out / "utt2spk").read_text().splitlines()
    lines[4] = "spkB-zz spkB"
    (out / "utt2spk").write_text("\n".join(lines) + "\n")
    with pytest.raises(DataError, match=r"the prepared tables disagree; run prepare_data"):
        list(iter_prepared_utterances(out, 0, 9))


# ------------------------------------------------------------------ streamed tables (issue 36)
def test_tables_out_of_kaldi_order_prepare_as_the_whole_tables_give(tmp_path):
    """prepare_data joins the sorted tables as it reads them and falls back to a table
    per speaker or recording where a data dir breaks Kaldi's conventions (allowed):
    speakers not in utterance order, segments not in recording order. The prepared dir
    is then what the whole tables (read_data_dir) give: spk2utt per speaker in speaker
    order, wav.scp the kept recordings sorted, every segment and origin line kept."""
    src = make_dir(tmp_path, speakers=2, per_speaker=3, segments=True)
    rename = {"spkA": "zrec", "spkB": "arec"}  # spkA's audio sorts last
    seg = [line.split() for line in (src / "segments").read_text().splitlines()]
    (src / "segments").write_text("".join(f"{u} {rename[r]} {a} {b}\n" for u, r, a, b in seg))
    wav = sorted(
        f"{rename[r]} {p}"
        for r, p in (x.split() for x in (src / "wav.scp").read_text().splitlines())
    )
    (src / "wav.scp").write_text("\n".join(wav) + "\nzzz_unused /nonexistent.wav\n")
    utts = [u for u, *_ in seg]
    (src / "utt2spk").write_text(
        "".join(f"{u} {'s2' if i % 2 else 's1'}\n" for i, u in enumerate(utts))
    )
    report = prepare(src, tmp_path, fraction=0.5)
    out = tmp_path / "out"
    data = read_data_dir(src)
    assert any("utterance order differs from speaker order" in w for w in report["warnings"])
    assert (out / "spk2utt").read_text() == "".join(
        f"{s} {' '.join(us)}\n" for s, us in data.spk2utt.items()
    )
    assert (out / "wav.scp").read_text() == "".join(
        f"arec {Path(wav[0].split()[1]).resolve()}\nzrec {Path(wav[1].split()[1]).resolve()}\n"
    )
    assert (out / "segments").read_text() == "".join(f"{u} {data.segments[u].text}\n" for u in utts)
    origin = [line.split() for line in (out / "origin").read_text().splitlines()]
    assert [(u, int(w), int(s)) for u, w, s, _ in origin] == [
        (u, data.wav_lines[data.recording(u)], data.segments[u].lineno) for u in utts
    ]
    assert report["duration_s_checked"] == pytest.approx(3.0)
    assert report["num_recordings"] == 2 and report["num_speakers"] == 2


def _traced_preparation_peaks(tmp_path, shuffled: bool) -> list[int]:
    """prepare_data's traced peak at 250 and 1,000 utterances of 48 frames (ids long
    enough that each output's 8-KiB write buffer fills at both sizes); ``shuffled``: the
    targets file lists them out of order."""
    import tracemalloc

    peaks = []
    for n in (250, 1000):
        d = tmp_path / f"n{n}"
        d.mkdir()
        audio = write_wav(tmp_path / "one.wav", noise(0.5, seed=1))
        utts = [f"speaker{i // 10:04d}-utterance{i:05d}-of-a-corpus" for i in range(n)]
        write(d / "wav.scp", "".join(f"{u} {audio}\n" for u in utts))
        write(d / "utt2spk", "".join(f"{u} {u[:11]}\n" for u in utts))
        write(d / "text", "".join(f"{u} some words\n" for u in utts))
        order = sorted(utts, key=lambda u: u[::-1]) if shuffled else utts
        write_targets(d, {u: np.arange(48, dtype=np.int32) % 7 for u in order}, "scp")
        prepare_data_dir(d, tmp_path / "warm", RATE, 0.0)  # imports, caches
        tracemalloc.start()
        report = prepare_data_dir(d, tmp_path / f"out{n}", RATE, 0.0)
        peaks.append(tracemalloc.get_traced_memory()[1])
        tracemalloc.stop()
        assert report["num_utterances_kept"] == n
    return peaks


def test_preparation_holds_nothing_per_utterance(tmp_path):
    """prepare_data's traced peak does not grow with the utterances (Kaldi's sorted
    tables: every check and write a join of the files as they are read): 4x the
    utterances add less than 50 bytes each (the whole tables held ~1,000)."""
    peaks = _traced_preparation_peaks(tmp_path, shuffled=False)
    assert peaks[1] - peaks[0] < 50 * 750, peaks


def test_targets_out_of_order_hold_what_the_declared_mem_mb_counts(tmp_path):
    """A targets file out of order is held (its keys' lengths and places, the kept
    vectors): the traced peak's growth per utterance is within what rule prepare_data's
    mem_mb formula declares for one (paravg.resources: per utterance + per frame)."""
    from paravg.resources import PER_UTT_BYTES, PREPARE_BYTES_PER_FRAME

    peaks = _traced_preparation_peaks(tmp_path, shuffled=True)
    per_utt = (peaks[1] - peaks[0]) / 750
    declared = PER_UTT_BYTES["prepare_data"] + PREPARE_BYTES_PER_FRAME * 48
    assert 200 < per_utt <= declared, (per_utt, declared)
