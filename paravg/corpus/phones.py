"""The demo corpus' phone label set and the maps from each TTS engine's phone names.

Labels: ``sil`` (id 0) and the 39 ARPAbet phones of CMUdict in alphabetical order (ids
1..39), 40 in all, written as Kaldi's ``phones.txt`` (``<phone> <id>`` per line). The
per-frame targets are these ids, the same kind of integer a Kaldi user gets from
``ali-to-pdf`` (there, pdf ids).

* festival and flite use the CMU/radio phone set: CMUdict's phones plus a few extras that
  are folded into the 39 (``ax->ah, axr->er, dx->t, el->l, em->m, en->n, hv->hh, nx->n``)
  and silences (``pau, h#, brth -> sil``); stress digits, if any, are stripped.
* espeak-ng reports its own phoneme mnemonics (Kirshenbaum-like: ``tS``, ``e@``, ``3:``).
  :data:`ESPEAK_PHONES` maps each to one or more labels; an r-coloured or centring
  diphthong becomes two labels that share its duration (``e@ -> eh r``, ``aI@ -> ay ah``),
  as CMUdict spells those words. ``;`` (palatalisation) is not a phone: it is merged into
  the phone before it (see :func:`espeak_labels`).
"""

from __future__ import annotations

from paravg.errors import DataError


def _wordlist(text: str) -> list[str]:
    """Words of a space-separated list."""
    return text.split()


SILENCE = "sil"

ARPABET = _wordlist(
    "aa ae ah ao aw ay b ch d dh eh er ey f g hh ih iy jh k l m n ng ow oy p r s sh t th "
    "uh uw v w y z zh"
)

#: All labels, index = id. ``sil`` is 0.
PHONES: tuple[str, ...] = (SILENCE, *ARPABET)
PHONE_IDS: dict[str, int] = {p: i for i, p in enumerate(PHONES)}
NUM_PHONES = len(PHONES)

#: festival/flite phone -> label, for the names that are not already labels.
FESTIVAL_FOLDING: dict[str, str] = {
    "ax": "ah",
    "axr": "er",
    "dx": "t",
    "el": "l",
    "em": "m",
    "en": "n",
    "hv": "hh",
    "nx": "n",
    "pau": SILENCE,
    "h#": SILENCE,
    "brth": SILENCE,
    "#": SILENCE,
    "ssil": SILENCE,
}

#: espeak-ng (en-us) phoneme mnemonic -> labels it spans.
ESPEAK_PHONES: dict[str, tuple[str, ...]] = {
    # silences and pauses
    "_": ("sil",),
    "_:": ("sil",),
    "_!": ("sil",),
    "_|": ("sil",),
    # vowels
    "a": ("ae",),
    "aa": ("ae",),  # en-us "bath" vowel (basket, last) is CMUdict's ae
    "a#": ("ah",),
    "A:": ("aa",),
    "A@": ("aa", "r"),
    "0": ("aa",),
    "E": ("eh",),
    "e@": ("eh", "r"),
    "I": ("ih",),
    "I#": ("ih",),
    "I2": ("ih",),
    "i": ("iy",),
    "i:": ("iy",),
    "i@": ("iy", "ah"),
    "i@3": ("ih", "r"),
    "O:": ("ao",),
    "O": ("ao",),
    "O2": ("ao",),
    "O@": ("ao", "r"),
    "o@": ("ao", "r"),
    "U": ("uh",),
    "U@": ("uh", "r"),
    "u:": ("uw",),
    "V": ("ah",),
    "@": ("ah",),
    "@2": ("ah",),
    "@5": ("ah",),
    "@L": ("ah", "l"),
    "3": ("er",),
    "3:": ("er",),
    "aI": ("ay",),
    "aI@": ("ay", "ah"),
    "aI3": ("ay", "er"),
    "aU": ("aw",),
    "aU@": ("aw", "er"),
    "eI": ("ey",),
    "oU": ("ow",),
    "OI": ("oy",),
    # consonants that differ from ARPAbet
    "tS": ("ch",),
    "dZ": ("jh",),
    "T": ("th",),
    "D": ("dh",),
    "S": ("sh",),
    "Z": ("zh",),
    "N": ("ng",),
    "j": ("y",),
    "h": ("hh",),
    "t#": ("t",),
    "t2": ("t",),
    "d#": ("d",),
    "r-": ("r",),
    "l/": ("l",),
    "l/2": ("l",),
    "n-": ("n",),
    "m-": ("m",),
    "w#": ("w",),
    # consonants spelt as in ARPAbet
    **{c: (c,) for c in _wordlist("b d f g k l m n p r s t v w z")},
}

#: espeak mnemonics that modify the previous phone instead of being one.
ESPEAK_MODIFIERS = frozenset({";"})

_STRESS_MARKS = "'\","


class UnknownPhoneError(DataError):
    """A TTS engine produced a phone name that has no label (a :class:`DataError`:
    :mod:`paravg.graph.lexicon` adds the word it was looking up)."""


def festival_label(phone: str) -> str:
    """Label of a festival/flite phone name (stress digits stripped, extras folded)."""
    name = phone.strip().lower().rstrip("012")
    name = FESTIVAL_FOLDING.get(name, name)
    if name not in PHONE_IDS:
        raise UnknownPhoneError(f"festival/flite phone {phone!r} has no label in {PHONES}")
    return name


def espeak_labels(mnemonic: str) -> tuple[str, ...]:
    """Labels of an espeak-ng phoneme mnemonic; ``()`` for a modifier such as ``;``.

    Stress marks are stripped. A mnemonic missing from the table is tried once more
    without a trailing variant marker (``#``, ``-``, ``/``, a digit) before it is an
    error.
    """
    name = mnemonic.strip().lstrip(_STRESS_MARKS)
    if name in ESPEAK_MODIFIERS:
        return ()
    if name in ESPEAK_PHONES:
        return ESPEAK_PHONES[name]
    base = name.rstrip("#-/0123456789") or name
    if base in ESPEAK_PHONES:
        return ESPEAK_PHONES[base]
    raise UnknownPhoneError(f"espeak-ng phoneme {mnemonic!r} has no entry in ESPEAK_PHONES")


def phones_txt() -> str:
    """Kaldi ``phones.txt`` text: ``<phone> <id>`` per line, ids 0..39."""
    return "".join(f"{p} {i}\n" for i, p in enumerate(PHONES))
