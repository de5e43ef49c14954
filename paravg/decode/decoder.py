"""Lattice-faster decoding of one split of an eval set, at every scoring setting.

Per utterance: log-posteriors with the trained network
(:func:`paravg.decode.posteriors.utterance_log_posteriors`, the function evaluation uses),
pseudo-log-likelihoods log p(pdf | x) − log prior(pdf) (priors of ``final.pt``), mapped
pdf -> transition-id (column t − 1 holds transition-id t, as kaldi-hmm-gmm's
``DecodableCtc`` reads them), then Kaldi's ``LatticeFasterDecoder`` (kaldi-hmm-gmm) with
Kaldi's options and the defaults of ``steps/nnet3/decode.sh``: ``--beam 15
--lattice-beam 8 --max-active 7000 --min-active 200``, ``--acoustic-scale 0.1``.

Scoring settings. Kaldi's ``local/score.sh`` rescales one lattice per utterance:
``lattice-scale --inv-acoustic-scale=LMWT | lattice-add-penalty --word-ins-penalty=WIP |
lattice-best-path``, i.e. the best path under graph cost + WIP·(words) + acoustic
cost / LMWT (Kaldi's lattices keep the acoustic cost unscaled). kaldi-hmm-gmm's Python
decoder returns the best path only, not the lattice
(and kaldi-decoder, which returns lattices, is built on an OpenFst that cannot take
kaldifst 1.7.17's FSTs), so each setting is decoded directly: acoustic scale 1/LMWT and
WIP added to every word arc of HCLG, beams rescaled so that they prune as Kaldi's one
decode at ``acoustic_scale`` does (:meth:`GraphDecoder.config`). That is the exact best
path of each setting, which Kaldi's lattice rescoring approximates within its lattice
beam; LMWT = 1/acoustic_scale (10), WIP = 0 is the plain decode. The network runs once
per utterance.

Lattices are not determinised (``determinize_lattice = false``): only the best path is
kept, so the transition model the binding asks for is used for nothing else.

``nnet_seconds`` and ``search_seconds`` of a split's JSON are CPU seconds of the job's
process (``time.process_time``: every thread of the network's forward pass counts).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import kaldiio
import numpy as np
import torch

from paravg.decode.posteriors import utterance_log_posteriors
from paravg.errors import DataError
from paravg.graph.load import DecodingGraph, load_graph
from paravg.io import write_json_atomic

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class DecodeOptions:
    """Kaldi's LatticeFasterDecoderConfig names; defaults of steps/nnet3/decode.sh."""

    acoustic_scale: float = 0.1
    beam: float = 15.0
    lattice_beam: float = 8.0
    max_active: int = 7000
    min_active: int = 200


def setting_key(lmwt: float, wip: float) -> str:
    """``"<LMWT>_<WIP>"`` as Kaldi's scoring dirs name them (``penalty_0.5/10.tra``)."""
    return f"{lmwt:g}_{wip:g}"


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
    """One graph decoded at several (LMWT, WIP) settings."""

    def __init__(self, graph: DecodingGraph, opts: DecodeOptions, wips: Sequence[float]):
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


def check_num_pdfs(graph: DecodingGraph, num_outputs: int, model_path) -> None:
    """The transition model's pdfs must be the network's outputs (before decoding)."""
    if graph.transitions.num_pdfs != num_outputs:
        raise DataError(
            f"{graph.directory / 'transition.mdl'}: the transition model has "
            f"{graph.transitions.num_pdfs} pdfs but the network {model_path} has "
            f"{num_outputs} outputs"
        )


def check_reference_text(text_path: str | Path | None, words_txt: str | Path) -> dict:
    """Before decoding: say whether the set has ``text`` and count its words missing
    from ``words.txt`` (Kaldi's ``sym2int.pl --map-oov``), naming the first line of each."""
    from paravg.graph.lang import read_symbol_table

    if text_path is None or not Path(text_path).is_file():
        log.warning("%s: no text; the set is decoded, WER is not scored", text_path)
        return {"text": None, "oov_count": 0}
    vocab = read_symbol_table(words_txt)
    count, first = 0, {}
    for lineno, line in enumerate(Path(text_path).read_text().splitlines(), 1):
        for word in line.split()[1:]:
            if word not in vocab:
                count += 1
                first.setdefault(word, f"{text_path}:{lineno}")
    if count:
        shown = ", ".join(f"{w} ({where})" for w, where in list(first.items())[:10])
        log.warning(
            "%d words of %s (%d distinct) are not in %s and will count as errors: %s",
            count,
            text_path,
            len(first),
            words_txt,
            shown,
        )
    return {"text": str(text_path), "oov_count": count, "oov_first": first}


def split_utterances(utts: Sequence[str], nj: int, job: int) -> list[str]:
    """Job ``job`` (0-based) of ``nj``: contiguous blocks of the sorted utterances, as
    Kaldi's ``split_data.sh`` (sizes differ by at most one)."""
    utts = sorted(utts)
    bounds = np.linspace(0, len(utts), nj + 1).round().astype(int)
    return utts[bounds[job] : bounds[job + 1]]


@torch.no_grad()
def decode_split(
    model_path: str | Path,
    graph_dirs: dict[str, str | Path],
    feats_scp: str | Path,
    out_path: str | Path,
    nj: int,
    job: int,
    lmwts: Sequence[float],
    wips: Sequence[float],
    opts: DecodeOptions,
    ivectors_scp: str | Path | None = None,
    period_path: str | Path | None = None,
    text_path: str | Path | None = None,
) -> dict:
    """Decode split ``job`` of ``nj`` on every graph (``{"words": dir, "phones": dir}``)
    at every (LMWT, WIP); write ``{kind: {setting: {utt: hyp}}}`` plus timing as JSON.
    The model/graph pdf counts and the set's ``text`` are checked first."""
    from paravg.nnet.tdnn import build_model, load_model_file

    file_dict = load_model_file(model_path)
    model = build_model(file_dict).eval()
    log_priors = file_dict["state_dict"]["log_priors"].double()
    decoders = {}
    for kind, d in graph_dirs.items():
        graph = load_graph(d)
        check_num_pdfs(graph, model.num_targets, model_path)
        decoders[kind] = GraphDecoder(graph, opts, wips)
    reference = check_reference_text(text_path, Path(graph_dirs["words"]) / "words.txt")
    feats = kaldiio.load_scp(str(feats_scp))
    ivecs = kaldiio.load_scp(str(ivectors_scp)) if (ivectors_scp and model.ivector_dim) else None
    period = int(Path(period_path).read_text().strip()) if ivecs is not None else 0
    hyps: dict[str, dict[str, dict[str, str]]] = {k: {} for k in decoders}
    frames, nnet_s, search_s = 0, 0.0, 0.0
    for utt in split_utterances(list(feats.keys()), nj, job):
        start = time.process_time()
        x = feats[utt]
        iv = None
        if ivecs is not None:
            if utt not in ivecs:
                raise DataError(f"{ivectors_scp}: no i-vectors for utterance {utt}")
            iv = ivecs[utt]
        logp = utterance_log_posteriors(model, x, iv, period).double()
        loglikes = (logp - log_priors[None, :]).numpy()
        nnet_s += time.process_time() - start
        start = time.process_time()
        for kind, decoder in decoders.items():
            for lmwt in lmwts:
                for wip in wips:
                    words = decoder.decode(utt, loglikes, lmwt, wip)
                    hyps[kind].setdefault(setting_key(lmwt, wip), {})[utt] = " ".join(words)
        search_s += time.process_time() - start
        frames += x.shape[0]
    settings = len(lmwts) * len(wips) * len(decoders)
    result = {
        "hyps": hyps,
        "frames": frames,
        "nnet_seconds": round(nnet_s, 3),
        "search_seconds": round(search_s, 3),
        "searches_per_utterance": settings,
        "reference": reference,
        "options": vars(opts),
    }
    write_json_atomic(out_path, result)
    return result
