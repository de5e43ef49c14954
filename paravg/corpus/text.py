"""Template sentence grammar for the demo corpus.

A handful of sentence templates over small word classes (names, numbers, colours, objects,
places, ...). Every word is in CMUdict, and together the words cover all 39 ARPAbet phones
of CMUdict several times over (rare phones such as ``zh`` and ``oy`` have their own
words: *measure, usual, beige, garage, television; boy, toy, coin, noise, voice*), so every
phone label of the corpus is seen in training.

Sentences are drawn with a seeded ``numpy.random.Generator``: the same seed gives the same
sentences. :func:`sentence_pools` returns disjoint train, test (and dev) pools (no test sentence
is ever spoken in training), and :func:`kaldi_transcript` gives the Kaldi ``text`` form
(upper-case words, no punctuation).
"""

from __future__ import annotations

import re

import numpy as np


def _wordlist(text: str) -> list[str]:
    """Words of a space-separated list."""
    return text.split()


NAMES = _wordlist(
    "john mary peter susan george linda thomas helen james nancy charles ruth joseph carol "
    "robert joyce michael judy william karen david sarah paul emily richard anna edward "
    "julia frank laura henry grace walter alice arthur rose roy irene victor martha"
)
COUNTS = _wordlist(
    "two three four five six seven eight nine ten eleven twelve fifteen twenty thirty forty fifty"
)
DIGITS = _wordlist("zero one two three four five six seven eight nine")
COLOURS = _wordlist(
    "red green blue yellow orange purple white black brown pink gray silver golden beige violet"
)
OBJECTS = (
    ("chair", "chairs"),
    ("table", "tables"),
    ("book", "books"),
    ("cup", "cups"),
    ("box", "boxes"),
    ("bottle", "bottles"),
    ("jacket", "jackets"),
    ("shoe", "shoes"),
    ("watch", "watches"),
    ("lamp", "lamps"),
    ("pencil", "pencils"),
    ("window", "windows"),
    ("basket", "baskets"),
    ("key", "keys"),
    ("coin", "coins"),
    ("toy", "toys"),
    ("ball", "balls"),
    ("bag", "bags"),
    ("hat", "hats"),
    ("ring", "rings"),
    ("spoon", "spoons"),
    ("plate", "plates"),
    ("mirror", "mirrors"),
    ("blanket", "blankets"),
    ("television", "televisions"),
    ("umbrella", "umbrellas"),
    ("bicycle", "bicycles"),
    ("wagon", "wagons"),
    ("hammer", "hammers"),
    ("feather", "feathers"),
    ("glove", "gloves"),
    ("treasure", "treasures"),
    ("cushion", "cushions"),
    ("pillow", "pillows"),
    ("candle", "candles"),
    ("drawing", "drawings"),
)
ADJECTIVES = _wordlist(
    "big small old new heavy tiny huge clean dirty quiet noisy warm cold soft smooth "
    "strange lovely shiny wooden thick thin usual young good"
)
PLACES = _wordlist(
    "kitchen garden garage office station market library village harbor bridge museum "
    "school church forest river valley beach hotel theater airport hospital cottage "
    "tower castle bakery palace"
)
ACTIONS_PAST = _wordlist(
    "found bought moved washed painted carried dropped lost sold took brought pushed "
    "pulled measured hid saw wanted needed kept threw fixed cleaned shared borrowed "
    "ordered noticed watched enjoyed"
)
ACTIONS_PRESENT = _wordlist(
    "finds buys moves washes paints carries drops sells takes brings pushes pulls "
    "measures hides keeps throws fixes cleans shares borrows orders watches enjoys"
)
ANIMALS = _wordlist(
    "dog cat horse mouse bird goat sheep fox zebra tiger rabbit monkey lion whale frog "
    "duck cow pig turtle"
)
ANIMAL_VERBS = _wordlist("sleeps waits jumps hides sits plays runs stays looks")
PREPOSITIONS = _wordlist(
    "near behind under beside inside beyond across above below toward through outside"
)
WEEKDAYS = _wordlist("monday tuesday wednesday thursday friday saturday sunday")
TIMES_OF_DAY = _wordlist("morning evening afternoon night")
MONTHS = _wordlist(
    "january february march april may june july august september october november december"
)
RELATIVES = _wordlist(
    "brother sister mother father uncle aunt cousin neighbor teacher friend boy girl"
)
FEELINGS = _wordlist("joy pleasure noise voice choice surprise")

# {slot} -> word class; a slot may repeat with a suffix digit ({name2}).
WORD_CLASSES: dict[str, tuple[str, ...]] = {
    "name": tuple(NAMES),
    "count": tuple(COUNTS),
    "digit": tuple(DIGITS),
    "colour": tuple(COLOURS),
    "object": tuple(s for s, _ in OBJECTS),
    "objects": tuple(p for _, p in OBJECTS),
    "adj": tuple(ADJECTIVES),
    "place": tuple(PLACES),
    "did": tuple(ACTIONS_PAST),
    "does": tuple(ACTIONS_PRESENT),
    "animal": tuple(ANIMALS),
    "moves": tuple(ANIMAL_VERBS),
    "prep": tuple(PREPOSITIONS),
    "weekday": tuple(WEEKDAYS),
    "time": tuple(TIMES_OF_DAY),
    "month": tuple(MONTHS),
    "relative": tuple(RELATIVES),
    "feeling": tuple(FEELINGS),
}

TEMPLATES = (
    "{name} {did} {count} {adj} {objects} {prep} the {place}.",
    "Please put the {colour} {object} {prep} the {place}.",
    "The {adj} {animal} {moves} {prep} the {colour} {object}.",
    "{name} and {name2} will meet at the {place} on {weekday} {time}.",
    "Call {name} at {digit} {digit2} {digit3} {digit4} {digit5}.",
    "Is the {object} {colour} or {colour2}?",
    "We measured {count} {objects} in the {place} last {weekday}.",
    "My {relative} usually {does} the {colour} {object} in {month}.",
    "How many {objects} did {name} see near the {place}?",
    "The {animal} with the {colour} {object} is {adj} and {adj2}.",
    "{name} heard the {feeling} of the {adj} {relative} in the {place}.",
    "On {weekday} the {relative} {did} a {colour} {object} and {count} {objects}.",
    "Take the {adj} {object} to the {place} before {month}.",
    "There were {count} {animal} toys {prep} the {adj} {place}.",
)

_SLOT = re.compile(r"\{([a-z]+)\d?\}")
# "a" before a vowel sound becomes "an" ("usual" starts with a "y" sound)
_ARTICLE = re.compile(r"\b([Aa]) (?!usual)([aeiou])")


def vocabulary() -> set[str]:
    """Every word a sentence can contain (lower case)."""
    words: set[str] = {"an"}  # from "a" before a vowel
    for template in TEMPLATES:
        fixed = _SLOT.sub(" ", template)
        words.update(_words(fixed))
        for slot in _SLOT.findall(template):
            words.update(WORD_CLASSES[slot])
    return words


def _words(text: str) -> list[str]:
    return re.findall(r"[a-z]+", text.lower())


def kaldi_transcript(sentence: str) -> str:
    """Kaldi ``text`` form: upper-case words separated by single spaces, no punctuation."""
    return " ".join(w.upper() for w in _words(sentence))


def random_sentence(rng: np.random.Generator) -> str:
    """One sentence: a uniformly chosen template with uniformly chosen slot fillers."""
    template = TEMPLATES[int(rng.integers(len(TEMPLATES)))]

    def fill(match: re.Match) -> str:
        choices = WORD_CLASSES[match.group(1)]
        return choices[int(rng.integers(len(choices)))]

    sentence = _ARTICLE.sub(r"\1n \2", _SLOT.sub(fill, template))
    return sentence[0].upper() + sentence[1:]


def sentence_pools(
    seed: int, num_train: int, num_test: int, num_dev: int = 0
) -> tuple[list[str], ...]:
    """Disjoint pools of distinct sentences for the train, the test and (when
    ``num_dev`` > 0) the dev set, in that order.

    Sentences are drawn one by one from ``default_rng([seed, 0x7e47])``; a sentence already
    drawn (compared by its Kaldi transcript) is skipped, so no pool shares a sentence with
    another and no pool holds a duplicate. The dev pool is drawn last: adding it changes
    neither the train nor the test pool.
    """
    rng = np.random.default_rng([seed, 0x7E47])
    seen: set[str] = set()
    sizes = (num_train, num_test, num_dev) if num_dev else (num_train, num_test)
    pools: list[list[str]] = [[] for _ in sizes]
    max_draws = 50 * sum(sizes) + 1000
    for pool, size in zip(pools, sizes, strict=True):
        draws = 0
        while len(pool) < size:
            sentence = random_sentence(rng)
            key = kaldi_transcript(sentence)
            draws += 1
            if draws > max_draws:
                raise ValueError(f"the grammar cannot give {size} distinct sentences")
            if key in seen:
                continue
            seen.add(key)
            pool.append(sentence)
    return tuple(pools)
