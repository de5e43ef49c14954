"""A tiny chain setup: the chain topology over 3 phones, a monophone tree, its
transition model (6 pdfs: forward and self-loop pdf-class per phone), a phone LM."""

import pytest

PHONE_SENTENCES = [[1, 2, 3, 1], [2, 3, 2, 1, 1], [3, 3, 1, 2], [1, 2, 3]]


@pytest.fixture(scope="module")
def chain_models():
    import kaldi_hmm_gmm

    from paravg.chain.topology import chain_topology

    topo = chain_topology([2, 3], [1])
    ctx_dep = kaldi_hmm_gmm.monophone_context_dependency(
        [1, 2, 3], list(topo.get_phone_to_num_pdf_classes())
    )
    return ctx_dep, kaldi_hmm_gmm.TransitionModel(ctx_dep, topo)


@pytest.fixture(scope="module")
def den_fst(chain_models):
    from paravg.chain.den_fst import create_denominator_fst
    from paravg.chain.phone_lm import estimate_phone_lm

    ctx_dep, trans_model = chain_models
    lm, _ = estimate_phone_lm(PHONE_SENTENCES)
    fst, _ = create_denominator_fst(lm, ctx_dep, trans_model)
    return fst
