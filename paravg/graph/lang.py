"""A Kaldi ``lang`` directory from a lexicon (Kaldi's ``utils/prepare_lang.sh``).

Kaldi's defaults: position-dependent phones, optional silence between words with
probability ``sil_prob = 0.5``, disambiguation symbols from ``add_lex_disambig.pl``.

* Phones: ``<eps>`` 0; every silence phone ``p`` as ``p p_B p_E p_I p_S``; every
  non-silence phone as ``p_B p_E p_I p_S`` (word-begin, -end, -internal, singleton);
  then ``#0 … #K``. All variants of one base phone share one pdf (``phones/sets``,
  ``roots`` "shared split"), so the pdfs stay the base phones.
* Words: ``<eps>`` 0, the sorted words, then ``#0 <s> </s>``.
* Disambiguation: a pronunciation that is a proper prefix of another, or that several
  words share, gets ``#1``, ``#2``… appended (distinct per homophone); ``#0`` is G's
  back-off symbol and passes through L as a self-loop ``#0:#0`` on the loop state; one
  more symbol than used is reserved, as prepare_lang.sh does for silence.
* L (``utils/lang/make_lexicon_fst.py``): start state 0 goes to the loop state 1 with
  cost −log(1 − sil_prob) or through ``sil`` to the silence state 2 with cost
  −log(sil_prob); each pronunciation leaves state 1 with the word on its first arc and
  cost −log(pron prob), and returns to 1 (cost −log(1 − sil_prob)) or to 2
  (−log(sil_prob)); state 2 goes back to 1 through ``sil``. State 1 is final.

:class:`Lang` is the in-memory form; :func:`write_lang` writes the directory Kaldi's
tools and :func:`read_lang` read (``words.txt``, ``phones.txt``, ``L.fst``,
``L_disambig.fst``, ``topo``, ``oov.txt``, ``phones/*.{txt,int}``).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from paravg.errors import DataError
from paravg.graph.lexicon import LexiconEntry
from paravg.io import atomic_path, write_text_atomic

POSITIONS = ("B", "E", "I", "S")
OOV = "<UNK>"
#: Files every lang dir must hold (checked by :func:`read_lang`).
REQUIRED_FILES = (
    "words.txt",
    "phones.txt",
    "L_disambig.fst",
    "topo",
    "oov.txt",
    "phones/disambig.int",
    "phones/silence.csl",
    "phones/word_boundary.int",
)


@dataclass
class Lang:
    """Symbol tables and the lexicon of a lang dir (ids as in its text files)."""

    phones: dict[str, int]
    words: dict[str, int]
    silence: list[str]  # base silence phones (``sil``)
    nonsilence: list[str]  # base non-silence phones
    lexicon: list[tuple[str, float, tuple[str, ...]]]  # position-dependent, + #k
    sets: list[list[str]] = field(default_factory=list)  # variants of each dict line
    #: the dict's ``extra_questions.txt`` (base phones); position questions are added on write
    extra_questions: list[list[str]] = field(default_factory=list)
    oov: str = OOV
    optional: str = ""  # ``optional_silence.txt``; empty: the first silence phone

    @property
    def disambig_phone_ids(self) -> list[int]:
        return [i for p, i in self.phones.items() if p.startswith("#")]

    @property
    def optional_silence(self) -> str:
        return self.optional or self.silence[0]

    def variants(self, phone: str) -> list[str]:
        """prepare_lang.sh's ``phone_map.txt``: ``sil -> sil sil_B sil_E sil_I sil_S``
        for a silence phone, ``aa -> aa_B aa_E aa_I aa_S`` for a non-silence one."""
        own = [phone] if phone in self.silence else []
        return own + [f"{phone}_{pos}" for pos in POSITIONS]

    def phone_names(self) -> dict[int, str]:
        return {i: p for p, i in self.phones.items()}


def base_phone(phone: str) -> str:
    """``aa_B`` -> ``aa``; a phone without a position suffix is returned unchanged."""
    head, _, tail = phone.rpartition("_")
    return head if head and tail in POSITIONS else phone


def position_dependent(pron: Sequence[str]) -> tuple[str, ...]:
    """Word-position variants: one phone ``_S``; else ``_B``, ``_I``…, ``_E``."""
    if len(pron) == 1:
        return (f"{pron[0]}_S",)
    return (f"{pron[0]}_B", *(f"{p}_I" for p in pron[1:-1]), f"{pron[-1]}_E")


def add_disambig(prons: Sequence[tuple[str, ...]]) -> tuple[list[tuple[str, ...]], int]:
    """``add_lex_disambig.pl``: append ``#k`` to prefixes and homophones; returns the
    new pronunciations and the largest k used (0 if none)."""
    count = Counter(prons)
    prefixes = {p[:i] for p in prons for i in range(1, len(p))}
    last: Counter[tuple[str, ...]] = Counter()
    out, top = [], 0
    for p in prons:
        if p in prefixes or count[p] > 1:
            last[p] += 1
            top = max(top, last[p])
            out.append((*p, f"#{last[p]}"))
        else:
            out.append(p)
    return out, top


def make_lang(
    entries: Sequence[LexiconEntry], silence: Sequence[str], nonsilence: Sequence[str]
) -> Lang:
    """Build the :class:`Lang` of a lexicon over the given base phones (one set each)."""
    return make_lang_from_sets(entries, [[p] for p in silence], [[p] for p in nonsilence])


def make_lang_from_sets(
    entries: Sequence[LexiconEntry],
    silence_sets: Sequence[Sequence[str]],
    nonsilence_sets: Sequence[Sequence[str]],
    optional_silence: str = "",
    extra_questions: Sequence[Sequence[str]] = (),
    oov: str = OOV,
) -> Lang:
    """The :class:`Lang` of a Kaldi dict dir: each line of ``silence_phones.txt`` /
    ``nonsilence_phones.txt`` is one set of base phones sharing a tree root (e.g. stress
    variants ``ah0 ah1 ah2``); ``phones.txt`` numbers silence then non-silence variants
    in file order, as prepare_lang.sh does."""
    silence = [p for s in silence_sets for p in s]
    nonsilence = [p for s in nonsilence_sets for p in s]
    base = set(silence) | set(nonsilence)
    for e in entries:
        bad = [p for p in e.phones if p not in base]
        if bad:
            raise DataError(f"lexicon word {e.word}: phones {bad} are not in the phone set")
    prons = [position_dependent(e.phones) for e in entries]
    with_disambig, top = add_disambig(prons)
    phones: dict[str, int] = {"<eps>": 0}
    sets = []
    for line in silence_sets:
        sets.append([v for p in line for v in (p, *(f"{p}_{pos}" for pos in POSITIONS))])
    for line in nonsilence_sets:
        sets.append([f"{p}_{pos}" for p in line for pos in POSITIONS])
    for variants in sets:
        for v in variants:
            phones[v] = len(phones)
    for k in range(top + 2):
        phones[f"#{k}"] = len(phones)
    words: dict[str, int] = {"<eps>": 0}
    for w in sorted({e.word for e in entries} | {oov}):
        words[w] = len(words)
    for w in ("#0", "<s>", "</s>"):
        words[w] = len(words)
    lexicon = [(e.word, e.prob, pron) for e, pron in zip(entries, with_disambig, strict=True)]
    questions = [list(q) for q in extra_questions]
    return Lang(phones, words, silence, nonsilence, lexicon, sets, questions, oov, optional_silence)


def extra_questions(lang: Lang) -> list[list[str]]:
    """prepare_lang.sh's ``phones/extra_questions.txt``: the dict's questions with each
    phone mapped to its variants, then one question per position over all non-silence
    phones (``_B``, ``_E``, ``_I``, ``_S``), then over all silence phones (the bare
    phone, ``_B``, ``_E``, ``_I``, ``_S``)."""
    out = [[v for p in q for v in lang.variants(p)] for q in lang.extra_questions]
    out += [[f"{p}_{pos}" for p in lang.nonsilence] for pos in POSITIONS]
    out += [[f"{p}{pos}" for p in lang.silence] for pos in ("", "_B", "_E", "_I", "_S")]
    return out


def lexicon_fst_text(lang: Lang, disambig: bool, sil_prob: float = 0.5) -> str:
    """L (or L_disambig) in OpenFst text form with integer labels. ``sil_prob`` 0 is
    ``prepare_lang.sh --sil-prob 0``: no optional silence, one loop state (silence is
    then a word of the lexicon, as in Kaldi's TIMIT recipe)."""
    if sil_prob == 0.0:
        return _lexicon_fst_text_without_silence(lang, disambig)
    sil = lang.phones[lang.optional_silence]
    sil_cost, nosil_cost = -math.log(sil_prob), -math.log(1.0 - sil_prob)
    start, loop, sil_state = 0, 1, 2
    # make_lexicon_fst.py: silence at the start is optional, and the arc into the silence
    # state consumes nothing (the silence state's own arc to the loop carries the phone)
    lines = [f"{start} {loop} 0 0 {nosil_cost:.6f}", f"{start} {sil_state} 0 0 {sil_cost:.6f}"]
    next_state = 3
    for word, prob, pron in lang.lexicon:
        phones = [p for p in pron if disambig or not p.startswith("#")]
        ids = [lang.phones[p] for p in phones]
        pron_cost = -math.log(prob)
        src = loop
        for i, pid in enumerate(ids[:-1]):
            olabel = lang.words[word] if i == 0 else 0
            cost = pron_cost if i == 0 else 0.0
            lines.append(f"{src} {next_state} {pid} {olabel} {cost:.6f}")
            src, next_state = next_state, next_state + 1
        olabel = lang.words[word] if len(ids) == 1 else 0
        extra = pron_cost if len(ids) == 1 else 0.0
        lines.append(f"{src} {loop} {ids[-1]} {olabel} {nosil_cost + extra:.6f}")
        lines.append(f"{src} {sil_state} {ids[-1]} {olabel} {sil_cost + extra:.6f}")
    lines.append(f"{sil_state} {loop} {sil} 0 0")
    if disambig:
        lines.append(f"{loop} {loop} {lang.phones['#0']} {lang.words['#0']} 0")
    lines.append(f"{loop}")
    return "\n".join(lines) + "\n"


def _lexicon_fst_text_without_silence(lang: Lang, disambig: bool) -> str:
    """L with every pronunciation a loop on state 0 (start and final)."""
    lines, next_state = [], 1
    for word, prob, pron in lang.lexicon:
        ids = [lang.phones[p] for p in pron if disambig or not p.startswith("#")]
        src, cost = 0, -math.log(prob)
        for i, pid in enumerate(ids):
            last = i == len(ids) - 1
            dst = 0 if last else next_state
            olabel = lang.words[word] if i == 0 else 0
            lines.append(f"{src} {dst} {pid} {olabel} {cost if i == 0 else 0.0:.6f}")
            if not last:
                src, next_state = next_state, next_state + 1
    if disambig:
        lines.append(f"0 0 {lang.phones['#0']} {lang.words['#0']} 0")
    lines.append("0")
    return "\n".join(lines) + "\n"


def compile_fst(text: str):
    """An OpenFst StdVectorFst from integer text form (kaldifst)."""
    import kaldifst

    return kaldifst.compile(text, acceptor=False)


def write_fst(fst, path: str | Path) -> None:
    """Write an FST in OpenFst binary form, atomically."""
    with atomic_path(path, suffix=".fst") as tmp:
        fst.write(str(tmp))


def _table(symbols: dict[str, int]) -> str:
    return "".join(f"{s} {i}\n" for s, i in symbols.items())


def word_boundary(phone: str) -> str:
    """Kaldi's ``phones/word_boundary.txt`` class of a phone."""
    tail = phone.rpartition("_")[2] if base_phone(phone) != phone else ""
    return {"B": "begin", "E": "end", "I": "internal", "S": "singleton"}.get(tail, "nonword")


def write_lang(lang: Lang, directory: str | Path, topo_text: str, sil_prob: float = 0.5) -> None:
    """Write a Kaldi lang dir (what utils/prepare_lang.sh writes, minus G)."""
    d = Path(directory)
    (d / "phones").mkdir(parents=True, exist_ok=True)
    write_text_atomic(d / "phones.txt", _table(lang.phones))
    write_text_atomic(d / "words.txt", _table(lang.words))
    write_text_atomic(d / "oov.txt", f"{lang.oov}\n")
    write_text_atomic(d / "oov.int", f"{lang.words[lang.oov]}\n")
    write_text_atomic(d / "topo", topo_text)
    write_text_atomic(
        d / "lexiconp.txt",
        "".join(
            f"{w} {p:g} {' '.join(x for x in pr if not x.startswith('#'))}\n"
            for w, p, pr in lang.lexicon
        ),
    )
    write_text_atomic(
        d / "lexiconp_disambig.txt",
        "".join(f"{w} {p:g} {' '.join(pr)}\n" for w, p, pr in lang.lexicon),
    )
    write_fst(compile_fst(lexicon_fst_text(lang, False, sil_prob)), d / "L.fst")
    write_fst(compile_fst(lexicon_fst_text(lang, True, sil_prob)), d / "L_disambig.fst")
    silence = [v for s in lang.sets if s[0] in lang.silence for v in s]
    nonsilence = [v for s in lang.sets if s[0] not in lang.silence for v in s]
    disambig = [p for p in lang.phones if p.startswith("#")]
    lists = {
        "silence": silence,
        "nonsilence": nonsilence,
        "optional_silence": [lang.optional_silence],
        "context_indep": silence,
        "disambig": disambig,
    }
    for name, phones in lists.items():
        write_text_atomic(d / "phones" / f"{name}.txt", "".join(f"{p}\n" for p in phones))
        write_text_atomic(
            d / "phones" / f"{name}.int", "".join(f"{lang.phones[p]}\n" for p in phones)
        )
        write_text_atomic(
            d / "phones" / f"{name}.csl", ":".join(str(lang.phones[p]) for p in phones) + "\n"
        )
    for name in ("sets", "roots"):
        prefix = "shared split " if name == "roots" else ""
        write_text_atomic(
            d / "phones" / f"{name}.txt", "".join(f"{prefix}{' '.join(s)}\n" for s in lang.sets)
        )
        write_text_atomic(
            d / "phones" / f"{name}.int",
            "".join(f"{prefix}{' '.join(str(lang.phones[p]) for p in s)}\n" for s in lang.sets),
        )
    questions = extra_questions(lang)
    write_text_atomic(
        d / "phones" / "extra_questions.txt", "".join(f"{' '.join(q)}\n" for q in questions)
    )
    write_text_atomic(
        d / "phones" / "extra_questions.int",
        "".join(f"{' '.join(str(lang.phones[p]) for p in q)}\n" for q in questions),
    )
    boundary = [(p, word_boundary(p)) for p in silence + nonsilence]
    write_text_atomic(
        d / "phones" / "word_boundary.txt", "".join(f"{p} {c}\n" for p, c in boundary)
    )
    write_text_atomic(
        d / "phones" / "word_boundary.int",
        "".join(f"{lang.phones[p]} {c}\n" for p, c in boundary),
    )
    align = [(w, [x for x in pr if not x.startswith("#")]) for w, _, pr in lang.lexicon]
    write_text_atomic(
        d / "phones" / "align_lexicon.int",
        "".join(
            f"{lang.words[w]} {lang.words[w]} {' '.join(str(lang.phones[x]) for x in pr)}\n"
            for w, pr in align
        ),
    )


def read_symbol_table(path: str | Path) -> dict[str, int]:
    """A Kaldi/OpenFst symbol table ``<symbol> <id>``, checked line by line."""
    table: dict[str, int] = {}
    seen: set[int] = set()
    for lineno, line in enumerate(Path(path).read_text().splitlines(), 1):
        fields = line.split()
        if not fields:
            continue
        if len(fields) != 2 or not fields[1].isdigit():
            raise DataError(f"{path}:{lineno}: expected '<symbol> <integer id>', got {line!r}")
        sym, idx = fields[0], int(fields[1])
        if sym in table or idx in seen:
            raise DataError(f"{path}:{lineno}: symbol {sym!r} or id {idx} appears twice")
        table[sym] = idx
        seen.add(idx)
    if not table:
        raise DataError(f"{path}: empty symbol table")
    return table


def check_lang_dir(directory: str | Path) -> None:
    """Raise :class:`DataError` naming the first file a lang dir lacks."""
    d = Path(directory)
    if not d.is_dir():
        raise DataError(f"{d}: lang directory does not exist")
    for name in REQUIRED_FILES:
        if not (d / name).is_file():
            raise DataError(
                f"{d / name}: missing from the lang dir (utils/prepare_lang.sh writes it)"
            )


def read_lang(directory: str | Path) -> Lang:
    """The :class:`Lang` of a lang dir written by :func:`write_lang` or prepare_lang.sh.

    Needs ``phones.txt``, ``words.txt``, ``phones/sets.txt`` (else one set per phone),
    ``phones/silence.txt`` and, for the lexicon, ``lexiconp_disambig.txt`` (optional).
    """
    check_lang_dir(directory)
    d = Path(directory)
    phones = read_symbol_table(d / "phones.txt")
    words = read_symbol_table(d / "words.txt")
    real = [p for p in phones if p != "<eps>" and not p.startswith("#")]
    sets_file = d / "phones" / "sets.txt"
    if sets_file.is_file():
        sets = [line.split() for line in sets_file.read_text().splitlines() if line.split()]
    else:
        sets = [[p] for p in real]
    for lineno, s in enumerate(sets, 1):
        bad = [p for p in s if p not in phones]
        if bad:
            raise DataError(f"{sets_file}:{lineno}: phones {bad} are not in {d / 'phones.txt'}")
    sil_file = d / "phones" / "silence.txt"
    sil_phones = set(sil_file.read_text().split()) if sil_file.is_file() else set()
    opt_file = d / "phones" / "optional_silence.txt"
    optional = opt_file.read_text().split() if opt_file.is_file() else []
    silence = [base_phone(s[0]) for s in sets if s[0] in sil_phones]
    if optional and optional[0] in silence:
        silence.remove(optional[0])
        silence.insert(0, optional[0])
    nonsilence = [base_phone(s[0]) for s in sets if s[0] not in sil_phones]
    lexicon = []
    lex_file = d / "lexiconp_disambig.txt"
    if lex_file.is_file():
        for lineno, line in enumerate(lex_file.read_text().splitlines(), 1):
            f = line.split()
            if len(f) < 3:
                raise DataError(f"{lex_file}:{lineno}: expected '<word> <prob> <phones>'")
            lexicon.append((f[0], float(f[1]), tuple(f[2:])))
    oov_words = (d / "oov.txt").read_text().split()
    oov = oov_words[0] if oov_words else OOV
    opt = optional[0] if optional else ""
    return Lang(phones, words, silence, nonsilence, lexicon, sets, [], oov, opt)
