"""Archive format: write -> memory-mapped read round trip, atomicity, dtypes."""

import json

import numpy as np
import pytest

from paravg.egs import EgsArchive, all_frame_minibatches, frame_minibatches
from paravg.egs.archive import ArchiveMeta, ArchiveWriter, EgsBatch, archive_files, write_archive
from paravg.errors import DataError


def batch(n, meta, seed=0):
    rng = np.random.default_rng(seed)
    return EgsBatch(
        rng.standard_normal((n, meta.window, meta.feat_dim)).astype(meta.feats_dtype),
        rng.integers(0, 50, (n, meta.frames_per_eg)).astype(np.int32),
        rng.random((n, meta.frames_per_eg)).astype(np.float32),
        rng.standard_normal((n, meta.ivector_dim)).astype(np.float32) if meta.ivector_dim else None,
        [f"u{i}-{i * 8}" for i in range(n)],
    )


@pytest.mark.parametrize(("dtype", "ivector_dim"), [("float16", 4), ("float32", 0)])
def test_round_trip(tmp_path, dtype, ivector_dim):
    meta = ArchiveMeta(13, 8, 3, 2, 6, ivector_dim, dtype)
    b = batch(13, meta)
    write_archive(tmp_path / "egs.0", b, meta)
    a = EgsArchive(tmp_path / "egs.0")
    assert isinstance(a.feats, np.memmap)
    assert a.num_egs == 13 and (a.left_context, a.right_context, a.frames_per_eg) == (3, 2, 8)
    assert a.feats.dtype == np.dtype(dtype)
    assert np.array_equal(a.feats, b.feats)
    assert np.array_equal(a.labels, b.labels)
    assert np.array_equal(a.weights, b.weights)
    if ivector_dim:
        assert np.array_equal(a.ivectors, b.ivectors)
    else:
        assert a.ivectors is None
        assert not (tmp_path / "egs.0.ivectors.npy").exists()
    assert a.read_keys() == b.keys
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        p.split("/")[-1] for p in archive_files(tmp_path / "egs.0", ivector_dim > 0).values()
    )


def test_empty_archive_round_trip(tmp_path):
    meta = ArchiveMeta(0, 8, 3, 2, 6, 0, "float16")
    write_archive(tmp_path / "e", batch(0, meta), meta)
    a = EgsArchive(tmp_path / "e")
    assert a.num_egs == 0 and a.read_keys() == []
    assert list(all_frame_minibatches(a, 3, 2, 16)) == []
    assert list(frame_minibatches(a, 0, 3, 2, 16, 100, 0)) == []


def test_failed_write_leaves_nothing(tmp_path):
    meta = ArchiveMeta(5, 8, 3, 2, 6, 0, "float16")
    with pytest.raises(ValueError, match="wrote 3 egs"), ArchiveWriter(tmp_path / "x", meta) as w:
        w.append(batch(3, meta))
        w.close()
    assert list(tmp_path.glob("*x*")) == []
    with pytest.raises(RuntimeError), ArchiveWriter(tmp_path / "y", meta) as w:
        w.append(batch(5, meta))
        raise RuntimeError("killed")
    assert list(tmp_path.glob("*y*")) == []


def test_meta_mismatch_is_detected(tmp_path):
    meta = ArchiveMeta(4, 8, 3, 2, 6, 0, "float16")
    write_archive(tmp_path / "z", batch(4, meta), meta)
    bad = {**json.loads((tmp_path / "z.meta.json").read_text()), "num_egs": 5}
    (tmp_path / "z.meta.json").write_text(json.dumps(bad))
    with pytest.raises(DataError, match=r"z\.feats\.npy: shape"):
        EgsArchive(tmp_path / "z")


def damage(path, offset, length=64):
    """Flip ``length`` bytes of ``path`` from ``offset`` (the probe's R5 damage)."""
    data = bytearray(path.read_bytes())
    for i in range(offset, min(offset + length, len(data))):
        data[i] ^= 0xFF
    path.write_bytes(bytes(data))


@pytest.fixture
def written(tmp_path):
    meta = ArchiveMeta(13, 8, 3, 2, 6, 4, "float16")
    write_archive(tmp_path / "egs.3", batch(13, meta), meta)
    return tmp_path / "egs.3"


def test_the_meta_records_the_sha256_of_every_file_of_the_archive(written):
    import hashlib

    recorded = json.loads(written.with_name("egs.3.meta.json").read_text())["sha256"]
    files = [p for p in written.parent.iterdir() if p.name != "egs.3.meta.json"]
    assert recorded == {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in files}
    assert ArchiveMeta.load(written.with_name("egs.3.meta.json")).num_egs == 13


@pytest.mark.parametrize("field", ["feats.npy", "labels.npy", "ivectors.npy", "keys.txt"])
def test_flipped_bytes_are_named_with_the_rebuild_before_any_egs_are_read(written, field):
    """64 flipped feature bytes were trained on silently (R5): every reader opens the
    archive through open_arrays, which checks each file against its recorded sha256."""
    path = written.with_name(f"egs.3.{field}")
    damage(path, path.stat().st_size // 2)
    with pytest.raises(DataError) as err:
        EgsArchive(written)
    assert str(err.value).startswith(f"{path}: its bytes differ from what the egs stage")
    assert f"rm {written}.*\n" in str(err.value)
    assert str(err.value).endswith(f" {written}.meta.json")


def test_a_missing_file_is_named(written):
    written.with_name("egs.3.weights.npy").unlink()
    with pytest.raises(DataError, match=r"egs\.3\.weights\.npy: cannot be read \(No such file"):
        EgsArchive(written)


def test_a_damaged_npy_header_is_named_as_not_a_readable_npy_file(written):
    """Without records (an archive written before them) the sha256 check has nothing to
    compare with; a damaged header gave ``TokenError: ('EOF in multi-line statement', (2,
    0))`` naming no file (R5)."""
    meta_path = written.with_name("egs.3.meta.json")
    meta = json.loads(meta_path.read_text())
    del meta["sha256"]
    meta_path.write_text(json.dumps(meta))
    feats = written.with_name("egs.3.feats.npy")
    damage(feats, 20, 40)  # inside the header's dict literal
    with pytest.raises(DataError, match=rf"^{feats}: not a readable npy file \(\w+"):
        EgsArchive(written)
    damage(feats, 20, 40)  # undone: an archive without records is read unchecked
    assert EgsArchive(written).num_egs == 13


def test_the_gather_of_an_archive_does_not_hash_the_split_files(synth, tmp_path, monkeypatch):
    """Each gather job reads 1/num_archives of every split job's file: hashing them whole
    in every gather would cost num_archives times the egs. The archives it writes are
    checked by their readers."""
    from egs_synth import build_egs

    from paravg.egs import archive

    checked = []
    real_check = archive.check_archive_files
    monkeypatch.setattr(
        archive,
        "check_archive_files",
        lambda prefix, *a: checked.append(str(prefix)) or real_check(prefix, *a),
    )
    out = tmp_path / "egs"
    build_egs(synth, out)
    assert [p for p in checked if "/split/" in p] == []
    EgsArchive(out / "egs.0")
    assert checked[-1] == str(out / "egs.0")
