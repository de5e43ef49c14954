"""The demo corpus' pronunciation lexicon, in its 40-phone label set.

The demo's voices come from three engines that pronounce words differently (festival and
flite read CMUdict, espeak-ng applies its own rules), and the corpus keeps, per
utterance, the exact phone segments each engine spoke (``phone_ctm``) beside the words
(``text``). The lexicon is learnt from those two files:

1. **Base pronunciations**: festival's ``lex.lookup`` (CMUdict plus festival's
   letter-to-sound rules) for every word of the vocabulary, mapped to the labels with
   :func:`paravg.corpus.phones.festival_label` (stress dropped, ``ax -> ah`` ...).
2. **Observed pronunciations**: each training utterance's phone sequence with silences
   removed is cut into one chunk per word by dynamic programming, minimising
   Σ_i d(chunk_i, base(word_i)) where d is the Levenshtein distance (chunk lengths within
   ``len(base) ± 3``). The chunk spoken for a word is one observation of its
   pronunciation.
3. **Lexicon**: per word, the base pronunciation plus every observed one seen at least
   ``min_count`` times and in at least ``min_share`` of the word's observations, with
   Kaldi's pronunciation probabilities (``lexiconp.txt``: count / count of the most
   frequent pronunciation, so the best has 1.0; the base counts at least once).

A word of the vocabulary never seen in training keeps its base pronunciation alone.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from paravg.corpus.phones import SILENCE, UnknownPhoneError, festival_label
from paravg.errors import DataError

Pron = tuple[str, ...]

_LOOKUP = re.compile(r"^\(\S+ \S+ \((.*)\)\)\s*$")
_SYLLABLE = re.compile(r"\(\(([^()]*)\) \d\)")


@dataclass(frozen=True)
class LexiconEntry:
    """One pronunciation of a word with its Kaldi pronunciation probability."""

    word: str
    prob: float
    phones: Pron


def festival_pronunciations(words: Iterable[str]) -> dict[str, Pron]:
    """Base pronunciation of each (lower-case) word from one ``festival -b`` batch."""
    words = sorted(set(words))
    if shutil.which("festival") is None:
        raise DataError("festival is not installed: the demo lexicon needs its lex.lookup")
    script = "".join(f'(print (lex.lookup "{w}" nil))\n' for w in words)
    with tempfile.NamedTemporaryFile("w", suffix=".scm", delete=False) as fd:
        fd.write(script)
        path = fd.name
    try:
        out = subprocess.run(
            ["festival", "-b", path], capture_output=True, text=True, check=True
        ).stdout
    finally:
        Path(path).unlink()
    # one printed entry per word, in order (festival may print the word unquoted or
    # capitalised, so entries are matched by position)
    found = [m for m in map(_LOOKUP.match, map(str.strip, out.splitlines())) if m]
    if len(found) != len(words):
        raise DataError(f"festival printed {len(found)} lookups for {len(words)} words")
    prons: dict[str, Pron] = {}
    for word, match in zip(words, found, strict=True):
        phones = [p for syl in _SYLLABLE.findall(match.group(1)) for p in syl.split()]
        try:
            prons[word] = tuple(festival_label(p) for p in phones)
        except UnknownPhoneError as exc:
            raise DataError(f"festival pronunciation of {word!r}: {exc}") from exc
    missing = [w for w in words if not prons.get(w)]
    if missing:
        raise DataError(f"festival gave no pronunciation for {missing[:10]}")
    return prons


def edit_distance(a: Sequence[str], b: Sequence[str]) -> int:
    """Levenshtein distance (unit costs) between two phone sequences."""
    prev = list(range(len(b) + 1))
    for i, x in enumerate(a, 1):
        cur = [i]
        for j, y in enumerate(b, 1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (x != y)))
        prev = cur
    return prev[-1]


def segment_words(
    phones: Sequence[str], words: Sequence[str], base: Mapping[str, Pron], slack: int = 3
) -> list[Pron] | None:
    """Cut ``phones`` into one chunk per word, minimising Σ edit distance to the bases.

    Returns the chunks, or None when no segmentation with chunk lengths in
    ``[max(1, len(base) - slack), len(base) + slack]`` covers the sequence.
    """
    n, m = len(phones), len(words)
    inf = float("inf")
    cost = [[inf] * (n + 1) for _ in range(m + 1)]
    back = [[0] * (n + 1) for _ in range(m + 1)]
    cost[0][0] = 0.0
    for i, word in enumerate(words, 1):
        ref = base[word]
        lo, hi = max(1, len(ref) - slack), len(ref) + slack
        for j in range(1, n + 1):
            for k in range(max(0, j - hi), j - lo + 1):
                if cost[i - 1][k] == inf:
                    continue
                c = cost[i - 1][k] + edit_distance(phones[k:j], ref)
                if c < cost[i][j]:
                    cost[i][j], back[i][j] = c, k
    if cost[m][n] == inf:
        return None
    chunks: list[Pron] = []
    j = n
    for i in range(m, 0, -1):
        k = back[i][j]
        chunks.append(tuple(phones[k:j]))
        j = k
    return chunks[::-1]


def utterance_phones(ctm_path: str | Path) -> dict[str, list[str]]:
    """Per utterance, the phones of a Kaldi phone CTM in time order."""
    phones: dict[str, list[str]] = defaultdict(list)
    for lineno, line in enumerate(Path(ctm_path).read_text().splitlines(), 1):
        fields = line.split()
        if len(fields) != 5:
            raise DataError(f"{ctm_path}:{lineno}: expected '<utt> 1 <start> <dur> <phone>'")
        phones[fields[0]].append(fields[4])
    return dict(phones)


def iter_text(path: str | Path) -> Iterator[tuple[int, str, list[str]]]:
    """``(line number, utterance, words)`` of each non-empty line of a Kaldi ``text``
    file, read line by line (an utterance may have no words)."""
    with open(path, encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            fields = line.split()
            if fields:
                yield lineno, fields[0], fields[1:]


def text_sentences(path: str | Path) -> Iterator[list[str]]:
    """The word sequences of a ``text`` file in its order, one line held (the training
    sentences of a bigram LM)."""
    return (words for _lineno, _utt, words in iter_text(path))


def read_text(path: str | Path) -> dict[str, list[str]]:
    """A Kaldi ``text`` file: utterance -> words (an utterance may have none)."""
    out: dict[str, list[str]] = {}
    for lineno, utt, words in iter_text(path):
        if utt in out:
            raise DataError(f"{path}:{lineno}: utterance {utt} appears twice")
        out[utt] = words
    return out


def learn_lexicon(
    text: Mapping[str, Sequence[str]],
    phones: Mapping[str, Sequence[str]],
    base: Mapping[str, Pron],
    min_count: int = 2,
    min_share: float = 0.1,
) -> list[LexiconEntry]:
    """Lexicon entries (sorted by word, then probability) from aligned training data.

    ``text`` words are upper case (Kaldi ``text``), ``base`` keys lower case.
    """
    observed: dict[str, Counter[Pron]] = defaultdict(Counter)
    lower = {w: w.lower() for ws in text.values() for w in ws}
    for utt, words in text.items():
        if utt not in phones or not words:
            continue
        seq = [p for p in phones[utt] if p != SILENCE]
        chunks = segment_words(seq, [lower[w] for w in words], base)
        if chunks is None:
            continue
        for word, chunk in zip(words, chunks, strict=True):
            observed[word][chunk] += 1
    vocabulary = sorted({w.upper() for w in base})
    entries: list[LexiconEntry] = []
    for word in vocabulary:
        counts = Counter(observed.get(word, Counter()))
        total = sum(counts.values())
        keep = {
            p: c
            for p, c in counts.items()
            if c >= min_count and c >= min_share * total and len(p) > 0
        }
        ref = base[word.lower()]
        keep[ref] = max(keep.get(ref, 0), 1)
        best = max(keep.values())
        for pron, count in sorted(keep.items(), key=lambda kv: (-kv[1], kv[0])):
            entries.append(LexiconEntry(word, round(count / best, 6), pron))
    return entries


def demo_lexicon(text_path: str | Path, ctm_path: str | Path) -> list[LexiconEntry]:
    """The demo lexicon learnt from a training set's ``text`` and ``phone_ctm``."""
    from paravg.corpus.text import vocabulary

    text = read_text(text_path)
    words = vocabulary() | {w.lower() for ws in text.values() for w in ws}
    base = festival_pronunciations(words)
    return learn_lexicon(text, utterance_phones(ctm_path), base)


def phone_lexicon(phones: Sequence[str], with_silence: bool = False) -> list[LexiconEntry]:
    """The PER "lexicon": every non-silence phone is a word spelt by itself (and, with
    ``with_silence``, silence too: Kaldi's TIMIT lexicon, for a lang without optional
    silence)."""
    return [LexiconEntry(p, 1.0, (p,)) for p in phones if with_silence or p != SILENCE]
