"""A small hand-made lexicon and training text, and its graph built once per module."""

from pathlib import Path

import pytest

from paravg.graph.lexicon import LexiconEntry

#: Words over a few phones; TO/TWO are homophones, CAT a prefix of CATS.
LEXICON = [
    LexiconEntry("CALL", 1.0, ("k", "ao", "l")),
    LexiconEntry("CAT", 1.0, ("k", "ae", "t")),
    LexiconEntry("CATS", 1.0, ("k", "ae", "t", "s")),
    LexiconEntry("JOHN", 1.0, ("jh", "aa", "n")),
    LexiconEntry("TO", 1.0, ("t", "uw")),
    LexiconEntry("TWO", 1.0, ("t", "uw")),
    LexiconEntry("SEE", 1.0, ("s", "iy")),
]
SENTENCES = [
    ["CALL", "JOHN"],
    ["CALL", "TWO", "CATS"],
    ["SEE", "JOHN"],
    ["SEE", "TWO", "CATS"],
    ["CALL", "JOHN", "TO", "SEE", "CAT"],
]


@pytest.fixture(scope="module")
def small_graph(tmp_path_factory):
    from paravg.graph.build import build_from_lexicon

    out = tmp_path_factory.mktemp("graph") / "words"
    summary = build_from_lexicon(LEXICON, SENTENCES, out)
    return out, summary


REPO_CONFIG = Path(__file__).resolve().parents[3] / "config" / "config.yaml"
