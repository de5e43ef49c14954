"""The Witten-Bell bigram: a proper distribution per history, and ARPA parsing errors."""

import pytest

from paravg.errors import DataError
from paravg.graph.arpa import (
    BOS,
    EOS,
    arpa_probability,
    phone_sequences,
    read_arpa,
    witten_bell_bigram,
    write_bigram_arpa,
)

from .conftest import SENTENCES

VOCAB = ["CALL", "CAT", "CATS", "JOHN", "TO", "TWO", "SEE", "UNSEEN"]


def test_every_history_sums_to_one(tmp_path):
    path = tmp_path / "lm.arpa"
    write_bigram_arpa(path, SENTENCES, VOCAB)
    uni, bi = read_arpa(path)
    predicted = [*VOCAB, EOS]
    for h in [BOS, *VOCAB]:
        total = sum(arpa_probability(uni, bi, h, w) for w in predicted)
        assert total == pytest.approx(1.0, abs=1e-4), h  # ARPA keeps 6 decimals
    assert sum(10 ** uni[w][0] for w in predicted) == pytest.approx(1.0, abs=1e-4)


def test_witten_bell_values_by_hand():
    p1, p2, alpha = witten_bell_bigram([["A", "B"], ["A", "A"]], ["A", "B"])
    # tokens predicted: A B </s> A A </s> -> N = 6, T = 3 types, |V| = 3 (A, B, </s>)
    assert p1["A"] == pytest.approx((3 + 1) / 9)
    # history A: followers B, </s>, A (one each): c(h) = 3, T(h) = 3
    assert alpha["A"] == pytest.approx(3 / 6)
    assert p2[("A", "B")] == pytest.approx((1 + 3 * p1["B"]) / 6)


def test_unseen_training_word_is_an_error():
    with pytest.raises(DataError, match="not in the vocabulary"):
        witten_bell_bigram([["DOG"]], ["CAT"])


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("\\data\\\nngram 1=1\n\n\\1-grams:\n-1.0\tA\n", "no \\\\end\\\\ marker"),
        ("\\data\\\nngram 1=2\n\n\\1-grams:\n-1.0\tA\n\\end\\\n", "declares 2 1-grams"),
        ("\\data\\\nngram 1=1\n\n\\1-grams:\nminus\tA\n\\end\\\n", r"lm\.arpa:5: expected"),
        ("\\data\\\nngram one\n", r"lm\.arpa:2: expected 'ngram N=COUNT'"),
    ],
)
def test_arpa_that_does_not_parse_names_file_and_line(tmp_path, text, message):
    path = tmp_path / "lm.arpa"
    path.write_text(text)
    with pytest.raises(DataError, match=message):
        read_arpa(path)


def test_phone_sequences_collapse_and_drop_silence():
    phones = ["sil", "a", "b"]
    assert phone_sequences([[0, 0, 1, 1, 2, 0, 2, 2]], phones, "sil") == [["a", "b", "b"]]


def test_the_lm_reads_a_text_file_streamed_as_it_reads_the_whole_table(tmp_path):
    """The bigram of a text file read line by line (``text_sentences``, a one-shot
    generator: the graph rules hold counts, never the corpus's text) is the bigram of
    the same sentences held as a table."""
    from paravg.graph.lexicon import read_text, text_sentences

    text = tmp_path / "text"
    text.write_text("".join(f"u{i:02d} {' '.join(s)}\n" for i, s in enumerate(SENTENCES)))
    write_bigram_arpa(tmp_path / "table.arpa", list(read_text(text).values()), VOCAB)
    streamed = text_sentences(text)
    write_bigram_arpa(tmp_path / "streamed.arpa", streamed, VOCAB)
    assert next(streamed, None) is None  # consumed once
    assert (tmp_path / "streamed.arpa").read_text() == (tmp_path / "table.arpa").read_text()
