"""The whole tree recipe of train_deltas.sh on synthetic 3-state triphone data: acc-tree-stats,
cluster-phones + extra questions, compile-questions, build-tree, the tree file loaded by
kaldi-hmm-gmm, mapping every seen (context, pdf-class) to our leaf, and a TransitionModel
built on it."""

from __future__ import annotations

import kaldi_hmm_gmm
import numpy as np

from paravg.gmm.build_tree import build_tree, map_stats, read_roots
from paravg.gmm.questions import cluster_phones, compile_questions, read_int_sets
from paravg.gmm.tree_io import load_kaldi_tree, read_tree, write_tree
from paravg.gmm.tree_stats import sum_tree_stats
from tests.unit.gmm.synthetic import TRI_PHONES as PHONES
from tests.unit.gmm.synthetic import TRI_SIL as SIL
from tests.unit.gmm.synthetic import TRI_TOPO as TOPO
from tests.unit.gmm.synthetic import triphone_job_stats


def test_tree_recipe_end_to_end(tmp_path):
    rng = np.random.default_rng(0)
    jobs = []
    for _ in range(2):  # two "nj" jobs, summed as sum-tree-stats
        jobs.append(triphone_job_stats(rng))
    stats = sum_tree_stats(jobs)

    sets = [[SIL], *([p] for p in PHONES)]
    questions = cluster_phones(stats, sets, pdf_class_list=[1])
    # phones are clustered on their own statistics (mean 4·phone): the top questions
    # split the phone line in two, and every phone set is a question
    assert sorted(questions[0] + questions[1]) == [SIL, *PHONES]
    assert all(q == list(range(q[0], q[-1] + 1)) for q in questions)
    assert all(s in questions for s in sets)
    # the left-context effect is on 'vowels' 2 3 4: an extra question, as a lang dir's
    (tmp_path / "extra_questions.int").write_text("1\n2 3 4 5 6 7\n2 3 4\n")
    questions += read_int_sets(tmp_path / "extra_questions.int")
    topo = kaldi_hmm_gmm.HmmTopology()
    topo.read(TOPO)
    num_pdf_classes = {p: n for p, n in enumerate(topo.get_phone_to_num_pdf_classes()) if p > 0}
    compiled = compile_questions(questions, 3, max(num_pdf_classes.values()))
    (tmp_path / "roots.txt").write_text(
        "shared split 1\n" + "".join(f"not-shared split {p}\n" for p in PHONES)
    )
    roots = read_roots(tmp_path / "roots.txt")

    built = build_tree(stats, compiled, roots, num_pdf_classes, max_leaves=40)
    assert 19 <= built.num_leaves <= 40 and built.num_leaves % 8 == 0
    write_tree(tmp_path / "tree", built.tree, 3, 1)
    assert read_tree(tmp_path / "tree") == (built.tree, 3, 1)

    ctx = load_kaldi_tree(tmp_path / "tree")
    assert (ctx.num_pdfs, ctx.context_width, ctx.central_position) == (built.num_leaves, 3, 1)
    leaves = map_stats(stats, built.tree)
    for i in range(len(stats)):
        event = stats.event(i)
        window = [event.get(k, 0) for k in range(3)]  # a CI phone's context: any phone
        assert ctx.compute(window, event[-1]) == (True, leaves[i])
    # each (phone, pdf-class) splits on the vowel question or not at all; silence's shared
    # root can only be split on the pdf-class (a CI phone's events have no context keys)
    separated = 0
    for central in PHONES:
        for pdf_class in range(3):
            vowel = {ctx.compute([left, central, 7], pdf_class) for left in (2, 3, 4)}
            other = {ctx.compute([left, central, 7], pdf_class) for left in (0, 1, 5, 6, 7)}
            assert len(vowel) == len(other) == 1
            separated += vowel != other
    silence = {
        ctx.compute([left, SIL, right], k) for left in (0, 2) for right in (0, 5) for k in range(3)
    }
    assert len(silence) == len({ctx.compute([0, SIL, 0], k) for k in range(3)}) >= 1
    assert separated == built.num_leaves - 18 - len(silence)  # 18 stub leaves of the phones
    assert separated >= 10
    # a context never seen still maps (the questions cover every phone)
    assert ctx.compute([7, 6, 5], 2)[0]

    trans = kaldi_hmm_gmm.TransitionModel(ctx, topo)
    assert trans.num_pdfs == built.num_leaves
