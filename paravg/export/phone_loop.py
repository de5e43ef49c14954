"""A monophone transition model whose pdf is the target id, and a phone-loop graph.

Used to check an export with Kaldi's own decoder when no lexicon or language model is at
hand (a phone recogniser: every phone is a "word").

Topology (one emitting state per phone, pdf class 0, HmmTopology text form)::

    <State> 0 <PdfClass> 0 <Transition> 0 p_loop <Transition> 1 1-p_loop </State>
    <State> 1 </State>

Phone k (Kaldi id k + 1; 0 is ``<eps>``) has pdf k, so the network's target k is its pdf.
Transition ids: the tuples in order, each with one id per transition of its HMM state
(``TransitionModel::ComputeDerived``), from 1.

HCLG of the loop (tropical weights = −log probability)::

    0 --<eps>:phone--> s_p          (weight: phone_penalty)
    s_p --self-loop tid:<eps>--> s_p  (−log p_loop)
    s_p --forward tid:<eps>--> 0      (−log (1 − p_loop));  state 0 is final.
"""

from __future__ import annotations

import math
from pathlib import Path

from paravg.export.transition_model import TransitionModel
from paravg.io import write_text_atomic


def monophone_topology_text(num_phones: int, p_loop: float = 0.5) -> str:
    phones = " ".join(str(p) for p in range(1, num_phones + 1))
    return (
        "<Topology>\n<TopologyEntry>\n<ForPhones>\n"
        f"{phones}\n</ForPhones>\n"
        f"<State> 0 <PdfClass> 0 <Transition> 0 {p_loop} <Transition> 1 {1 - p_loop} </State>\n"
        "<State> 1 </State>\n</TopologyEntry>\n</Topology>\n"
    )


def monophone_transition_model(num_phones: int, p_loop: float = 0.5):
    """``(kaldi_hmm_gmm.TransitionModel, TransitionModel)``: phone k + 1 -> pdf k."""
    import kaldi_hmm_gmm as khg

    topo = khg.HmmTopology()
    topo.read(monophone_topology_text(num_phones, p_loop))
    phones = list(range(1, num_phones + 1))
    ctx = khg.monophone_context_dependency(phones, [0] + [1] * num_phones)
    tm = khg.TransitionModel(ctx, topo)
    return tm, TransitionModel.from_kaldi_hmm_gmm(tm)


def transition_ids(tm: TransitionModel) -> list[list[tuple[int, int, int]]]:
    """Per tuple: ``(transition id, destination state, pdf)`` of each of its transitions."""
    out, tid = [], 1
    for phone, state, fwd, loop in tm.tuples:
        entry = tm.entries[tm.phone2idx[phone]]
        row = []
        for dst, _prob in entry[state].transitions:
            row.append((tid, dst, loop if dst == state else fwd))
            tid += 1
        out.append(row)
    return out


def write_phone_loop_graph(
    tm: TransitionModel, phone_names: list[str], out_dir: str | Path, phone_penalty: float = 0.0
) -> Path:
    """Write ``HCLG.fst``, ``words.txt``, ``phones.txt``, ``phones/word_boundary.int`` and
    ``phones/silence.csl`` of a phone loop into ``out_dir``."""
    import kaldifst

    out = Path(out_dir)
    (out / "phones").mkdir(parents=True, exist_ok=True)
    lines = []
    states = 1
    for (phone, state, _f, _l), tids in zip(tm.tuples, transition_ids(tm), strict=True):
        entry = tm.entries[tm.phone2idx[phone]]
        probs = dict(entry[state].transitions)
        s = states
        states += 1
        lines.append(f"0 {s} 0 {phone} {phone_penalty}")
        for tid, dst, _pdf in tids:
            w = -math.log(probs[dst])
            lines.append(f"{s} {s} {tid} 0 {w}" if dst == state else f"{s} 0 {tid} 0 {w}")
    lines.append("0")
    fst = kaldifst.compile("\n".join(lines), acceptor=False)
    kaldifst.arcsort(fst, sort_type="ilabel")
    fst.write(str(out / "HCLG.fst"))
    table = "<eps> 0\n" + "".join(f"{n} {i}\n" for i, n in enumerate(phone_names, 1))
    write_text_atomic(out / "words.txt", table)
    write_text_atomic(out / "phones.txt", table)
    ids = range(1, len(phone_names) + 1)
    write_text_atomic(
        out / "phones" / "word_boundary.int", "".join(f"{i} singleton\n" for i in ids)
    )
    write_text_atomic(out / "phones" / "silence.csl", "1\n")
    return out
