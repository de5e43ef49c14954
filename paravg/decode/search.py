"""One lattice-generating Viterbi beam search per utterance (Kaldi's
``LatticeFasterDecoder``, ``src/decoder/lattice-faster-decoder.{h,cc}``), vectorised
over the active arcs of a frame with numpy.

Costs are Kaldi's: a token's cost is graph cost + ``acoustic_scale`` · acoustic cost,
with acoustic cost −log p(x_t | pdf) (pseudo-log-likelihoods, column per pdf) and graph
cost the HCLG arc weights. Per frame t (Kaldi's ``ProcessEmitting`` then
``ProcessNonemitting``):

1. **Cut-off** (``GetCutoff``): tokens of frame t above ``best + beam`` are dropped;
   more than ``max_active`` tokens tighten the cut-off to the ``max_active``-th cost,
   fewer than ``min_active`` below it widen it to the ``min_active``-th; the beam of the
   next frame is the one used (``adaptive_beam``: the cut-off's distance from the best,
   plus ``beam_delta`` 0.5, when a count bound it).
2. **Emitting arcs** (ilabel = transition-id > 0) of the surviving tokens give the tokens
   of frame t + 1: cost = token + arc weight + scale · acoustic cost of the arc's pdf at
   t; kept below ``best new cost + adaptive_beam``; a state's token keeps the minimum.
3. **Non-emitting arcs** (ilabel 0) of frame t + 1 are relaxed until no token improves
   (HCLG has no epsilon cycles), kept below the same cut-off.

Every arc kept is a **link** of the raw lattice: (source token, destination token, graph
cost, acoustic cost, transition-id, word). After the last frame the final costs are
added (when no final state is active every token is final, Kaldi's partial result), and
the links are pruned to those on a path within ``lattice_beam`` of the best
(:func:`_pruned_lattice`), as ``PruneForwardLinksFinal`` and ``GetRawLattice`` leave
them. As Kaldi's ``PruneActiveTokens``, the links held are pruned every
``PRUNE_INTERVAL`` (25) frames on the way (:meth:`_Trellis.prune_active`): a link on no
path within ``lattice_beam`` of the best path to some token of the newest frame can be on
no complete path within it either, so the final lattice is the one a single pruning at the
end gives, and what the search holds is about the lattice surviving so far (at most
twice it, once past :data:`PRUNE_ABOVE_LINKS`) plus 25 frames' unpruned links, not every
link within the beam of every frame.

Kaldi's options and defaults (``LatticeFasterDecoderConfig``, ``steps/nnet3/decode.sh``):
beam 15, lattice-beam 8, max-active 7000, min-active 200, acoustic-scale 0.1
(:class:`paravg.decode.options.SearchOptions`, from the schema's ``decode`` section).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from paravg.decode.lattice import Lattice
from paravg.decode.options import SearchOptions

BEAM_DELTA = 0.5  # Kaldi's LatticeFasterDecoderConfig::beam_delta
PRUNE_INTERVAL = 25  # ::prune_interval: frames between two prunings of the links held
PRUNE_SCALE = 0.1  # ::prune_scale: extra costs that move less than lattice_beam · this
#                   do not send the pruning further back
# Kaldi goes back while an extra cost moves by more than delta, which on a long utterance
# with many lasting alternatives (an untrained model) is back to its start at every
# pruning: quadratic in its length with numpy's cost per frame. paravg's pruning goes back
# at most PRUNE_DEPTH frames, and all the way only once the utterance has grown by
# 1/DEEP_FRACTION since the last time (at most ~DEEP_FRACTION + 1 passes over each frame
# in all). The kept extra costs then err low: more links held for a while, never fewer,
# and the final lattice is the same.
PRUNE_DEPTH = 100
DEEP_FRACTION = 8
# Pruning costs CPU (about twice the search's on the tiny model's 3-s utterances when done
# every 25 frames) and saves memory only where there is much to hold: paravg prunes once
# the links held pass PRUNE_ABOVE_LINKS (32 MB), then again each time they have doubled
# since the last pruning left them. An utterance of a few seconds is never pruned on the
# way; what a long one holds stays under about twice its surviving lattice plus 25 frames.
PRUNE_ABOVE_LINKS = 1_000_000


def low_frame_rate_scales(
    acoustic_scale: float, frame_subsampling_factor: int
) -> tuple[float, float]:
    """(decoding acoustic scale, post-decode acoustic scale) of a model with an output every
    f frames, from ``acoustic_scale``, the scale of a 10-ms frame (``decode.acoustic_scale``).

    One output stands for f frames, so its log-likelihood is weighted f times as much:
    the search runs at f·a, and the lattice's acoustic costs are multiplied by f after it
    (Kaldi's ``--post-decode-acwt``, ``lattice-scale --acoustic-scale=f``), so that a
    scoring LMWT means what it means at f = 1 (LMWT 1/a is the decoding scale) and the
    same LMWT range 7-17 applies. Kaldi's LFR recipes (``run_tdnn_lfr1c.sh``,
    ``run_tdnn_lstm_lfr_1a.sh``) write 0.333 and 3.0 for f = 3 and a = 0.1; f·a = 0.3 keeps
    LMWT 10 at the decoding scale (their 0.333 is LMWT 9), as the chain recipes' acwt 1.0
    with post-decode-acwt 10. f = 1: (a, 1)."""
    if frame_subsampling_factor == 1:
        return acoustic_scale, 1.0
    f = frame_subsampling_factor
    return round(f * acoustic_scale, 12), float(f)


@dataclass(frozen=True)
class SearchGraph:
    """An HCLG as arrays: arcs sorted by source state, emitting and non-emitting apart.

    ``offsets[kind][s] : offsets[kind][s + 1]`` are the arcs of kind ``"emit"`` or
    ``"eps"`` leaving state s; ``final`` is each state's final cost (inf: not final).
    """

    num_states: int
    start: int
    final: np.ndarray
    offsets: dict[str, np.ndarray]
    dst: dict[str, np.ndarray]
    weight: dict[str, np.ndarray]
    ilabel: dict[str, np.ndarray]
    olabel: dict[str, np.ndarray]

    @classmethod
    def from_fst(cls, fst) -> SearchGraph:
        """From a kaldifst StdVectorFst (read through its text form, once per job)."""
        return cls.from_text(fst.to_str(show_weight_one=True), fst.start)

    @classmethod
    def from_text(cls, text: str, start: int) -> SearchGraph:
        """From OpenFst's text form (``src dst ilabel olabel weight`` / ``state weight``)."""
        arcs: list[tuple[int, int, int, int, float]] = []
        finals: dict[int, float] = {}
        num_states = start + 1
        for line in text.splitlines():
            f = line.split()
            if len(f) >= 4:
                w = float(f[4]) if len(f) > 4 else 0.0
                arcs.append((int(f[0]), int(f[1]), int(f[2]), int(f[3]), w))
                num_states = max(num_states, int(f[0]) + 1, int(f[1]) + 1)
            elif f:
                finals[int(f[0])] = float(f[1]) if len(f) > 1 else 0.0
                num_states = max(num_states, int(f[0]) + 1)
        table = np.array(arcs, dtype=np.float64).reshape(-1, 5)
        final = np.full(num_states, np.inf)
        for s, w in finals.items():
            final[s] = w
        parts: dict[str, dict[str, np.ndarray]] = {}
        for kind, mask in (("emit", table[:, 2] > 0), ("eps", table[:, 2] == 0)):
            sub = table[mask]
            sub = sub[np.argsort(sub[:, 0], kind="stable")]
            src = sub[:, 0].astype(np.int64)
            parts[kind] = {
                "offsets": np.searchsorted(src, np.arange(num_states + 1)),
                "dst": sub[:, 1].astype(np.int64),
                "weight": sub[:, 4],
                "ilabel": sub[:, 2].astype(np.int64),
                "olabel": sub[:, 3].astype(np.int64),
            }
        return cls(
            num_states,
            start,
            final,
            **{key: {k: parts[k][key] for k in parts} for key in parts["emit"]},
        )

    def arcs_of(self, kind: str, states: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Indices of the ``kind`` arcs leaving ``states``, and each arc's position in
        ``states``."""
        off = self.offsets[kind]
        counts = off[states + 1] - off[states]
        total = int(counts.sum())
        owner = np.repeat(np.arange(len(states)), counts)
        first = np.repeat(off[states] - np.cumsum(counts) + counts, counts)
        return first + np.arange(total), owner


class _Frame:
    """Tokens of one frame: states (in creation order) and their costs. While the frame
    is built, dense per-state arrays hold each state's cost and token index (shared
    between frames; reset on :meth:`close`)."""

    def __init__(self, dense_cost: np.ndarray, dense_token: np.ndarray, mark: np.ndarray):
        self.dense_cost = dense_cost  # inf everywhere while no frame is open
        self.dense_token = dense_token  # -1 likewise
        self.mark = mark  # scratch of _distinct
        self.states = np.zeros(0, dtype=np.int64)
        self.costs = np.zeros(0)

    def add(self, states: np.ndarray, costs: np.ndarray) -> np.ndarray:
        """Lower the costs of ``states`` (adding new tokens); return the states whose
        cost went down (new ones included)."""
        before = self.dense_cost[states]
        np.minimum.at(self.dense_cost, states, costs)
        changed = _distinct(states[costs < before], self.mark)
        new = changed[self.dense_token[changed] < 0]
        if len(new):
            self.dense_token[new] = len(self.states) + np.arange(len(new))
            self.states = np.concatenate([self.states, new])
        return changed

    def cost_of(self, states: np.ndarray) -> np.ndarray:
        return self.dense_cost[states]

    def token_of(self, states: np.ndarray) -> np.ndarray:
        return self.dense_token[states]

    def close(self) -> None:
        self.costs = self.dense_cost[self.states].copy()
        self.dense_cost[self.states] = np.inf
        self.dense_token[self.states] = -1


def _distinct(values: np.ndarray, mark: np.ndarray) -> np.ndarray:
    """The distinct entries of ``values`` (indices into ``mark``, a scratch array of the
    same range), in O(n) without sorting: the last write of each value survives."""
    pos = np.arange(len(values))
    mark[values] = pos
    return values[mark[values] == pos]


def _cutoff(costs: np.ndarray, opts: SearchOptions) -> tuple[float, float]:
    """Kaldi's GetCutoff: (cut-off, adaptive beam) of a frame's token costs."""
    best = float(costs.min())
    beam_cutoff = best + opts.beam
    if len(costs) > opts.max_active:
        max_cut = float(np.partition(costs, opts.max_active)[opts.max_active])
        if max_cut < beam_cutoff:
            return max_cut, max_cut - best + BEAM_DELTA
    if len(costs) > opts.min_active:
        min_cut = float(np.partition(costs, opts.min_active)[opts.min_active])
        if min_cut > beam_cutoff:
            return min_cut, min_cut - best + BEAM_DELTA
    return beam_cutoff, opts.beam


@dataclass
class _Block:
    """The links made in one step: ``kind`` ``"emit"`` (frame t → t + 1) or ``"eps"``
    (within frame t); ``src``/``dst`` the tokens' positions in their frames, ``arc`` the
    graph arc of that kind (its weight, transition-id and word are the link's), and
    ``acoustic`` the unscaled acoustic cost (0 on a non-emitting link). 32 bytes a link."""

    kind: str
    src: np.ndarray
    dst: np.ndarray
    arc: np.ndarray
    acoustic: np.ndarray

    def __len__(self) -> int:
        return len(self.arc)

    def cost(self, graph: SearchGraph, scale: float) -> np.ndarray:
        """Search cost of each link: graph + scale · acoustic."""
        return graph.weight[self.kind][self.arc] + scale * self.acoustic

    def keep(self, mask: np.ndarray) -> None:
        self.src, self.dst = self.src[mask], self.dst[mask]
        self.arc, self.acoustic = self.arc[mask], self.acoustic[mask]


def _empty_block(kind: str) -> _Block:
    none = np.zeros(0, dtype=np.int64)
    return _Block(kind, none, none, none, np.zeros(0))


class _Trellis:
    """What the search holds: the tokens of every frame (``frames``), each frame's
    non-emitting links (``eps[t]``) and emitting links to the next frame (``emit[t]``),
    and each token's extra cost (``extra[t]``) as Kaldi's ``PruneActiveTokens`` last set it.

    A token's **extra cost** is how much worse the best path through it is than the best
    path to the frontier token that path reaches (the frontier's tokens have 0; Kaldi's
    ``Token::extra_cost``): extra(x) = min over links x → y of
    α(x) + cost(link) − α(y) + extra(y), α a token's forward cost. A link whose
    α(src) + cost − α(dst) + extra(dst) exceeds ``lattice_beam`` is on no path within
    the lattice beam of any frontier token, so on no complete path within the lattice
    beam of the best one either (every complete path passes a frontier token, whose
    α is at most that path's cost to it): pruning it changes nothing the final pruning
    (:func:`_pruned_lattice`) keeps. Tokens left without a link forward go too."""

    def __init__(self, graph: SearchGraph, scale: float):
        self.graph, self.scale = graph, scale
        self.frames: list[_Frame] = []
        self.eps: list[_Block] = []
        self.emit: list[_Block] = []
        self.extra: list[np.ndarray] = []
        self.pruned_to = 0  # the frontier at the last pruning
        self.deep_at = 0  # the frontier from which a pruning may go back to frame 0
        self.links = 0  # links held now
        self.peak_links = 0  # the most links held at once

    def add_frame(self, frame: _Frame, eps: _Block) -> None:
        self.frames.append(frame)
        self.eps.append(eps)
        self.extra.append(np.zeros(len(frame.states)))
        self.links += len(eps)
        self.peak_links = max(self.peak_links, self.links)

    def add_emit(self, block: _Block) -> None:
        self.emit.append(block)
        self.links += len(block)
        self.peak_links = max(self.peak_links, self.links)

    def prune_active(self, lattice_beam: float, delta: float) -> None:
        """Kaldi's ``PruneActiveTokens(lattice_beam * prune_scale)``: from the frontier back,
        recompute each frame's extra costs from its links forward, prune the links above
        ``lattice_beam`` and the tokens left without a link, and go on to the frame before
        while the frame is new since the last pruning or an extra cost moved by more than
        ``delta`` (Kaldi's ``must_prune_forward_links``; a smaller move is kept and not
        propagated: the kept extra costs err low, which only keeps more links), at most
        :data:`PRUNE_DEPTH` frames back unless the utterance grew by 1/:data:`DEEP_FRACTION`
        since the last pass that could reach frame 0."""
        frontier = len(self.frames) - 1
        deep = frontier >= self.deep_at
        stop = -1 if deep else max(frontier - 1 - PRUNE_DEPTH, -1)
        changed = True
        for f in range(frontier - 1, stop, -1):
            if f < self.pruned_to and not changed:
                break
            changed = self._prune_frame(f, lattice_beam, delta)
        self.pruned_to = frontier
        if deep:
            self.deep_at = frontier + max(PRUNE_DEPTH, frontier // DEEP_FRACTION)

    def _prune_frame(self, f: int, lattice_beam: float, delta: float) -> bool:
        """Kaldi's ``PruneForwardLinks(f)`` and ``PruneTokensForFrame(f)``: a token's extra
        cost is the least over its links kept (those within ``lattice_beam``; none: the
        token goes). Returns whether an extra cost moved by more than ``delta``."""
        alpha, alpha_next = self.frames[f].costs, self.frames[f + 1].costs
        emit, eps = self.emit[f], self.eps[f]
        before = self.emit[f - 1] if f > 0 else _empty_block("emit")
        held = len(emit) + len(eps) + len(before)
        emit_extra = (
            alpha[emit.src] + emit.cost(self.graph, self.scale) - alpha_next[emit.dst]
        ) + self.extra[f + 1][emit.dst]
        emit_kept = emit_extra <= lattice_beam
        extra = np.full(len(alpha), np.inf)
        np.minimum.at(extra, emit.src[emit_kept], emit_extra[emit_kept])
        eps_base = alpha[eps.src] + eps.cost(self.graph, self.scale) - alpha[eps.dst]
        while True:  # non-emitting chains within the frame: relax until nothing falls
            eps_extra = eps_base + extra[eps.dst]
            eps_kept = eps_extra <= lattice_beam
            last = extra.copy()
            np.minimum.at(extra, eps.src[eps_kept], eps_extra[eps_kept])
            if np.array_equal(last, extra):
                break
        moved = bool(np.any(np.abs(extra - self.extra[f]) > delta))
        emit.keep(emit_kept)
        eps.keep(eps_kept)
        alive = np.isfinite(extra)
        if not alive.all():  # renumber the surviving tokens; links into the others go
            new_pos = np.cumsum(alive) - 1
            frame = self.frames[f]
            frame.states, frame.costs = frame.states[alive], frame.costs[alive]
            emit.src = new_pos[emit.src]
            eps.src, eps.dst = new_pos[eps.src], new_pos[eps.dst]
            before.keep(alive[before.dst])
            before.dst = new_pos[before.dst]
        self.extra[f] = extra[alive]
        self.links += len(emit) + len(eps) + len(before) - held
        return moved


def search(
    graph: SearchGraph,
    arc_pdf: np.ndarray,
    loglikes: np.ndarray,
    opts: SearchOptions,
    prune_interval: int | None = None,
    prune_above: int | None = None,
) -> Lattice:
    """The raw lattice of one utterance, pruned to ``opts.lattice_beam``.

    ``arc_pdf``: the pdf of every emitting arc (its transition-id's pdf); ``loglikes``:
    (frames × pdfs) pseudo-log-likelihoods, unscaled. Every ``prune_interval`` frames
    the links held are pruned (:meth:`_Trellis.prune_active`; 0: only at the end, the
    same lattice; None: :data:`PRUNE_INTERVAL`) once there are more than ``prune_above``
    (None: :data:`PRUNE_ABOVE_LINKS`) and twice as many as the last pruning left (0:
    every ``prune_interval`` frames, as Kaldi).
    ``Lattice.peak_links`` is the most links the search held at once.
    """
    if prune_interval is None:
        prune_interval = PRUNE_INTERVAL
    if prune_above is None:
        prune_above = PRUNE_ABOVE_LINKS
    next_prune_above = prune_above
    scale = opts.acoustic_scale
    dense_cost = np.full(graph.num_states, np.inf)
    dense_token = np.full(graph.num_states, -1, dtype=np.int64)
    mark = np.zeros(graph.num_states, dtype=np.int64)
    trellis = _Trellis(graph, scale)

    def relax_epsilons(frame: _Frame, changed: np.ndarray, cutoff: float) -> _Block:
        kept = []
        while len(changed):
            arcs, owner = graph.arcs_of("eps", changed)
            if not len(arcs):
                break
            cost = frame.cost_of(changed)[owner] + graph.weight["eps"][arcs]
            keep = cost < cutoff
            arcs, cost = arcs[keep], cost[keep]
            kept.append(arcs)
            changed = frame.add(graph.dst["eps"][arcs], cost)
        if not kept:
            return _empty_block("eps")
        arcs = np.unique(np.concatenate(kept))
        src = np.searchsorted(graph.offsets["eps"], arcs, side="right") - 1
        return _Block(
            "eps",
            frame.token_of(src),
            frame.token_of(graph.dst["eps"][arcs]),
            arcs,
            np.zeros(len(arcs)),
        )

    first = _Frame(dense_cost, dense_token, mark)
    first.add(np.array([graph.start]), np.zeros(1))
    eps = relax_epsilons(first, np.array([graph.start]), opts.beam)
    first.close()
    trellis.add_frame(first, eps)
    delta = opts.lattice_beam * PRUNE_SCALE
    for t in range(loglikes.shape[0]):
        cur = trellis.frames[-1]
        cutoff, adaptive = _cutoff(cur.costs, opts)
        alive = np.flatnonzero(cur.costs <= cutoff)
        arcs, owner = graph.arcs_of("emit", cur.states[alive])
        acoustic = -loglikes[t, arc_pdf[arcs]]
        cost = cur.costs[alive][owner] + graph.weight["emit"][arcs] + scale * acoustic
        next_cutoff = float(cost.min()) + adaptive if len(cost) else -np.inf
        keep = cost < next_cutoff
        arcs, owner, cost, acoustic = arcs[keep], owner[keep], cost[keep], acoustic[keep]
        nxt = _Frame(dense_cost, dense_token, mark)
        dst = graph.dst["emit"][arcs]
        changed = nxt.add(dst, cost)
        # src: positions in frame t (its map is closed)
        emit = _Block("emit", alive[owner], nxt.token_of(dst), arcs, acoustic)
        eps = relax_epsilons(nxt, changed, next_cutoff)
        nxt.close()
        if not len(nxt.states):  # no arc left within the beam: stop at frame t
            break
        trellis.add_emit(emit)
        trellis.add_frame(nxt, eps)
        if prune_interval and (t + 1) % prune_interval == 0 and trellis.links > next_prune_above:
            trellis.prune_active(opts.lattice_beam, delta)
            next_prune_above = max(prune_above, 2 * trellis.links) if prune_above else 0
    frames = trellis.frames
    final = graph.final[frames[-1].states]
    reached_final = len(frames) == loglikes.shape[0] + 1 and bool(np.isfinite(final).any())
    if not reached_final:  # Kaldi's partial traceback: every token of the last frame ends
        final = np.zeros(len(frames[-1].states))
    lattice = _pruned_lattice(trellis, final, opts)
    lattice.reached_final = reached_final
    lattice.peak_links = trellis.peak_links
    return lattice


def _pruned_lattice(trellis: _Trellis, final: np.ndarray, opts: SearchOptions) -> Lattice:
    """Kaldi's ``PruneForwardLinksFinal`` + ``GetRawLattice``: the links on a path within
    ``lattice_beam`` of the best (search costs), as a :class:`Lattice`. Empties the
    trellis's links (its memory) once the kept ones are copied out.

    Forward costs are the tokens' (each the minimum over its kept incoming links);
    backward costs run over the link blocks in reverse, a frame's non-emitting links
    relaxed until no cost falls (their chains are short)."""
    graph, frames = trellis.graph, trellis.frames
    # the blocks in the order made: eps of 0, emit 0 -> 1, eps of 1, ...; (frame of src, dst)
    blocks = [(t, t, trellis.eps[t]) for t in range(len(frames))]
    blocks += [(t, t + 1, b) for t, b in enumerate(trellis.emit)]
    blocks.sort(key=lambda b: (b[0], b[1]))
    offsets = np.concatenate([[0], np.cumsum([len(f.states) for f in frames])])
    alpha = np.concatenate([f.costs for f in frames])
    beta = np.full(len(alpha), np.inf)
    beta[offsets[-2] :] = final
    links = [
        (b.src + offsets[a], b.dst + offsets[z], b.cost(graph, opts.acoustic_scale), a == z, b)
        for a, z, b in blocks
    ]
    for src, dst, cost, within, _ in reversed(links):
        while True:
            before = beta[src]
            np.minimum.at(beta, src, beta[dst] + cost)
            if not within or np.array_equal(before, beta[src]):
                break
    best = float(np.min(alpha[offsets[-2] :] + final))
    limit = best + opts.lattice_beam
    kept = {k: [] for k in ("src", "dst", "graph", "acoustic", "tid", "word")}
    for src, dst, cost, _, b in links:
        keep = alpha[src] + cost + beta[dst] <= limit
        arc = b.arc[keep]
        kept["src"].append(src[keep])
        kept["dst"].append(dst[keep])
        kept["graph"].append(graph.weight[b.kind][arc])
        kept["acoustic"].append(b.acoustic[keep])
        kept["tid"].append(graph.ilabel[b.kind][arc])
        kept["word"].append(graph.olabel[b.kind][arc])
    links.clear()  # the trellis is spent: its links go before the lattice is sorted
    trellis.eps.clear()
    trellis.emit.clear()
    out = {}
    for k in list(kept):
        v = kept.pop(k)
        out[k] = np.concatenate(v) if v else np.zeros(0)
        if k in ("src", "dst", "tid", "word"):
            out[k] = out[k].astype(np.int64, copy=False)
    node_frame = np.concatenate(
        [np.full(len(f.states), t, dtype=np.int64) for t, f in enumerate(frames)]
    )
    node_final = np.full(len(alpha), np.inf)
    node_final[offsets[-2] :] = np.where(alpha[offsets[-2] :] + final <= limit, final, np.inf)
    used = np.zeros(len(alpha), dtype=bool)
    used[0] = True
    used[out["src"]] = used[out["dst"]] = True
    new_id = np.cumsum(used) - 1
    out["src"], out["dst"] = new_id[out["src"]], new_id[out["dst"]]
    return Lattice.from_links(node_frame[used], node_final[used], **out)
