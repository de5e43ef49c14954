"""A job's per-frame table written and read in bounded chunks."""

import numpy as np
import pytest

from paravg.errors import DataError
from paravg.ivector.frame_table import FrameTableReader, FrameTableWriter

EMPTY = {"index": np.zeros((0, 3), np.int32), "value": np.zeros((0, 3))}


def utterances(rng, n=12):
    out = []
    for i in range(n):
        t = int(rng.integers(5, 40))
        out.append((f"utt{i:03d}", rng.integers(0, 9, (t, 3)).astype(np.int32), rng.random((t, 3))))
    return out


def write(path, utts, chunk_frames):
    with FrameTableWriter(path, "posteriors", EMPTY, chunk_frames) as w:
        for utt, index, value in utts:
            w.add(utt, index=index, value=value)


def test_rows_come_back_in_order_whatever_the_chunk_size(tmp_path):
    utts = utterances(np.random.default_rng(0))
    for chunk in (1, 30, 100, 10_000):
        path = tmp_path / f"t{chunk}.npz"
        write(path, utts, chunk)
        with FrameTableReader(path, "posteriors", "a table", ("index", "value")) as r:
            for utt, index, value in utts:
                rows = r.take(utt, index.shape[0])
                np.testing.assert_array_equal(rows["index"], index)
                np.testing.assert_array_equal(rows["value"], value)


def test_chunks_hold_at_most_chunk_frames_plus_one_utterance(tmp_path):
    utts = utterances(np.random.default_rng(1), 40)
    write(tmp_path / "t.npz", utts, 60)
    with np.load(tmp_path / "t.npz") as z:
        chunks = int(z["chunks"])
        sizes = [z[f"index.{k}"].shape[0] for k in range(chunks)]
    assert sum(sizes) == sum(u[1].shape[0] for u in utts)
    assert chunks > 5 and max(sizes) < 60 + 40


def test_an_empty_job_has_an_empty_chunk(tmp_path):
    write(tmp_path / "t.npz", [], 10)
    reader = FrameTableReader(tmp_path / "t.npz", "posteriors", "a table", ("index",))
    with (
        reader as r,
        pytest.raises(DataError, match=r"no entry for utterance 'a' \(the table ends"),
    ):
        r.take("a", 3)


def test_other_data_is_a_clear_error(tmp_path):
    utts = utterances(np.random.default_rng(2), 3)
    write(tmp_path / "t.npz", utts, 10)

    def reader():
        return FrameTableReader(tmp_path / "t.npz", "posteriors", "a table", ("index",))

    with reader() as r, pytest.raises(DataError, match=r"'utt001' \(the next entry is 'utt000'"):
        r.take("utt001", 5)
    with reader() as r, pytest.raises(DataError, match="frames there but 10000 now"):
        r.take("utt000", 10_000)
    with pytest.raises(DataError, match="not a gselect table"):
        FrameTableReader(tmp_path / "t.npz", "gselect", "a gselect table", ("index",)).__enter__()


def test_a_failed_job_leaves_no_table(tmp_path):
    writer = FrameTableWriter(tmp_path / "t.npz", "gselect", EMPTY, 5)
    with pytest.raises(RuntimeError), writer as w:
        w.add("a", index=np.zeros((9, 3), np.int32), value=np.zeros((9, 3)))
        raise RuntimeError("job dies")
    assert list(tmp_path.iterdir()) == []
