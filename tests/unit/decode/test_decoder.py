"""Decoder pieces: split jobs, word insertion penalty on the graph, pdf count check."""

import numpy as np
import pytest

from paravg.decode.decoder import check_num_pdfs, split_utterances
from paravg.decode.reference import add_word_penalty
from paravg.errors import DataError
from paravg.graph.load import DecodingGraph, TransitionInfo


def test_splits_partition_the_sorted_utterances():
    utts = [f"u{i:02d}" for i in range(10)]
    parts = [split_utterances(utts[::-1], 3, j) for j in range(3)]
    assert [u for p in parts for u in p] == utts
    assert sorted(len(p) for p in parts) == [3, 3, 4]


def test_word_penalty_only_on_word_arcs():
    import kaldifst

    fst = kaldifst.compile("0 1 1 5 0.5\n1 2 2 0 0.25\n2\n", acceptor=False)
    out = add_word_penalty(fst, 1.0)
    rows = [line.split() for line in out.to_str(show_weight_one=True).splitlines()]
    arcs = {(r[2], r[3]): float(r[4]) for r in rows if len(r) >= 5}
    assert arcs[("1", "5")] == pytest.approx(1.5)
    assert arcs[("2", "0")] == pytest.approx(0.25)


def test_pdf_count_must_match_the_network(tmp_path):
    info = TransitionInfo(np.array([-1, 0, 1]), np.array([-1, 1, 1]), 40, [1])
    graph = DecodingGraph(None, {}, info, tmp_path)
    check_num_pdfs(graph, 40, "final.pt")
    with pytest.raises(
        DataError, match=r"transition\.mdl: .* 40 pdfs but the network final\.pt has 39"
    ):
        check_num_pdfs(graph, 39, "final.pt")


def test_reference_text_checked_before_decoding(tmp_path, caplog):
    from paravg.decode.decoder import check_reference_text

    (tmp_path / "words.txt").write_text("<eps> 0\nA 1\nB 2\n")
    (tmp_path / "text").write_text("u1 A B\nu2 A ZED\nu3 ZED Q\n")
    res = check_reference_text(tmp_path / "text", tmp_path / "words.txt")
    assert res["oov_count"] == 3
    assert res["oov_first"] == {"ZED": f"{tmp_path / 'text'}:2", "Q": f"{tmp_path / 'text'}:3"}
    assert "3 words of" in caplog.text and "ZED" in caplog.text
    res = check_reference_text(tmp_path / "missing", tmp_path / "words.txt")
    assert res["text"] is None and "no text" in caplog.text


def test_oov_words_are_named_in_the_users_text_not_the_prepared_copy(tmp_path, caplog):
    """W4: the warning named results/data/<set>/text. The prepared copy keeps the user's
    utterances in sorted order, so the user's line numbers differ from the copy's."""
    from paravg.decode.decoder import check_reference_text
    from paravg.io import write_json_atomic

    user, prepared = tmp_path / "user", tmp_path / "results" / "data" / "test"
    user.mkdir()
    prepared.mkdir(parents=True)
    (tmp_path / "words.txt").write_text("<eps> 0\nA 1\nB 2\n")
    (user / "text").write_text("u0 A\nu1 A B\nu2 A ZED\n")  # u0: not kept (no targets)
    (prepared / "text").write_text("u1 A B\nu2 A ZED\n")
    write_json_atomic(prepared / "report.json", {"source": str(user)})
    res = check_reference_text(prepared / "text", tmp_path / "words.txt")
    assert res["oov_first"] == {"ZED": f"{user / 'text'}:3"}
    assert f"1 words of {user / 'text'} (1 distinct)" in caplog.text
    assert str(prepared) not in caplog.text
