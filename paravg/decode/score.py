"""Scoring as Kaldi's ``local/score.sh`` (``steps/score_kaldi.sh``): WER and PER.

The split jobs wrote one lattice per (utterance, graph) (:mod:`paravg.decode.decoder`).
For every setting (LMWT, WIP) of the grid, each lattice's best path under graph cost +
acoustic cost / LMWT + WIP · words (``lattice-scale --inv-acoustic-scale=LMWT |
lattice-add-penalty --word-ins-penalty=WIP | lattice-best-path``;
:meth:`paravg.decode.lattice.Lattice.best_paths`, every setting in one pass) is the
hypothesis: changing the grid reruns this step only, never the search. Hypotheses are
compared with the references by Levenshtein alignment (kaldialign): errors =
substitutions + deletions + insertions, error rate = errors / reference words, in
percent. The phone graph has its own grid (TIMIT's ``local/score.sh``: LMWT 1-10). The best
setting (lowest errors; ties: the lower LMWT, then the lower WIP) is chosen per set —
what score.sh reports as ``best_wer`` — or, when a tuning set is named, the setting best
on that set is applied to every set (the honest way: tune on dev, report on test).

Text normalisation: references are the ``text`` words as they are (Kaldi ``text`` is
upper case, no punctuation); hypotheses drop symbols in angle brackets (``<UNK>``,
``<NOISE>``), as recipes' ``wer_hyp_filter`` does; nothing else is changed. Reference
words not in ``words.txt`` are counted and reported as OOVs (Kaldi's ``sym2int.pl
--map-oov``); they stay in the reference, so they count as errors.

PER: the same on phones. References are the utterance's frame targets run-length
collapsed with silence removed (:func:`paravg.graph.arpa.phone_sequences`); hypotheses
are the phone graph's output collapsed the same way.

``wer_details/per_utt`` lines follow Kaldi's ``align-text`` + ``wer_per_utt_details.pl``:
``<utt> ref``, ``<utt> hyp``, ``<utt> op`` (C/S/I/D) and ``<utt> #csid <C> <S> <I> <D>``.

Beside the scores: ``hyps.json`` (every setting's hypotheses, per graph) and ``ctm``, the
words of the chosen setting with times and confidences (:mod:`paravg.decode.ctm`). The
lattices of a model of frame-subsampling-factor f (its split JSONs say so) count frames
of f feature frames: the CTM's frame shift is f × ``frame_shift`` (Kaldi's
``get_ctm.sh --frame-shift 0.03`` for f = 3), and ``scores.json`` records f when f > 1.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from paravg.data import source_text_lines
from paravg.decode.lattice import Lattice, LatticeArchives
from paravg.errors import ConfigError
from paravg.io import read_json, write_json_atomic, write_text_atomic

EPS = "<eps>"


def normalise_hyp(words: Iterable[str]) -> list[str]:
    """Drop ``<...>`` symbols (``<UNK>``, ``<NOISE>``) from a hypothesis."""
    return [w for w in words if not (w.startswith("<") and w.endswith(">"))]


def collapse(seq: Sequence[str]) -> list[str]:
    """Merge runs of one symbol (phones: frame labels cannot show a repeated phone)."""
    return [s for i, s in enumerate(seq) if i == 0 or s != seq[i - 1]]


def align_counts(ref: Sequence[str], hyp: Sequence[str]) -> dict:
    """Correct, substitution, insertion, deletion counts and the alignment."""
    import kaldialign

    pairs = kaldialign.align(list(ref), list(hyp), EPS) if (ref or hyp) else []
    c = s = i = d = 0
    ops = []
    for r, h in pairs:
        if r == EPS:
            i += 1
            ops.append("I")
        elif h == EPS:
            d += 1
            ops.append("D")
        elif r == h:
            c += 1
            ops.append("C")
        else:
            s += 1
            ops.append("S")
    return {"C": c, "S": s, "I": i, "D": d, "pairs": pairs, "ops": ops}


def score_setting(refs: Mapping[str, Sequence[str]], hyps: Mapping[str, Sequence[str]]) -> dict:
    """Totals over the utterances of ``refs`` (a missing hypothesis is empty)."""
    tot = {"C": 0, "S": 0, "I": 0, "D": 0}
    for utt, ref in refs.items():
        counts = align_counts(ref, hyps.get(utt, []))
        for k in tot:
            tot[k] += counts[k]
    n = sum(len(r) for r in refs.values())
    errors = tot["S"] + tot["I"] + tot["D"]
    return {
        "errors": errors,
        "ref_tokens": n,
        "insertions": tot["I"],
        "deletions": tot["D"],
        "substitutions": tot["S"],
        "rate": 100.0 * errors / max(n, 1),
        "utterances": len(refs),
    }


def parse_setting(key: str) -> tuple[float, float]:
    lmwt, wip = key.split("_")
    return float(lmwt), float(wip)


def best_setting(scores: Mapping[str, dict]) -> str:
    """The setting with the fewest errors (ties: lower LMWT, then lower WIP)."""
    return min(scores, key=lambda k: (scores[k]["errors"], *parse_setting(k)))


def per_utt_lines(refs: Mapping[str, Sequence[str]], hyps: Mapping[str, Sequence[str]]) -> str:
    """Kaldi's ``wer_details/per_utt`` text."""
    lines = []
    for utt in sorted(refs):
        a = align_counts(refs[utt], hyps.get(utt, []))
        width = [max(len(r), len(h)) for r, h in a["pairs"]]
        lines.append(
            f"{utt} ref  "
            + "  ".join(r.ljust(w) for (r, _), w in zip(a["pairs"], width, strict=True))
        )
        lines.append(
            f"{utt} hyp  "
            + "  ".join(h.ljust(w) for (_, h), w in zip(a["pairs"], width, strict=True))
        )
        lines.append(
            f"{utt} op   " + "  ".join(o.ljust(w) for o, w in zip(a["ops"], width, strict=True))
        )
        lines.append(f"{utt} #csid {a['C']} {a['S']} {a['I']} {a['D']}")
    return "".join(f"{line.rstrip()}\n" for line in lines)


def score_kind(
    refs: Mapping[str, Sequence[str]],
    hyps_by_setting: Mapping[str, Mapping[str, str]],
    phones: bool,
    chosen: str | None = None,
) -> tuple[dict, str, dict]:
    """(scores per setting, chosen setting, its hypotheses as token lists): the chosen
    setting is ``chosen`` (the tuning set's) or else the set's own best."""
    from paravg.corpus.phones import SILENCE

    scores, tokens = {}, {}
    for key, hyps in hyps_by_setting.items():
        toks = {u: normalise_hyp(h.split()) for u, h in hyps.items()}
        if phones:  # PER counts non-silence phones (silence is a word of the phone lang)
            toks = {u: collapse([p for p in t if p != SILENCE]) for u, t in toks.items()}
        tokens[key] = toks
        scores[key] = score_setting(refs, toks)
    key = chosen if chosen is not None else best_setting(scores)
    return scores, key, tokens[key]


def write_scores(
    out_json: str | Path,
    details_dir: str | Path,
    result: dict,
    per_utt: Mapping[str, str],
) -> None:
    """``<set>.json`` and ``wer_details/per_utt`` (+ ``per_details/per_utt``)."""
    for name in ("wer_details", "per_details"):  # empty when not scored
        write_text_atomic(Path(details_dir) / name / "per_utt", per_utt.get(name, ""))
    write_json_atomic(out_json, result)


def _score_unit(
    unit: str,
    refs: Mapping[str, Sequence[str]],
    hyps_by_setting: Mapping[str, Mapping[str, str]],
    tuned: Mapping[str, str],
    result: dict,
    per_utt: dict[str, str],
) -> str:
    """Score one unit, ``"wer"`` (words) or ``"per"`` (collapsed phones), the same way
    (Kaldi's ``score.sh`` for both), into ``result`` and ``per_utt``; return the setting.

    The setting is the tuning set's ``<unit>_setting`` when ``tuned`` names one, else this
    set's best. ``result`` gets ``<unit>`` (the rate in %), ``<unit>_setting``, the
    setting's LMWT and WIP (``lmwt``/``word_ins_penalty``; ``per_lmwt``/…  for PER),
    ``<unit>_details``, ``<unit>_all`` (every setting's rate) and ``<unit>_own[_setting]``
    (this set's own best); ``per_utt["<unit>_details"]`` Kaldi's per-utterance lines.
    """
    scores, key, toks = score_kind(
        refs, hyps_by_setting, unit == "per", tuned.get(f"{unit}_setting")
    )
    best = scores[key]
    lmwt, wip = parse_setting(key)
    own = best_setting(scores)
    prefix = "" if unit == "wer" else f"{unit}_"
    result.update(
        {
            unit: best["rate"],
            f"{unit}_setting": key,
            f"{prefix}lmwt": lmwt,
            f"{prefix}word_ins_penalty": wip,
            f"{unit}_details": best,
            f"{unit}_all": {k: v["rate"] for k, v in scores.items()},
            f"{unit}_own": scores[own]["rate"],
            f"{unit}_own_setting": own,
        }
    )
    per_utt[f"{unit}_details"] = per_utt_lines(refs, toks)
    return key


def setting_key(lmwt: float, wip: float) -> str:
    """``"<LMWT>_<WIP>"`` as Kaldi's scoring dirs name them (``penalty_0.5/10.tra``)."""
    return f"{lmwt:g}_{wip:g}"


def merge_timing(split_jsons: Sequence[str | Path]) -> dict:
    """Frames and CPU seconds of all split jobs (``determinize_seconds``, part of
    ``search_seconds``, when they determinised their lattices)."""
    timing = {"frames": 0, "nnet_seconds": 0.0, "search_seconds": 0.0}
    for path in split_jsons:
        part = read_json(path)
        for k in ("frames", "nnet_seconds", "search_seconds"):
            timing[k] += part[k]
        if "determinize_seconds" in part:
            timing["determinize_seconds"] = (
                timing.get("determinize_seconds", 0.0) + part["determinize_seconds"]
            )
    return timing


def lattice_hypotheses(
    lattices: Iterable[tuple[str, Lattice]],
    lmwts: Sequence[float],
    wips: Sequence[float],
    words: Mapping[int, str],
) -> dict[str, dict[str, str]]:
    """``{setting: {utt: hypothesis}}``: every lattice's best path at every setting."""
    hyps: dict[str, dict[str, str]] = {setting_key(lm, wip): {} for lm in lmwts for wip in wips}
    for utt, lattice in lattices:
        for (lm, wip), links in lattice.best_paths(lmwts, wips).items():
            hyps[setting_key(lm, wip)][utt] = " ".join(
                words[int(w)] for w in lattice.word[links] if w > 0
            )
    return hyps


def write_ctm(
    out_path: str | Path,
    lattices: Iterable[tuple[str, Lattice]],
    setting: str,
    graph_dir: str | Path,
    frame_shift: float,
    data_dir: str | Path | None = None,
    beam: float = 5.0,
    decode_mbr: bool = True,
) -> dict:
    """The CTM at ``setting`` (``steps/get_ctm_conf.sh``: word-aligned, MBR words and
    confidences; :mod:`paravg.decode.ctm`), in recording time when the set's prepared
    ``data_dir`` has ``segments``; returns the number of words, of utterances
    word-aligned and not, and the options."""
    import logging

    from paravg.decode.ctm import ctm_conf_spans, ctm_lines, read_word_boundary, recording_ctm_lines
    from paravg.graph.lang import read_symbol_table
    from paravg.graph.load import read_transition_model

    graph_dir = Path(graph_dir)
    words = {i: w for w, i in read_symbol_table(graph_dir / "words.txt").items()}
    trans = read_transition_model(graph_dir / "transition.mdl")
    boundary_file = graph_dir / "phones" / "word_boundary.int"
    boundary = read_word_boundary(boundary_file) if boundary_file.is_file() else None
    if boundary is None:
        logging.getLogger(__name__).warning(
            "%s: missing; the CTM's words are not word-aligned (their times run from the "
            "lattice arc of each word to the next)",
            boundary_file,
        )
    lmwt, wip = parse_setting(setting)
    lines: list[str] = []
    not_aligned: list[str] = []
    for utt, lattice in lattices:
        spans, aligned = ctm_conf_spans(lattice, lmwt, wip, trans, boundary, beam, decode_mbr)
        if not aligned:
            not_aligned.append(utt)
        lines += ctm_lines(utt, spans, words, frame_shift)
    if boundary is not None and not_aligned:
        logging.getLogger(__name__).warning(
            "%d utterances' lattices could not be word-aligned with %s (first: %s); their "
            "CTM times are the lattice arcs'",
            len(not_aligned),
            boundary_file,
            not_aligned[0],
        )
    lines.sort(key=_ctm_order)
    segments = Path(data_dir) / "segments" if data_dir is not None else None
    if segments is not None and segments.is_file():
        r2fc = segments.with_name("reco2file_and_channel")
        lines = recording_ctm_lines(lines, segments, r2fc, frame_shift)
    write_text_atomic(out_path, "".join(f"{line}\n" for line in lines))
    return {
        "words": len(lines),
        "not_word_aligned": len(not_aligned),
        "beam": beam,
        "decode_mbr": decode_mbr,
    }


def _ctm_order(line: str) -> tuple[str, float]:
    f = line.split()
    return f[0], float(f[2])


def splits_decode_options(split_jsons: Sequence[str | Path]) -> dict | None:
    """The search options every split job decoded with (``options`` of its JSON); a
    :class:`ConfigError` when two splits differ (one set decoded with two configs)."""
    options = {str(p): read_json(p).get("options") for p in split_jsons}
    distinct = {json.dumps(o, sort_keys=True) for o in options.values()}
    if len(distinct) > 1:
        listed = "\n  ".join(f"{p}: {o}" for p, o in options.items())
        raise ConfigError(
            f"the decode splits of one set were decoded with different options:\n  {listed}"
            "\nrun the same command again with --forcerun decode_split"
        )
    return next(iter(options.values()), None)


def splits_frame_subsampling_factor(split_jsons: Sequence[str | Path]) -> int:
    """The frame-subsampling-factor every split job decoded with (1 when its JSON does not
    say); a :class:`ConfigError` when two splits differ."""
    factors = {str(p): read_json(p).get("frame_subsampling_factor", 1) for p in split_jsons}
    if len(set(factors.values())) > 1:
        listed = "\n  ".join(f"{p}: {f}" for p, f in factors.items())
        raise ConfigError(
            f"the decode splits of one set were decoded at different frame rates:\n  {listed}"
            "\nrun the same command again with --forcerun decode_split"
        )
    return next(iter(factors.values()), 1)


def oov_report(text: Mapping[str, Sequence[str]], words_txt: str | Path, text_path) -> dict:
    """Reference words missing from ``words.txt`` (``sym2int.pl --map-oov``): count,
    distinct words and the first utterance of each."""
    from paravg.graph.lang import read_symbol_table

    vocab = read_symbol_table(words_txt)
    first: dict[str, str] = {}
    count = 0
    for utt, words in text.items():
        for w in words:
            if w not in vocab:
                count += 1
                first.setdefault(w, utt)
    return {
        "count": count,
        "distinct": len(first),
        "rate": 100.0 * count / max(1, sum(len(w) for w in text.values())),
        "first_utterance": dict(sorted(first.items())[:50]),
        "text": str(text_path),
    }


@dataclass(frozen=True)
class GraphScoring:
    """One decoded graph of a set: its lattices (one archive per split), its directory
    and its scoring grid."""

    lattices: Sequence[str | Path]
    graph_dir: str | Path
    lmwts: Sequence[float]
    wips: Sequence[float]


def score_set(
    split_jsons: Sequence[str | Path],
    graphs: Mapping[str, GraphScoring],
    out_json: str | Path,
    details_dir: str | Path,
    hyps_json: str | Path,
    ctm_path: str | Path,
    text_path: str | Path | None = None,
    targets_scp: str | Path | None = None,
    tuned_json: str | Path | None = None,
    frame_shift: float = 0.01,
    data_dir: str | Path | None = None,
    ctm_beam: float = 5.0,
    ctm_decode_mbr: bool = True,
) -> dict:
    """Score one (experiment, eval set) from its lattices: WER on the ``words`` graph (if
    the set has ``text``) and PER on the ``phones`` graph (if decoded and the set has
    targets), each at its best setting or at the tuned one; the CTM of the words at the
    chosen setting (the plain decode's, LMWT = 10, WIP = 0 when WER is not scored), in
    recording time when the set's prepared ``data_dir`` has ``segments``, word-aligned
    with MBR confidences after pruning to ``ctm_beam`` (``steps/get_ctm_conf.sh``'s
    ``--beam``; ``ctm_decode_mbr``: its ``--decode-mbr``). ``frame_shift``: seconds per
    feature frame (× f for a model of frame-subsampling-factor f)."""
    import logging

    from paravg.corpus.phones import PHONES, SILENCE
    from paravg.graph.arpa import phone_sequences
    from paravg.graph.lang import read_symbol_table
    from paravg.graph.lexicon import read_text
    from paravg.kaldi_io import load_scp

    log = logging.getLogger(__name__)
    start = time.process_time()
    hyps, lattices = {}, {}
    for kind, g in graphs.items():
        words = {i: w for w, i in read_symbol_table(Path(g.graph_dir) / "words.txt").items()}
        # only the word lattices are read again (the CTM): keep those in memory
        lattices[kind] = LatticeArchives(
            g.lattices, max_links=5_000_000 if kind == "words" else 0, word_level=True
        )
        hyps[kind] = lattice_hypotheses(lattices[kind], g.lmwts, g.wips, words)
    tuned = read_json(tuned_json) if tuned_json else {}
    result: dict = {
        "timing": merge_timing(split_jsons),
        "tuned_on": str(tuned_json) if tuned_json else None,
        "decode_options": splits_decode_options(split_jsons),
        "grids": {k: {"lmwts": list(g.lmwts), "wips": list(g.wips)} for k, g in graphs.items()},
    }
    subsampling = splits_frame_subsampling_factor(split_jsons)
    if subsampling > 1:  # lattice frames of f feature frames
        result["frame_subsampling_factor"] = subsampling
        frame_shift = round(frame_shift * subsampling, 12)
    per_utt: dict[str, str] = {}
    refs_words = None
    words_txt = Path(graphs["words"].graph_dir) / "words.txt"
    if text_path is not None and Path(text_path).is_file():
        refs_words = read_text(text_path)
        result["oov"] = oov_report(refs_words, words_txt, text_path)
        if result["oov"]["count"]:
            source = source_text_lines(Path(text_path).parent)  # the user's file, not the copy
            log.warning(
                "%s: %d reference words (%d distinct) are not in %s; they count as errors",
                source[0] if source else text_path,
                result["oov"]["count"],
                result["oov"]["distinct"],
                words_txt,
            )
    ctm_setting = setting_key(10, 0)
    if refs_words is not None:
        utts = set(next(iter(hyps["words"].values())))
        refs = {u: w for u, w in refs_words.items() if u in utts}
        ctm_setting = _score_unit("wer", refs, hyps["words"], tuned, result, per_utt)
    else:
        result.update(wer=None, wer_note="no text for this set: decoded, WER not scored")
        log.warning("%s: no text; decoded without scoring WER", user_file(text_path))
    if targets_scp is not None and Path(targets_scp).is_file() and "phones" in hyps:
        targets = load_scp(targets_scp)
        utts = sorted(u for u in next(iter(hyps["phones"].values())) if u in targets)
        seqs = phone_sequences((targets[u] for u in utts), PHONES, SILENCE)
        refs = {u: collapse(s) for u, s in zip(utts, seqs, strict=True)}
        _score_unit("per", refs, hyps["phones"], tuned, result, per_utt)
    else:
        result.update(per=None)
    ctm_start = time.process_time()
    result["ctm"] = {
        "setting": ctm_setting,
        **write_ctm(
            ctm_path,
            lattices["words"],
            ctm_setting,
            graphs["words"].graph_dir,
            frame_shift,
            data_dir,
            ctm_beam,
            ctm_decode_mbr,
        ),
    }
    result["timing"]["ctm_seconds"] = round(time.process_time() - ctm_start, 3)
    write_json_atomic(hyps_json, hyps)
    result["timing"]["scoring_seconds"] = round(time.process_time() - start, 3)
    write_scores(out_json, details_dir, result, per_utt)
    return result


def user_file(prepared_file: str | Path) -> Path:
    """The user's file behind a file of a prepared data dir (``results/data/<set>/text``
    -> ``<data.sets[set]>/text``), from the preparation's report; the prepared path when
    the report does not say."""
    prepared_file = Path(prepared_file)
    report = prepared_file.parent / "report.json"
    try:
        source = read_json(report)["source"]
    except (OSError, ValueError, KeyError):
        return prepared_file
    return Path(source) / prepared_file.name
