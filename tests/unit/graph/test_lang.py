"""The Kaldi lang dir: phone and word tables, disambiguation, word boundaries, checks."""

import itertools
import math

import pytest

from paravg.corpus.phones import PHONES
from paravg.errors import DataError
from paravg.graph.lang import (
    REQUIRED_FILES,
    add_disambig,
    base_phone,
    check_lang_dir,
    lexicon_fst_text,
    make_lang,
    position_dependent,
    read_lang,
    read_symbol_table,
    word_boundary,
    write_lang,
)
from paravg.graph.lexicon import LexiconEntry
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


def _paths(fst_text: str, max_phones: int) -> dict[tuple, list[float]]:
    """The costs of every path, by (phone string, word string), of an L text from state 0 to a
    final state with at most ``max_phones`` non-epsilon phones (a depth-first walk of the
    arcs; costs add along the path, plus the final cost)."""
    arcs, finals = {}, {}
    for line in fst_text.splitlines():
        f = line.split()
        if len(f) >= 4:
            cost = float(f[4]) if len(f) > 4 else 0.0
            arcs.setdefault(int(f[0]), []).append((int(f[1]), int(f[2]), int(f[3]), cost))
        elif f:
            finals[int(f[0])] = float(f[1]) if len(f) > 1 else 0.0
    found, stack = {}, [(0, (), (), 0.0)]
    while stack:
        state, phones, words, cost = stack.pop()
        if state in finals:
            found.setdefault((phones, words), []).append(cost + finals[state])
        for dst, phone, word, c in arcs.get(state, []):
            p = (*phones, phone) if phone else phones
            if len(p) <= max_phones:
                stack.append((dst, p, (*words, word) if word else words, cost + c))
    return found


def test_lexicon_fst_accepts_make_lexicon_fst_py_paths_and_no_others():
    """make_lexicon_fst.py's L with ``--sil-prob p``: a word sequence w1..wn is any of its
    pronunciations with one optional silence phone in each of the n + 1 slots (before w1,
    between words, after wn), each slot costing -log p with silence and -log(1 - p)
    without, plus -log(pron-prob) per word. The start state's arc into the silence state
    consumes nothing, so an utterance begins with at most one silence phone (an L whose
    start arc carried ``sil`` asked for two). The walk lists every path up to two words
    and compares the whole set, homophones and a pron-prob included."""
    entries = [
        LexiconEntry("TO", 1.0, ("t", "uw")),
        LexiconEntry("TWO", 0.5, ("t", "uw")),  # a homophone with a pron-prob
        LexiconEntry("A", 1.0, ("ah",)),
    ]
    lang = make_lang(entries, ["sil"], list(PHONES[1:]))
    sil, p = lang.phones["sil"], 0.3
    expected = {}
    for n in (1, 2):
        for seq in itertools.product(entries, repeat=n):
            prons = [tuple(lang.phones[x] for x in position_dependent(e.phones)) for e in seq]
            words = tuple(lang.words[e.word] for e in seq)
            base = sum(-math.log(e.prob) for e in seq)
            for slots in itertools.product((False, True), repeat=n + 1):
                phones = (sil,) if slots[0] else ()
                for pron, after in zip(prons, slots[1:], strict=True):
                    phones += pron + ((sil,) if after else ())
                cost = base + sum(-math.log(p) if s else -math.log(1 - p) for s in slots)
                expected[phones, words] = cost
    found = _paths(lexicon_fst_text(lang, False, sil_prob=p), 7)
    # the walk also reaches 3-word strings of up to 7 phones, and the empty one: keep
    # the word strings of 1-2 words
    found = {k: v for k, v in found.items() if 1 <= len(k[1]) <= 2}
    assert found.keys() == expected.keys()
    for key, costs in found.items():  # one path each, at the expected cost
        assert costs == pytest.approx([expected[key]], abs=1e-5), key
    assert not any(phones[:2] == (sil, sil) for phones, _ in found)  # one start silence
