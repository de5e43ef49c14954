"""A GMM-HMM acoustic model (Kaldi's ``final.mdl``: a TransitionModel + an AmDiagGmm), its
file, and the ways Kaldi creates one: ``gmm-init-mono``, ``gmm-init-model``, ``gmm-mixup``,
``gmm-boost-silence``; plus the recipe topology of ``utils/gen_topo.pl``.

The model lives in memory as kaldi-hmm-gmm objects (``TransitionModel`` on a
``ContextDependency`` and ``HmmTopology``; ``AmDiagGmm`` of one ``DiagGmm`` per pdf). Each
``DiagGmm`` of M Gaussians holds weights ``w_m``, means ``μ_m`` and diagonal variances
``σ²_m``; a frame's log-likelihood is ``log Σ_m w_m N(x; μ_m, σ²_m)``.

:class:`GmmModel` is saved as ``.npz`` (paravg's ``.mdl``): the topology text, the tree in
Kaldi binary (:mod:`paravg.gmm.tree_io`), the transition log-probabilities and every pdf's
weights, means and variances; :meth:`GmmModel.load` rebuilds the kaldi-hmm-gmm objects.

* :func:`init_mono` (``src/gmmbin/gmm-init-mono.cc``): a shared monophone tree over
  ``phones/sets.int`` (``--shared-phones``), every pdf one Gaussian with the global mean
  ``m = Σx/T`` and variance ``Σx²/T - m²`` of a feature subset (train_mono.sh: 10 utts).
* :func:`init_model` (``gmm-init-model.cc: InitAmGmm``): one Gaussian per tree leaf from
  the tree statistics pooled per leaf, variance floored at ``--var-floor 0.01``; a leaf
  with no statistics gets the pooled Gaussian of all. Returns the occupancies (``--write-occs``).
* :func:`mixup` (``gmm-mixup``, ``AmDiagGmm::SplitByCount``): Gaussians allocated to pdfs
  by ``occ^power`` up to ``--mix-up`` in all (:func:`split_targets`), each split of the
  heaviest component with means perturbed by ``perturb_factor`` standard deviations
  (:func:`split_gmm`), from a seeded generator.
* :func:`boost_silence` (``gmm-boost-silence``): the weights of the silence phones' pdfs
  multiplied by ``boost`` (not renormalised: silence gets ``log boost`` more likelihood).
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from paravg.gmm.tree_io import context_dependency_bytes, kaldi_context_dependency

DEFAULT_VAR_FLOOR = 0.01  # gmm-init-model --var-floor


def gen_topo(
    nonsil_phones: Sequence[int],
    sil_phones: Sequence[int],
    num_nonsil_states: int = 3,
    num_sil_states: int = 5,
) -> str:
    """``utils/gen_topo.pl``: left-to-right ``num_nonsil_states`` states (self-loop 0.75)
    for non-silence phones; silence: state 0 goes to states ``0..S-2``, the middle states
    to ``1..S-1``, each with probability ``1/(S-1)``, the last emitting state loops 0.75."""
    lines = ["<Topology>", "<TopologyEntry>", "<ForPhones>"]
    lines += [" ".join(map(str, nonsil_phones)), "</ForPhones>"]
    for s in range(num_nonsil_states):
        lines.append(
            f"<State> {s} <PdfClass> {s} <Transition> {s} 0.75 <Transition> {s + 1} 0.25 </State>"
        )
    lines += [f"<State> {num_nonsil_states} </State>", "</TopologyEntry>"]
    lines += ["<TopologyEntry>", "<ForPhones>", " ".join(map(str, sil_phones)), "</ForPhones>"]
    s_count = num_sil_states
    if s_count > 1:
        p = f"{1.0 / (s_count - 1):g}"
        lines.append("<State> 0 <PdfClass> 0 " + "".join(
            f"<Transition> {n} {p} " for n in range(s_count - 1)) + "</State>")  # fmt: skip
        for s in range(1, s_count - 1):
            lines.append(f"<State> {s} <PdfClass> {s} " + "".join(
                f"<Transition> {n} {p} " for n in range(1, s_count)) + "</State>")  # fmt: skip
        last = s_count - 1
        lines.append(f"<State> {last} <PdfClass> {last} <Transition> {last} 0.75 "
                     f"<Transition> {s_count} 0.25 </State>")  # fmt: skip
    else:
        lines.append("<State> 0 <PdfClass> 0 <Transition> 0 0.75 <Transition> 1 0.25 </State>")
    lines += [f"<State> {max(s_count, 1)} </State>", "</TopologyEntry>", "</Topology>"]
    return "\n".join(lines) + "\n"


def read_topo(topo_text: str):
    """kaldi-hmm-gmm ``HmmTopology`` from Kaldi's text ``topo``."""
    import kaldi_hmm_gmm

    topo = kaldi_hmm_gmm.HmmTopology()
    topo.read(topo_text)
    return topo


def make_diag_gmm(weights: np.ndarray, means: np.ndarray, variances: np.ndarray):
    """A ``kaldi_hmm_gmm.DiagGmm`` (gconsts computed) from weights (M,), means and
    variances (M, D)."""
    import kaldi_hmm_gmm

    means = np.asarray(means, dtype=np.float32)
    gmm = kaldi_hmm_gmm.DiagGmm(nmix=means.shape[0], dim=means.shape[1])
    gmm.set_weights(np.asarray(weights, dtype=np.float32))
    gmm.set_means(means)
    gmm.set_invvars((1.0 / np.asarray(variances, dtype=np.float64)).astype(np.float32))
    gmm.compute_gconsts()
    return gmm


@dataclass
class GmmModel:
    """``final.mdl`` in memory: topology text, tree bytes (Kaldi binary, no ``\\0B``),
    the kaldi-hmm-gmm ``TransitionModel`` and ``AmDiagGmm`` (and the tree object)."""

    topo_text: str
    tree_bytes: bytes
    trans: object
    am: object
    ctx: object

    @classmethod
    def create(cls, topo_text: str, tree_bytes: bytes, pdfs: Iterable) -> GmmModel:
        """A model with a fresh transition model (the topology's probabilities) and the
        given ``DiagGmm`` per pdf."""
        import kaldi_hmm_gmm

        ctx = kaldi_context_dependency(tree_bytes)
        trans = kaldi_hmm_gmm.TransitionModel(ctx, read_topo(topo_text))
        am = kaldi_hmm_gmm.AmDiagGmm()
        for gmm in pdfs:
            am.add_pdf(gmm)
        if am.num_pdfs != trans.num_pdfs:
            raise ValueError(f"{am.num_pdfs} GMMs for a tree of {trans.num_pdfs} pdfs")
        return cls(topo_text, tree_bytes, trans, am, ctx)

    @property
    def num_pdfs(self) -> int:
        return self.am.num_pdfs

    @property
    def num_gauss(self) -> int:
        return self.am.num_gauss

    @property
    def dim(self) -> int:
        return self.am.dim

    def pdf_params(self, pdf: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(weights (M,), means (M, D), variances (M, D)) of one pdf, float64."""
        gmm = self.am.get_pdf(pdf)
        return (np.asarray(gmm.weights, np.float64), np.asarray(gmm.means, np.float64),
                np.asarray(gmm.vars, np.float64))  # fmt: skip

    def set_pdfs(self, pdfs: Iterable) -> None:
        """Replace every pdf's ``DiagGmm`` (same number of pdfs)."""
        import kaldi_hmm_gmm

        am = kaldi_hmm_gmm.AmDiagGmm()
        for gmm in pdfs:
            am.add_pdf(gmm)
        if am.num_pdfs != self.num_pdfs:
            raise ValueError(f"{am.num_pdfs} GMMs for a model of {self.num_pdfs} pdfs")
        self.am = am

    def set_log_probs(self, log_probs: np.ndarray, non_self_loop: np.ndarray) -> None:
        """Replace the transition log-probabilities (``TransitionModel`` pickled state)."""
        import kaldi_hmm_gmm

        state = self.trans.__getstate__()
        trans = kaldi_hmm_gmm.TransitionModel.__new__(kaldi_hmm_gmm.TransitionModel)
        trans.__setstate__((*state[:6], [float(x) for x in log_probs],
                            [float(x) for x in non_self_loop]))  # fmt: skip
        self.trans = trans

    def copy(self) -> GmmModel:
        import kaldi_hmm_gmm

        am = kaldi_hmm_gmm.AmDiagGmm()
        am.copy_from_am_diag_gmm(self.am)
        out = GmmModel(self.topo_text, self.tree_bytes, self.trans, am, self.ctx)
        state = self.trans.__getstate__()
        out.set_log_probs(state[6], state[7])
        return out

    def save(self, path: str | Path) -> None:
        """Write the model as ``.npz`` (atomically)."""
        params = [self.pdf_params(p) for p in range(self.num_pdfs)]
        state = self.trans.__getstate__()
        path = Path(path)
        tmp = path.with_name(path.name + ".tmp.npz")
        np.savez(
            tmp, topo=np.array(self.topo_text), tree=np.frombuffer(self.tree_bytes, np.uint8),
            log_probs=np.asarray(state[6]), non_self_loop_log_probs=np.asarray(state[7]),
            num_gauss=np.array([len(w) for w, _, _ in params], np.int64),
            weights=np.concatenate([w for w, _, _ in params]),
            means=np.concatenate([m for _, m, _ in params]),
            variances=np.concatenate([v for _, _, v in params]),
        )  # fmt: skip
        tmp.replace(path)

    @classmethod
    def load(cls, path: str | Path) -> GmmModel:
        with np.load(path) as z:
            bounds = np.concatenate([[0], np.cumsum(z["num_gauss"])])
            pdfs = [
                make_diag_gmm(z["weights"][a:b], z["means"][a:b], z["variances"][a:b])
                for a, b in itertools.pairwise(bounds)
            ]
            model = cls.create(str(z["topo"]), z["tree"].tobytes(), pdfs)
            model.set_log_probs(z["log_probs"], z["non_self_loop_log_probs"])
        return model


def init_mono(
    topo_text: str, shared_phones: Sequence[Sequence[int]], feats: Iterable[np.ndarray]
) -> GmmModel:
    """``gmm-init-mono --shared-phones``: every pdf one Gaussian of the global mean and
    variance of ``feats`` (matrices [T, D])."""
    import kaldi_hmm_gmm

    count, sums, squares = 0.0, 0.0, 0.0
    for x in feats:
        x = np.asarray(x, np.float64)
        count += len(x)
        sums = sums + x.sum(0)
        squares = squares + (x * x).sum(0)
    if count == 0:
        raise ValueError("gmm-init-mono: no features were seen")
    mean = sums / count
    var = squares / count - mean * mean
    if np.min(var) <= 0.0:
        raise ValueError("gmm-init-mono: bad variance (a feature dimension is constant)")
    topo = read_topo(topo_text)
    ctx = kaldi_hmm_gmm.monophone_context_dependency_shared(
        phone_classes=[sorted(s) for s in shared_phones],
        phone2num_pdf_classes=topo.get_phone_to_num_pdf_classes(),
    )
    tree_bytes = bytes(np.array(ctx.__getstate__()[0], np.int8).view(np.uint8))
    return GmmModel.create(
        topo_text, tree_bytes,
        (make_diag_gmm([1.0], mean[None], var[None]) for _ in range(ctx.num_pdfs)),
    )  # fmt: skip


def init_model(
    topo_text: str, tree, tree_stats, leaves: np.ndarray, var_floor: float = DEFAULT_VAR_FLOOR
):
    """``gmm-init-model``: ``tree`` (an EventMap, N, P) and the tree statistics whose event
    ``i`` falls in leaf ``leaves[i]`` (:func:`paravg.gmm.build_tree.map_stats`); one
    Gaussian per leaf. Returns (model, occupancy per pdf)."""
    event_map, width, central = tree
    tree_bytes = context_dependency_bytes(event_map, width, central)
    num_pdfs = kaldi_context_dependency(tree_bytes).num_pdfs
    leaves = np.asarray(leaves, np.int64)
    count = np.bincount(leaves, tree_stats.count, num_pdfs)
    dim = tree_stats.x_stats.shape[1]
    xs = np.zeros((num_pdfs, dim))
    x2s = np.zeros((num_pdfs, dim))
    np.add.at(xs, leaves, tree_stats.x_stats)
    np.add.at(x2s, leaves, tree_stats.x2_stats)
    empty = count <= 0
    count[empty] = tree_stats.count.sum()
    xs[empty] = tree_stats.x_stats.sum(0)
    x2s[empty] = tree_stats.x2_stats.sum(0)
    mean = xs / count[:, None]
    var = np.maximum(x2s / count[:, None] - mean * mean, var_floor)
    model = GmmModel.create(
        topo_text, tree_bytes,
        (make_diag_gmm([1.0], mean[j][None], var[j][None]) for j in range(num_pdfs)),
    )  # fmt: skip
    occs = np.bincount(leaves, tree_stats.count, num_pdfs)
    return model, occs


def split_targets(
    occs: np.ndarray, target: int, power: float = 0.2, min_count: float = 20.0
) -> list[int]:
    """``GetSplitTargets`` (``gmm/am-diag-gmm.cc``): Gaussians per pdf for ``target`` in
    all. Every pdf starts with one; the pdf with the largest ``occ^power / n`` gets the next
    one, unless ``(n + 1) · min_count >= occ`` (then it gets no more). Ties go to the lower
    pdf index (Kaldi's priority queue leaves them to the heap)."""
    occs = np.asarray(occs, np.float64)
    scores = np.power(np.maximum(occs, 0.0), power)
    counts = [1] * len(occs)
    heap = [(-scores[p] / (1 + 1e-10), p) for p in range(len(occs))]
    heapq.heapify(heap)
    total = len(occs)
    while total < target and heap:
        _key, p = heapq.heappop(heap)
        if scores[p] == 0.0:
            break
        if (counts[p] + 1) * min_count >= occs[p]:
            continue  # min-count reached: the pdf leaves the queue
        counts[p] += 1
        total += 1
        heapq.heappush(heap, (-scores[p] / (counts[p] + 1e-10), p))
    return counts


def split_gmm(
    weights, means, variances, target: int, perturb_factor: float, rng: np.random.Generator
):
    """``DiagGmm::Split``: until ``target`` components, the heaviest component (first of
    equal weights) is halved into two whose means move by ``±perturb_factor · σ · r``,
    ``r ~ N(0, I)`` (drawn from ``rng``, where Kaldi uses ``RandGauss``)."""
    weights = list(np.asarray(weights, np.float64))
    means = [np.asarray(m, np.float64) for m in means]
    variances = [np.asarray(v, np.float64) for v in variances]
    while len(weights) < target:
        k = int(np.argmax(weights))
        weights[k] /= 2.0
        step = perturb_factor * rng.standard_normal(len(means[k])) * np.sqrt(variances[k])
        weights.append(weights[k])
        variances.append(variances[k].copy())
        means.append(means[k] + step)
        means[k] = means[k] - step
    return np.array(weights), np.array(means), np.array(variances)


def mixup(model: GmmModel, occs: np.ndarray, target: int, perturb_factor: float = 0.01,
          power: float = 0.2, min_count: float = 20.0, seed: int = 0) -> None:  # fmt: skip
    """``gmm-mixup --mix-up=target`` / gmm-est's ``--mix-up`` (``AmDiagGmm::SplitByCount``),
    in place: :func:`split_targets`, then :func:`split_gmm` for every pdf below its target.
    The perturbations are drawn from ``numpy.random.default_rng(seed)`` so a rerun gives
    the same model (kaldi-hmm-gmm's own ``split_by_count`` seeds from ``random_device``)."""
    rng = np.random.default_rng(seed)
    targets = split_targets(occs, target, power, min_count)
    if all(model.am.num_gauss_in_pdf(p) >= t for p, t in enumerate(targets)):
        return
    pdfs = []
    for p, t in enumerate(targets):
        if model.am.num_gauss_in_pdf(p) < t:
            pdfs.append(make_diag_gmm(*split_gmm(*model.pdf_params(p), t, perturb_factor, rng)))
        else:
            pdfs.append(model.am.get_pdf(p))
    model.set_pdfs(pdfs)


def boost_silence(model: GmmModel, silence_phones: Sequence[int], boost: float) -> GmmModel:
    """``gmm-boost-silence --boost=boost``: a copy whose silence pdfs' weights are scaled."""
    import kaldi_hmm_gmm

    if boost == 1.0:
        return model
    _unique, pdfs = kaldi_hmm_gmm.get_pdfs_for_phones(model.trans, sorted(silence_phones))
    out = model.copy()
    for pdf in pdfs:
        gmm = out.am.get_pdf(pdf)
        gmm.set_weights(np.asarray(gmm.weights, np.float32) * np.float32(boost))
        gmm.compute_gconsts()
    return out
