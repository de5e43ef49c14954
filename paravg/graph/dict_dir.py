"""A user's Kaldi ``data/local/dict`` directory, checked, and the lang dir built from it.

Mirrors the inputs of Kaldi's ``utils/prepare_lang.sh`` (checks as
``utils/validate_dict_dir.pl``):

* ``lexiconp.txt`` (``<word> <prob> <phones>``, prob in (0, 1]) or, if absent,
  ``lexicon.txt`` (``<word> <phones>``, prob 1.0);
* ``silence_phones.txt`` / ``nonsilence_phones.txt``: each line one set of base phones
  that share a tree root (``roots.txt`` "shared split"), e.g. stress variants;
* ``optional_silence.txt``: one silence phone;
* ``extra_questions.txt`` (optional): extra phone sets for tree questions.

Every error names the file, the line and what was expected. :func:`map_text` is
``utils/sym2int.pl --map-oov``: the words of a ``text`` file that are not in the lexicon
are an error, or become the OOV word when one is given.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from paravg.errors import DataError
from paravg.graph.lang import POSITIONS, Lang, make_lang_from_sets, write_lang
from paravg.graph.lexicon import LexiconEntry

#: Words prepare_lang.sh reserves (words.txt adds them itself).
RESERVED_WORDS = ("<eps>", "#0", "<s>", "</s>")


@dataclass
class DictDir:
    """The parsed contents of a Kaldi dict dir."""

    silence_sets: list[list[str]]
    nonsilence_sets: list[list[str]]
    optional_silence: str
    entries: list[LexiconEntry]
    extra_questions: list[list[str]] = field(default_factory=list)


def _lines(path: Path) -> list[tuple[int, list[str]]]:
    """(line number, fields) of every line of a file."""
    return [(n, line.split()) for n, line in enumerate(path.read_text().splitlines(), 1)]


def _phone_sets(path: Path, seen: dict[str, str]) -> list[list[str]]:
    """The lines of a phone-list file; ``seen`` maps each phone to where it was listed."""
    if not path.is_file():
        raise DataError(f"{path}: missing from the dict dir (utils/prepare_lang.sh needs it)")
    lines = _lines(path)
    if not any(fields for _, fields in lines):
        raise DataError(f"{path}: expected at least one phone, the file is empty")
    sets = []
    for n, fields in lines:
        if not fields:
            raise DataError(f"{path}, line {n}: empty line (expected a set of phones)")
        for p in fields:
            where = f"{path}, line {n}"
            if p in seen:
                raise DataError(f"{where}: phone {p!r} is already listed at {seen[p]}")
            head, _, tail = p.rpartition("_")
            if p == "<eps>" or p.startswith("#") or (head and tail in POSITIONS):
                raise DataError(
                    f"{where}: phone {p!r} is reserved (<eps>, #k) or ends in a word-position "
                    f"suffix _B/_E/_I/_S that prepare_lang.sh adds itself"
                )
            seen[p] = where
        sets.append(fields)
    return sets


def _lexicon(d: Path, phones: set[str]) -> list[LexiconEntry]:
    """``lexiconp.txt`` if present, else ``lexicon.txt`` with probability 1.0."""
    path, with_prob = d / "lexiconp.txt", True
    if not path.is_file():
        path, with_prob = d / "lexicon.txt", False
    if not path.is_file():
        raise DataError(f"{d}: the dict dir has neither lexicon.txt nor lexiconp.txt")
    entries, seen = [], {}
    for n, fields in _lines(path):
        where = f"{path}, line {n}"
        if not fields:
            raise DataError(f"{where}: empty line (expected a word and its phones)")
        word, rest = fields[0], fields[1:]
        prob = 1.0
        if with_prob:
            try:
                prob = float(rest[0]) if rest else float("nan")
            except ValueError:
                prob = float("nan")
            if not 0.0 < prob <= 1.0:
                raise DataError(
                    f"{where}: expected '<word> <prob in (0, 1]> <phones>', "
                    f"got {' '.join(fields)!r}"
                )
            rest = rest[1:]
        if word in RESERVED_WORDS:
            raise DataError(f"{where}: {word!r} is reserved and must not be in the lexicon")
        if not rest:
            raise DataError(
                f"{where}: word {word!r} has an empty pronunciation; prepare_lang.sh needs at "
                f"least one phone (give a silence word its silence phone, e.g. '<sil> SIL')"
            )
        unknown = [p for p in rest if p not in phones]
        if unknown:
            raise DataError(
                f"{where}: word {word!r} uses phones {unknown} that are in neither "
                f"silence_phones.txt nor nonsilence_phones.txt"
            )
        key = (word, tuple(rest))
        if key in seen:
            raise DataError(
                f"{where}: duplicate entry {word} {' '.join(rest)} (first at line {seen[key]})"
            )
        seen[key] = n
        entries.append(LexiconEntry(word, prob, tuple(rest)))
    if not entries:
        raise DataError(f"{path}: the lexicon is empty")
    if with_prob and (d / "lexicon.txt").is_file():
        _check_lexicon_pair(d / "lexicon.txt", entries)
    return entries


def _check_lexicon_pair(path: Path, entries: Sequence[LexiconEntry]) -> None:
    """``lexicon.txt`` next to ``lexiconp.txt`` must hold the same words and
    pronunciations in the same order (else one was edited and the other is stale)."""
    lines = [fields for _, fields in _lines(path) if fields]
    for n, (fields, e) in enumerate(zip(lines, entries, strict=False), 1):
        if fields != [e.word, *e.phones]:
            raise DataError(
                f"{path}, line {n}: expected {e.word} {' '.join(e.phones)} as line {n} of "
                f"lexiconp.txt, got {' '.join(fields)!r} (regenerate one from the other)"
            )
    if len(lines) != len(entries):
        raise DataError(f"{path}: {len(lines)} entries but lexiconp.txt has {len(entries)}")


def _check_distinguishable(path: Path, sets: Sequence[Sequence[str]], questions) -> None:
    """Two phones on one line of ``nonsilence_phones.txt`` share a tree root and the
    automatic questions never split them, so ``extra_questions.txt`` must hold a
    question with one and not the other (``validate_dict_dir.pl``)."""
    qs = [set(q) for q in questions]
    for n, line in enumerate(sets, 1):
        for i, p1 in enumerate(line):
            for p2 in line[i + 1 :]:
                if not any((p1 in q) != (p2 in q) for q in qs):
                    raise DataError(
                        f"{path}, line {n}: phones {p1} and {p2} share a tree root but no "
                        f"question of extra_questions.txt tells them apart (add one, e.g. "
                        f"a line per stress level)"
                    )


def read_dict_dir(directory: str | Path) -> DictDir:
    """Read and check a Kaldi dict dir (``validate_dict_dir.pl``'s checks that matter here)."""
    d = Path(directory)
    if not d.is_dir():
        raise DataError(f"{d}: dict directory does not exist")
    seen: dict[str, str] = {}
    silence_sets = _phone_sets(d / "silence_phones.txt", seen)
    nonsilence_sets = _phone_sets(d / "nonsilence_phones.txt", seen)
    silence = {p for s in silence_sets for p in s}
    opt_path = d / "optional_silence.txt"
    if not opt_path.is_file():
        raise DataError(f"{opt_path}: missing from the dict dir (utils/prepare_lang.sh needs it)")
    opt = opt_path.read_text().split()
    if len(opt) != 1 or opt[0] not in silence:
        raise DataError(
            f"{opt_path}, line 1: expected one phone of silence_phones.txt, got {' '.join(opt)!r}"
        )
    questions = []
    q_path = d / "extra_questions.txt"
    if q_path.is_file():
        for n, fields in _lines(q_path):
            if not fields:
                raise DataError(f"{q_path}, line {n}: empty line (expected a set of phones)")
            unknown = [p for p in fields if p not in seen]
            if unknown:
                raise DataError(
                    f"{q_path}, line {n}: phones {unknown} are in neither silence_phones.txt "
                    f"nor nonsilence_phones.txt"
                )
            questions.append(fields)
    _check_distinguishable(d / "nonsilence_phones.txt", nonsilence_sets, questions)
    entries = _lexicon(d, set(seen))
    return DictDir(silence_sets, nonsilence_sets, opt[0], entries, questions)


def lang_from_dict(dict_dir: DictDir, oov: str) -> Lang:
    """The :class:`Lang` prepare_lang.sh builds (``<oov-dict-entry>`` = ``oov``, which,
    as there, must be a word of the lexicon: e.g. ``<unk> spn``)."""
    if oov not in {e.word for e in dict_dir.entries}:
        raise DataError(
            f"OOV word {oov!r} is not in the lexicon; add it with a garbage phone (e.g. "
            f"'{oov} spn', spn in silence_phones.txt) as Kaldi recipes do"
        )
    return make_lang_from_sets(
        dict_dir.entries,
        dict_dir.silence_sets,
        dict_dir.nonsilence_sets,
        dict_dir.optional_silence,
        dict_dir.extra_questions,
        oov,
    )


def prepare_lang(
    dict_path: str | Path, oov: str, lang_dir: str | Path, topo_text: str, sil_prob: float = 0.5
) -> Lang:
    """``utils/prepare_lang.sh <dict> <oov> <tmp> <lang>``: read the dict dir, write the
    lang dir (``topo_text``: the HMM topology, e.g. from
    :func:`paravg.graph.topology.lang_topo_text`)."""
    lang = lang_from_dict(read_dict_dir(dict_path), oov)
    write_lang(lang, lang_dir, topo_text, sil_prob)
    return lang


def map_text(
    path: str | Path, words: Sequence[str] | dict[str, int], oov: str | None = None
) -> dict[str, list[str]]:
    """A Kaldi ``text`` file checked against the vocabulary: utterance -> words. Words
    not in ``words`` raise a :class:`DataError` naming the file, the line and the words,
    or, with ``oov``, are replaced by it (``sym2int.pl --map-oov``)."""
    vocab = set(words)
    if oov is not None and oov not in vocab:
        raise DataError(f"OOV word {oov!r} is not in the vocabulary")
    out: dict[str, list[str]] = {}
    for n, fields in _lines(Path(path)):
        if not fields:
            continue
        utt, ws = fields[0], fields[1:]
        if utt in out:
            raise DataError(f"{path}, line {n}: utterance {utt} appears twice")
        unknown = sorted({w for w in ws if w not in vocab})
        if unknown and oov is None:
            raise DataError(
                f"{path}, line {n}: utterance {utt}: words {unknown} are not in the lexicon "
                f"(add them, or give an OOV word such as <unk> to map them to)"
            )
        out[utt] = [w if w in vocab else oov for w in ws]
    return out
