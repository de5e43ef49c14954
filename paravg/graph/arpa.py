"""A bigram language model with interpolated Witten-Bell smoothing, as ARPA text.

Witten & Bell (1991), interpolated as in Chen & Goodman (1998, §2.5) and SRILM's
``-wbdiscount -interpolate``. Sentences are ``<s> w1 … wn </s>``; V is the vocabulary
(every word that may be predicted, including ``</s>``, excluding ``<s>``).

Unigram (interpolated with the uniform distribution), N = number of tokens predicted,
T = number of distinct types seen:

    P1(w) = (c(w) + T / |V|) / (N + T)

Bigram, for a history h with c(h) tokens following it and T(h) distinct followers:

    P2(w | h) = (c(h, w) + T(h) · P1(w)) / (c(h) + T(h))

In ARPA form a seen bigram stores log10 P2(w|h); an unseen one backs off to
α(h) · P1(w) with α(h) = T(h) / (c(h) + T(h)), which is exactly the interpolated mass,
so Σ_w P(w | h) = 1 for every history (:func:`arpa_probability` computes it from the
file, and the tests sum it). ``<s>`` gets the customary unigram log10 prob −99 and the
back-off weight of its history.
"""

from __future__ import annotations

import itertools
import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from pathlib import Path

from paravg.errors import DataError
from paravg.io import write_text_atomic

BOS, EOS = "<s>", "</s>"
NEVER = -99.0


def witten_bell_bigram(
    sentences: Iterable[Sequence[str]], vocabulary: Iterable[str]
) -> tuple[dict[str, float], dict[tuple[str, str], float], dict[str, float]]:
    """(unigram P1, seen-bigram P2, back-off α) as probabilities (not logs)."""
    vocab = set(vocabulary) | {EOS}
    vocab.discard(BOS)
    uni: Counter[str] = Counter()
    bi: Counter[tuple[str, str]] = Counter()
    for words in sentences:
        seq = [BOS, *words, EOS]
        for w in seq[1:]:
            if w not in vocab:
                raise DataError(f"training word {w!r} is not in the vocabulary")
        uni.update(seq[1:])
        bi.update(itertools.pairwise(seq))
    n, types = sum(uni.values()), len(uni)
    if n == 0:
        raise DataError("no training sentences for the language model")
    p1 = {w: (uni[w] + types / len(vocab)) / (n + types) for w in vocab}
    followers: dict[str, Counter[str]] = defaultdict(Counter)
    for (h, w), c in bi.items():
        followers[h][w] = c
    p2: dict[tuple[str, str], float] = {}
    alpha: dict[str, float] = {}
    for h, ws in followers.items():
        ch, th = sum(ws.values()), len(ws)
        for w, c in ws.items():
            p2[(h, w)] = (c + th * p1[w]) / (ch + th)
        alpha[h] = th / (ch + th)
    return p1, p2, alpha


def arpa_text(
    p1: dict[str, float], p2: dict[tuple[str, str], float], alpha: dict[str, float]
) -> str:
    """The ARPA file of a bigram model (log10 probabilities and back-off weights)."""
    unigrams = [*sorted(p1), BOS]
    lines = ["", "\\data\\", f"ngram 1={len(unigrams)}", f"ngram 2={len(p2)}", "", "\\1-grams:"]
    for w in unigrams:
        prob = NEVER if w == BOS else math.log10(p1[w])
        if w in alpha:
            lines.append(f"{prob:.6f}\t{w}\t{math.log10(alpha[w]):.6f}")
        else:
            lines.append(f"{prob:.6f}\t{w}")
    lines += ["", "\\2-grams:"]
    for (h, w), p in sorted(p2.items()):
        lines.append(f"{math.log10(p):.6f}\t{h} {w}")
    lines += ["", "\\end\\", ""]
    return "\n".join(lines)


def write_bigram_arpa(
    path: str | Path, sentences: Iterable[Sequence[str]], vocabulary: Iterable[str]
) -> dict:
    """Estimate the Witten-Bell bigram and write it; returns counts for the summary.
    ``sentences`` is read once, one sentence at a time (the counts are what is held)."""
    p1, p2, alpha = witten_bell_bigram(sentences, vocabulary)
    write_text_atomic(path, arpa_text(p1, p2, alpha))
    return {"unigrams": len(p1) + 1, "bigrams": len(p2), "discounting": "witten-bell"}


def read_arpa(
    path: str | Path,
) -> tuple[dict[str, tuple[float, float]], dict[tuple[str, ...], float]]:
    """Parse a unigram/bigram ARPA file: ({w: (log10 p, log10 bow)}, {(h, w): log10 p}).

    Raises :class:`DataError` naming the file and line of the first malformed entry,
    before any graph is built.
    """
    uni: dict[str, tuple[float, float]] = {}
    bi: dict[tuple[str, ...], float] = {}
    declared: dict[int, int] = {}
    section = None
    text = Path(path).read_text()
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line:
            continue
        if line == "\\data\\":
            section = "data"
            continue
        if line == "\\end\\":
            section = "end"
            continue
        if line.startswith("\\") and line.endswith("-grams:"):
            try:
                section = int(line[1:-7])
            except ValueError:
                raise DataError(f"{path}:{lineno}: bad section header {line!r}") from None
            continue
        if section == "data":
            key, _, value = line.partition("=")
            if not key.startswith("ngram ") or not value.strip().isdigit():
                raise DataError(f"{path}:{lineno}: expected 'ngram N=COUNT', got {line!r}")
            declared[int(key.split()[1])] = int(value)
            continue
        if not isinstance(section, int):
            raise DataError(f"{path}:{lineno}: text outside any ARPA section: {line!r}")
        fields = line.split()
        try:
            prob = float(fields[0])
            words = tuple(fields[1 : 1 + section])
            bow = float(fields[1 + section]) if len(fields) > 1 + section else 0.0
        except (ValueError, IndexError):
            raise DataError(f"{path}:{lineno}: expected '<log10 prob> <words> [<bow>]'") from None
        if len(words) != section or len(fields) > section + 2:
            raise DataError(f"{path}:{lineno}: a {section}-gram needs {section} words: {line!r}")
        if section == 1:
            uni[words[0]] = (prob, bow)
        else:
            bi[words] = prob
    if section != "end":
        raise DataError(f"{path}: no \\end\\ marker (truncated ARPA file?)")
    if not declared or not uni:
        raise DataError(f"{path}: no \\data\\ header or no 1-grams")
    counts = {1: len(uni)}
    for order in sorted(declared):
        if order > 1:
            counts[order] = sum(1 for k in bi if len(k) == order)
        if counts.get(order, 0) != declared[order]:
            raise DataError(
                f"{path}: header declares {declared[order]} {order}-grams, file has "
                f"{counts.get(order, 0)}"
            )
    return uni, bi


def arpa_probability(
    uni: dict[str, tuple[float, float]], bi: dict[tuple[str, ...], float], h: str, w: str
) -> float:
    """P(w | h) of a bigram ARPA model (with back-off), as a probability."""
    if (h, w) in bi:
        return 10.0 ** bi[(h, w)]
    return 10.0 ** (uni[h][1] + uni[w][0])


def phone_sequences(
    targets: Iterable[Sequence[int]], phones: Sequence[str], silence: str | None
) -> list[list[str]]:
    """Per utterance, its frame targets run-length collapsed, ``silence`` removed (None:
    kept)."""
    out = []
    for t in targets:
        seq: list[str] = []
        prev = None
        for x in t:
            if x != prev:
                seq.append(phones[int(x)])
                prev = x
        out.append([p for p in seq if p != silence])
    return out
