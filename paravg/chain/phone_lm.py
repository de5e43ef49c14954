"""The phone language model of chain training: Kaldi's ``LanguageModelEstimator``
(``src/chain/language-model.{h,cc}``, binary ``src/chainbin/chain-est-phone-lm.cc``).

An un-smoothed n-gram over phones with *hard* backoff, built only to make the
denominator graph small:

* Counts: each sentence ``p_1 .. p_n`` (phone ids > 0) adds, for ``i = 1 .. n+1``,
  ``count[h_i][p_i] += 1`` where ``p_{n+1} = 0`` is end-of-sentence and the history
  ``h_i`` is the last ``ngram_order - 1`` symbols before ``p_i``, with ``0`` standing for
  begin-of-sentence (``h_1 = (0,)``, histories keep a leading 0 until they are full).
* Every history of length ``>= no_prune_ngram_order`` has a backoff state (its history
  without the first phone); histories shorter than ``no_prune_ngram_order - 1`` only exist
  as backoff targets, so there is never a unigram state when ``no_prune_ngram_order >= 2``.
* Pruning: states are deleted (their counts moved to their backoff state) while more
  than ``num_basic + num_extra_lm_states`` states have counts, ``num_basic`` being the
  number of histories of length ``no_prune_ngram_order - 1``. The state deleted next is
  the one whose merge loses least training log-likelihood,
  ``L(c_h + c_b) - L(c_h) - L(c_b)`` with ``L(c) = Σ_p c_p log(c_p / Σ c)`` (a merge into
  a backoff state without counts costs ``-1e-15 · count``, so low-count states go first);
  a state may go only when no longer history backs off to it with counts and no arc
  out of it needs all of its context. The queue is rebuilt at 4 intermediate targets.
* Probabilities: ``P(p | h) = count[h][p] / Σ_q count[h][q]`` (maximum likelihood, no
  smoothing, no backoff arcs); ``P(0 | h)`` is the final probability of the state.
  Arc ``h --p/-log P(p|h)--> h'``: ``h'`` = the longest suffix of ``h + (p,)`` (at most
  ``ngram_order - 1`` long) that has counts.

The FST's states are the states with counts, numbered in order of creation; its start
is the state of history ``(0,)`` (backed off as needed).
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

from paravg.chain.fst_arrays import FstArrays, arrays_to_fst


@dataclass(frozen=True)
class LanguageModelOptions:
    """Kaldi's ``LanguageModelOptions`` (defaults as ``chain-est-phone-lm``'s)."""

    ngram_order: int = 4
    num_extra_lm_states: int = 1000
    no_prune_ngram_order: int = 3

    def check(self) -> None:
        if self.ngram_order < 2:
            raise ValueError("--ngram-order must be >= 2")
        if not 1 <= self.no_prune_ngram_order <= self.ngram_order:
            raise ValueError("need 1 <= no_prune_ngram_order <= ngram_order")
        if self.num_extra_lm_states < 0:
            raise ValueError("num_extra_lm_states must be >= 0")


@dataclass
class _LmState:
    history: tuple[int, ...]
    counts: dict[int, int] = field(default_factory=dict)
    tot_count: int = 0
    tot_count_with_parents: int = 0
    backoff: int = -1
    fst_state: int = -1
    backoff_allowed: bool = False

    def add_count(self, phone: int, count: int) -> None:
        self.counts[phone] = self.counts.get(phone, 0) + count
        self.tot_count += count

    def log_like(self) -> float:
        return sum(c * math.log(c / self.tot_count) for c in self.counts.values())


def _merged_log_like(a: _LmState, b: _LmState) -> float:
    counts = dict(a.counts)
    for p, c in b.counts.items():
        counts[p] = counts.get(p, 0) + c
    tot = a.tot_count + b.tot_count
    return sum(c * math.log(c / tot) for c in counts.values())


def _trunc_div(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


def _approx_equal(a: float, b: float, rel: float = 0.001) -> bool:
    return a == b or abs(a - b) <= rel * abs(a + b)


class LanguageModelEstimator:
    """Accumulate phone sequences with :meth:`add_counts`, then :meth:`estimate`."""

    def __init__(self, opts: LanguageModelOptions | None = None):
        self.opts = opts or LanguageModelOptions()
        self.opts.check()
        self.states: list[_LmState] = []
        self.index: dict[tuple[int, ...], int] = {}
        self.num_active = 0
        self.num_basic = 0
        self.log: list[str] = []

    # ------------------------------------------------------------------ counting
    def add_counts(self, sentence: Sequence[int]) -> None:
        """``AddCounts``: every n-gram of ``sentence`` (and its end) counted once."""
        history: list[int] = [0]
        for phone in sentence:
            phone = int(phone)
            if phone <= 0:
                raise ValueError(f"phone ids must be > 0, got {phone}")
            self._increment(tuple(history), phone)
            history.append(phone)
            if len(history) >= self.opts.ngram_order:
                history.pop(0)
        self._increment(tuple(history), 0)

    def _increment(self, history: tuple[int, ...], phone: int) -> None:
        state = self.states[self._find_or_create(history)]
        if state.tot_count == 0:
            self.num_active += 1
        state.add_count(phone, 1)

    def _find_or_create(self, hist: tuple[int, ...]) -> int:
        if hist in self.index:
            return self.index[hist]
        ans = len(self.states)
        self.states.append(_LmState(history=hist))
        self.index[hist] = ans
        if len(hist) >= self.opts.no_prune_ngram_order:
            self.states[ans].backoff = self._find_or_create(hist[1:])
        return ans

    def _find_nonzero(self, hist: tuple[int, ...]) -> int:
        while True:
            lm = self.index.get(hist, -1)
            if lm != -1 and self.states[lm].tot_count != 0:
                return lm
            if not hist:
                raise RuntimeError("no LM state with counts for the empty history")
            hist = hist[1:]

    # ------------------------------------------------------------------ pruning
    def _backoff_allowed(self, lm: int) -> bool:
        st = self.states[lm]
        if len(st.history) < self.opts.no_prune_ngram_order:
            return False
        if st.tot_count != st.tot_count_with_parents or st.tot_count == 0:
            return False
        if len(st.history) == self.opts.ngram_order - 1:
            return True
        for phone in st.counts:
            if phone != 0:
                nxt = self.index.get((*st.history, phone), -1)
                if nxt != -1 and self.states[nxt].tot_count_with_parents != 0:
                    return False
        return True

    def _like_change(self, lm: int) -> float:
        st = self.states[lm]
        b = self.states[st.backoff]
        if b.tot_count == 0:
            return float(np.float32(-1.0e-15 * st.tot_count))
        change = _merged_log_like(b, st) - st.log_like() - b.log_like()
        assert change < 0.1, change
        return float(np.float32(min(change, 0.0)))  # Kaldi's BaseFloat

    def _push(self, queue: list, change: float, lm: int) -> None:
        # std::priority_queue<pair<float,int>>: largest change, then largest index, first
        heapq.heappush(queue, (-change, -lm))

    def _initialize_queue(self) -> list:
        queue: list = []
        for lm, st in enumerate(self.states):
            st.backoff_allowed = self._backoff_allowed(lm)
            if st.backoff_allowed:
                self._push(queue, self._like_change(lm), lm)
        return queue

    def _back_off_state(self, lm: int, queue: list) -> None:
        st = self.states[lm]
        b = self.states[st.backoff]
        had_allowed = b.backoff_allowed
        if b.tot_count != 0:
            self.num_active -= 1
        for p, c in st.counts.items():
            b.add_count(p, c)
        st.counts, st.tot_count, st.tot_count_with_parents = {}, 0, 0
        st.backoff_allowed = False
        b.backoff_allowed = self._backoff_allowed(st.backoff)
        if not had_allowed and b.backoff_allowed:
            self._push(queue, self._like_change(st.backoff), st.backoff)

    def _do_backoff(self) -> None:
        initial = self.num_active
        target = self.num_basic + self.opts.num_extra_lm_states
        # C++ integer division truncates towards zero (the difference is usually < 0)
        targets = [initial + _trunc_div((target - initial) * (t + 1), 4) for t in range(4)]
        for this_target in targets:
            queue = self._initialize_queue()
            while self.num_active > this_target and queue:
                neg_change, neg_lm = heapq.heappop(queue)
                change, lm = -neg_change, -neg_lm
                recomputed = self._like_change(lm)
                if not _approx_equal(change, recomputed):
                    self._push(queue, recomputed, lm)
                else:
                    self._back_off_state(lm, queue)
        self.log.append(
            f"In LM [hard] backoff, target num states was {self.num_basic} + "
            f"--num-extra-lm-states={self.opts.num_extra_lm_states} = {target}, "
            f"pruned from {initial} to {self.num_active}"
        )

    # ------------------------------------------------------------------ output
    def estimate(self):
        """``Estimate``: prune, then the LM as a kaldifst acceptor (phone labels,
        weights ``-log P``, arcs sorted by label)."""
        if not self.states:
            raise ValueError("no phone sequences were counted")
        for st in self.states:  # SetParentCounts
            lm = self.index[st.history]
            while lm != -1:
                self.states[lm].tot_count_with_parents += st.tot_count
                lm = self.states[lm].backoff
        self.num_basic = sum(
            len(st.history) == self.opts.no_prune_ngram_order - 1 for st in self.states
        )
        self._do_backoff()
        return arrays_to_fst(self._to_arrays())

    def _to_arrays(self) -> FstArrays:
        num = 0
        for st in self.states:
            st.fst_state = -1
            if st.tot_count != 0:
                st.fst_state = num
                num += 1
        assert num == self.num_active
        rows, final = [], np.full(num, np.inf)
        tot_count, tot_logprob = 0, 0.0
        for st in self.states:
            if st.fst_state == -1:
                continue
            for phone in sorted(st.counts):
                count = st.counts[phone]
                logprob = math.log(count / st.tot_count)
                tot_count += count
                tot_logprob += logprob * count
                if phone == 0:
                    final[st.fst_state] = -logprob
                else:
                    dest = self.states[self._find_nonzero((*st.history, phone))].fst_state
                    rows.append((st.fst_state, dest, phone, -logprob))
        self.perplexity = math.exp(-tot_logprob / tot_count)
        self.log.append(
            f"Created phone language model with {num} states and {len(rows)} arcs; "
            f"perplexity on training data {self.perplexity:.3f} ({tot_count} phone instances)"
        )
        start = self.states[self._find_nonzero((0,))].fst_state
        arr = np.array(rows, dtype=np.float64).reshape(-1, 4)
        lab = arr[:, 2].astype(np.int64)
        return FstArrays(
            num_states=num,
            start=start,
            src=arr[:, 0].astype(np.int64),
            dst=arr[:, 1].astype(np.int64),
            ilabel=lab,
            olabel=lab.copy(),
            weight=arr[:, 3],
            final=final,
        )


def estimate_phone_lm(sentences: Iterable[Sequence[int]], opts: LanguageModelOptions | None = None):
    """``chain-est-phone-lm``: the phone LM FST of ``sentences`` (and the estimator,
    whose ``log`` holds Kaldi's log lines)."""
    est = LanguageModelEstimator(opts)
    for s in sentences:
        est.add_counts(s)
    return est.estimate(), est
