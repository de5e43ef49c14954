"""The reference route: Kaldi's own ``LatticeFasterDecoder`` (kaldi-hmm-gmm's C++), one
search per scoring setting, best path only.

kaldi-hmm-gmm's Python binding returns the best path of a search, not its lattice, so
before paravg had its own lattice search (:mod:`paravg.decode.search`) every scoring
setting (LMWT, WIP) was searched directly: acoustic scale 1/LMWT and WIP added to every
word arc of HCLG, beams rescaled so that they prune as Kaldi's one decode at
``acoustic_scale`` does (:meth:`GraphDecoder.config`). That is the exact best path of
each setting, which Kaldi's lattice rescoring approximates within its lattice beam.

It is kept as the independent reference the lattice search is checked against (tests of
best paths on the demo graph; ``benchmarks/bench_decode.py`` prints both routes side by
side) and for vosk's agreement benchmark. Lattices are not determinised
(``determinize_lattice = false``): the transition model the binding asks for is unused.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import numpy as np

from paravg.decode.search import SearchOptions
from paravg.graph.load import DecodingGraph

log = logging.getLogger(__name__)


def add_word_penalty(hclg, penalty: float):
    """A copy of HCLG with ``penalty`` added to every arc with a word (olabel ≠ 0)."""
    import kaldifst

    if penalty == 0.0:
        return hclg
    lines = []
    for line in hclg.to_str(show_weight_one=True).splitlines():
        f = line.split()
        if len(f) >= 4 and f[3] != "0":
            w = float(f[4]) if len(f) > 4 else 0.0
            f = [*f[:4], f"{w + penalty:.7g}"]
        lines.append(" ".join(f))
    out = kaldifst.compile("\n".join(lines) + "\n", acceptor=False)
    kaldifst.arcsort(out, sort_type="ilabel")
    return out


def _any_transition_model():
    """A TransitionModel for the binding's signature (unused: no determinisation)."""
    import kaldi_hmm_gmm

    from paravg.graph.topology import monophone_topo_text, read_topology

    topo = read_topology(monophone_topo_text([1]))
    tree = kaldi_hmm_gmm.monophone_context_dependency([1], topo.get_phone_to_num_pdf_classes())
    return kaldi_hmm_gmm.TransitionModel(tree, topo)


class GraphDecoder:
    """One graph decoded by Kaldi's LatticeFasterDecoder at several (LMWT, WIP)."""

    def __init__(self, graph: DecodingGraph, opts: SearchOptions, wips: Sequence[float]):
        import kaldi_hmm_gmm

        self.graph = graph
        self.opts = opts
        self.k = kaldi_hmm_gmm
        self.graphs = {wip: add_word_penalty(graph.hclg, wip) for wip in wips}
        self.configs: dict[float, object] = {}
        self.trans_model = _any_transition_model()
        self.columns = graph.transitions.tid_to_pdf[1:]

    def config(self, lmwt: float):
        """Decoder options of setting LMWT: the beams in units of graph + acoustic/LMWT
        are Kaldi's (given in units of graph + acoustic_scale · acoustic) divided by
        LMWT · acoustic_scale, so the search prunes as Kaldi's decode pass does."""
        if lmwt not in self.configs:
            factor = 1.0 / (lmwt * self.opts.acoustic_scale)
            self.configs[lmwt] = self.k.LatticeFasterDecoderConfig(
                beam=self.opts.beam * factor,
                lattice_beam=self.opts.lattice_beam * factor,
                max_active=self.opts.max_active,
                min_active=self.opts.min_active,
                determinize_lattice=False,
            )
        return self.configs[lmwt]

    def decode(self, utt: str, loglikes: np.ndarray, lmwt: float, wip: float) -> list[str]:
        """Best word sequence of one utterance at (LMWT, WIP): the best path under graph
        cost + WIP · words + acoustic cost / LMWT (``loglikes``: unscaled, per pdf)."""
        mat = np.ascontiguousarray(loglikes[:, self.columns] / lmwt, dtype=np.float32)
        decoder = self.k.LatticeFasterDecoderStdVectorFst(self.graphs[wip], self.config(lmwt))
        ok, _ali, words, _like = self.k.decode_utterance_lattice_faster(
            decoder, self.k.DecodableCtc(mat), self.trans_model, utt, True
        )
        if not ok:
            log.warning("%s: no best path (partial or failed decode)", utt)
        return [self.graph.words[w] for w in words]
