"""A user's lang dir / HCLG: bad inputs are reported with the file before decoding."""

import shutil

import pytest

from paravg.errors import DataError
from paravg.graph.user import build_from_lang, import_hclg


def test_hclg_source_is_checked_and_copied(small_graph, tmp_path):
    src = small_graph[0]
    summary = import_hclg(src / "HCLG.fst", src / "words.txt", src / "transition.mdl", tmp_path)
    assert summary["num_pdfs"] == 40
    assert (tmp_path / "HCLG.fst").read_bytes() == (src / "HCLG.fst").read_bytes()


def test_hclg_with_a_smaller_model_is_rejected(small_graph, tmp_path):
    src = small_graph[0]
    text = (src / "transition.mdl").read_text()
    # keep only the first 10 transition states: the graph's transition-ids exceed them
    head, rest = text.split("<Triples> ", 1)
    _count, body = rest.split("\n", 1)
    rows = body.split("\n")
    small = (
        head + "<Triples> 10 \n" + "\n".join(rows[:10]) + "\n" + body[body.index("</Triples>") :]
    )
    (tmp_path / "final.mdl").write_text(small)
    with pytest.raises(DataError, match=r"HCLG\.fst: state \d+ has input label"):
        import_hclg(src / "HCLG.fst", src / "words.txt", tmp_path / "final.mdl", tmp_path / "g")


def test_binary_model_is_refused_with_the_conversion_command(tmp_path, small_graph):
    (tmp_path / "final.mdl").write_bytes(b"\x00B<TransitionModel>")
    src = small_graph[0]
    with pytest.raises(DataError, match="gmm-copy --binary=false"):
        import_hclg(src / "HCLG.fst", src / "words.txt", tmp_path / "final.mdl", tmp_path / "g")


def test_lang_source_builds_the_same_graph(small_graph, tmp_path):
    src = small_graph[0]
    summary = build_from_lang(src / "lang", src / "lm.arpa", src / "transition.mdl", None, tmp_path)
    assert summary["num_pdfs"] == 40
    assert summary["sizes"]["HCLG"] == small_graph[1]["sizes"]["HCLG"]


def test_lang_phones_disagreeing_with_the_model(small_graph, tmp_path):
    src = small_graph[0]
    lang = tmp_path / "lang"
    shutil.copytree(src / "lang", lang)
    lines = (lang / "phones.txt").read_text().splitlines()
    extra = len(lines)
    (lang / "phones.txt").write_text("\n".join([*lines, f"zz_S {extra}"]) + "\n")
    with pytest.raises(DataError, match=r"phones\.txt and .*transition\.mdl disagree"):
        build_from_lang(lang, src / "lm.arpa", src / "transition.mdl", None, tmp_path / "g")


def test_lang_dir_missing_a_file(small_graph, tmp_path):
    src = small_graph[0]
    lang = tmp_path / "lang"
    shutil.copytree(src / "lang", lang)
    (lang / "topo").unlink()
    with pytest.raises(DataError, match=r"topo: missing from the lang dir"):
        build_from_lang(lang, src / "lm.arpa", src / "transition.mdl", None, tmp_path / "g")


def test_arpa_with_words_outside_words_txt(small_graph, tmp_path):
    src = small_graph[0]
    text = (src / "lm.arpa").read_text().replace("\tCALL\t", "\tCALLS\t", 1)
    (tmp_path / "lm.arpa").write_text(text)
    with pytest.raises(DataError, match=r"lm\.arpa:\d+: 1 words of the ARPA file are not in"):
        build_from_lang(src / "lang", tmp_path / "lm.arpa", src / "transition.mdl", None, tmp_path)


def _cut_short(src, dst):
    """A copy of ``src`` with its second half missing (a copy interrupted midway)."""
    data = src.read_bytes()
    dst.write_bytes(data[: len(data) // 2])
    return dst


def test_a_truncated_hclg_is_named_not_an_attribute_error(small_graph, tmp_path):
    """B3: kaldifst returns None for a file cut short; the reader says which file."""
    src = small_graph[0]
    hclg = _cut_short(src / "HCLG.fst", tmp_path / "HCLG.fst")
    with pytest.raises(DataError, match=rf"{hclg}: cannot be read as an OpenFst VectorFst"):
        import_hclg(hclg, src / "words.txt", src / "transition.mdl", tmp_path / "g")
    assert not (tmp_path / "g").exists()


def test_a_truncated_g_fst_is_named_before_anything_is_written(small_graph, tmp_path):
    """B3: a G.fst cut short crashed the graph build (SIGSEGV, empty log) and left a
    stray copy of it in the output directory."""
    src = small_graph[0]
    good = tmp_path / "G_good.fst"
    build_from_lang(src / "lang", src / "lm.arpa", src / "transition.mdl", None, tmp_path / "a")
    shutil.copy(tmp_path / "a" / "G.fst", good)
    cut = _cut_short(good, tmp_path / "G.fst")
    out = tmp_path / "g"
    with pytest.raises(DataError, match=rf"{cut}: cannot be read as an OpenFst VectorFst"):
        build_from_lang(src / "lang", cut, src / "transition.mdl", None, out)
    assert not out.exists()
    summary = build_from_lang(src / "lang", good, src / "transition.mdl", None, out)
    assert summary["sizes"]["HCLG"] == small_graph[1]["sizes"]["HCLG"]
