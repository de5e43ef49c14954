"""Word times and confidences: the CTM as ``steps/get_ctm_conf.sh`` writes it.

Kaldi (``steps/get_ctm_conf.sh``, ``--beam 5``, ``--decode-mbr true``)::

    lattice-prune --inv-acoustic-scale=LMWT --beam=5 "ark:gunzip -c lat.*.gz|" ark:- |
    lattice-align-words <lang>/phones/word_boundary.int final.mdl ark:- ark:- |
    lattice-to-ctm-conf --decode-mbr=true --inv-acoustic-scale=LMWT ark:- - |
    utils/int2sym.pl -f 5 words.txt | utils/convert_ctm.pl segments reco2file_and_channel

Here, per utterance at the chosen setting (LMWT, WIP) (:func:`ctm_conf_spans`):

1. **The determinised lattice**: as written (``decode.determinize_lattice``), or for a
   raw lattice determinised as ``lattice-determinize-pruned`` would
   (:func:`paravg.decode.determinize.determinize_lattice_phone_pruned`, at the CTM's beam
   and the setting's acoustic scale 1/LMWT): Kaldi's word aligner expects determinised
   input (one alignment per word sequence).
2. **Scaled and pruned**: acoustic costs × 1/LMWT, WIP added to each word's graph cost
   (``lattice-add-penalty``; get_ctm_conf.sh has no WIP, paravg's chosen setting does),
   then ``lattice-prune --beam`` (``decode.ctm_beam``, get_ctm_conf.sh's 5).
3. **Word-aligned** (``lattice-align-words``, :mod:`paravg.decode.word_align`) with the
   graph's ``phones/word_boundary.int``: each word one arc spanning exactly its phones,
   each silence phone an arc without a word, so state times are word boundaries. Every
   graph paravg builds has position-dependent phones and the file (the demo's word graph,
   ``graph.source: lang`` from a lang dir made by ``prepare_lang.sh``, the GMM path's
   lang); a user's ``hclg`` graph dir without it (or a lattice whose phones do not spell
   its words) is not aligned: its words keep the determinised arcs' spans, from the
   arc that carries the label to the next (Kaldi's ``lattice-align-words-lexicon`` with
   ``align_lexicon.int`` would align those; not implemented).
4. **Confusion network and MBR** (``lattice-to-ctm-conf``, :mod:`paravg.decode.mbr`):
   the words (the MBR hypothesis with ``decode.ctm_decode_mbr``, Kaldi's default; else
   the best path's words, those of ``hyps.json``), each with its bin's posterior as the
   confidence and its average start and end time in the bin.

A line: ``<utt> 1 <start> <duration> <word> <confidence>``, seconds with two decimals
(``lattice-to-ctm-conf``'s format; three when the frame shift is below 10 ms). With
``segments``, :func:`recording_ctm_lines` makes the times the recording's, as
``utils/convert_ctm.pl``: ``<file> <channel> <segment start + start> ...``, file and
channel from ``reco2file_and_channel`` (without it: the recording id and channel 1).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from paravg.decode.determinize import CompactLattice, determinize_lattice_phone_pruned
from paravg.decode.lattice import Lattice
from paravg.decode.mbr import minimum_bayes_risk
from paravg.decode.word_align import WordBoundaryInfo, word_align_lattice

BOUNDARY_CLASSES = ("nonword", "begin", "end", "internal", "singleton")


@dataclass(frozen=True)
class WordSpan:
    word: int
    start: float  # frames: the average start in the word's bin
    end: float
    confidence: float


def read_word_boundary(path: str | Path) -> dict[int, str]:
    """``phones/word_boundary.int``: phone id -> begin | end | internal | singleton |
    nonword (Kaldi's ``utils/prepare_lang.sh``)."""
    out = {}
    for line in Path(path).read_text().splitlines():
        if line.strip():
            phone, cls = line.split()
            out[int(phone)] = cls
    return out


def compact_at_setting(lattice: Lattice, lmwt: float, wip: float, trans, beam: float):
    """Steps 1-2 of the module doc: the lattice determinised (if raw), scaled by 1/LMWT,
    the WIP added and pruned to ``beam``."""
    if lattice.compact is not None:
        clat = CompactLattice(*lattice.compact)
        clat.add_word_penalty(wip)
    else:
        penalised = dataclasses.replace(lattice, graph=lattice.graph + wip * (lattice.word > 0))
        clat = determinize_lattice_phone_pruned(
            penalised, beam, 1.0 / lmwt, trans.tid_to_phone, trans.tid_starts_phone
        )
    clat.scale_acoustic(1.0 / lmwt)
    return clat.pruned(beam)


def ctm_conf_spans(
    lattice: Lattice,
    lmwt: float,
    wip: float,
    trans,
    boundary: Mapping[int, str] | None,
    beam: float = 5.0,
    decode_mbr: bool = True,
) -> tuple[list[WordSpan], bool]:
    """The words of a lattice with their times and confidences (the module doc), and
    whether they were word-aligned (False: no ``word_boundary.int``, or its phones did
    not parse)."""
    clat = compact_at_setting(lattice, lmwt, wip, trans, beam)
    if not clat.num_states:  # a search that found nothing: no words to align
        return [], True
    aligned = False
    if boundary is not None:
        info = WordBoundaryInfo.from_transitions(boundary, trans)
        out, aligned = word_align_lattice(clat, info)
        if out.num_states:
            clat = out
        else:
            aligned = False
    mbr = minimum_bayes_risk(clat, decode_mbr)
    spans = [
        WordSpan(w, t0, t1, c)
        for w, (t0, t1), c in zip(mbr.words, mbr.times, mbr.confidences, strict=True)
    ]
    return spans, aligned


def ctm_lines(
    utt: str, spans: list[WordSpan], words: Mapping[int, str], frame_shift: float = 0.01
) -> list[str]:
    """``<utt> 1 <start> <duration> <word> <confidence>`` per word (nbest-to-ctm)."""
    digits = 3 if frame_shift < 0.01 else 2
    return [
        f"{utt} 1 {s.start * frame_shift:.{digits}f} {(s.end - s.start) * frame_shift:.{digits}f}"
        f" {words[s.word]} {s.confidence:.2f}"
        for s in spans
    ]


def recording_ctm_lines(
    lines: list[str],
    segments: str | Path,
    reco2file_and_channel: str | Path | None = None,
    frame_shift: float = 0.01,
) -> list[str]:
    """``utils/convert_ctm.pl``: utterance-relative CTM lines to the recording's time
    (``segments``: ``<utt> <recording> <start> <end>``; ``reco2file_and_channel``:
    ``<recording> <file> <channel>``), sorted by file, channel and start."""
    starts = {}
    for line in Path(segments).read_text().splitlines():
        if line.strip():
            utt, reco, start, _end = line.split()
            starts[utt] = (reco, float(start))
    files = {}
    if reco2file_and_channel is not None and Path(reco2file_and_channel).is_file():
        for line in Path(reco2file_and_channel).read_text().splitlines():
            if line.strip():
                reco, file, channel = line.split()
                files[reco] = (file, channel)
    digits = 3 if frame_shift < 0.01 else 2
    out = []
    for line in lines:
        utt, _channel, start, rest = line.split(maxsplit=3)
        reco, offset = starts[utt]
        file, channel = files.get(reco, (reco, "1"))
        out.append((file, channel, offset + float(start), rest))
    out.sort(key=lambda x: (x[0], x[1], x[2]))
    return [f"{f} {c} {t:.{digits}f} {rest}" for f, c, t, rest in out]
