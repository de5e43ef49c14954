"""The den FST and a supervision with a left-biphone tree (context width 2, central
position 1: the chain recipes' ``build_tree.sh --context-opts "--context-width=2
--central-position=1"``), so the context composition and H see real context."""

import numpy as np
import pytest

from paravg.chain.fst_arrays import fst_to_arrays
from paravg.chain.supervision import SupervisionOptions, alignment_supervision

PHONES = (1, 2, 3)


def pdf(phone, pdf_class, left):
    """The full biphone tree's leaves: one pdf per (phone, pdf-class, left phone 0..3)."""
    return ((phone - 1) * 2 + pdf_class) * 4 + left


@pytest.fixture(scope="module")
def biphone_models():
    import kaldi_hmm_gmm

    from paravg.chain.topology import chain_topology
    from paravg.gmm.event_map import PDF_CLASS_KEY, ConstantEventMap, table_from_dict
    from paravg.gmm.tree_io import context_dependency_bytes, kaldi_context_dependency

    tree = table_from_dict(
        1,  # the central phone
        {
            p: table_from_dict(
                PDF_CLASS_KEY,
                {
                    c: table_from_dict(
                        0, {left: ConstantEventMap(pdf(p, c, left)) for left in (0, *PHONES)}
                    )
                    for c in (0, 1)
                },
            )
            for p in PHONES
        },
    )
    ctx_dep = kaldi_context_dependency(context_dependency_bytes(tree, 2, 1))
    tm = kaldi_hmm_gmm.TransitionModel(ctx_dep, chain_topology([2, 3], [1]))
    assert (ctx_dep.context_width, ctx_dep.central_position, tm.num_pdfs) == (2, 1, 24)
    return ctx_dep, tm


def accepts(a, labels) -> bool:
    cur = {a.start}
    for lab in labels:
        cur = {
            int(d) for s, d, k in zip(a.src, a.dst, a.ilabel, strict=True) if s in cur and k == lab
        }
    return bool(cur)


def test_den_fst_uses_the_left_phone(biphone_models):
    from paravg.chain.den_fst import create_denominator_fst
    from paravg.chain.phone_lm import estimate_phone_lm

    ctx_dep, tm = biphone_models
    lm, _ = estimate_phone_lm([[1, 2], [2, 2, 3]])
    a = fst_to_arrays(create_denominator_fst(lm, ctx_dep, tm)[0])
    f = lambda p, left: pdf(p, 0, left) + 1  # noqa: E731
    loop = lambda p, left: pdf(p, 1, left) + 1  # noqa: E731
    assert accepts(a, [f(1, 0), loop(1, 0), f(2, 1), loop(2, 1)])
    assert accepts(a, [f(2, 0), f(2, 2), loop(2, 2), f(3, 2)])
    assert not accepts(a, [f(1, 0), f(2, 0)])  # 2 after 1 has left context 1
    assert not accepts(a, [f(2, 0), f(3, 2)])  # the LM has no [2 3] from the start
    seen = set((a.ilabel - 1).tolist())
    assert seen == {
        pdf(p, c, left) for p, left in ((1, 0), (2, 1), (2, 0), (2, 2), (3, 2)) for c in (0, 1)
    }


def test_supervision_uses_the_left_phone(biphone_models):
    ctx_dep, tm = biphone_models
    sup = alignment_supervision(
        [1, 2, 3], [3, 6, 3], ctx_dep, tm, None, SupervisionOptions(1, 1, 3)
    )
    want = {
        (pdf(1, 0, 0), pdf(1, 1, 0), pdf(2, 0, 1), pdf(3, 0, 2)),
        (pdf(1, 0, 0), pdf(2, 0, 1), pdf(2, 1, 1), pdf(3, 0, 2)),
    }
    got = set()

    def walk(s, labels):
        if len(labels) == 4:
            if np.isfinite(sup.final[s]):
                got.add(tuple(labels))
            return
        for i in np.flatnonzero(sup.src == s):
            walk(int(sup.dst[i]), [*labels, int(sup.ilabel[i]) - 1])

    walk(sup.start, [])
    assert got == want
