"""Monophone HMM topology, tree and transition model whose pdfs are the targets.

The network's targets are per-frame phone ids, so each phone is a one-state HMM whose
single pdf is its target: Kaldi's topology entry

    <State> 0 <PdfClass> 0 <Transition> 0 0.75 <Transition> 1 0.25 </State>
    <State> 1 </State>

(self-loop 0.75, exit 0.25: the initial probabilities ``gmm-init-mono`` gives a state;
with ``self_loop_scale = 0.1`` and ``transition_scale = 1.0`` in the graph they matter
little). The tree is Kaldi's ``MonophoneContextDependencyShared`` over the phone sets
(``phones/sets.int``: every word-position variant of a base phone shares one pdf), which
numbers the pdfs in the order of the sets, so pdf ``k`` is the k-th base phone, i.e.
target ``k`` (``sil`` = 0). :func:`check_pdfs_are_targets` verifies that.

The transition model is kaldi-hmm-gmm's ``TransitionModel`` (Kaldi's
hmm/transition-model.cc). :func:`transition_model_text` writes it in Kaldi's text form
(``<TransitionModel> <Topology>… <Triples>… <LogProbs>…``) for a ``final.mdl``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np

from paravg.errors import DataError
from paravg.graph.lang import Lang, base_phone

SELF_LOOP_PROB = 0.75


def monophone_topo_text(phone_ids: Sequence[int], self_loop: float = SELF_LOOP_PROB) -> str:
    """Kaldi ``topo`` text: one emitting state with a self-loop, for every phone."""
    return (
        "<Topology>\n<TopologyEntry>\n<ForPhones>\n"
        + " ".join(str(p) for p in phone_ids)
        + "\n</ForPhones>\n"
        + f"<State> 0 <PdfClass> 0 <Transition> 0 {self_loop:g} "
        + f"<Transition> 1 {1.0 - self_loop:g} </State>\n"
        + "<State> 1 </State>\n</TopologyEntry>\n</Topology>\n"
    )


def lang_topo_text(lang: Lang) -> str:
    """The topology of every (non-disambiguation) phone of ``lang``."""
    return monophone_topo_text(sorted(i for p, i in lang.phones.items() if p[0] not in "<#"))


def read_topology(topo_text: str):
    """kaldi-hmm-gmm ``HmmTopology`` from Kaldi's text form."""
    import kaldi_hmm_gmm

    topo = kaldi_hmm_gmm.HmmTopology()
    try:
        topo.read(topo_text)
    except Exception as exc:  # the binding raises RuntimeError with Kaldi's message
        raise DataError(f"topology does not parse: {exc}") from exc
    return topo


def shared_tree(lang: Lang, topo):
    """Monophone tree with one pdf per phone set (``gmm-init-mono --shared-phones``)."""
    import kaldi_hmm_gmm

    sets = [[lang.phones[p] for p in s] for s in lang.sets]
    return kaldi_hmm_gmm.monophone_context_dependency_shared(
        sets, topo.get_phone_to_num_pdf_classes()
    )


def transition_model(lang: Lang, topo_text: str | None = None):
    """(topology, tree, TransitionModel) of ``lang`` with the monophone topology."""
    import kaldi_hmm_gmm

    topo = read_topology(topo_text or lang_topo_text(lang))
    tree = shared_tree(lang, topo)
    return topo, tree, kaldi_hmm_gmm.TransitionModel(tree, topo)


def chain_transition_model(lang: Lang):
    """(topology text, tree, TransitionModel) of ``lang`` with the chain topology
    (``steps/nnet3/chain/gen_topo.py``, :mod:`paravg.chain.topology`: one state, a
    forward and a self-loop pdf-class) and the shared monophone tree over the lang's phone
    sets: set k (target k, chain phone k + 1 of :mod:`paravg.chain.prepare`) gets the
    forward pdf 2k and the self-loop pdf 2k + 1, the pdfs of the chain model's outputs
    (:func:`check_pdfs_are_chain_targets`)."""
    import kaldi_hmm_gmm

    from paravg.chain.topology import chain_topo_text

    real = [(p, i) for p, i in lang.phones.items() if p[0] not in "<#"]
    silence = {v for p in lang.silence for v in lang.variants(p)}
    topo_text = chain_topo_text(
        sorted(i for p, i in real if p not in silence), sorted(i for p, i in real if p in silence)
    )
    topo = read_topology(topo_text)
    tree = shared_tree(lang, topo)
    return topo_text, tree, kaldi_hmm_gmm.TransitionModel(tree, topo)


def check_pdfs_are_chain_targets(lang: Lang, trans_model, target_phones: Sequence[str]) -> None:
    """Raise unless every variant of target k's phone has forward pdf 2k and self-loop
    pdf 2k + 1 (the chain tree of :mod:`paravg.chain.prepare`)."""
    want = {p: k for k, p in enumerate(target_phones)}
    names = lang.phone_names()
    bad = set()
    for t in trans_model.tuples:
        f = {k: int(v) for k, v in re.findall(r"(\w+)=(-?\d+)", str(t))}
        phone = base_phone(names[f["phone"]])
        k = want.get(phone)
        if k is None or (f["forward_pdf"], f["self_loop_pdf"]) != (2 * k, 2 * k + 1):
            bad.add(phone)
    if bad or trans_model.num_pdfs != 2 * len(target_phones):
        raise DataError(
            f"chain transition model: pdfs are not 2k / 2k + 1 of target k for phones "
            f"{sorted(bad)[:10]} ({trans_model.num_pdfs} pdfs for {len(target_phones)} targets)"
        )


def pdf_of_phone(lang: Lang, trans_model) -> dict[str, int]:
    """Base phone -> pdf id, read back from the transition model."""
    names = lang.phone_names()
    out: dict[str, int] = {}
    for tid in range(1, trans_model.num_transition_ids + 1):
        phone = names[trans_model.transition_id_to_phone(tid)]
        out.setdefault(base_phone(phone), trans_model.transition_id_to_pdf(tid))
    return out


def check_pdfs_are_targets(lang: Lang, trans_model, target_phones: Sequence[str]) -> None:
    """Raise unless pdf k is the phone of target k for every target."""
    got = pdf_of_phone(lang, trans_model)
    want = {p: k for k, p in enumerate(target_phones)}
    if got != want:
        bad = sorted(p for p in want if got.get(p) != want[p])
        raise DataError(f"transition model pdfs are not the targets for phones {bad[:10]}")


def tid_to_pdf(trans_model) -> np.ndarray:
    """int array t -> pdf of transition-id t (index 0, no transition-id, is -1)."""
    pdfs = np.asarray(trans_model.transition_id_to_pdf_array(), dtype=np.int64)
    if len(pdfs) == trans_model.num_transition_ids:
        pdfs = np.concatenate([[-1], pdfs])
    pdfs[0] = -1
    return pdfs


def transition_model_text(trans_model, topo_text: str) -> str:
    """Kaldi's text form of a transition model (what ``gmm-copy --binary=false`` shows
    before the GMMs): topology, ``<Triples>`` (phone, HMM state, pdf) per transition
    state, or ``<Tuples>`` (phone, HMM state, forward pdf, self-loop pdf) for a topology
    with separate self-loop pdf-classes (the chain one), ``<LogProbs>`` per
    transition-id (index 0 unused)."""
    fields = [dict(re.findall(r"(\w+)=(-?\d+)", str(t))) for t in trans_model.tuples]
    # the binding exposes the fields only through str(); Kaldi writes <Triples> when
    # every state's forward and self-loop pdf-classes agree (HmmTopology::IsHmm), else
    # <Tuples> with the self-loop pdf (the chain topology)
    is_hmm = all(f["forward_pdf"] == f["self_loop_pdf"] for f in fields)
    rows = [
        f"{f['phone']} {f['hmm_state']} {f['forward_pdf']}"
        + ("" if is_hmm else f" {f['self_loop_pdf']}")
        for f in fields
    ]
    tag = "Triples" if is_hmm else "Tuples"
    log_probs = np.asarray(trans_model.log_probs).ravel()
    return (
        "<TransitionModel> \n"
        + topo_text
        + f"<{tag}> {len(rows)} \n"
        + "".join(f"{r} \n" for r in rows)
        + f"</{tag}> \n<LogProbs> \n [ "
        + " ".join(f"{x:.9g}" for x in log_probs)
        + " ]\n</LogProbs> \n</TransitionModel> \n"
    )
