"""The split jobs' per-archive pieces (paravg.egs.pieces): each eg written once, into the
piece of the archive drawn for it, and each archive job reading only its own pieces."""

import hashlib

import numpy as np
import pytest
from egs_synth import build_egs, default_lengths, make_data

from paravg.egs import split as split_mod
from paravg.egs.archive import ArchiveMeta, EgsBatch
from paravg.egs.info import EgsInfo
from paravg.egs.inputs import EgsSources
from paravg.egs.make import iter_egs, meta_for
from paravg.egs.pieces import PieceWriter, open_piece, piece_files
from paravg.egs.plan import read_uttlist
from paravg.egs.shuffle import merge_archive
from paravg.errors import DataError


def digests(out) -> dict[str, str]:
    return {
        p.name: hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(out.iterdir())
        if p.is_file()
    }


@pytest.mark.parametrize("num_archives", [1, 3, 113])
def test_block_draws_are_the_draws_of_one_call(monkeypatch, num_archives):
    """The pieces' sizes (drawn in blocks) and the writer's draws (per buffer) are the
    sequence one call of the generator gives: the layout does not depend on block sizes."""
    monkeypatch.setattr(split_mod, "DRAW_BLOCK", 7)
    whole = split_mod.distribute(1000, num_archives, srand=3, job=1)
    sizes = split_mod.piece_sizes(1000, num_archives, srand=3, job=1)
    assert np.array_equal(sizes, np.bincount(whole, minlength=num_archives))
    rng = split_mod.archive_draws(3, 1)
    parts = [split_mod.draw_archives(rng, k, num_archives) for k in (1, 0, 250, 13, 736)]
    assert np.array_equal(np.concatenate(parts), whole)


def job_egs_reference(data, out, info, job) -> EgsBatch:
    """The job's egs in utterance order, made at once (no pieces, no buffers)."""
    utts = read_uttlist(out / "lists" / f"job.{job}")
    sources = EgsSources(data.feats_scp, data.targets_scp, data.ivector_scp, info.ivector_period)
    return EgsBatch.concatenate(list(iter_egs(utts, None, sources, info)), meta_for(info, 0))


@pytest.mark.parametrize("buffer_bytes", [1, 1000, 1 << 25])
def test_each_piece_holds_its_archives_egs_in_job_order(tmp_path, monkeypatch, buffer_bytes):
    """Archive a's piece of job j = the egs of job j whose drawn archive is a, in the
    job's order, whatever the buffer the job flushes to its pieces."""
    monkeypatch.setattr(split_mod, "BUFFER_BYTES", buffer_bytes)
    data = make_data(tmp_path / "data", default_lengths(30, seed=4), ivectors=True)
    out = tmp_path / "egs"
    built = build_egs(data, out, samples_per_iter=20)
    info: EgsInfo = built["info"]
    assert info.num_archives >= 4
    for j, prefix in enumerate(built["jobs"]):
        ref = job_egs_reference(data, out, info, j)
        archives = split_mod.distribute(len(ref), info.num_archives, info.srand, j)
        for a in range(info.num_archives):
            arrays, keys = open_piece(prefix, a, info.num_archives)
            want = ref.take(np.flatnonzero(archives == a))
            assert [k.decode() for k in keys.tolist()] == want.keys
            for name in ("feats", "labels", "weights", "ivectors"):
                assert np.array_equal(arrays[name], getattr(want, name)), (j, a, name)


def test_archives_do_not_depend_on_the_split_buffer(tmp_path, monkeypatch):
    data = make_data(tmp_path / "data", default_lengths(30, seed=6), ivectors=True)
    sums = []
    for buffer_bytes in (1, 1 << 25):
        monkeypatch.setattr(split_mod, "BUFFER_BYTES", buffer_bytes)
        out = tmp_path / f"b{buffer_bytes}"
        build_egs(data, out, samples_per_iter=20)
        sums.append(digests(out))
    assert sums[0] == sums[1] and any(n.startswith("egs.3.") for n in sums[0])


def test_an_archive_job_reads_only_its_own_pieces(synth, tmp_path):
    """Every row of the split files outside archive 1's pieces is overwritten: archive 1
    is rebuilt byte for byte (each eg is read by one archive job only)."""
    out = tmp_path / "egs"
    built = build_egs(synth, out)
    info = built["info"]
    assert info.num_archives >= 3
    before = digests(out)
    for prefix in built["jobs"]:
        files = piece_files(prefix, False)
        offsets = np.load(files["offsets"])
        lo, hi = int(offsets[1]), int(offsets[2])
        for name in ("feats", "labels", "weights", "eg_keys"):
            array = np.load(files[name], mmap_mode="r+")
            array[:lo] = 0
            array[hi:] = 0
            array.flush()
    merge_archive(1, [str(p) for p in built["jobs"]], out / "info.json", out / "egs.1")
    after = digests(out)
    assert {k: v for k, v in after.items() if k.startswith("egs.1.")} == {
        k: v for k, v in before.items() if k.startswith("egs.1.")
    }
    merge_archive(0, [str(p) for p in built["jobs"]], out / "info.json", out / "egs.0")
    assert digests(out)["egs.0.feats.npy"] != before["egs.0.feats.npy"]  # the check bites


META = ArchiveMeta(
    num_egs=5, frames_per_eg=2, left_context=1, right_context=0, feat_dim=3, ivector_dim=0,
    feats_dtype="float16",
)  # fmt: skip


def batch(n: int, first: int = 0) -> EgsBatch:
    return EgsBatch(
        np.full((n, 3, 3), first, np.float16),
        np.zeros((n, 2), np.int32),
        np.ones((n, 2), np.float32),
        None,
        [f"u-{first + i}" for i in range(n)],
    )


def test_the_writer_refuses_more_egs_than_a_piece_and_a_short_piece(tmp_path):
    job = tmp_path / "job.0"
    with (
        pytest.raises(ValueError, match="more egs for archive 0"),
        PieceWriter(job, META, [2, 3], key_width=4) as w,
    ):
        w.write(batch(3), np.array([0, 0, 0]))
    with (
        pytest.raises(ValueError, match="archive 1's piece has 2 egs, planned 3"),
        PieceWriter(job, META, [2, 3], key_width=4) as w,
    ):
        w.write(batch(4), np.array([1, 0, 1, 0]))
    with (
        pytest.raises(ValueError, match="eg key of 3 bytes, the split job planned 2"),
        PieceWriter(job, META, [2, 3], key_width=2) as w,
    ):
        w.write(batch(1), np.array([1]))
    assert list(tmp_path.iterdir()) == []  # nothing renamed, no temporaries left
    with PieceWriter(tmp_path / "job.0", META, [2, 3], key_width=4) as w:
        w.write(batch(4), np.array([1, 0, 1, 0]))
        w.write(batch(1, first=7), np.array([1]))
    arrays, keys = open_piece(tmp_path / "job.0", 1, 2)
    assert keys.tolist() == [b"u-0", b"u-2", b"u-7"]
    assert arrays["feats"][:, 0, 0].tolist() == [0, 0, 7]
    with pytest.raises(DataError, match="pieces of 2 archives, the egs plan has 3"):
        open_piece(tmp_path / "job.0", 0, 3)
