"""The Kaldi lang dir: phone and word tables, disambiguation, word boundaries, checks."""

import pytest

from paravg.corpus.phones import PHONES
from paravg.errors import DataError
from paravg.graph.lang import (
    REQUIRED_FILES,
    add_disambig,
    base_phone,
    check_lang_dir,
    make_lang,
    position_dependent,
    read_lang,
    read_symbol_table,
    word_boundary,
    write_lang,
)
from paravg.graph.topology import lang_topo_text

from .conftest import LEXICON


def demo_lang():
    return make_lang(LEXICON, ["sil"], list(PHONES[1:]))


def test_position_dependent_phones_mark_word_positions():
    assert position_dependent(["aa"]) == ("aa_S",)
    assert position_dependent(["k", "ae", "t"]) == ("k_B", "ae_I", "t_E")
    assert base_phone("ae_I") == "ae" and base_phone("sil") == "sil"


def test_disambiguation_of_prefixes_and_homophones():
    prons = [("k", "ae", "t"), ("k", "ae", "t", "s"), ("t", "uw"), ("t", "uw"), ("s",)]
    out, top = add_disambig(prons)
    assert out[0] == ("k", "ae", "t", "#1")  # prefix of "k ae t s"
    assert out[1] == ("k", "ae", "t", "s")
    assert out[2] == ("t", "uw", "#1") and out[3] == ("t", "uw", "#2")  # homophones differ
    assert out[4] == ("s",) and top == 2


def test_phone_table_is_kaldi_order_with_shared_sets():
    lang = demo_lang()
    assert lang.phones["<eps>"] == 0
    assert [p for p in lang.phones][1:6] == ["sil", "sil_B", "sil_E", "sil_I", "sil_S"]
    assert lang.sets[0][0] == "sil" and lang.sets[1] == ["aa_B", "aa_E", "aa_I", "aa_S"]
    assert len(lang.sets) == 40  # one set (one pdf) per target
    # #0 (G's back-off) plus the symbols the lexicon needs (#1, #2) plus one spare
    assert [p for p in lang.phones if p.startswith("#")] == ["#0", "#1", "#2", "#3"]
    words = list(lang.words)
    assert words[0] == "<eps>" and words[-3:] == ["#0", "<s>", "</s>"]
    assert words[1:-3] == sorted(words[1:-3]) and "<UNK>" in words


def test_word_boundary_classes():
    assert word_boundary("sil") == "nonword"
    assert [word_boundary(f"k_{p}") for p in "BEIS"] == ["begin", "end", "internal", "singleton"]


def test_written_lang_dir_reads_back(tmp_path):
    lang = demo_lang()
    write_lang(lang, tmp_path, lang_topo_text(lang))
    for name in REQUIRED_FILES:
        assert (tmp_path / name).is_file(), name
    back = read_lang(tmp_path)
    assert back.phones == lang.phones and back.words == lang.words
    assert back.sets == lang.sets and back.silence == ["sil"]
    assert back.lexicon == lang.lexicon
    boundary = (tmp_path / "phones" / "word_boundary.int").read_text().splitlines()
    assert f"{lang.phones['k_B']} begin" in boundary


def test_lang_dir_missing_a_file_is_named(tmp_path):
    lang = demo_lang()
    write_lang(lang, tmp_path, lang_topo_text(lang))
    (tmp_path / "L_disambig.fst").unlink()
    with pytest.raises(DataError, match=r"L_disambig\.fst: missing from the lang dir"):
        check_lang_dir(tmp_path)


def test_bad_symbol_table_line_is_named(tmp_path):
    path = tmp_path / "words.txt"
    path.write_text("<eps> 0\nCAT 1\nDOG two\n")
    with pytest.raises(DataError, match=r"words\.txt:3: expected '<symbol> <integer id>'"):
        read_symbol_table(path)
    path.write_text("<eps> 0\nCAT 1\nCAT 2\n")
    with pytest.raises(DataError, match=r"words\.txt:3:.*twice"):
        read_symbol_table(path)


def test_lexicon_phone_outside_the_set_is_an_error():
    from paravg.graph.lexicon import LexiconEntry

    with pytest.raises(DataError, match="lexicon word DOG"):
        make_lang([LexiconEntry("DOG", 1.0, ("d", "ao", "gx"))], ["sil"], list(PHONES[1:]))


def test_sil_prob_zero_gives_a_lexicon_without_optional_silence():
    """prepare_lang.sh --sil-prob 0 (Kaldi's TIMIT recipe): one loop state, start and
    final; silence only where the lexicon spells it (here a "word" sil)."""
    import kaldifst

    from paravg.graph.lang import lexicon_fst_text
    from paravg.graph.lexicon import phone_lexicon

    lang = make_lang(phone_lexicon(PHONES, with_silence=True), ["sil"], list(PHONES[1:]))
    fst = kaldifst.compile(lexicon_fst_text(lang, False, 0.0), acceptor=False)
    arcs = [line.split() for line in fst.to_str().splitlines() if len(line.split()) >= 4]
    finals = [line.split() for line in fst.to_str().splitlines() if len(line.split()) <= 2]
    assert fst.start == 0 and [f[0] for f in finals] == ["0"]
    assert all(a[0] == "0" and a[1] == "0" for a in arcs)  # every phone-word a loop on 0
    assert len(arcs) == len(PHONES)  # one per phone, silence included
    sil_word = lang.words["sil"]
    assert [a[2] for a in arcs if a[3] == str(sil_word)] == [str(lang.phones["sil_S"])]
    with_silence = lexicon_fst_text(make_lang(LEXICON, ["sil"], list(PHONES[1:])), False)
    assert f" {lang.phones['sil']} 0 " in with_silence  # the 0.5 lang offers silence arcs
