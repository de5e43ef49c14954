"""paravg.lhotse: lhotse manifests in (checked, named by file and line, made a Kaldi dir)
and out (a prepared set written with lhotse's own classes); the round trip gives the same
features and targets. lhotse is installed by tools/setup.sh (`.[dev,lhotse]`)."""

from __future__ import annotations

import gzip
import json
import sys
from pathlib import Path

import numpy as np
import pytest

from paravg.data import read_data_dir
from paravg.errors import DataError
from paravg.features import MfccOptions, compute_features_split
from paravg.kaldi_io import iter_int_vectors, load_scp
from paravg.lhotse import (
    export_manifests,
    import_lhotse,
    is_manifest_dir,
    kaldi_dir_from_manifests,
    main,
)
from paravg.prepare_data import prepare_data_dir

from .test_data import RATE, make_dir, prepare, write


def with_text(src: Path) -> Path:
    utts = [line.split()[0] for line in (src / "utt2spk").read_text().splitlines()]
    write(src / "text", "".join(f"{u} hello {u.lower()}\n" for u in utts))
    return src


def features(prepared: Path, tmp: Path) -> dict[str, np.ndarray]:
    out = tmp / "feats"
    out.mkdir(parents=True, exist_ok=True)
    opts = MfccOptions(sample_frequency=RATE)
    compute_features_split(
        prepared, 1, 1, opts, 0, out / "f.ark", out / "f.scp", out / "u2nf", out / "r.json"
    )
    return {k: np.asarray(v) for k, v in load_scp(out / "f.scp").items()}


def targets(d: Path) -> dict[str, list[int]]:
    return {k: v.tolist() for k, v, _ in iter_int_vectors(d / "targets.scp")}


def round_trip(tmp_path: Path, segments: bool) -> tuple[Path, Path]:
    """A Kaldi dir prepared, exported as manifests, read back and prepared again."""
    prepare(with_text(make_dir(tmp_path, segments=segments)), tmp_path)
    first = tmp_path / "out"
    export_manifests(first, tmp_path / "manifests")
    assert is_manifest_dir(tmp_path / "manifests")
    kaldi_dir_from_manifests(tmp_path / "manifests", tmp_path / "converted", RATE)
    prepare_data_dir(tmp_path / "converted", tmp_path / "again", RATE, 0.0)
    return first, tmp_path / "again"


@pytest.mark.parametrize("segments", [False, True])
def test_the_round_trip_gives_the_same_features_and_targets(tmp_path, segments):
    first, again = round_trip(tmp_path, segments)
    a, b = read_data_dir(first), read_data_dir(again)
    assert (a.utt2spk, a.text) == (b.utt2spk, b.text)
    assert (a.segments is None) == (b.segments is None) == (not segments)
    assert targets(first) == targets(again)
    fa, fb = features(first, tmp_path / "a"), features(again, tmp_path / "b")
    assert fa.keys() == fb.keys()
    for utt in fa:
        assert np.array_equal(fa[utt], fb[utt]), utt


def test_manifests_written_by_lhotses_own_kaldi_import_train_like_the_dir(tmp_path):
    """lhotse.kaldi.load_kaldi_data_dir of a prepared dir, written with to_file, plus the
    dir's targets: paravg reads them as the same set (same features and targets)."""
    from lhotse.kaldi import load_kaldi_data_dir

    prepare(with_text(make_dir(tmp_path)), tmp_path)
    first, manifests = tmp_path / "out", tmp_path / "m"
    recordings, supervisions, _ = load_kaldi_data_dir(first, RATE)
    manifests.mkdir()
    recordings.to_file(manifests / "recordings.jsonl.gz")
    supervisions.to_file(manifests / "supervisions.jsonl")
    for name in ("targets.ark", "targets.scp"):  # the scp names the ark by absolute path
        (manifests / name).write_bytes((first / name).read_bytes())
    report = kaldi_dir_from_manifests(manifests, tmp_path / "converted", RATE)
    assert not report["has_segments"] and report["has_text"]
    prepare_data_dir(tmp_path / "converted", tmp_path / "again", RATE, 0.0)
    assert targets(first) == targets(tmp_path / "again")
    fa, fb = features(first, tmp_path / "a"), features(tmp_path / "again", tmp_path / "b")
    assert all(np.array_equal(fa[u], fb[u]) for u in fa) and fa.keys() == fb.keys()


def test_export_from_the_command_line(tmp_path, capsys):
    prepare(make_dir(tmp_path), tmp_path)
    assert main(["export", str(tmp_path / "out"), str(tmp_path / "m")]) == 0
    assert "6 recordings, 6 supervisions" in capsys.readouterr().out
    with gzip.open(tmp_path / "m" / "supervisions.jsonl.gz", "rt") as f:
        lines = f.read().splitlines()
    assert json.loads(lines[0])["speaker"] == "spkA"


def test_a_missing_lhotse_names_the_extra_that_installs_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "lhotse", None)
    with pytest.raises(ImportError, match=r"pip install '\.\[lhotse\]'"):
        import_lhotse()


# ------------------------------------------------------------------ errors
def manifests(tmp_path: Path) -> Path:
    prepare(with_text(make_dir(tmp_path)), tmp_path)
    export_manifests(tmp_path / "out", tmp_path / "m")
    for name in ("recordings", "supervisions"):  # plain jsonl, to edit
        gz = tmp_path / "m" / f"{name}.jsonl.gz"
        with gzip.open(gz, "rt") as f:
            (tmp_path / "m" / f"{name}.jsonl").write_text(f.read())
        gz.unlink()
    return tmp_path / "m"


def edit(path: Path, line: int, change) -> None:
    rows = [json.loads(x) for x in path.read_text().splitlines()]
    change(rows[line - 1])
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


@pytest.mark.parametrize(
    ("name", "line", "change", "message"),
    [
        ("supervisions", 2, lambda r: r.update(recording_id="nope"), "recording 'nope' is not"),
        ("supervisions", 3, lambda r: r.pop("speaker"), "field 'speaker' missing"),
        ("supervisions", 4, lambda r: r.update(duration=0), "invalid segment"),
        ("supervisions", 5, lambda r: r.update(text=None), "have no text"),
        ("supervisions", 2, lambda r: r.update(channel=1), "only mono"),
        ("recordings", 2, lambda r: r.update(sampling_rate=8000), "sample rate 8000 Hz"),
        ("recordings", 3, lambda r: r.update(transforms=[{"name": "Speed"}]), "data.perturb"),
        ("recordings", 4, lambda r: r["sources"][0].update(source="/no/such.wav"), "not exist"),
        ("recordings", 5, lambda r: r["sources"][0].update(type="url"), "'url' is not"),
        ("recordings", 6, lambda r: r.update(id="spkA-u0"), "duplicate recording id"),
    ],
)
def test_a_bad_manifest_line_is_named(tmp_path, name, line, change, message):
    m = manifests(tmp_path)
    edit(m / f"{name}.jsonl", line, change)
    with pytest.raises(DataError, match=message) as err:
        kaldi_dir_from_manifests(m, tmp_path / "converted", RATE)
    where = f"{m / f'{name}.jsonl'}" + ("" if "have no text" in message else f":{line}")
    assert str(err.value).startswith(where)
    assert not (tmp_path / "converted").exists()


def test_a_manifest_dir_needs_its_targets(tmp_path):
    m = manifests(tmp_path)
    (m / "targets.scp").unlink()
    (m / "targets.ark").unlink()
    with pytest.raises(DataError, match="no targets file"):
        kaldi_dir_from_manifests(m, tmp_path / "converted", RATE)


# ------------------------------------------------------------------ the DAG
def test_a_manifest_set_is_prepared_from_its_converted_dir(tmp_path):
    from .test_dag import dag_of

    m = manifests(tmp_path)
    dag, _ = dag_of(tmp_path, {"data": {"sets": {"mine": str(m)}}, "eval_sets": ["test", "mine"]})
    assert dag.data.lhotse_sets() == {"mine": str(m)}
    converted = dag.data.converted_dir("mine")
    assert dag.data.source_dir("mine") == converted
    assert dag.data.source_inputs("mine") == [f"{converted}/{n}" for n in
                                              ("wav.scp", "utt2spk", "report.json")]  # fmt: skip
    inputs = {Path(p).name for p in dag.data.manifest_inputs("mine")}
    assert inputs == {"recordings.jsonl", "supervisions.jsonl", "targets.scp", "targets.ark"}
    dag.data.check_data_dirs()  # the configured dir exists: no error before conversion
