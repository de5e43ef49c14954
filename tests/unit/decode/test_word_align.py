"""Word alignment of a determinised lattice (Kaldi's lattice-align-words), on a
hand-built lattice whose word labels and transition-id strings cross word boundaries."""

import numpy as np
import pytest

from paravg.decode.determinize import CompactLattice
from paravg.decode.word_align import WordBoundaryInfo, word_align_lattice
from paravg.graph.load import read_transition_model

# four one-state phones (Kaldi's topology): 1 silence, 2 a_B, 3 a_E, 4 b_S; phone p's
# self-loop is transition-id 2p - 1, its forward (final) transition 2p; with self-loop
# reordering a phone instance is its forward transition-id then its self-loops
TRANSITION_MDL = """<TransitionModel>
<Topology>
<TopologyEntry>
<ForPhones>
1 2 3 4
</ForPhones>
<State> 0 <PdfClass> 0 <Transition> 0 0.75 <Transition> 1 0.25 </State>
<State> 1 </State>
</TopologyEntry>
</Topology>
<Triples> 4
1 0 0
2 0 1
3 0 2
4 0 3
</Triples>
</TransitionModel>
"""
BOUNDARY = {1: "nonword", 2: "begin", 3: "end", 4: "singleton"}
A, B = 1, 2
SIL, A_B, A_E, B_S = 1, 2, 3, 4


def fwd(p):
    return 2 * p


def loop(p):
    return 2 * p - 1


def phone(p, frames):
    return [fwd(p)] + [loop(p)] * (frames - 1)


@pytest.fixture
def info(tmp_path):
    (tmp_path / "final.mdl").write_text(TRANSITION_MDL)
    trans = read_transition_model(tmp_path / "final.mdl")
    return WordBoundaryInfo.from_transitions(BOUNDARY, trans)


def paths(clat):
    """Every path as ((word, string), ...) per arc plus the final string, with its total
    (graph, acoustic)."""
    out = []
    columns = (clat.src, clat.dst, clat.word, clat.graph, clat.acoustic)
    arcs = list(zip(*(c.tolist() for c in columns), clat.strings, strict=True))

    def walk(s, sofar, g, a):
        if s in clat.final:
            fg, fa, fs = clat.final[s]
            out.append(((*tuple(sofar), (None, tuple(fs))), round(g + fg, 9), round(a + fa, 9)))
        for src, dst, w, ag, aa, string in arcs:
            if src == s:
                walk(dst, [*sofar, (w, tuple(string))], g + ag, a + aa)

    walk(0, [], 0.0, 0.0)
    return sorted(out)


# silence 2 frames, "A" (a_B 2, a_E 3), "B" (b_S 2), silence 1; against silence 2, "B"
# (b_S 3), silence 1. The determinised arcs carry the labels early and their strings
# run across the words (as DeterminizeLatticePruned leaves them).
SIL2, AB2, AE3, BS2, SIL1, BS3 = (phone(SIL, 2), phone(A_B, 2), phone(A_E, 3), phone(B_S, 2),
                                  phone(SIL, 1), phone(B_S, 3))  # fmt: skip
LATTICE = CompactLattice(
    num_states=4,
    src=np.array([0, 1, 0]),
    dst=np.array([1, 2, 3]),
    word=np.array([A, B, B]),
    graph=np.array([1.0, 2.0, 4.0]),
    acoustic=np.array([10.0, 20.0, 35.0]),
    strings=[(*SIL2, AB2[0]), (*AB2[1:], *AE3, BS2[0]), (*SIL2, *BS3)],
    final={2: (0.5, 3.0, (*BS2[1:], *SIL1)), 3: (0.25, 1.0, tuple(SIL1))},
)


def test_each_word_gets_one_arc_with_exactly_its_phones_and_silence_its_own(info):
    aligned, ok = word_align_lattice(LATTICE, info)
    assert ok
    assert paths(aligned) == sorted([
        (((0, tuple(SIL2)), (A, (*AB2, *AE3)), (B, tuple(BS2)), (0, tuple(SIL1)), (None, ())),
         3.5, 33.0),
        (((0, tuple(SIL2)), (B, tuple(BS3)), (0, tuple(SIL1)), (None, ())), 4.25, 36.0),
    ])  # fmt: skip
    # the paths' weights are the lattice's (the weights moved, not changed)


def test_phones_that_do_not_spell_the_words_are_an_error(info):
    broken = CompactLattice(
        num_states=2, src=np.array([0]), dst=np.array([1]), word=np.array([A]),
        graph=np.array([0.0]), acoustic=np.array([0.0]),
        strings=[(*phone(A_E, 2), *phone(A_B, 2))], final={1: (0.0, 0.0, ())},
    )  # fmt: skip
    _, ok = word_align_lattice(broken, info)
    assert not ok
