"""A lang dir from a user's Kaldi dict dir: every file as utils/prepare_lang.sh writes it
(expectations derived by hand from prepare_lang.sh), and the dict dir's errors."""

from pathlib import Path

import pytest

from paravg.errors import DataError
from paravg.graph.dict_dir import map_text, prepare_lang, read_dict_dir
from paravg.graph.lang import read_lang
from paravg.graph.topology import lang_topo_text

DICT = {
    "silence_phones.txt": "sil\nspn\n",
    "nonsilence_phones.txt": "ah0 ah1\nk\nt\n",
    "optional_silence.txt": "sil\n",
    "extra_questions.txt": "sil spn\nah0\nah1\n",
    "lexicon.txt": "<unk> spn\ncat k ah1 t\na ah0\nat ah1 t\nta t ah0\ntat t ah1 t\nkat k ah1 t\n",
}

# <eps> 0; silence lines then non-silence lines, each phone's variants in order; #0..#3.
PHONES = [
    "<eps>",
    "sil",
    "sil_B",
    "sil_E",
    "sil_I",
    "sil_S",
    "spn",
    "spn_B",
    "spn_E",
    "spn_I",
    "spn_S",
    "ah0_B",
    "ah0_E",
    "ah0_I",
    "ah0_S",
    "ah1_B",
    "ah1_E",
    "ah1_I",
    "ah1_S",
    "k_B",
    "k_E",
    "k_I",
    "k_S",
    "t_B",
    "t_E",
    "t_I",
    "t_S",
    "#0",
    "#1",
    "#2",
    "#3",
]
WORDS = ["<eps>", "<unk>", "a", "at", "cat", "kat", "ta", "tat", "#0", "<s>", "</s>"]
SETS = [
    "sil sil_B sil_E sil_I sil_S",
    "spn spn_B spn_E spn_I spn_S",
    "ah0_B ah0_E ah0_I ah0_S ah1_B ah1_E ah1_I ah1_S",
    "k_B k_E k_I k_S",
    "t_B t_E t_I t_S",
]
SETS_INT = ["1 2 3 4 5", "6 7 8 9 10", "11 12 13 14 15 16 17 18", "19 20 21 22", "23 24 25 26"]
EXTRA_Q = [
    "sil sil_B sil_E sil_I sil_S spn spn_B spn_E spn_I spn_S",  # the dict's questions
    "ah0_B ah0_E ah0_I ah0_S",
    "ah1_B ah1_E ah1_I ah1_S",
    "ah0_B ah1_B k_B t_B",  # position questions over all non-silence phones
    "ah0_E ah1_E k_E t_E",
    "ah0_I ah1_I k_I t_I",
    "ah0_S ah1_S k_S t_S",
    "sil spn",  # then over the silence phones: bare, _B, _E, _I, _S
    "sil_B spn_B",
    "sil_E spn_E",
    "sil_I spn_I",
    "sil_S spn_S",
]
EXTRA_Q_INT = [
    "1 2 3 4 5 6 7 8 9 10",
    "11 12 13 14",
    "15 16 17 18",
    "11 15 19 23",
    "12 16 20 24",
    "13 17 21 25",
    "14 18 22 26",
    "1 6",
    "2 7",
    "3 8",
    "4 9",
    "5 10",
]


def write_dict(d: Path, **changes) -> Path:
    d.mkdir(parents=True, exist_ok=True)
    files = {**DICT, **changes}
    for name, text in files.items():
        if text is not None:
            (d / name).write_text(text)
    return d


@pytest.fixture
def lang_dir(tmp_path):
    d = write_dict(tmp_path / "dict")
    out = tmp_path / "lang"
    lang = prepare_lang(d, "<unk>", out, "")
    (out / "topo").write_text(lang_topo_text(lang))
    return out


def lines(path: Path) -> list[str]:
    return path.read_text().splitlines()


def test_symbol_tables_match_prepare_lang(lang_dir):
    assert lines(lang_dir / "phones.txt") == [f"{p} {i}" for i, p in enumerate(PHONES)]
    assert lines(lang_dir / "words.txt") == [f"{w} {i}" for i, w in enumerate(WORDS)]
    assert lines(lang_dir / "oov.txt") == ["<unk>"]
    assert lines(lang_dir / "oov.int") == ["1"]


def test_sets_roots_and_extra_questions_match_prepare_lang(lang_dir):
    ph = lang_dir / "phones"
    assert lines(ph / "sets.txt") == SETS
    assert lines(ph / "sets.int") == SETS_INT
    assert lines(ph / "roots.txt") == [f"shared split {s}" for s in SETS]
    assert lines(ph / "roots.int") == [f"shared split {s}" for s in SETS_INT]
    assert lines(ph / "extra_questions.txt") == EXTRA_Q
    assert lines(ph / "extra_questions.int") == EXTRA_Q_INT


def test_phone_lists_match_prepare_lang(lang_dir):
    ph = lang_dir / "phones"
    sil = PHONES[1:11]
    nonsil = PHONES[11:27]
    assert lines(ph / "silence.txt") == sil
    assert lines(ph / "context_indep.txt") == sil
    assert lines(ph / "nonsilence.txt") == nonsil
    assert lines(ph / "silence.csl") == [":".join(str(i) for i in range(1, 11))]
    assert lines(ph / "nonsilence.int") == [str(i) for i in range(11, 27)]
    assert lines(ph / "optional_silence.txt") == ["sil"]
    assert lines(ph / "optional_silence.int") == ["1"]
    assert lines(ph / "disambig.txt") == ["#0", "#1", "#2", "#3"]
    assert lines(ph / "disambig.int") == ["27", "28", "29", "30"]
    kind = {"B": "begin", "E": "end", "I": "internal", "S": "singleton"}
    expected = [f"{p} {kind.get(p[-1], 'nonword') if '_' in p else 'nonword'}" for p in sil]
    expected += [f"{p} {kind[p[-1]]}" for p in nonsil]
    assert lines(ph / "word_boundary.txt") == expected
    assert lines(ph / "word_boundary.int")[:2] == ["1 nonword", "2 begin"]


def test_lexicon_gets_positions_and_homophone_disambiguation(lang_dir):
    lex = lines(lang_dir / "lexiconp_disambig.txt")
    assert "cat 1 k_B ah1_I t_E #1" in lex
    assert "kat 1 k_B ah1_I t_E #2" in lex
    assert "a 1 ah0_S" in lex
    assert "<unk> 1 spn_S" in lex
    assert (lang_dir / "L.fst").stat().st_size > 0
    assert (lang_dir / "L_disambig.fst").stat().st_size > 0
    lang = read_lang(lang_dir)
    assert lang.oov == "<unk>" and lang.optional_silence == "sil"
    assert [" ".join(s) for s in lang.sets] == SETS


def test_gmm_readers_read_the_lang_files(lang_dir):
    from paravg.gmm.build_tree import read_roots
    from paravg.gmm.questions import read_int_sets

    expect = [[int(x) for x in s.split()] for s in EXTRA_Q_INT]
    assert read_int_sets(lang_dir / "phones/extra_questions.int") == expect
    assert read_int_sets(lang_dir / "phones/sets.int") == [
        [int(x) for x in s.split()] for s in SETS_INT
    ]
    roots = read_roots(lang_dir / "phones/roots.int")
    assert roots.phone_sets == tuple(tuple(int(x) for x in s.split()) for s in SETS_INT)
    assert all(roots.shared) and all(roots.split)


def test_lexiconp_is_preferred_and_its_probabilities_kept(tmp_path):
    lexp = "<unk> 1.0 spn\ncat 0.5 k ah1 t\n"
    d = write_dict(tmp_path / "dict", **{"lexiconp.txt": lexp, "lexicon.txt": None})
    dd = read_dict_dir(d)
    assert [(e.word, e.prob, e.phones) for e in dd.entries] == [
        ("<unk>", 1.0, ("spn",)),
        ("cat", 0.5, ("k", "ah1", "t")),
    ]


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"lexicon.txt": "cat k ah1 x\n"}, r"lexicon.txt, line 1: word 'cat' uses phones \['x'\]"),
        ({"lexicon.txt": "a ah0\ncat\n"}, r"lexicon.txt, line 2: word 'cat' has an empty pron"),
        ({"lexicon.txt": "a ah0\na ah0\n"}, r"lexicon.txt, line 2: duplicate entry a ah0 \(first"),
        ({"lexicon.txt": "<s> sil\n"}, r"lexicon.txt, line 1: '<s>' is reserved"),
        ({"lexicon.txt": None}, r"neither lexicon.txt nor lexiconp.txt"),
        ({"lexiconp.txt": "a 1.5 ah0\n"}, r"lexiconp.txt, line 1: expected '<word> <prob in"),
        (
            {"nonsilence_phones.txt": "ah0 ah1\nk\nsil\n"},
            r"nonsilence_phones.txt, line 3: phone "
            r"'sil' is already listed at .*silence_phones.txt, line 1",
        ),
        ({"nonsilence_phones.txt": "k k\n"}, r"line 1: phone 'k' is already listed"),
        ({"nonsilence_phones.txt": "k_B\n"}, r"nonsilence_phones.txt, line 1: phone 'k_B' is res"),
        ({"nonsilence_phones.txt": "\n"}, r"nonsilence_phones.txt: expected at least one phone"),
        ({"nonsilence_phones.txt": "ah0 ah1\n\nk t\n"}, r"phones.txt, line 2: empty line"),
        ({"lexicon.txt": "a ah0\n\n"}, r"lexicon.txt, line 2: empty line"),
        (
            {"extra_questions.txt": "sil\nah0 ah1\n"},
            r"nonsilence_phones.txt, line 1: phones "
            r"ah0 and ah1 share a tree root but no question",
        ),
        (
            {"lexiconp.txt": "<unk> 1.0 spn\na 0.5 ah0\n", "lexicon.txt": "<unk> spn\na ah1\n"},
            r"lexicon.txt, line 2: expected a ah0 as line 2 of lexiconp.txt",
        ),
        ({"optional_silence.txt": "k\n"}, r"optional_silence.txt, line 1: expected one phone of"),
        ({"extra_questions.txt": "sil\nah2\n"}, r"extra_questions.txt, line 2: phones \['ah2'\]"),
    ],
)
def test_dict_dir_errors_name_file_line_and_expectation(tmp_path, changes, message):
    d = write_dict(tmp_path / "dict", **changes)
    with pytest.raises(DataError, match=message):
        read_dict_dir(d)


def test_missing_phone_list_is_named(tmp_path):
    d = write_dict(tmp_path / "dict")
    (d / "silence_phones.txt").unlink()
    with pytest.raises(DataError, match=r"silence_phones.txt: missing from the dict dir"):
        read_dict_dir(d)


def test_oov_word_must_be_in_the_lexicon(tmp_path):
    d = write_dict(tmp_path / "dict")
    with pytest.raises(DataError, match=r"OOV word '<UNK>' is not in the lexicon"):
        prepare_lang(d, "<UNK>", tmp_path / "lang", "")


def test_text_words_missing_from_the_lexicon(tmp_path):
    text = tmp_path / "text"
    text.write_text("u1 cat at\nu2 dog cat zebra\n")
    vocab = WORDS
    with pytest.raises(DataError, match=r"text, line 2: utterance u2: words \['dog', 'zebra'\]"):
        map_text(text, vocab)
    assert map_text(text, vocab, oov="<unk>") == {
        "u1": ["cat", "at"],
        "u2": ["<unk>", "cat", "<unk>"],
    }
