"""Decoding of one split of an eval set: one lattice search per (utterance, graph).

Per utterance: log-posteriors with the trained network
(:func:`paravg.decode.posteriors.utterance_log_posteriors`, the function evaluation uses),
pseudo-log-likelihoods log p(pdf | x) − log prior(pdf) (priors of ``final.pt``), then one
lattice-generating search per graph (:func:`paravg.decode.search.search`, Kaldi's
``LatticeFasterDecoder``) at Kaldi's options, defaults of ``steps/nnet3/decode.sh``:
``--acoustic-scale 0.1 --beam 15 --lattice-beam 8 --max-active 7000 --min-active 200``.
The lattices keep graph and acoustic costs apart (acoustic unscaled, as Kaldi writes
them) and go on disk as a gzipped Kaldi text archive of CompactLattices per split and
graph (``lat.<j>.gz``; the phone graph's under ``phones/``): for the word graph, with
``decode.determinize_lattice`` (the default), the lattice determinised as Kaldi's decoder
writes it (``DeterminizeLatticePhonePruned`` at beam ``decode.determinize_beam``, 5 by
default, else ``lattice_beam``; without it the raw lattice, one arc a link): one path per
word sequence, its best
alignment as transition-id strings; :mod:`paravg.decode.determinize`). The phone
graph's lattices stay raw (PER reads their best paths only, and a phone loop's lattices
are the determiniser's worst case: about 40 CPU s per demo dev utterance, stopped by
``max_mem``). The split's JSON counts the search's links (``lattice_links_per_frame``),
the arcs written (``written_arcs_per_frame``) and ``determinize_seconds`` (part of
``search_seconds``). Scoring
(:mod:`paravg.decode.score`) rescales them for every (LMWT, WIP): lattice operations,
never a new search, as Kaldi's ``local/score.sh``.

``nnet_seconds`` and ``search_seconds`` of a split's JSON are CPU seconds of the job's
process (``time.process_time``: every thread of the network's forward pass counts).

A model of frame-subsampling-factor f (``model.frame_subsampling_factor``; Kaldi's
``--frame-subsampling-factor``) is evaluated at output frames t = 0, f, 2f, … only, and
the search sees those ⌈T/f⌉ frames, one transition-id each: lattices (and the CTM and
alignments read from them) count frames of f·10 ms. It searches at acoustic scale f·a
and multiplies the lattice's acoustic costs by f afterwards (Kaldi's LFR decode with
``--acwt`` and ``--post-decode-acwt``: :func:`paravg.decode.search.low_frame_rate_scales`),
with the graph every experiment shares (built at ``graph.self_loop_scale``, 0.1; Kaldi's
LFR recipes make theirs at 0.333). The split's JSON keeps the config's ``options`` (per
10-ms frame, what the results table checks) and adds ``frame_subsampling_factor``,
``search_acoustic_scale`` and ``post_decode_acwt`` when f > 1.

A chain model (``model.objective: chain``; ``chain`` given) is decoded as Kaldi's
``steps/nnet3/decode.sh --acwt 1.0 --post-decode-acwt 10.0`` decodes one: its ``output``
(no softmax; ``final.pt``'s log-priors are zero, so nothing is subtracted) is the
pseudo-log-likelihood, searched at ``chain_acoustic_scale`` (1.0) on the chain graph
(self-loop scale 1.0), and the lattice's acoustic costs are multiplied by
``chain_post_decode_acwt`` (10) so that scoring's LMWT 7-17 applies (LMWT 10 is the
decoding scale); ``decode.acoustic_scale`` (a cross-entropy model's) is not used. The
split's JSON records ``objective: chain`` with the search scale and the post-decode one.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from pathlib import Path

import numpy as np
import torch

from paravg.decode.determinize import determinize_lattice_phone_pruned
from paravg.decode.lattice import writing_lattice_archives
from paravg.decode.options import recorded_options
from paravg.decode.posteriors import utterance_log_posteriors
from paravg.decode.search import SearchGraph, SearchOptions, low_frame_rate_scales, search
from paravg.decode.split import split_utterances
from paravg.errors import DataError
from paravg.graph.load import DecodingGraph, load_graph
from paravg.io import write_json_atomic
from paravg.kaldi_io import load_scp

log = logging.getLogger(__name__)


class GraphSearch:
    """One graph ready for the lattice search: its arrays and each emitting arc's pdf."""

    def __init__(self, graph: DecodingGraph, opts: SearchOptions):
        self.graph = graph
        self.opts = opts
        self.arrays = SearchGraph.from_fst(graph.hclg)
        self.arc_pdf = graph.transitions.tid_to_pdf[self.arrays.ilabel["emit"]]

    def lattice(self, loglikes: np.ndarray):
        """The pruned lattice of one utterance (``loglikes``: unscaled, per pdf)."""
        return search(self.arrays, self.arc_pdf, loglikes, self.opts)

    def determinize(self, lattice, utt: str):
        """The utterance's raw lattice determinised as Kaldi's decoder does it
        (``DeterminizeLatticePhonePrunedWrapper`` at the search's acoustic scale, beam
        ``determinize_beam`` or ``lattice_beam``; :mod:`paravg.decode.determinize`)."""
        clat = self.determinize_with_beam(lattice, self.opts.determinize_at)
        if clat.effective_beam < self.opts.determinize_at:
            log.warning(
                "%s: determinization finished earlier than the beam (effective beam %.3g "
                "vs. requested %.3g): its size exceeded max-mem",
                utt,
                clat.effective_beam,
                self.opts.determinize_at,
            )
        return clat

    def determinize_with_beam(self, lattice, beam: float):
        """:meth:`determinize` at ``beam``, without the warning."""
        trans = self.graph.transitions
        return determinize_lattice_phone_pruned(
            lattice, beam, self.opts.acoustic_scale, trans.tid_to_phone, trans.tid_starts_phone
        )


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
    from ``words.txt`` (Kaldi's ``sym2int.pl --map-oov``), naming the first line of each
    in the user's text file (:func:`paravg.data.source_text_lines`; the prepared copy's
    lines when the set records no source)."""
    from paravg.data import source_text_lines
    from paravg.graph.lang import read_symbol_table

    if text_path is None or not Path(text_path).is_file():
        log.warning("%s: no text; the set is decoded, WER is not scored", text_path)
        return {"text": None, "oov_count": 0}
    vocab = read_symbol_table(words_txt)
    source = source_text_lines(Path(text_path).parent)
    named = source[0] if source else text_path
    count, first = 0, {}
    for lineno, line in enumerate(Path(text_path).read_text().splitlines(), 1):
        utt, *words = line.split()
        where = f"{named}:{source[1].get(utt, lineno) if source else lineno}"
        for word in words:
            if word not in vocab:
                count += 1
                first.setdefault(word, where)
    if count:
        shown = ", ".join(f"{w} ({where})" for w, where in list(first.items())[:10])
        log.warning(
            "%d words of %s (%d distinct) are not in %s and will count as errors: %s",
            count,
            named,
            len(first),
            words_txt,
            shown,
        )
    return {"text": str(text_path), "oov_count": count, "oov_first": first}


@torch.no_grad()
def decode_split(
    model_path: str | Path,
    graph_dirs: dict[str, str | Path],
    feats_scp: str | Path,
    out_path: str | Path,
    lattice_paths: dict[str, str | Path],
    nj: int,
    job: int,
    opts: SearchOptions,
    ivectors_scp: str | Path | None = None,
    period_path: str | Path | None = None,
    text_path: str | Path | None = None,
    chain: dict | None = None,
) -> dict:
    """Decode split ``job`` of ``nj`` on every graph (``{"words": dir, "phones": dir}``),
    one search each; write each graph's lattices to ``lattice_paths[kind]`` and the
    split's summary (timing, options, lattice sizes, the reference check) as JSON. The
    model/graph pdf counts and the set's ``text`` are checked first."""
    from paravg.nnet.model_file import build_model, load_model_file

    file_dict = load_model_file(model_path)
    model = build_model(file_dict).eval()
    f = model.frame_subsampling_factor
    is_chain = getattr(model, "objective", "xent") == "chain"
    log_priors = file_dict["state_dict"]["log_priors"].double()
    if is_chain:  # no priors (as the export's final.mdl): the output is the log-likelihood
        log_priors = torch.zeros_like(log_priors)
    if is_chain != (chain is not None):
        raise DataError(
            f"{model_path}: a {'chain' if is_chain else 'cross-entropy'} model, decoded with "
            f"the {'chain' if chain is not None else 'cross-entropy'} settings (graph, scales)"
        )
    if chain is not None:  # decode.sh --acwt 1.0 --post-decode-acwt 10.0
        search_scale = float(chain["chain_acoustic_scale"])
        post_decode_acwt = float(chain["chain_post_decode_acwt"])
    else:
        search_scale, post_decode_acwt = low_frame_rate_scales(opts.acoustic_scale, f)
    search_opts = dataclasses.replace(opts, acoustic_scale=search_scale)
    searches = {}
    for kind, d in graph_dirs.items():
        graph = load_graph(d)
        check_num_pdfs(graph, model.num_targets, model_path)
        searches[kind] = GraphSearch(graph, search_opts)
    reference = check_reference_text(text_path, Path(graph_dirs["words"]) / "words.txt")
    feats = load_scp(feats_scp)
    ivecs = load_scp(ivectors_scp) if (ivectors_scp and model.ivector_dim) else None
    period = int(Path(period_path).read_text().strip()) if ivecs is not None else 0
    frames, nnet_s, search_s, det_s = 0, 0.0, 0.0, 0.0
    links = {kind: 0 for kind in searches}
    arcs = {kind: 0 for kind in searches}  # of the lattices written
    held = {kind: 0 for kind in searches}  # the most links one search held at once
    utts = split_utterances(list(feats.keys()), nj, job)
    with writing_lattice_archives({k: lattice_paths[k] for k in searches}) as archives:
        for utt in utts:
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
            for kind, graph_search in searches.items():
                lattice = graph_search.lattice(loglikes)
                if not lattice.reached_final:
                    log.warning(
                        "%s: the %s search reached no final state at the last frame; "
                        "its lattice ends where the search did (partial, as Kaldi's)",
                        utt,
                        kind,
                    )
                links[kind] += lattice.num_links
                held[kind] = max(held[kind], lattice.peak_links)
                determinized = opts.determinize_lattice and kind == "words"
                if determinized:
                    det_start = time.process_time()
                    out = graph_search.determinize(lattice, utt)
                    det_s += time.process_time() - det_start
                else:
                    out = lattice
                arcs[kind] += out.num_arcs if determinized else out.num_links
                if post_decode_acwt != 1.0 and determinized:
                    out.scale_acoustic(post_decode_acwt)  # lattice-scale --acoustic-scale=f
                elif post_decode_acwt != 1.0:
                    out.acoustic = out.acoustic * post_decode_acwt
                out.write_kaldi_text(archives[kind], utt)
            search_s += time.process_time() - start
            frames += x.shape[0]
    result = {
        "utterances": len(utts),
        "frames": frames,
        "nnet_seconds": round(nnet_s, 3),
        "search_seconds": round(search_s, 3),
        "searches_per_utterance": len(searches),
        "lattice_links_per_frame": {k: round(n / max(frames, 1), 2) for k, n in links.items()},
        "written_arcs_per_frame": {k: round(n / max(frames, 1), 2) for k, n in arcs.items()},
        "peak_held_links": held,
        "reference": reference,
        "options": recorded_options(vars(opts)),
    }
    if opts.determinize_lattice:  # part of search_seconds
        result["determinize_seconds"] = round(det_s, 3)
    if chain is not None:
        result["objective"] = "chain"
    if f > 1 or chain is not None:
        result.update(
            frame_subsampling_factor=f,
            search_acoustic_scale=search_scale,
            post_decode_acwt=post_decode_acwt,
        )
    write_json_atomic(out_path, result)
    return result
