"""Scoring as Kaldi's ``local/score.sh`` (``steps/score_kaldi.sh``): WER and PER.

For every setting (LMWT, WIP) decoded, the hypotheses of all split jobs are compared
with the references by Levenshtein alignment (kaldialign): errors = substitutions +
deletions + insertions, error rate = errors / reference words, in percent. The best
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
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

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
    """(scores per setting, chosen setting, its hypotheses as token lists)."""
    scores, tokens = {}, {}
    for key, hyps in hyps_by_setting.items():
        toks = {u: normalise_hyp(h.split()) for u, h in hyps.items()}
        if phones:
            toks = {u: collapse(t) for u, t in toks.items()}
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


def merge_splits(split_jsons: Sequence[str | Path]) -> tuple[dict, dict]:
    """Hypotheses ``{kind: {setting: {utt: hyp}}}`` of all split jobs, and timing."""
    hyps: dict[str, dict[str, dict[str, str]]] = {}
    timing = {"frames": 0, "nnet_seconds": 0.0, "search_seconds": 0.0}
    for path in split_jsons:
        part = read_json(path)
        for kind, by_setting in part["hyps"].items():
            for key, utts in by_setting.items():
                hyps.setdefault(kind, {}).setdefault(key, {}).update(utts)
        for k in timing:
            timing[k] += part[k]
    return hyps, timing


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


def score_set(
    split_jsons: Sequence[str | Path],
    out_json: str | Path,
    details_dir: str | Path,
    words_txt: str | Path,
    text_path: str | Path | None = None,
    targets_scp: str | Path | None = None,
    tuned_json: str | Path | None = None,
) -> dict:
    """Score one (experiment, eval set): WER (if the set has ``text``) and PER (if it has
    targets and a phone graph was decoded), at the best setting or the tuned one."""
    import logging

    import kaldiio

    from paravg.corpus.phones import PHONES, SILENCE
    from paravg.graph.arpa import phone_sequences
    from paravg.graph.lexicon import read_text
    from paravg.io import read_json

    log = logging.getLogger(__name__)
    hyps, timing = merge_splits(split_jsons)
    tuned = read_json(tuned_json) if tuned_json else {}
    result: dict = {"timing": timing, "tuned_on": str(tuned_json) if tuned_json else None}
    result["decode_options"] = splits_decode_options(split_jsons)
    per_utt: dict[str, str] = {}
    refs_words = None
    if text_path is not None and Path(text_path).is_file():
        refs_words = read_text(text_path)
        result["oov"] = oov_report(refs_words, words_txt, text_path)
        if result["oov"]["count"]:
            log.warning(
                "%s: %d reference words (%d distinct) are not in %s; they count as errors",
                text_path,
                result["oov"]["count"],
                result["oov"]["distinct"],
                words_txt,
            )
    if refs_words is not None and "words" in hyps:
        utts = set(next(iter(hyps["words"].values())))
        refs = {u: w for u, w in refs_words.items() if u in utts}
        scores, key, toks = score_kind(refs, hyps["words"], False, tuned.get("wer_setting"))
        best = scores[key]
        lmwt, wip = parse_setting(key)
        result.update(
            wer=best["rate"],
            wer_setting=key,
            lmwt=lmwt,
            word_ins_penalty=wip,
            wer_details=best,
            wer_all={k: v["rate"] for k, v in scores.items()},
        )
        per_utt["wer_details"] = per_utt_lines(refs, toks)
    else:
        result.update(wer=None, wer_note="no text for this set: decoded, WER not scored")
        log.warning("%s: no text; decoded without scoring WER", user_file(text_path))
    if targets_scp is not None and Path(targets_scp).is_file() and "phones" in hyps:
        targets = kaldiio.load_scp(str(targets_scp))
        utts = sorted(u for u in next(iter(hyps["phones"].values())) if u in targets)
        seqs = phone_sequences((targets[u] for u in utts), PHONES, SILENCE)
        refs = {u: collapse(s) for u, s in zip(utts, seqs, strict=True)}
        scores, key, toks = score_kind(refs, hyps["phones"], True, tuned.get("per_setting"))
        best = scores[key]
        lmwt, wip = parse_setting(key)
        result.update(
            per=best["rate"],
            per_setting=key,
            per_lmwt=lmwt,
            per_word_ins_penalty=wip,
            per_details=best,
            per_all={k: v["rate"] for k, v in scores.items()},
        )
        per_utt["per_details"] = per_utt_lines(refs, toks)
    else:
        result.update(per=None)
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
