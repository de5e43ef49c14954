"""A raw state-level lattice (Kaldi's ``Lattice`` from ``GetRawLattice``) as arrays, and
the operations scoring needs: Viterbi passes, best paths under every (LMWT, WIP), arc
posteriors, and Kaldi's text archive form.

Nodes are the search's tokens (frame, HCLG state); links carry a graph cost, an acoustic
cost −log p(x | pdf) **unscaled** (Kaldi's lattices keep it so; ``lattice-scale``
applies the scale at scoring), a transition-id (0 on a non-emitting link) and a word (0:
none). Nodes are numbered in topological order: by frame, then by depth along the
frame's non-emitting links, so node 0 is the start and every link goes to a higher level.

Scoring (Kaldi's ``local/score.sh``: ``lattice-scale --inv-acoustic-scale=LMWT |
lattice-add-penalty --word-ins-penalty=WIP | lattice-best-path``): the cost of a path is
graph + acoustic / LMWT + WIP · (number of words), and the final cost counts as graph
cost. :meth:`Lattice.best_paths` finds the best path of every setting in one pass over
the levels, the settings side by side.
"""

from __future__ import annotations

import contextlib
import errno
import gzip
import io
import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from paravg.errors import DataError
from paravg.io import disk_full_error


def _runs(values: np.ndarray) -> list[tuple[int, int]]:
    """(start, stop) of each run of equal entries of a sorted array."""
    if not len(values):
        return []
    bounds = np.flatnonzero(np.diff(values)) + 1
    starts = np.concatenate([[0], bounds]).astype(np.int64)
    stops = np.concatenate([bounds, [len(values)]]).astype(np.int64)
    return list(zip(starts.tolist(), stops.tolist(), strict=True))


@dataclass
class Lattice:
    """Node arrays (``frame``, ``level``, ``final``: graph cost, inf if not final) and
    link arrays (``src``, ``dst``, ``graph``, ``acoustic``, ``tid``, ``word``), links
    sorted by the level of their destination."""

    frame: np.ndarray
    level: np.ndarray
    final: np.ndarray
    src: np.ndarray
    dst: np.ndarray
    graph: np.ndarray
    acoustic: np.ndarray
    tid: np.ndarray
    word: np.ndarray
    # False when the search ended without a final state (or early): every token of the
    # last frame reached was made final at cost 0, Kaldi's partial traceback
    reached_final: bool = True
    # the most links the search held at once (its memory: 32 bytes a link), 0 if unknown
    peak_links: int = 0
    # a word-level lattice read from a determinised CompactLattice (one link per arc,
    # ``frame`` the node's depth in arcs): the arguments of :meth:`from_compact` that
    # spell its state-level form (:meth:`state_level`); None for a state-level lattice
    compact: tuple | None = None

    @property
    def num_nodes(self) -> int:
        return len(self.frame)

    @property
    def num_links(self) -> int:
        return len(self.src)

    @property
    def num_frames(self) -> int:
        return int(self.frame.max()) if len(self.frame) else 0

    # ------------------------------------------------------------ construction
    @classmethod
    def from_links(cls, frame, final, src, dst, graph, acoustic, tid, word) -> Lattice:
        """From nodes (``frame``, ``final``) and links in any order: nodes renumbered in
        topological order (frame, then depth along non-emitting links), links sorted by
        their destination's level."""
        n = len(frame)
        depth = np.zeros(n, dtype=np.int64)
        same = frame[src] == frame[dst]
        es, ed = src[same], dst[same]
        while len(es):
            cand = depth[es] + 1
            grow = cand > depth[ed]
            if not grow.any():
                break
            np.maximum.at(depth, ed[grow], cand[grow])
        level = frame * (int(depth.max(initial=0)) + 1) + depth
        order = np.argsort(level, kind="stable")
        new_id = np.empty(n, dtype=np.int64)
        new_id[order] = np.arange(n)
        src, dst = new_id[src], new_id[dst]
        link_order = np.argsort(dst, kind="stable")  # node ids rise with the level
        return cls(
            frame=frame[order],
            level=level[order],
            final=final[order],
            src=src[link_order],
            dst=dst[link_order],
            graph=np.asarray(graph, dtype=np.float64)[link_order],
            acoustic=np.asarray(acoustic, dtype=np.float64)[link_order],
            tid=np.asarray(tid, dtype=np.int64)[link_order],
            word=np.asarray(word, dtype=np.int64)[link_order],
        )

    def state_level(self) -> Lattice:
        """The state-level lattice (itself, or the one its CompactLattice spells)."""
        return self if self.compact is None else Lattice.from_compact(*self.compact)

    @classmethod
    def word_level(cls, num_states, src, dst, word, graph, acoustic, strings, final) -> Lattice:
        """A CompactLattice (as :meth:`from_compact` takes it) as a word-level lattice for
        the scoring grid: one link per arc without its string, a final weight with an
        acoustic cost as a word-less link to a new final node; nodes levelled by their
        depth in arcs (a level per word position, not per frame: the passes over the
        levels take a few steps an utterance). Its best paths and words are those of
        :meth:`from_compact`'s lattice; :meth:`state_level` gives that one."""
        src = np.asarray(src, dtype=np.int64)
        dst = np.asarray(dst, dtype=np.int64)
        graph = np.asarray(graph, dtype=np.float64)
        acoustic = np.asarray(acoustic, dtype=np.float64)
        word = np.asarray(word, dtype=np.int64)
        n = num_states
        fin = np.full(n + 1, np.inf)
        extra = [s for s, (g, a, _) in final.items() if a != 0.0]
        for s, (g, a, _) in final.items():
            if a == 0.0:
                fin[s] = g
        if extra:
            fin[n] = 0.0
            src = np.concatenate([src, extra])
            dst = np.concatenate([dst, np.full(len(extra), n)])
            graph = np.concatenate([graph, [final[s][0] for s in extra]])
            acoustic = np.concatenate([acoustic, [final[s][1] for s in extra]])
            word = np.concatenate([word, np.zeros(len(extra), dtype=np.int64)])
            n += 1
        depth = np.zeros(n, dtype=np.int64)  # longest path in arcs (the arcs go forward)
        while len(src):
            cand = depth[src] + 1
            grow = cand > depth[dst]
            if not grow.any():
                break
            np.maximum.at(depth, dst[grow], cand[grow])
        out = cls.from_links(
            depth, fin[:n], src, dst, graph, acoustic, np.zeros(len(src), np.int64), word
        )
        out.compact = (num_states, src[: len(strings)], dst[: len(strings)], word[: len(strings)],
                       graph[: len(strings)], acoustic[: len(strings)], strings, final)  # fmt: skip
        return out

    @classmethod
    def from_compact(cls, num_states, src, dst, word, graph, acoustic, strings, final) -> Lattice:
        """The state-level lattice a CompactLattice spells (Kaldi's ``ConvertLattice``;
        state 0 the start, ``strings`` the arcs' transition-id tuples, ``final``: state ->
        (graph, acoustic, string)): each arc a chain of links, one transition-id each (one
        link without any for an empty string), its word and weight on the first; a final
        weight with a string or an acoustic cost is such a chain to a new final node."""
        n = num_states
        out: tuple[list, ...] = ([], [], [], [], [], [])  # src, dst, tid, word, graph, acoustic
        final_cost = {}

        def chain(s, d, w, g, a, tids):
            nonlocal n
            tids = tids or (0,)
            last = len(tids) - 1
            for i, t in enumerate(tids):
                nxt = d if i == last else n
                n += i != last
                for column, value in zip(
                    out,
                    (s, nxt, t, w if i == 0 else 0, g if i == 0 else 0.0, a if i == 0 else 0.0),
                    strict=True,
                ):
                    column.append(value)
                s = nxt

        for arc in zip(
            np.asarray(src).tolist(),
            np.asarray(dst).tolist(),
            np.asarray(word).tolist(),
            np.asarray(graph).tolist(),
            np.asarray(acoustic).tolist(),
            strings,
            strict=True,
        ):
            chain(*arc)
        for s, (g, a, tids) in final.items():
            if not tids and a == 0.0:
                final_cost[s] = g
            else:
                end, n = n, n + 1
                chain(s, end, 0, g, a, tids)
                final_cost[end] = 0.0
        fin = np.full(n, np.inf)
        fin[list(final_cost)] = list(final_cost.values())
        src_a, dst_a, tid_a, word_a = (np.array(c, dtype=np.int64) for c in out[:4])
        return cls.from_links(
            node_frames(n, src_a, dst_a, tid_a > 0),
            fin,
            src_a,
            dst_a,
            np.array(out[4], dtype=np.float64),
            np.array(out[5], dtype=np.float64),
            tid_a,
            word_a,
        )

    # ------------------------------------------------------------ passes over the levels
    def _level_groups(self, by: np.ndarray) -> list[tuple[int, int]]:
        """(start, stop) of the links per level of ``by`` (links sorted by it)."""
        return _runs(self.level[by])

    def _forward(self, link_value: np.ndarray, reduce: np.ufunc, empty: float) -> np.ndarray:
        """value(node 0) = 0, value(dst) = ``reduce`` over its links of value(src) +
        ``link_value``, level by level (min: Viterbi costs; logaddexp: log-probabilities)."""
        out = np.full(self.num_nodes, empty)
        if self.num_nodes:
            out[0] = 0.0
        for a, b in self._level_groups(self.dst):
            reduce.at(out, self.dst[a:b], out[self.src[a:b]] + link_value[a:b])
        return out

    def _backward(self, link_value: np.ndarray, reduce: np.ufunc, final: np.ndarray) -> np.ndarray:
        """value(node) = ``reduce`` of its ``final`` value and, over its links, value(dst)
        + ``link_value``, from the last level back."""
        out = final.copy()
        order = np.argsort(self.level[self.src], kind="stable")
        src, dst, value = self.src[order], self.dst[order], link_value[order]
        for a, b in reversed(_runs(self.level[src])):
            reduce.at(out, src[a:b], out[dst[a:b]] + value[a:b])
        return out

    def forward_costs(self, link_cost: np.ndarray) -> np.ndarray:
        """Best cost from the start to each node (Viterbi), links costing ``link_cost``."""
        return self._forward(link_cost, np.minimum, np.inf)

    def backward_costs(self, link_cost: np.ndarray) -> np.ndarray:
        """Best cost from each node to the end (final costs included)."""
        return self._backward(link_cost, np.minimum, self.final)

    def best_paths(
        self, lmwts: Sequence[float], wips: Sequence[float]
    ) -> dict[tuple[float, float], np.ndarray]:
        """The best path's links (in order) of every (LMWT, WIP): cost graph +
        acoustic / LMWT + WIP · words, settings searched side by side."""
        settings = [(lm, wip) for lm in lmwts for wip in wips]
        inv = np.array([1.0 / lm for lm, _ in settings])[:, None]
        pen = np.array([wip for _, wip in settings])[:, None]
        cost = self.graph[None, :] + inv * self.acoustic[None, :] + pen * (self.word > 0)[None, :]
        k = len(settings)
        alpha = np.full((k, self.num_nodes), np.inf)
        alpha[:, 0] = 0.0
        back = np.full((k, self.num_nodes), -1, dtype=np.int64)
        for a, b in self._level_groups(self.dst):
            dst = self.dst[a:b]
            cand = alpha[:, self.src[a:b]] + cost[:, a:b]
            # links are sorted by destination within a level: per (setting, node) minimum
            starts = np.flatnonzero(np.concatenate([[True], dst[1:] != dst[:-1]]))
            mins = np.minimum.reduceat(cand, starts, axis=1)
            counts = np.diff(np.concatenate([starts, [len(dst)]]))
            is_min = cand <= np.repeat(mins, counts, axis=1)
            idx = np.where(is_min, np.arange(a, b)[None, :], np.iinfo(np.int64).max)
            first = np.minimum.reduceat(idx, starts, axis=1)
            nodes = dst[starts]
            better = mins < alpha[:, nodes]
            alpha[:, nodes] = np.where(better, mins, alpha[:, nodes])
            back[:, nodes] = np.where(better, first, back[:, nodes])
        total = alpha + self.final[None, :]
        ends = np.argmin(total, axis=1)
        out = {}
        for i, setting in enumerate(settings):
            path, node = [], int(ends[i])
            if not np.isfinite(total[i, node]):
                out[setting] = np.zeros(0, dtype=np.int64)
                continue
            while node != 0:
                link = int(back[i, node])
                path.append(link)
                node = int(self.src[link])
            out[setting] = np.array(path[::-1], dtype=np.int64)
        return out

    def link_posteriors(self, lmwt: float, wip: float = 0.0) -> np.ndarray:
        """Posterior probability of each link under the scaled lattice (forward-backward
        in the log semiring, cost graph + acoustic / LMWT + WIP · words)."""
        logp = -(self.graph + self.acoustic / lmwt + wip * (self.word > 0))
        fwd = self._forward(logp, np.logaddexp, -np.inf)
        bwd = self._backward(logp, np.logaddexp, -self.final)
        return np.exp(fwd[self.src] + logp + bwd[self.dst] - bwd[0])

    # ------------------------------------------------------------ Kaldi text form
    def kaldi_text(self, key: str) -> str:
        """One entry of a Kaldi text archive of CompactLattices (``ark,t``): ``key``,
        then ``src dst word graph,acoustic,tids`` per link and ``node graph,0,`` per final
        node, then an empty line. Each link is its own arc (not determinised: Kaldi's
        ``lattice-determinize-pruned`` reads it as it is)."""
        buf = io.StringIO()
        self.write_kaldi_text(buf, key)
        return buf.getvalue()

    def write_kaldi_text(self, out, key: str, chunk: int = 65536) -> None:
        """Write :meth:`kaldi_text`'s entry to the text stream ``out``, ``chunk`` links at a
        time: the text and its Python numbers exist for one chunk only (a whole lattice's
        would take ~200 bytes a link)."""
        out.write(f"{key}\n")
        for a in range(0, self.num_links, chunk):
            b = a + chunk
            out.write(
                "".join(
                    f"{s}\t{d}\t{w}\t{g:.6g},{ac:.6g},{t if t else ''}\n"
                    for s, d, w, g, ac, t in zip(
                        self.src[a:b].tolist(),
                        self.dst[a:b].tolist(),
                        self.word[a:b].tolist(),
                        self.graph[a:b].tolist(),
                        self.acoustic[a:b].tolist(),
                        self.tid[a:b].tolist(),
                        strict=True,
                    )
                )
            )
        for node in np.flatnonzero(np.isfinite(self.final)).tolist():
            out.write(f"{node}\t{self.final[node]:.6g},0,\n")
        out.write("\n")


class _ArchiveWriter:
    """One gzipped text archive being written under a temporary name: a full disk (or
    quota) while writing or closing it is the :func:`paravg.io.disk_full_error` that names
    the archive, as for every other output."""

    def __init__(self, tmp: Path, path: str | os.PathLike) -> None:
        self.path = path
        with self._naming_a_full_disk():
            self._file = gzip.open(tmp, "wt", compresslevel=1)  # noqa: SIM115 (closed by its owner)

    @contextlib.contextmanager
    def _naming_a_full_disk(self) -> Iterator[None]:
        try:
            yield
        except OSError as exc:
            if exc.errno in (errno.ENOSPC, errno.EDQUOT):
                raise disk_full_error(self.path) from exc
            raise

    def write(self, text: str) -> int:
        with self._naming_a_full_disk():
            return self._file.write(text)

    def close(self) -> None:
        with self._naming_a_full_disk():
            self._file.close()

    def discard(self) -> None:
        """Close after a failure, whatever the disk says (the temporary is removed)."""
        with contextlib.suppress(OSError):
            self._file.close()


@contextlib.contextmanager
def writing_lattice_archives(paths: Mapping[str, str | os.PathLike]) -> Iterator[dict]:
    """Open gzipped Kaldi text archives of CompactLattices (``lat.<j>.gz``; Kaldi reads
    them as ``"ark:gunzip -c lat.0.gz|"``), one per key of ``paths``, to write
    :meth:`Lattice.kaldi_text` entries into. Each is written as ``<path>.tmp`` and renamed
    when the block ends without an error (removed otherwise): whole or not at all. A full
    disk is an ``OSError`` that names the archive (``… while writing lat.0.gz``)."""
    tmps = {k: Path(p).with_name(Path(p).name + ".tmp") for k, p in paths.items()}
    for tmp in tmps.values():
        tmp.parent.mkdir(parents=True, exist_ok=True)
    writers: dict[str, _ArchiveWriter] = {}
    try:
        for k, tmp in tmps.items():
            writers[k] = _ArchiveWriter(tmp, paths[k])
        yield writers
        for writer in writers.values():
            writer.close()
    except BaseException:
        for writer in writers.values():
            writer.discard()
        for tmp in tmps.values():
            tmp.unlink(missing_ok=True)
        raise
    for k, tmp in tmps.items():
        os.replace(tmp, paths[k])


def read_lattice_archive(
    path: str | os.PathLike, word_level: bool = False
) -> Iterator[tuple[str, Lattice]]:
    """(key, lattice) of every entry of a (gzipped) text archive that
    :func:`writing_lattice_archives` wrote: nodes numbered in topological order, each
    arc one link with at most one transition-id, final lines after the arcs. Each
    entry's numbers are parsed in one C call (``numpy.fromstring``). With
    ``word_level``, a determinised entry is read as :meth:`Lattice.word_level` gives it
    (what the scoring grid needs), else spelt out state by state."""
    opener = gzip.open if str(path).endswith(".gz") else open
    try:
        with opener(path, "rt") as f:
            text = f.read()
    except (OSError, EOFError, UnicodeDecodeError) as exc:  # cut short, not gzip, not text
        raise DataError(
            f"{path}: the lattice archive cannot be read ({exc}); rebuild it with the same "
            "command and --forcerun decode_split"
        ) from exc
    for entry in text.split("\n\n"):
        if entry.strip():
            yield _parse_entry(entry.lstrip("\n"), path, word_level)


def _parse_entry(entry: str, path, word_level: bool = False) -> tuple[str, Lattice]:
    """One archive entry: the key line, ``src dst word graph,acoustic,tids`` arc lines,
    then ``state graph,acoustic,tids`` final lines (an empty string read as
    transition-id 0). A raw lattice (one transition-id an arc, final weights without
    acoustic cost or string) is parsed in one C call (``numpy.fromstring``); a
    determinised CompactLattice (strings ``t1_t2_…``) line by line and spelt out
    (:meth:`Lattice.from_compact`)."""
    key, _, body = entry.partition("\n")
    if not body.strip():  # a search that found nothing: no state at all
        return key.strip(), Lattice.from_links(*(np.zeros(0, np.int64) for _ in range(8)))
    if "_" in body:
        return key.strip(), _parse_compact(body, key, path, word_level)
    body = body.rstrip("\n") + "\n"
    num_lines = body.count("\n")
    num_arcs = (body.count("\t") - num_lines) // 2  # an arc line has 3 tabs, a final 1
    numbers = body.replace(",\n", ",0\n").replace(",", " ").replace("\t", " ")
    values = np.fromstring(numbers, sep=" ")
    if len(values) != 6 * num_arcs + 4 * (num_lines - num_arcs):
        raise DataError(f"{path}: lattice {key}: not a lattice written by paravg")
    arcs = values[: 6 * num_arcs].reshape(num_arcs, 6)
    finals = values[6 * num_arcs :].reshape(-1, 4)
    src, dst, word, tid = (arcs[:, i].astype(np.int64) for i in (0, 1, 2, 5))
    final_nodes = finals[:, 0].astype(np.int64)
    n = int(max(src.max(initial=-1), dst.max(initial=-1), final_nodes.max(initial=-1))) + 1
    if (finals[:, 2] != 0).any() or (finals[:, 3] != 0).any():  # compact final weights
        strings = [(t,) if t else () for t in tid.tolist()]
        final = {int(s): (g, a, (int(t),) if t else ()) for s, g, a, t in finals.tolist()}
        build = Lattice.word_level if word_level else Lattice.from_compact
        return key, build(n, src, dst, word, arcs[:, 3], arcs[:, 4], strings, final)
    final = np.full(n, np.inf)
    final[final_nodes] = finals[:, 1]
    return key, Lattice.from_links(
        node_frames(n, src, dst, tid > 0), final, src, dst, arcs[:, 3], arcs[:, 4], tid, word
    )


def _parse_compact(body: str, key: str, path, word_level: bool = False) -> Lattice:
    """A CompactLattice entry's lines (``WriteCompactLattice`` text) as a state-level
    :class:`Lattice`."""
    src, dst, word, graph, acoustic, strings = [], [], [], [], [], []
    final = {}
    try:
        for line in body.splitlines():
            fields = line.split()
            if not fields:
                continue
            g, a, tids = fields[-1].split(",")
            string = tuple(int(t) for t in tids.split("_")) if tids else ()
            if len(fields) == 2:
                final[int(fields[0])] = (float(g), float(a), string)
            else:
                src.append(int(fields[0]))
                dst.append(int(fields[1]))
                word.append(int(fields[2]))
                graph.append(float(g))
                acoustic.append(float(a))
                strings.append(string)
    except ValueError as exc:
        raise DataError(f"{path}: lattice {key}: not a lattice written by paravg ({exc})") from exc
    n = 1 + max([*src, *dst, *final, 0])
    build = Lattice.word_level if word_level else Lattice.from_compact
    return build(n, src, dst, word, graph, acoustic, strings, final)


class LatticeArchives:
    """The lattices of several archives (a set's splits), read in order; the first pass
    keeps them in memory up to ``max_links`` links in all, so that a second pass (the
    CTM after the grid) reads nothing again; beyond it every pass reads the files. With
    ``word_level``, determinised entries come word-level (:meth:`Lattice.word_level`; a
    pass that needs frames calls :meth:`Lattice.state_level`)."""

    def __init__(
        self,
        paths: Sequence[str | os.PathLike],
        max_links: int = 5_000_000,
        word_level: bool = False,
    ):
        self.paths = list(paths)
        self.max_links = max_links
        self.word_level = word_level
        self._kept: list[tuple[str, Lattice]] | None = None

    def __iter__(self) -> Iterator[tuple[str, Lattice]]:
        if self._kept is not None:
            yield from self._kept
            return
        kept: list[tuple[str, Lattice]] | None = []
        links = 0
        for path in self.paths:
            for key, lattice in read_lattice_archive(path, self.word_level):
                links += lattice.num_links
                if kept is not None and links <= self.max_links:
                    kept.append((key, lattice))
                else:
                    kept = None
                yield key, lattice
        self._kept = kept


def node_frames(n: int, src: np.ndarray, dst: np.ndarray, emits: np.ndarray) -> np.ndarray:
    """Each node's frame: the number of transition-ids on any path from node 0 (the same
    on every path of a state-level lattice). One incoming link per node makes a tree;
    depths by pointer jumping, O(links · log frames)."""
    parent = np.zeros(n, dtype=np.int64)
    step = np.zeros(n, dtype=np.int64)
    parent[dst] = src  # any one incoming link per node
    step[dst] = emits
    while True:
        moved = parent != 0
        if not moved.any():
            return step
        step = step + np.where(moved, step[parent], 0)
        parent = parent[parent]
