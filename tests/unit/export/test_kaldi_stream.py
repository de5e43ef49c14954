"""Kaldi's serialisation: byte layout of the binary form, and round trips of both forms."""

from __future__ import annotations

import numpy as np
import pytest

from paravg.errors import ModelFileError
from paravg.export.kaldi_stream import KaldiReader, KaldiWriter


def test_binary_layout_is_kaldis():
    w = KaldiWriter(binary=True)
    w.token("<Dim>")
    w.int32(5)
    w.float32(1.5)
    w.vector([1.0, 2.0])
    w.boolean(True)
    data = w.getvalue()
    assert data[:2] == b"\0B"
    assert data[2:8] == b"<Dim> "
    assert data[8:13] == b"\x04\x05\x00\x00\x00"  # size byte 4, little-endian int32
    assert data[13] == 4  # float: size byte 4
    assert data[18:21] == b"FV " and data[21:26] == b"\x04\x02\x00\x00\x00"
    assert data[-1:] == b"T"


def test_text_layout_is_kaldis():
    w = KaldiWriter(binary=False)
    w.token("<Priors>")
    w.vector([0.25, 0.75])
    w.matrix([[1, 2], [3, 4]])
    assert w.getvalue() == b"<Priors>  [ 0.25 0.75 ]\n [\n  1 2 \n  3 4 ]\n"


@pytest.mark.parametrize("binary", [False, True])
def test_round_trip(binary):
    rng = np.random.default_rng(0)
    mat = rng.standard_normal((3, 4)).astype(np.float32)
    sym = rng.standard_normal((4, 4))
    sym = sym + sym.T
    w = KaldiWriter(binary)
    w.token("<A>")
    w.int32(-7)
    w.float64(np.pi)
    w.boolean(False)
    w.int_vector([3, 1, 2])
    w.vector(mat[0])
    w.vector(sym[0], double=True)
    w.matrix(mat)
    w.matrix(sym, double=True)
    w.packed(sym)
    w.matrix(np.zeros((0, 0)), double=True)
    r = KaldiReader(w.getvalue())
    assert r.binary == binary
    r.expect("<A>")
    assert r.int32() == -7
    assert r.float() == pytest.approx(np.pi, rel=1e-15)
    assert r.boolean() is False
    assert list(r.int_vector()) == [3, 1, 2]
    np.testing.assert_array_equal(r.vector().astype(np.float32), mat[0])
    np.testing.assert_array_equal(r.vector(), sym[0])
    np.testing.assert_array_equal(r.matrix().astype(np.float32), mat)
    np.testing.assert_array_equal(r.matrix(), sym)
    np.testing.assert_array_equal(r.packed(), sym)
    assert r.matrix().size == 0
    assert r.at_end()


def test_wrong_token_names_the_file():
    w = KaldiWriter(True)
    w.token("<Nnet3>")
    with pytest.raises(ModelFileError, match=r"final\.mdl: expected <TransitionModel>"):
        KaldiReader(w.getvalue(), "final.mdl").expect("<TransitionModel>")
