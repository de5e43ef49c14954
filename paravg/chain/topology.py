"""The chain topology of Kaldi's ``steps/nnet3/chain/gen_topo.py``.

One emitting state per phone, with separate pdf-classes on the forward transition
(``<ForwardPdfClass> 0``) and on the self-loop (``<SelfLoopPdfClass> 1``)::

    <State> 0 <ForwardPdfClass> 0 <SelfLoopPdfClass> 1
              <Transition> 0 0.5 <Transition> 1 0.5 </State>
    <State> 1 </State>

(one line in the file)

Graphs are always built with ``reorder=true``, so the forward pdf-class is emitted on the
first frame of a phone and the self-loop pdf-class on every later frame: a phone lasting
``d`` (subsampled) frames emits ``fwd, loop, loop, ...`` (``d - 1`` loops); the minimum
duration is one frame, which is what lets chain models run at a third of the frame rate.
The 0.5 probabilities only make the entry normalise; chain graphs do not use them as
acoustic-model transition probabilities (there is no transition-probability training).
"""

from __future__ import annotations

from collections.abc import Sequence


def chain_topo_text(nonsilence_phones: Sequence[int], silence_phones: Sequence[int]) -> str:
    """Kaldi ``topo`` text exactly as ``gen_topo.py NONSIL SIL`` prints it (silence first)."""
    phones = [int(p) for p in silence_phones] + [int(p) for p in nonsilence_phones]
    if not phones or min(phones) < 1 or len(set(phones)) != len(phones):
        raise ValueError(f"chain topology needs distinct phone ids >= 1, got {phones}")
    return (
        "<Topology>\n<TopologyEntry>\n<ForPhones>\n"
        + " ".join(str(p) for p in phones)
        + "\n</ForPhones>\n"
        + "<State> 0 <ForwardPdfClass> 0 <SelfLoopPdfClass> 1 "
        + "<Transition> 0 0.5 <Transition> 1 0.5 </State>\n"
        + "<State> 1 </State>\n</TopologyEntry>\n</Topology>\n"
    )


def chain_topology(nonsilence_phones: Sequence[int], silence_phones: Sequence[int]):
    """kaldi-hmm-gmm ``HmmTopology`` of :func:`chain_topo_text`."""
    import kaldi_hmm_gmm

    topo = kaldi_hmm_gmm.HmmTopology()
    topo.read(chain_topo_text(nonsilence_phones, silence_phones))
    return topo
