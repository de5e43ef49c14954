"""paravg.perturb: the perturbed copies of a prepared training set (Kaldi's
perturb_data_dir_speed_3way.sh + perturb_data_dir_volume.sh), and data.perturb's config."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import yaml

from paravg.audio import AudioReader, check_audio, read_recording
from paravg.config import REPO_CONFIG, deep_merge, perturbed_train_set, validate_config
from paravg.data import read_data_dir, read_origin
from paravg.errors import ConfigError
from paravg.features import MfccOptions, num_frames, utterance_seed
from paravg.kaldi_io import iter_int_vectors, read_table
from paravg.perturb import PerturbOptions, map_targets, perturb_data_dir, speed_prefix
from paravg.resample import volume_gain
from paravg.schema import defaults

from .test_data import RATE, make_dir, prepare, write

KALDI = PerturbOptions(speed=(0.9, 1.0, 1.1), volume=True)
FRAMES = MfccOptions(sample_frequency=RATE)


def prepared(tmp_path: Path, segments: bool = False, uniq: bool = False) -> Path:
    src = make_dir(tmp_path, segments=segments)
    if uniq:  # the source already holds copies: a and b of speaker A share a source
        utts = sorted(line.key for line in read_table(src / "utt2spk"))
        write(src / "utt2uniq", "".join(f"{u} {u.split('-')[0]}-orig\n" for u in utts))
    prepare(src, tmp_path)
    return tmp_path / "out"


def targets(d: Path) -> dict[str, np.ndarray]:
    return {k: v for k, v, _ in iter_int_vectors(d / "targets.scp")}


def table(path: Path) -> dict[str, str]:
    return {line.key: line.rest for line in read_table(path)}


# ------------------------------------------------------------------ targets
def test_map_targets_takes_the_source_frame_under_each_copy_frames_centre():
    """Copy frame i takes source frame ⌊(i + ½)·f⌋ (clamped to T − 1)."""
    src = np.arange(10, dtype=np.int32)
    assert map_targets(src, 2.0, 5).tolist() == [1, 3, 5, 7, 9]
    assert map_targets(src, 0.5, 20).tolist() == [i // 2 for i in range(20)]
    assert map_targets(src, 0.9, 12).tolist() == [0, 1, 2, 3, 4, 4, 5, 6, 7, 8, 9, 9]
    assert map_targets(src, 1.0, 10).tolist() == src.tolist()
    assert map_targets(src, 1.1, 12).tolist()[-3:] == [9, 9, 9]  # past the end: the last


# ------------------------------------------------------------------ the data dir
def test_three_way_speed_and_volume_copies_as_kaldi_names_them(tmp_path):
    src = prepared(tmp_path)
    dst = tmp_path / "train_sp"
    report = perturb_data_dir(src, dst, KALDI, RATE)
    data = read_data_dir(dst)  # a valid Kaldi data dir (validate_data_dir.sh's checks)
    source = read_data_dir(src)
    prefixes = ("sp0.9-", "sp1.0-", "sp1.1-")
    assert [speed_prefix(f) for f in KALDI.speed] == list(prefixes)
    assert data.utterances == sorted(p + u for p in prefixes for u in source.utterances)
    assert data.utt2spk == {p + u: p + s for p in prefixes for u, s in source.utt2spk.items()}
    assert table(dst / "utt2uniq") == {p + u: u for p in prefixes for u in source.utterances}
    assert data.text is None and not (dst / "text").exists()
    assert report["num_utterances"] == 3 * len(source.utterances)
    assert report["id_prefixes"] == list(prefixes)
    audio = check_audio(data, RATE)  # every copy is a readable 16-kHz mono WAV
    # what later stages read of a prepared set's report (the resource formulas: its
    # utterances and hours) holds for the copies as prepare_data writes it for a set
    assert report["num_utterances_kept"] == report["num_utterances"]
    assert report["duration_s_checked"] == round(audio["duration_s"], 3)

    gains = {k: float(v) for k, v in table(dst / "reco2vol").items()}
    assert set(gains) == set(data.wav)
    for reco, gain in gains.items():  # seeded by (srand, recording id), in [0.125, 2)
        assert gain == pytest.approx(volume_gain(utterance_seed(0, reco)), abs=1e-6)
    new_targets, old_targets = targets(dst), targets(src)
    reader = AudioReader(data, RATE)
    for utt in source.utterances:
        _, x = read_recording(source.wav[utt])
        for prefix, factor in zip(prefixes, KALDI.speed, strict=True):
            y = reader(prefix + utt)
            assert y.size == math.ceil(x.size / factor - 1e-9)  # duration × 1/f
            if factor == 1.0:  # the same audio times its gain: targets unchanged
                gain = volume_gain(utterance_seed(0, prefix + utt))
                want = np.clip(np.rint(x.astype(np.float64) * gain), -32768, 32767)
                assert np.array_equal(y, want)
                assert np.array_equal(new_targets[prefix + utt], old_targets[utt])
            else:  # as many targets as the copy has feature frames, stretched
                t = new_targets[prefix + utt]
                assert t.size == num_frames(y.size, FRAMES)
                assert np.array_equal(t, map_targets(old_targets[utt], factor, t.size))
    origin = read_origin(dst)  # errors about a copy name the user's line of its source
    assert origin.wav("sp1.1-spkB-u2") == read_origin(src).wav("spkB-u2").replace(
        "'spkB-u2'", "'sp1.1-spkB-u2'"
    )


def test_the_copies_are_the_same_bytes_every_time(tmp_path):
    src = prepared(tmp_path)
    first = tmp_path / "a"
    perturb_data_dir(src, first, KALDI, RATE)
    files = {p.name: p.read_bytes() for p in first.iterdir()}
    perturb_data_dir(src, first, KALDI, RATE)  # rerun into the same place
    assert {p.name: p.read_bytes() for p in first.iterdir()} == files
    other = PerturbOptions(speed=(0.9, 1.0, 1.1), volume=True, srand=1)
    perturb_data_dir(src, tmp_path / "b", other, RATE)
    assert (tmp_path / "b" / "reco2vol").read_text() != files["reco2vol"].decode()


def test_segments_are_scaled_and_recordings_prefixed(tmp_path):
    """Kaldi perturbs recordings and divides segment times by f; each copy's targets
    have the frames of its segment of the perturbed recording."""
    src = prepared(tmp_path, segments=True)
    dst = tmp_path / "sp"
    perturb_data_dir(src, dst, PerturbOptions(speed=(0.9, 1.1)), RATE)
    data, source = read_data_dir(dst), read_data_dir(src)
    assert sorted(data.wav) == sorted(p + r for p in ("sp0.9-", "sp1.1-") for r in source.wav)
    assert not (dst / "reco2vol").exists()
    new_targets = targets(dst)
    reader = AudioReader(data, RATE)
    for utt, seg in source.segments.items():
        for factor in (0.9, 1.1):
            new = data.segments[speed_prefix(factor) + utt]
            assert new.recording == speed_prefix(factor) + seg.recording
            assert new.start == pytest.approx(seg.start / factor, abs=1e-6)
            assert new.end == pytest.approx(seg.end / factor, abs=1e-6)
            samples = reader(speed_prefix(factor) + utt)
            assert new_targets[speed_prefix(factor) + utt].size == num_frames(samples.size, FRAMES)


def test_volume_only_keeps_the_ids_and_the_source_utt2uniq_is_carried(tmp_path):
    src = prepared(tmp_path, uniq=True)
    dst = tmp_path / "vp"
    perturb_data_dir(src, dst, PerturbOptions(volume=True), RATE)
    data, source = read_data_dir(dst), read_data_dir(src)
    assert data.utt2spk == source.utt2spk
    assert table(dst / "utt2uniq") == table(src / "utt2uniq")
    assert {v for v in table(dst / "utt2uniq").values()} == {"spkA-orig", "spkB-orig"}
    perturb_data_dir(src, tmp_path / "sp", PerturbOptions(speed=(0.9, 1.0)), RATE)
    uniq = table(tmp_path / "sp" / "utt2uniq")
    assert uniq["sp0.9-spkA-u1"] == uniq["sp1.0-spkA-u1"] == "spkA-orig"


def test_perturbation_off_is_refused(tmp_path):
    with pytest.raises(ValueError, match="no perturbation"):
        perturb_data_dir(prepared(tmp_path), tmp_path / "x", PerturbOptions(), RATE)


# ------------------------------------------------------------------ config
def config_with(perturb: dict, **more) -> dict:
    cfg = yaml.safe_load(REPO_CONFIG.read_text())
    return validate_config(deep_merge(cfg, {"data": {"perturb": perturb}, **more}))


def test_off_by_default_and_the_option_class_has_the_schemas_defaults():
    cfg = config_with({})
    assert perturbed_train_set(cfg) is None
    assert PerturbOptions.from_config(cfg["data"]["perturb"]) == PerturbOptions()
    assert PerturbOptions.from_config(defaults("data.perturb")) == PerturbOptions()
    assert not PerturbOptions().enabled


def test_the_perturbed_set_is_named_as_kaldi_names_it():
    assert perturbed_train_set(config_with({"speed": [0.9, 1.0, 1.1]})) == "train_sp"
    assert perturbed_train_set(config_with({"volume": True})) == "train_vp"


@pytest.mark.parametrize(
    ("perturb", "more", "names"),
    [
        ({"speed": [0.9, -1.0]}, {}, "data.perturb.speed.1"),
        ({"speed": [0.9, 0.9]}, {}, "data.perturb.speed"),
        ({"speed": 0.9}, {}, "data.perturb.speed"),
        ({"volume": "yes"}, {}, "data.perturb.volume"),
        ({"speeds": [0.9]}, {}, "data.perturb"),
        ({"scale_low": 0}, {}, "data.perturb.scale_low"),
        ({"volume": True, "scale_low": 3.0}, {}, "data.perturb.scale_low = 3.0"),
        ({"speed": [1.1]}, {"data": {"sets": {"train_sp": "/x"}}}, "data.perturb: the"),
    ],
)
def test_a_bad_setting_is_an_error_naming_its_key(perturb, more, names):
    if "data" in more:
        more = {"data": {**more["data"], "perturb": perturb}}
        cfg = deep_merge(yaml.safe_load(REPO_CONFIG.read_text()), more)
        with pytest.raises(ConfigError, match=names.replace(".", r"\.")):
            validate_config(cfg)
        return
    with pytest.raises(ConfigError, match=names.replace(".", r"\.")):
        config_with(perturb)


# ------------------------------------------------------------------ the DAG
def test_the_features_ivectors_and_egs_of_the_training_set_come_from_the_copies(tmp_path):
    """run_ivector_common.sh: train_sp's features train the i-vector models and make the
    egs; the prepared (source) sets stay the gate's; prepare_data never writes the copies."""
    import re

    from .test_dag import dag_of

    dag, _ = dag_of(tmp_path, {"data": {"perturb": {"speed": [0.9, 1.0, 1.1], "volume": True}}})
    L = dag.layout
    assert (dag.source_train_set, dag.train_set) == ("train", "train_sp")
    assert dag.all_sets() == ["train_sp", "dev", "test"]
    assert dag.prepared_sets() == ["train", "dev", "test"]
    assert set(dag.data.prepared_reports()) == {"train", "dev", "test"}
    assert dag.ivector.train_data()["feats"] == L.feats_scp("train_sp")
    assert dag.ivector.utts_per_spk_max("train_sp") == 2  # pseudo-speakers: training data
    assert dag.egs.source_files()["targets_scp"] == L.data_file("train_sp", "targets.scp")
    assert dag.data.perturb_inputs()["report"] == L.data_file("train", "report.json")
    assert dag.data.perturb_outputs()["reco2vol"] == L.data_file("train_sp", "reco2vol")
    pattern = re.compile(dag.data.prepared_set_pattern())
    assert pattern.fullmatch("train") and pattern.fullmatch("train_sp2")
    assert not pattern.fullmatch("train_sp")
    off, _ = dag_of(tmp_path / "off")
    assert off.train_set == off.source_train_set == "train"
    assert off.data.prepared_set_pattern() == r"[A-Za-z0-9_.-]+"
