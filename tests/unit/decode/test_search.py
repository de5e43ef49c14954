"""The lattice search and the lattice: best paths known by enumeration.

Small random graphs (emitting arcs with transition-ids 1-4 over 2 pdfs, non-emitting
arcs that carry words, forward only so there is no epsilon cycle) and random
log-likelihoods: every path of the graph over the frames is enumerated, so the best path
of every (LMWT, WIP) and the paths within the lattice beam are known exactly.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from paravg.decode.lattice import Lattice, read_lattice_archive, writing_lattice_archives
from paravg.decode.search import SearchGraph, SearchOptions, search

TID_TO_PDF = np.array([-1, 0, 0, 1, 1])


def random_graph(seed: int, num_states: int = 5) -> str:
    """OpenFst text: 2-3 emitting arcs per state (any destination), a word-carrying
    non-emitting arc to a later state from some states, two final states."""
    rng = np.random.default_rng(seed)
    lines = []
    for s in range(num_states):
        for _ in range(rng.integers(2, 4)):
            tid, dst = int(rng.integers(1, 5)), int(rng.integers(0, num_states))
            word = int(rng.integers(1, 4)) if rng.random() < 0.4 else 0
            lines.append(f"{s} {dst} {tid} {word} {rng.uniform(0, 2):.4f}")
        if s < num_states - 1 and rng.random() < 0.6:
            dst = int(rng.integers(s + 1, num_states))
            lines.append(f"{s} {dst} 0 {int(rng.integers(1, 4))} {rng.uniform(0, 1):.4f}")
    lines += [f"{num_states - 1} 0.5", f"{num_states - 2}"]
    return "\n".join(lines) + "\n"


def enumerate_paths(text: str, loglikes: np.ndarray) -> list[tuple[float, float, tuple]]:
    """(graph cost incl. final, acoustic cost, words) of every complete path."""
    g = SearchGraph.from_text(text, 0)
    arcs = [line.split() for line in text.splitlines() if len(line.split()) == 5]
    out_arcs: dict[int, list] = {}
    for a in arcs:
        out_arcs.setdefault(int(a[0]), []).append((int(a[1]), int(a[2]), int(a[3]), float(a[4])))
    num_frames = loglikes.shape[0]
    paths = []

    def walk(state, t, graph, acoustic, words):
        if t == num_frames and np.isfinite(g.final[state]):
            paths.append((graph + g.final[state], acoustic, tuple(words)))
        for dst, tid, word, w in out_arcs.get(state, []):
            if tid == 0:
                walk(dst, t, graph + w, acoustic, [*words, word] if word else words)
            elif t < num_frames:
                ac = -loglikes[t, TID_TO_PDF[tid]]
                walk(dst, t + 1, graph + w, acoustic + ac, [*words, word] if word else words)

    walk(g.start, 0, 0.0, 0.0, [])
    return paths


def decode(text: str, loglikes: np.ndarray, **opts) -> Lattice:
    graph = SearchGraph.from_text(text, 0)
    return search(graph, TID_TO_PDF[graph.ilabel["emit"]], loglikes, SearchOptions(**opts))


def path_words(lattice: Lattice, links: np.ndarray) -> tuple:
    return tuple(int(w) for w in lattice.word[links] if w > 0)


def path_cost(lattice: Lattice, links: np.ndarray, lmwt: float, wip: float) -> float:
    words = np.count_nonzero(lattice.word[links])
    end = lattice.final[lattice.dst[links[-1]]]
    return float(
        lattice.graph[links].sum() + end + lattice.acoustic[links].sum() / lmwt + wip * words
    )


@pytest.mark.parametrize("seed", range(8))
def test_best_path_of_every_setting_is_the_enumerated_best(seed):
    """No pruning (wide beams): the lattice holds every path, so the best path of every
    (LMWT, WIP) is the enumerated minimum of graph + acoustic / LMWT + WIP · words."""
    rng = np.random.default_rng(100 + seed)
    text = random_graph(seed)
    loglikes = rng.normal(-3, 2, size=(6, 2))
    paths = enumerate_paths(text, loglikes)
    assert paths, "the random graph has a complete path"
    lattice = decode(text, loglikes, beam=1e9, lattice_beam=1e9, max_active=10**6)
    settings = [(lm, wip) for lm in (1, 4, 10, 17) for wip in (0.0, 0.5, 1.0)]
    best = lattice.best_paths(sorted({s[0] for s in settings}), [0.0, 0.5, 1.0])
    for lm, wip in settings:
        expected = min(g + a / lm + wip * len(w) for g, a, w in paths)
        links = best[(lm, wip)]
        assert path_cost(lattice, links, lm, wip) == pytest.approx(expected, abs=1e-9)
        winners = {w for g, a, w in paths if g + a / lm + wip * len(w) <= expected + 1e-9}
        assert path_words(lattice, links) in winners


@pytest.mark.parametrize("seed", range(8))
def test_the_lattice_keeps_every_path_within_the_lattice_beam(seed):
    """At the search's scale every enumerated path within ``lattice_beam`` of the best is
    a path of the lattice, and every link of the lattice lies on a path within it
    (Kaldi prunes links: a path of kept links may still cost more)."""
    rng = np.random.default_rng(200 + seed)
    text = random_graph(seed)
    loglikes = rng.normal(-3, 2, size=(6, 2))
    paths = enumerate_paths(text, loglikes)
    scale, beam = 0.1, 1.0
    lattice = decode(text, loglikes, beam=1e9, lattice_beam=beam, acoustic_scale=scale)
    best = min(g + scale * a for g, a, _ in paths)
    cost = lattice.graph + scale * lattice.acoustic
    alpha, beta = lattice.forward_costs(cost), lattice.backward_costs(cost)
    through = alpha[lattice.src] + cost + beta[lattice.dst]
    assert through.min() == pytest.approx(best, abs=1e-9)
    assert through.max() <= best + beam + 1e-9
    within = sorted(g + scale * a for g, a, _ in paths if g + scale * a <= best + beam)
    kept = [c for c in _lattice_path_costs(lattice, cost) if c <= best + beam + 1e-9]
    assert kept == pytest.approx(within, abs=1e-9)
    unpruned = decode(text, loglikes, beam=1e9, lattice_beam=1e9, acoustic_scale=scale)
    assert _lattice_path_costs(unpruned, unpruned.graph + scale * unpruned.acoustic) == (
        pytest.approx(sorted(g + scale * a for g, a, _ in paths), abs=1e-9)
    )


def _lattice_path_costs(lattice: Lattice, cost: np.ndarray) -> list[float]:
    """Every complete path's cost in a small lattice (enumerated)."""
    out_links: dict[int, list[int]] = {}
    for i, s in enumerate(lattice.src.tolist()):
        out_links.setdefault(s, []).append(i)
    found = []

    def walk(node, total):
        if math.isfinite(lattice.final[node]):
            found.append(total + lattice.final[node])
        for i in out_links.get(node, []):
            walk(int(lattice.dst[i]), total + cost[i])

    walk(0, 0.0)
    return sorted(found)


def test_the_search_agrees_with_kaldis_lattice_faster_decoder():
    """The same graphs and log-likelihoods through kaldi-hmm-gmm's C++ decoder (one
    search per setting, paravg.decode.reference) give the same words."""
    import kaldifst

    from paravg.decode.reference import GraphDecoder
    from paravg.graph.load import DecodingGraph, TransitionInfo

    info = TransitionInfo(TID_TO_PDF, np.array([-1, 1, 1, 2, 2]), 2, [1, 2])
    agree = total = 0
    for seed in range(8):
        text = random_graph(seed)
        fst = kaldifst.compile(text, acceptor=False)
        kaldifst.arcsort(fst, sort_type="ilabel")
        graph = DecodingGraph(fst, {i: str(i) for i in range(4)}, info, None)
        reference = GraphDecoder(graph, SearchOptions(), [0.0, 1.0])
        loglikes = np.random.default_rng(300 + seed).normal(-3, 2, size=(6, 2))
        lattice = decode(text, loglikes)
        best = lattice.best_paths([7, 10, 17], [0.0, 1.0])
        for (lm, wip), links in best.items():
            ours = [str(w) for w in path_words(lattice, links)]
            agree += ours == reference.decode("u", loglikes, lm, wip)
            total += 1
    assert agree == total


def test_pruning_by_max_active_keeps_the_best_path_when_it_survives():
    """max_active bounds the tokens per frame (Kaldi's GetCutoff); a beam that keeps
    the best path gives the unpruned best path."""
    rng = np.random.default_rng(7)
    text = random_graph(3)
    loglikes = rng.normal(-3, 2, size=(6, 2))
    wide = decode(text, loglikes, beam=1e9, lattice_beam=1e9, max_active=10**6)
    narrow = decode(text, loglikes, beam=1e9, lattice_beam=1e9, max_active=2, min_active=1)
    assert narrow.num_links < wide.num_links
    a = wide.best_paths([10], [0.0])[(10, 0.0)]
    b = narrow.best_paths([10], [0.0])[(10, 0.0)]
    assert path_cost(narrow, b, 10, 0.0) >= path_cost(wide, a, 10, 0.0) - 1e-9


def test_link_posteriors_sum_to_one_per_frame():
    rng = np.random.default_rng(11)
    text = random_graph(5)
    lattice = decode(text, rng.normal(-3, 2, size=(6, 2)), beam=1e9, lattice_beam=1e9)
    post = lattice.link_posteriors(10.0)
    emitting = lattice.tid > 0
    at = lattice.frame[lattice.src]
    for t in range(6):
        assert post[emitting & (at == t)].sum() == pytest.approx(1.0)


def test_kaldi_text_archive_round_trip(tmp_path):
    """Written as Kaldi's CompactLattice text (``src dst word graph,acoustic,tid``),
    read back with the same links, costs and best paths."""
    rng = np.random.default_rng(5)
    lattices = {
        f"utt{k}": decode(random_graph(k), rng.normal(-3, 2, size=(6, 2)), lattice_beam=1e9)
        for k in range(3)
    }
    path = tmp_path / "lat.0.gz"
    with writing_lattice_archives({"w": path}) as archives:
        for key, lattice in lattices.items():
            archives["w"].write(lattice.kaldi_text(key))
    text = lattices["utt0"].kaldi_text("utt0").splitlines()
    assert text[0] == "utt0"
    weight = text[1].split("\t")[3]
    assert weight.count(",") == 2  # graph,acoustic,transition-ids
    back = dict(read_lattice_archive(path))
    assert list(back) == list(lattices)
    for key, lattice in lattices.items():
        other = back[key]
        assert other.num_links == lattice.num_links
        np.testing.assert_array_equal(other.frame, lattice.frame)
        np.testing.assert_allclose(np.sort(other.acoustic), np.sort(lattice.acoustic), rtol=1e-5)
        for setting, links in lattice.best_paths([7, 10], [0.0, 1.0]).items():
            got = other.best_paths([7, 10], [0.0, 1.0])[setting]
            assert path_words(other, got) == path_words(lattice, links)
    assert not (tmp_path / "lat.0.gz.tmp").exists()


def test_a_failed_split_leaves_no_archive(tmp_path):
    path = tmp_path / "lat.0.gz"
    with pytest.raises(RuntimeError), writing_lattice_archives({"w": path}) as archives:
        archives["w"].write("u1\n0\t1\t0\t0,0,1\n1\t0,0,\n\n")
        raise RuntimeError("the job died")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("fills_at", ["write", "close"])
def test_a_full_disk_while_writing_lattices_names_the_archive(tmp_path, fills_at):
    """The temporary of lat.0.gz is /dev/full, which answers every write with ENOSPC: the
    error names the archive and how to resume, as every other writer's does (the probe's
    W1: a bare ``[Errno 28] No space left on device``), and nothing is left behind."""
    path = tmp_path / "lat.0.gz"
    (tmp_path / "lat.0.gz.tmp").symlink_to("/dev/full")
    # gzip buffers: 1 MB of random hex reaches the disk at once, an entry only at close
    noise = np.random.default_rng(0).bytes(1 << 19).hex()
    entry = "u1\n0\t1\t0\t0,0,1\n1\t0,0,\n\n" + (noise if fills_at == "write" else "")
    with (
        pytest.raises(OSError, match=r"no space left .* while writing lat\.0\.gz; .*run the same"),
        writing_lattice_archives({"w": path}) as archives,
    ):
        archives["w"].write(entry)
    assert list(tmp_path.iterdir()) == []


def test_a_search_that_runs_out_of_arcs_gives_kaldis_partial_traceback():
    """No arc leaves the graph's state 1: the search stops after frame 0, and every
    token of the last frame reached ends the lattice (not reached_final), as Kaldi's
    decoders output a partial traceback."""
    text = "0 1 1 5 0.5\n1\n"
    lattice = decode(text, np.zeros((3, 2)))
    assert not lattice.reached_final and lattice.num_frames == 1
    links = lattice.best_paths([10], [0.0])[(10, 0.0)]
    assert path_words(lattice, links) == (5,)
    complete = decode(text, np.zeros((1, 2)))  # one frame: the final state is reached
    assert complete.reached_final


def test_an_utterance_without_frames_gives_an_empty_lattice(tmp_path):
    lattice = decode("0 1 1 5 0.5\n1\n", np.zeros((0, 2)))
    assert lattice.num_links == 0 and not lattice.reached_final
    assert lattice.best_paths([10], [0.0])[(10, 0.0)].tolist() == []
    empty = Lattice.from_links(*(np.zeros(0, np.int64) for _ in range(8)))
    with writing_lattice_archives({"w": tmp_path / "lat.0.gz"}) as archives:
        for key, lat in (
            ("u0", lattice),
            ("u1", empty),
            ("u2", decode("0 1 1 5 0\n1\n", np.zeros((1, 2)))),
        ):
            archives["w"].write(lat.kaldi_text(key))
    back = dict(read_lattice_archive(tmp_path / "lat.0.gz"))
    assert list(back) == ["u0", "u1", "u2"] and back["u1"].num_links == 0
    assert path_words(back["u2"], back["u2"].best_paths([10], [0.0])[(10, 0.0)]) == (5,)


def test_a_damaged_lattice_archive_is_named_with_its_rebuild(tmp_path):
    from paravg.errors import DataError

    path = tmp_path / "lat.0.gz"
    with writing_lattice_archives({"w": path}) as archives:
        archives["w"].write(decode("0 1 1 5 0\n1\n", np.zeros((1, 2))).kaldi_text("u1"))
    path.write_bytes(path.read_bytes()[:20])  # cut short by a full disk
    with pytest.raises(
        DataError, match=r"lat\.0\.gz: the lattice archive cannot be read.*forcerun"
    ):
        list(read_lattice_archive(path))


# ---------------------------------------------------------------- pruning as it goes
LATTICE_ARRAYS = ("frame", "level", "final", "src", "dst", "graph", "acoustic", "tid", "word")


def wide_graph(seed: int, num_states: int = 300, num_tids: int = 40) -> str:
    """A larger random graph (3 emitting arcs a state, some word-carrying non-emitting
    arcs forward, every 7th state final): many tokens stay within the beam every frame."""
    rng = np.random.default_rng(seed)
    lines = []
    for s in range(num_states):
        for _ in range(3):
            word = int(rng.integers(1, 50)) if rng.random() < 0.2 else 0
            lines.append(
                f"{s} {int(rng.integers(0, num_states))} {int(rng.integers(1, num_tids + 1))} "
                f"{word} {rng.uniform(0, 2):.4f}"
            )
        if rng.random() < 0.3 and s < num_states - 1:
            dst = int(rng.integers(s + 1, num_states))
            lines.append(f"{s} {dst} 0 {int(rng.integers(1, 50))} {rng.uniform(0, 1):.4f}")
    lines += [f"{s} 0.5" for s in range(0, num_states, 7)]
    return "\n".join(lines) + "\n"


def wide_search(
    num_frames: int, lattice_beam: float, prune_interval: int | None, prune_above: int = 0
) -> Lattice:
    """The wide graph over ``num_frames`` frames of 10 pdfs (tid k -> pdf k mod 10);
    log-likelihoods drawn uniformly and rounded (the same bits on every CPU); pruned
    whatever the links held unless ``prune_above`` is given."""
    graph = SearchGraph.from_text(wide_graph(0), 0)
    loglikes = -np.round(np.random.default_rng(1).uniform(0, 8, (num_frames, 10)), 3)
    opts = SearchOptions(lattice_beam=lattice_beam)
    return search(
        graph, graph.ilabel["emit"] % 10, loglikes, opts, prune_interval, prune_above=prune_above
    )


@pytest.mark.parametrize("interval", [1, 7, 25])
@pytest.mark.parametrize("seed", range(4))
def test_pruning_as_it_goes_gives_the_lattice_of_one_pruning_at_the_end(seed, interval):
    """Kaldi's PruneActiveTokens every prune_interval frames removes only links that the
    final pruning removes too: the lattice is the same, array for array."""
    text = random_graph(seed, num_states=8)
    loglikes = np.log(np.random.default_rng(seed).dirichlet([1.0, 1.0], size=120))
    graph = SearchGraph.from_text(text, 0)
    arc_pdf = TID_TO_PDF[graph.ilabel["emit"]]
    opts = SearchOptions(lattice_beam=3.0, beam=10.0)
    once = search(graph, arc_pdf, loglikes, opts, prune_interval=0)
    going = search(graph, arc_pdf, loglikes, opts, prune_interval=interval, prune_above=0)
    assert once.num_links > 0
    for name in LATTICE_ARRAYS:
        np.testing.assert_array_equal(getattr(going, name), getattr(once, name), err_msg=name)


@pytest.mark.parametrize("lattice_beam", [1.0, 4.0])
def test_pruning_as_it_goes_on_a_wide_graph_keeps_the_lattice(lattice_beam):
    once = wide_search(600, lattice_beam, prune_interval=0)
    going = wide_search(600, lattice_beam, prune_interval=None)
    assert going.peak_links < once.peak_links
    for name in LATTICE_ARRAYS:
        np.testing.assert_array_equal(getattr(going, name), getattr(once, name), err_msg=name)


def test_the_links_the_search_holds_do_not_grow_with_the_utterance_beyond_its_lattice():
    """Issue 34 (R4): the search held every link within the beam of every frame to the
    end of the utterance, so its memory grew as frames x active arcs (1,000 links a frame
    here). Pruned every 25 frames, what it holds beyond the lattice it returns stays the
    same from 400 to 1,600 frames, where holding everything grows fourfold."""
    short, long = (wide_search(n, 1.0, prune_interval=None) for n in (400, 1600))
    short_all, long_all = (wide_search(n, 1.0, prune_interval=0) for n in (400, 1600))
    assert long_all.peak_links > 3.5 * short_all.peak_links  # every link made: ~frames
    assert long_all.peak_links > 500 * 1600
    beyond_short = short.peak_links - short.num_links
    beyond_long = long.peak_links - long.num_links
    assert beyond_long < 1.2 * beyond_short, (beyond_short, beyond_long)
    assert long.peak_links < long_all.peak_links / 20


def test_the_archive_entry_written_in_chunks_is_the_whole_one():
    """The decoder writes each lattice a chunk of links at a time (its memory): the same
    text as formatting it whole, whatever the chunk."""
    import io

    lattice = wide_search(60, 2.0, prune_interval=None)
    assert lattice.num_links > 7
    for chunk in (1, 7, lattice.num_links, 10 * lattice.num_links):
        buf = io.StringIO()
        lattice.write_kaldi_text(buf, "u", chunk=chunk)
        assert buf.getvalue() == lattice.kaldi_text("u")
    assert (
        lattice.kaldi_text("u").count("\n")
        == 1 + lattice.num_links + int(np.isfinite(lattice.final).sum()) + 1
    )


def test_pruning_waits_until_the_links_held_pass_the_threshold_then_their_doubling():
    """Short utterances are not pruned on the way (it would only cost CPU); a long one is
    pruned once it holds more than prune_above links, and holds at most about twice its
    surviving lattice plus the links of 25 frames after that."""
    never = wide_search(1600, 1.0, prune_interval=0)
    short = wide_search(100, 1.0, prune_interval=None, prune_above=200_000)
    assert short.peak_links == wide_search(100, 1.0, prune_interval=0).peak_links
    waited = wide_search(1600, 1.0, prune_interval=None, prune_above=200_000)
    per_frame = never.peak_links / 1600
    assert 200_000 < waited.peak_links < 200_000 + 26 * per_frame
    assert waited.peak_links < never.peak_links / 4
    for name in LATTICE_ARRAYS:
        np.testing.assert_array_equal(getattr(waited, name), getattr(never, name), err_msg=name)
