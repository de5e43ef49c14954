"""Small hand-built lattices and graph directories for the decode tests.

The transition model has two one-state phones (Kaldi's topology, self-loop 0.75):
transition-ids 1 (phone 1 self-loop), 2 (phone 1 forward), 3 (phone 2 self-loop),
4 (phone 2 forward); with self-loop reordering a phone instance starts on its forward
transition-id. Word ``A`` is spelt by phone 1 (``a_S``), ``B`` by phone 2 (``b_S``).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from paravg.decode.lattice import Lattice, writing_lattice_archives
from paravg.decode.score import GraphScoring, score_set

TRANSITION_MDL = """<TransitionModel>
<Topology>
<TopologyEntry>
<ForPhones>
1 2
</ForPhones>
<State> 0 <PdfClass> 0 <Transition> 0 0.75 <Transition> 1 0.25 </State>
<State> 1 </State>
</TopologyEntry>
</Topology>
<Triples> 2
1 0 0
2 0 1
</Triples>
</TransitionModel>
"""
WORDS = {"<eps>": 0, "A": 1, "B": 2}
PHONE_OF_WORD = {1: 1, 2: 2}  # word id -> its phone id
FORWARD_TID = {1: 2, 2: 4}  # phone -> the transition-id a phone instance starts with
LOOP_TID = {1: 1, 2: 3}


def write_graph_dir(directory: Path, word_boundary: bool = True) -> Path:
    """words.txt, transition.mdl and (optionally) phones/word_boundary.int."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "words.txt").write_text("".join(f"{w} {i}\n" for w, i in WORDS.items()))
    (directory / "transition.mdl").write_text(TRANSITION_MDL)
    if word_boundary:
        (directory / "phones").mkdir(exist_ok=True)
        (directory / "phones" / "word_boundary.int").write_text("1 singleton\n2 singleton\n")
    return directory


def lattice_of_paths(paths: list[list[tuple[int, int, float, float]]]) -> Lattice:
    """A lattice with one branch per path from a shared start node; a path is a list of
    segments (word id, frames, graph cost, acoustic cost): the word's phone for that many
    frames, the word label and the graph cost on its first link, the acoustic cost spread
    evenly over its frames. Each branch ends in a final node of cost 0."""
    frame, final = [0], [np.inf]
    src, dst, graph, acoustic, tid, word = [], [], [], [], [], []
    for path in paths:
        node, t = 0, 0
        for w, frames, g, a in path:
            phone = PHONE_OF_WORD[w]
            for k in range(frames):
                frame.append(t + 1)
                final.append(np.inf)
                new = len(frame) - 1
                src.append(node)
                dst.append(new)
                graph.append(g if k == 0 else 0.0)
                acoustic.append(a / frames)
                tid.append(FORWARD_TID[phone] if k == 0 else LOOP_TID[phone])
                word.append(w if k == 0 else 0)
                node, t = new, t + 1
        final[node] = 0.0
    return Lattice.from_links(
        np.array(frame), np.array(final), np.array(src), np.array(dst),
        np.array(graph), np.array(acoustic), np.array(tid), np.array(word),
    )  # fmt: skip


def write_split(directory, j, lattices):
    """Split j of a set: its summary JSON and its word lattices (as decode_split)."""
    (directory / f"s{j}.json").write_text(
        json.dumps({"frames": 10, "nnet_seconds": 0.1, "search_seconds": 0.2})
    )
    with writing_lattice_archives({"words": directory / f"lat.{j}.gz"}) as archives:
        for utt, lattice in lattices.items():
            archives["words"].write(lattice.kaldi_text(utt))
    return directory / f"s{j}.json", directory / f"lat.{j}.gz"


# u1: "A B" is best at LMWT 2 (cost 0 + 3.8/2 = 1.9 < 0.5 + 3/2), "A" at LMWT 1 (0.5 + 3
# < 3.8); u2 says "A" at both (its reference, "A ZED", has a word not in words.txt)
U1 = lattice_of_paths([[(1, 3, 0.0, 1.9), (2, 2, 0.0, 1.9)], [(1, 5, 0.5, 3.0)]])
U2 = lattice_of_paths([[(1, 4, 0.0, 1.0)]])


def score(tmp_path, splits, text="text", lmwts=(1, 2), **kwargs):
    """``score_set`` on these splits' lattices at LMWTs ``lmwts``, word insertion
    penalty 0, against the reference ``tmp_path / text``; the graph of
    :func:`write_graph_dir`."""
    graph_dir = write_graph_dir(tmp_path / "graph")
    written = [write_split(tmp_path, j, lats) for j, lats in enumerate(splits)]
    summaries, lattices = [w[0] for w in written], [w[1] for w in written]
    return score_set(
        summaries,
        {"words": GraphScoring(lattices, graph_dir, lmwts, [0.0])},
        tmp_path / "scores.json",
        tmp_path,
        tmp_path / "hyps.json",
        tmp_path / "ctm",
        tmp_path / text,
        **kwargs,
    )
