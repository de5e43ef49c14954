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


def _left_context_model(lang_dir, tmp_path):
    """A hand-made triphone tree over the lang's phones (each phone's pdf split on whether
    its left phone is one of the first five phones) written as Kaldi's binary ``tree``,
    and the text ``final.mdl`` of ``TransitionModel(tree, topo)``, as gmm-init-model
    makes them."""
    import kaldi_hmm_gmm

    from paravg.gmm.event_map import ConstantEventMap, SplitEventMap, TableEventMap
    from paravg.gmm.tree_io import load_kaldi_tree, write_tree
    from paravg.graph.lang import read_lang
    from paravg.graph.topology import read_topology, transition_model_text

    lang = read_lang(lang_dir)
    phones = sorted(i for p, i in lang.phones.items() if p[0] not in "<#")
    topo_text = (lang_dir / "topo").read_text()
    topo = read_topology(topo_text)
    assert set(topo.get_phone_to_num_pdf_classes()[p] for p in phones) == {1}
    left_set = tuple(phones[:5])
    table: list = [None] * (max(phones) + 1)
    for n, p in enumerate(phones):
        table[p] = SplitEventMap(0, left_set, ConstantEventMap(2 * n), ConstantEventMap(2 * n + 1))
    tree = TableEventMap(1, tuple(table))
    write_tree(tmp_path / "tree", tree, 3, 1)
    ctx = load_kaldi_tree(tmp_path / "tree")
    trans = kaldi_hmm_gmm.TransitionModel(ctx, topo)
    (tmp_path / "final.mdl").write_text(transition_model_text(trans, topo_text))
    return 2 * len(phones)


def test_lang_source_with_a_users_triphone_tree(small_graph, tmp_path):
    """graph.tree: a context-dependent final.mdl + its tree give a context-dependent HCLG
    whose transition-ids are the model's; the tree is copied beside the graph."""
    import kaldifst

    from paravg.graph.hclg import read_fst
    from paravg.graph.load import read_transition_model

    src = small_graph[0]
    num_pdfs = _left_context_model(src / "lang", tmp_path)
    out = tmp_path / "g"
    summary = build_from_lang(
        src / "lang", src / "lm.arpa", tmp_path / "final.mdl", tmp_path / "tree", out
    )
    assert summary["num_pdfs"] == num_pdfs
    assert (summary["context_width"], summary["central_position"]) == (3, 1)
    assert (out / "tree").read_bytes() == (tmp_path / "tree").read_bytes()
    # every input label is a transition-id of the triphone model, and the graph uses
    # pdfs of both halves of the split (left context in and out of the set)
    tid_to_pdf = read_transition_model(tmp_path / "final.mdl").tid_to_pdf
    hclg = read_fst(out / "HCLG.fst")
    pdfs = set()
    for state in range(hclg.num_states):
        arcs = kaldifst.ArcIterator(hclg, state)
        while not arcs.done:
            if arcs.value.ilabel:
                pdfs.add(int(tid_to_pdf[arcs.value.ilabel]))
            arcs.next()
    assert {p % 2 for p in pdfs} == {0, 1}
    assert summary["sizes"]["HCLG"] != small_graph[1]["sizes"]["HCLG"]


def test_lang_source_triphone_model_without_its_tree(small_graph, tmp_path):
    src = small_graph[0]
    _left_context_model(src / "lang", tmp_path)
    with pytest.raises(DataError, match=r"final\.mdl: .* give its tree: graph\.tree"):
        build_from_lang(src / "lang", src / "lm.arpa", tmp_path / "final.mdl", None, tmp_path / "g")


def test_lang_source_tree_of_another_model(small_graph, tmp_path):
    src = small_graph[0]
    _left_context_model(src / "lang", tmp_path)
    with pytest.raises(DataError, match=r"transition\.mdl: .*do not belong together"):
        build_from_lang(
            src / "lang", src / "lm.arpa", src / "transition.mdl", tmp_path / "tree", tmp_path / "g"
        )


def test_lang_source_tree_file_that_is_not_a_tree(small_graph, tmp_path):
    src = small_graph[0]
    (tmp_path / "tree").write_bytes(b"\0BContextDependency garbage")
    with pytest.raises(DataError, match=r"tree: not a Kaldi binary tree file"):
        build_from_lang(
            src / "lang", src / "lm.arpa", src / "transition.mdl", tmp_path / "tree", tmp_path / "g"
        )
