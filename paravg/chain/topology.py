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
from dataclasses import dataclass


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


@dataclass(frozen=True)
class ChainPhones:
    """The chain model's phones ``1 … num_phones`` and where their sets come from.

    * From the frame targets (``data.targets: data``): target ``k`` is phone ``k + 1``,
      phone 1 (target 0) silence, each phone its own set (root) in the tree:
      ``ChainPhones(num_targets)``.
    * From a lang dir (``data.targets: gmm``, :meth:`of_lang`): Kaldi's chain lang is the
      GMM lang with the chain topology (``local/chain/run_tdnn.sh``: ``cp -r data/lang
      data/lang_chain``, ``gen_topo.py`` over its silence and non-silence phones), so the
      chain phones are the lang's real phones (``phones.txt`` without ``<eps>`` and the
      ``#k``), position-dependent variants included, numbered as there; ``silence`` its
      ``phones/context_indep.csl`` (context-independent in the tree, as build_tree.sh's
      ``--ci-phones``); the sets, roots and extra questions its ``phones/sets.int``,
      ``roots.int``, ``extra_questions.int`` (the variants of a base phone share a root).
    """

    num_phones: int
    silence: tuple[int, ...] = (1,)
    lang_dir: str | None = None

    @classmethod
    def of_lang(cls, lang_dir) -> ChainPhones:
        """The real phones of ``lang_dir`` (they must be ``1 … K``, as prepare_lang.sh
        numbers them) and its context-independent phones."""
        from pathlib import Path

        from paravg.errors import DataError

        d = Path(lang_dir)
        ids = []
        for n, line in enumerate((d / "phones.txt").read_text().splitlines(), 1):
            fields = line.split()
            if len(fields) != 2 or not fields[1].isdigit():
                raise DataError(f"{d / 'phones.txt'}, line {n}: expected '<phone> <id>'")
            if fields[0][0] not in "<#":
                ids.append(int(fields[1]))
        if not ids or sorted(ids) != list(range(1, len(ids) + 1)):
            raise DataError(
                f"{d / 'phones.txt'}: the chain phones are the lang's real phones numbered "
                f"1 … K; got ids {sorted(ids)[:5]} … ({len(ids)} phones)"
            )
        ci = [int(x) for x in (d / "phones" / "context_indep.csl").read_text().split(":")]
        return cls(len(ids), tuple(sorted(ci)), str(d))

    def topo_text(self) -> str:
        """The chain ``topo`` (gen_topo.py: silence first, then the others)."""
        sil = set(self.silence)
        others = [p for p in range(1, self.num_phones + 1) if p not in sil]
        return chain_topo_text(others, sorted(sil))

    def topology(self):
        import kaldi_hmm_gmm

        topo = kaldi_hmm_gmm.HmmTopology()
        topo.read(self.topo_text())
        return topo
