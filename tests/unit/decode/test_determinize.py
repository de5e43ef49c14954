"""Kaldi's pruned lattice determinisation (paravg.decode.determinize) against brute force.

On small seeded random state-level lattices, every path is enumerated: per word sequence,
the best (graph, acoustic) cost (g + s·a, ties to the lower g) and the transition-id
strings of the paths achieving it. The determinised CompactLattice must be deterministic
on words and epsilon-free, hold every word sequence within the beam (and each one once),
each with the raw lattice's best weight and the string of a path achieving it.
"""

from __future__ import annotations

import io
import math
from collections import defaultdict

import numpy as np
import pytest

from paravg.decode.determinize import (
    CompactLattice,
    determinize_lattice_phone_pruned,
    prune_lattice,
)
from paravg.decode.lattice import Lattice, read_lattice_archive

SCALE = 0.5
TOL = 1e-6
# transition-ids 1..6: phone (tid + 1) // 2; odd ones start the phone (forward of state 0)
TID_TO_PHONE = np.array([0, 1, 1, 2, 2, 3, 3])
TID_STARTS_PHONE = np.array([False, True, False, True, False, True, False])


def random_lattice(seed: int, frames: int = 5, words: int = 3) -> Lattice:
    """Nodes per frame (1-3), emitting links frame t -> t + 1 (random transition-id,
    sometimes a word), a few non-emitting links inside a frame, a few dead ends, final
    costs at the last frame."""
    rng = np.random.default_rng(seed)
    nodes = [[0]]
    frame = [0]
    for t in range(1, frames + 1):
        k = int(rng.integers(1, 4))
        nodes.append(list(range(len(frame), len(frame) + k)))
        frame += [t] * k
    src, dst, g, a, tid, word = [], [], [], [], [], []

    def link(s, d, t, w):
        src.append(s)
        dst.append(d)
        g.append(float(rng.uniform(0, 2)))
        a.append(float(rng.uniform(0, 4)))
        tid.append(t)
        word.append(w)

    for t in range(frames):
        for s in nodes[t]:
            if s != nodes[t][0] and rng.random() < 0.15:  # a dead end
                continue
            targets = rng.choice(nodes[t + 1], size=int(rng.integers(1, 3)), replace=True)
            if s == nodes[t][0]:  # the first nodes of the frames make a complete path
                targets = [nodes[t + 1][0], *targets[1:]]
            for d in targets:
                w = int(rng.integers(1, words + 1)) if rng.random() < 0.35 else 0
                link(s, int(d), int(rng.integers(1, 7)), w)
        here = nodes[t + 1]
        for i in range(len(here) - 1):  # non-emitting, to a later node of the same frame
            if rng.random() < 0.3:
                w = int(rng.integers(1, words + 1)) if rng.random() < 0.5 else 0
                link(here[i], here[i + 1], 0, w)
    final = np.full(len(frame), np.inf)
    for s in nodes[frames]:
        final[s] = float(rng.uniform(0, 1))
    i64 = lambda x: np.array(x, dtype=np.int64)  # noqa: E731
    return Lattice.from_links(
        i64(frame), final, i64(src), i64(dst), np.array(g), np.array(a), i64(tid), i64(word)
    )


def raw_paths(lat: Lattice) -> dict[tuple, list[tuple[float, float, tuple]]]:
    """Every complete path of the raw lattice: word sequence -> [(g, a, tid string)]."""
    out: dict[tuple, list] = defaultdict(list)
    arcs = defaultdict(list)
    for i in range(lat.num_links):
        arcs[int(lat.src[i])].append(i)

    def walk(node, g, a, words, tids):
        if math.isfinite(lat.final[node]):
            out[words].append((g + lat.final[node], a, tids))
        for i in arcs[node]:
            w, t = int(lat.word[i]), int(lat.tid[i])
            walk(
                int(lat.dst[i]),
                g + lat.graph[i],
                a + lat.acoustic[i],
                words + ((w,) if w else ()),
                tids + ((t,) if t else ()),
            )

    walk(0, 0.0, 0.0, (), ())
    return out


def compact_paths(clat: CompactLattice) -> dict[tuple, list[tuple[float, float, tuple]]]:
    out: dict[tuple, list] = defaultdict(list)
    arcs = defaultdict(list)
    for i in range(clat.num_arcs):
        arcs[int(clat.src[i])].append(i)

    def walk(state, g, a, words, tids):
        if state in clat.final:
            fg, fa, fs = clat.final[state]
            out[words].append((g + fg, a + fa, tids + fs))
        for i in arcs[state]:
            walk(
                int(clat.dst[i]),
                g + clat.graph[i],
                a + clat.acoustic[i],
                (*words, int(clat.word[i])),
                tids + clat.strings[i],
            )

    if clat.num_states:
        walk(0, 0.0, 0.0, (), ())
    return out


def cost(w) -> float:
    return w[0] + SCALE * w[1]


def check_determinised(lat: Lattice, clat: CompactLattice, beam: float) -> None:
    raw = raw_paths(lat)
    det = compact_paths(clat)
    if not raw:  # no complete path: nothing comes out
        assert not det
        return
    best = min(cost(w) for ws in raw.values() for w in ws)
    # deterministic on words, no epsilon arcs
    seen = set()
    for s, w in zip(clat.src.tolist(), clat.word.tolist(), strict=True):
        assert w > 0, "an epsilon arc in the determinised lattice"
        assert (s, w) not in seen, "two arcs with one word leave a state"
        seen.add((s, w))
    within = {ws for ws, paths in raw.items() if min(cost(p) for p in paths) <= best + beam}
    det_within = {ws for ws, paths in det.items() if cost(paths[0]) <= best + beam + TOL}
    assert det_within == within
    for ws, paths in det.items():
        assert len(paths) == 1, f"{ws} is accepted twice"
        g, a, tids = paths[0]
        raw_best = min(raw[ws], key=lambda p: (cost(p), p[0]))
        assert cost((g, a)) == pytest.approx(cost(raw_best), abs=TOL)
        assert g == pytest.approx(raw_best[0], abs=TOL)
        achieving = {p[2] for p in raw[ws] if abs(cost(p) - cost(raw_best)) <= TOL}
        assert tids in achieving, "the string is not that of a best path"


@pytest.mark.parametrize("seed", range(40))
@pytest.mark.parametrize("beam", [1.5, 4.0, math.inf])
def test_word_determinisation_matches_brute_force(seed, beam):
    lat = random_lattice(seed, frames=6)
    clat = determinize_lattice_phone_pruned(lat, beam, SCALE)
    check_determinised(lat, clat, beam)


@pytest.mark.parametrize("seed", range(40))
@pytest.mark.parametrize("beam", [1.5, 4.0, math.inf])
def test_phone_pruned_determinisation_matches_brute_force(seed, beam):
    lat = random_lattice(seed + 1000, frames=6)
    clat = determinize_lattice_phone_pruned(lat, beam, SCALE, TID_TO_PHONE, TID_STARTS_PHONE)
    check_determinised(lat, clat, beam)


def test_determinisation_without_pruning_first_is_the_same_within_the_beam():
    for seed in range(10):
        lat = random_lattice(seed + 2000)
        a = determinize_lattice_phone_pruned(lat, 2.0, SCALE, prune_first=False)
        check_determinised(lat, a, 2.0)


@pytest.mark.parametrize("seed", range(20))
def test_prune_lattice_keeps_the_paths_within_the_beam_and_only_links_on_them(seed):
    lat = random_lattice(seed + 3000, frames=6)
    raw = raw_paths(lat)
    best = min(cost(w) for ws in raw.values() for w in ws)
    pruned = prune_lattice(lat, 2.0, SCALE)
    kept = {(ws, p[2]) for ws, ps in raw_paths(pruned).items() for p in ps}
    assert {(ws, p[2]) for ws, ps in raw.items() for p in ps if cost(p) <= best + 2.0} <= kept
    c = pruned.graph + SCALE * pruned.acoustic
    through = pruned.forward_costs(c)[pruned.src] + c + pruned.backward_costs(c)[pruned.dst]
    assert (through <= best + 2.0 + TOL).all()
    assert pruned.num_links < lat.num_links or all(
        cost(p) <= best + 2.0 for ps in raw.values() for p in ps
    )


@pytest.mark.parametrize("seed", range(10))
def test_to_lattice_and_the_text_archive_keep_the_paths(seed, tmp_path):
    """The CompactLattice spelt as a state-level lattice, and written as Kaldi text and
    read back, has the same word sequences, weights and strings."""
    lat = random_lattice(seed + 4000)
    clat = determinize_lattice_phone_pruned(lat, math.inf, SCALE, TID_TO_PHONE, TID_STARTS_PHONE)
    want = compact_paths(clat)
    expanded = raw_paths(clat.to_lattice())
    buf = io.StringIO()
    clat.write_kaldi_text(buf, "utt1")
    path = tmp_path / "lat.1"
    path.write_text(buf.getvalue())
    ((key, read),) = list(read_lattice_archive(path))
    assert key == "utt1"
    for got in (expanded, raw_paths(read)):
        assert set(got) == set(want)
        for ws, (p,) in want.items():
            assert len(got[ws]) == 1
            assert got[ws][0][2] == p[2]
            assert got[ws][0][0] == pytest.approx(p[0], abs=1e-4)
            assert got[ws][0][1] == pytest.approx(p[1], abs=1e-4)
    # the best path of every setting is the raw lattice's
    for lmwt in (1.0, 2.0, 10.0):
        raw_cost = min(p[0] + p[1] / lmwt for ps in raw_paths(lat).values() for p in ps)
        det_cost = min(p[0] + p[1] / lmwt for ps in want.values() for p in ps)
        assert det_cost >= raw_cost - TOL


def test_empty_and_single_path_lattices():
    empty = Lattice.from_links(*(np.zeros(0, np.int64) for _ in range(8)))
    assert determinize_lattice_phone_pruned(empty, 8.0, 0.1).num_arcs == 0
    i64 = lambda x: np.array(x, dtype=np.int64)  # noqa: E731
    one = Lattice.from_links(
        i64([0, 1, 2]),
        np.array([np.inf, np.inf, 1.0]),
        i64([0, 1]),
        i64([1, 2]),
        np.array([0.5, 0.25]),
        np.array([3.0, 2.0]),
        i64([1, 2]),
        i64([2, 0]),
    )
    clat = determinize_lattice_phone_pruned(one, 8.0, 0.1, TID_TO_PHONE, TID_STARTS_PHONE)
    assert compact_paths(clat) == {(2,): [(1.75, 5.0, (1, 2))]}


@pytest.mark.parametrize("seed", [1, 4, 6, 7, 8, 9])  # those the limit stops
def test_a_memory_limit_stops_early_keeping_the_best_paths(seed):
    """``max_mem`` reached (Kaldi's "Did not reach requested beam"): the beam reached is
    reported, the output is still deterministic, every word sequence it holds has its
    raw best weight and string, and the best path is among them."""
    lat = random_lattice(seed + 5000, frames=14, words=8)
    clat = determinize_lattice_phone_pruned(lat, 50.0, SCALE, max_mem=800)
    full = determinize_lattice_phone_pruned(lat, 50.0, SCALE)
    assert full.effective_beam == 50.0
    assert clat.effective_beam < 50.0 and clat.num_arcs < full.num_arcs
    raw, det = raw_paths(lat), compact_paths(clat)
    best = min(raw, key=lambda ws: min(cost(p) for p in raw[ws]))
    assert best in det
    for ws, ((g, a, tids),) in det.items():
        want = min(cost(p) for p in raw[ws])
        assert cost((g, a)) == pytest.approx(want, abs=TOL)
        assert tids in {p[2] for p in raw[ws] if abs(cost(p) - want) <= TOL}
    seen = set()
    for s, w in zip(clat.src.tolist(), clat.word.tolist(), strict=True):
        assert w > 0 and (s, w) not in seen
        seen.add((s, w))


@pytest.mark.parametrize("seed", range(10))
def test_the_word_level_reading_has_the_state_level_ones_best_paths(seed, tmp_path):
    """What scoring reads (one link per arc, levels by depth) gives every setting the best
    path of the spelt-out lattice: the same words and cost; state_level() spells it."""
    lat = random_lattice(seed + 6000, frames=7)
    clat = determinize_lattice_phone_pruned(lat, 3.0, SCALE, TID_TO_PHONE, TID_STARTS_PHONE)
    buf = io.StringIO()
    clat.write_kaldi_text(buf, "u")
    (tmp_path / "lat").write_text(buf.getvalue())
    ((_, word),) = list(read_lattice_archive(tmp_path / "lat", word_level=True))
    ((_, state),) = list(read_lattice_archive(tmp_path / "lat"))
    assert word.num_links <= clat.num_arcs + len(clat.final)
    settings = ([1.0, 2.0, 10.0], [0.0, 1.0])
    got, want = word.best_paths(*settings), state.best_paths(*settings)
    for (lmwt, wip), links in want.items():

        def cost(lat, ls, lmwt=lmwt, wip=wip):
            c = lat.graph[ls] + lat.acoustic[ls] / lmwt + wip * (lat.word[ls] > 0)
            return c.sum() + lat.final[lat.dst[ls[-1]]]

        w = got[(lmwt, wip)]
        assert cost(word, w) == pytest.approx(cost(state, links), abs=1e-4)
        assert [x for x in word.word[w] if x] == [x for x in state.word[links] if x]
    spelt = word.state_level()
    assert spelt.num_links == state.num_links and spelt.num_frames == state.num_frames
