"""Load a graph directory for decoding: HCLG, words, transition-id -> pdf map.

A graph dir is what :mod:`paravg.graph.build` writes (``HCLG.fst``, ``words.txt``,
``transition.mdl`` or a Kaldi ``final.mdl``, ``graph.json``), or, for the ``hclg``
source, a user's ``HCLG.fst`` + ``words.txt`` + GMM ``final.mdl`` (text form). The
transition-id -> pdf map is read from the ``<Triples>``/``<Tuples>`` of the transition
model with the topology's transitions per state (Kaldi's transition-model.cc numbering:
transition-ids 1.. in order of transition state, then of the state's transitions; a
self-loop carries the self-loop pdf, any other transition the forward pdf).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from paravg.errors import DataError
from paravg.graph.lang import read_symbol_table


@dataclass
class TransitionInfo:
    """What decoding needs from a transition model."""

    tid_to_pdf: np.ndarray  # index t (1-based transition-ids), entry 0 unused (-1)
    tid_to_phone: np.ndarray
    num_pdfs: int
    phones: list[int]  # phone ids the topology covers
    # True where the transition leaves the phone's first HMM state for another state:
    # in a graph with Kaldi's default self-loop reordering (mkgraph.sh, paravg's graphs)
    # the frame that carries it is the phone's first (word alignment, CTM)
    tid_starts_phone: np.ndarray | None = None
    # Kaldi's TransitionModel::IsFinal (the transition enters the phone's final,
    # non-emitting state) and IsSelfLoop, per transition-id (word alignment:
    # lattice-align-words finds a phone's end by them)
    tid_is_final: np.ndarray | None = None
    tid_is_self_loop: np.ndarray | None = None


_TOKENS = re.compile(r"\S+")


def parse_topology(tokens: list[str], pos: int, path) -> tuple[dict[int, list[list[int]]], int]:
    """phone -> per state, the destination states of its transitions; and next pos."""
    if tokens[pos] != "<Topology>":
        raise DataError(f"{path}: expected <Topology>, got {tokens[pos]!r}")
    pos += 1
    out: dict[int, list[list[int]]] = {}
    while tokens[pos] == "<TopologyEntry>":
        pos += 2  # <TopologyEntry> <ForPhones>
        phones = []
        while tokens[pos] != "</ForPhones>":
            phones.append(int(tokens[pos]))
            pos += 1
        pos += 1
        states: list[list[int]] = []
        while tokens[pos] == "<State>":
            pos += 2
            dests: list[int] = []
            while tokens[pos] != "</State>":
                if tokens[pos] == "<Transition>":
                    dests.append(int(tokens[pos + 1]))
                    pos += 3
                elif tokens[pos] in ("<PdfClass>", "<ForwardPdfClass>", "<SelfLoopPdfClass>"):
                    pos += 2
                else:
                    raise DataError(f"{path}: unexpected {tokens[pos]!r} in <State>")
            states.append(dests)
            pos += 1
        pos += 1  # </TopologyEntry>
        for p in phones:
            out[p] = states
    return out, pos + 1


def read_transition_model(path: str | Path) -> TransitionInfo:
    """Transition-id maps of a Kaldi transition model in text form (``transition.mdl``,
    or a ``final.mdl`` written with ``--binary=false``)."""
    path = Path(path)
    raw = path.read_bytes()
    if raw[:2] == b"\x00B":
        raise DataError(
            f"{path}: Kaldi binary model; convert it with "
            f"'gmm-copy --binary=false {path.name} final.txt.mdl' (text form is read)"
        )
    tokens = _TOKENS.findall(raw.decode("utf-8", errors="replace"))
    try:
        pos = tokens.index("<TransitionModel>") + 1
        topo, pos = parse_topology(tokens, pos, path)
        kind = tokens[pos]
        width = {"<Triples>": 3, "<Tuples>": 4}.get(kind)
        if width is None:
            raise DataError(f"{path}: expected <Triples> or <Tuples>, got {kind!r}")
        n = int(tokens[pos + 1])
        pos += 2
        tuples = [
            tuple(int(x) for x in tokens[pos + i * width : pos + (i + 1) * width]) for i in range(n)
        ]
    except (ValueError, IndexError) as exc:
        raise DataError(f"{path}: not a Kaldi transition model ({exc})") from exc
    pdfs, phones, starts, finals, loops = [-1], [-1], [False], [False], [False]
    for t in tuples:
        phone, state = t[0], t[1]
        fwd, loop = t[2], t[-1]
        if phone not in topo:
            raise DataError(f"{path}: phone {phone} has no topology entry")
        for dest in topo[phone][state]:
            pdfs.append(loop if dest == state else fwd)
            phones.append(phone)
            starts.append(state == 0 and dest != state)
            finals.append(not topo[phone][dest])  # the final state has no transitions
            loops.append(dest == state)
    num_pdfs = 1 + max(max(t[2], t[-1]) for t in tuples)
    return TransitionInfo(
        np.array(pdfs),
        np.array(phones),
        num_pdfs,
        sorted(topo),
        np.array(starts, dtype=bool),
        np.array(finals, dtype=bool),
        np.array(loops, dtype=bool),
    )


@dataclass
class DecodingGraph:
    """HCLG (kaldifst StdVectorFst), word symbols and transition-id maps."""

    hclg: object
    words: dict[int, str]
    transitions: TransitionInfo
    directory: Path


def load_graph(directory: str | Path, model_file: str = "transition.mdl") -> DecodingGraph:
    """Read a graph dir (HCLG.fst, words.txt and the transition model)."""
    from paravg.graph.hclg import read_fst

    d = Path(directory)
    for name in ("HCLG.fst", "words.txt", model_file):
        if not (d / name).is_file():
            raise DataError(f"{d / name}: missing from the graph directory")
    words = {i: w for w, i in read_symbol_table(d / "words.txt").items()}
    return DecodingGraph(read_fst(d / "HCLG.fst"), words, read_transition_model(d / model_file), d)
