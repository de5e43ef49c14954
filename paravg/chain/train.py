"""Chain training on paravg's egs: Kaldi's ``nnet3-chain-train`` / ``nnet3-chain-compute-prob``
minibatch (``src/nnet3/nnet-chain-training.cc``, ``nnet-chain-diagnostics.cc``).

A chain eg is a row of an egs archive (``F`` input frames with the model's context) and
the same row of its :class:`~paravg.chain.egs.SupervisionTable` (``P.chain.*.npy``;
:mod:`paravg.chain.prepare`). A minibatch is ``B`` egs with supervision
(``nnet3-chain-merge-egs``); the model gives ``output`` (no softmax) and ``output-xent``
(log-softmax) at eg frames 0, f, 2f, … (``T = ⌈F / f⌉``), and per minibatch

    maximised = objf + l2_term + xent_regularize · Σ γ_num · output-xent

(:func:`paravg.chain.objective.chain_objective` with the leaky HMM, the out-of-range
penalty; :func:`paravg.chain.objective.xent_objective`), as ``NnetChainTrainer``'s
``ProcessOutputs`` adds both outputs' derivatives (Kaldi scales output-xent's by
``xent_regularize``). The update of the parameters is the cross-entropy job's
(:mod:`paravg.train_job`: NG-SGD, max-change, l2, batch-norm, orthonormal constraint).

Options (``model.chain``, absent keys :data:`CHAIN_DEFAULTS`, the values of Kaldi's chain
recipes: ``--chain.leaky-hmm-coefficient 0.1``, ``--chain.xent-regularize 0.1``,
``--chain.l2-regularize 0.0``, out-of-range 0.01, tolerances 5).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from paravg.chain.den_graph import DenominatorGraph
from paravg.chain.egs import SupervisionTable, output_frames
from paravg.chain.objective import ChainTrainingOptions, chain_objective, xent_objective
from paravg.chain.supervision import SupervisionOptions

CHAIN_DEFAULTS = {
    "leaky_hmm_coefficient": 0.1,
    "xent_regularize": 0.1,
    "l2_regularize": 0.0,
    "out_of_range_regularize": 0.01,
    "left_tolerance": 5,
    "right_tolerance": 5,
}


def chain_options(model_cfg: dict) -> tuple[ChainTrainingOptions, SupervisionOptions]:
    """The training and supervision options of a chain model config."""
    c = {**CHAIN_DEFAULTS, **(model_cfg.get("chain") or {})}
    train = ChainTrainingOptions(
        l2_regularize=float(c["l2_regularize"]),
        out_of_range_regularize=float(c["out_of_range_regularize"]),
        leaky_hmm_coefficient=float(c["leaky_hmm_coefficient"]),
        xent_regularize=float(c["xent_regularize"]),
    )
    sup = SupervisionOptions(
        int(c["left_tolerance"]),
        int(c["right_tolerance"]),
        int(model_cfg.get("frame_subsampling_factor", 1)),
    )
    return train, sup


def chain_dir_of(archive_prefix: str | os.PathLike) -> Path:
    """The run's chain setup (:func:`paravg.chain.prepare.prepare_chain`): ``chain/`` in
    the egs directory the archive lies in."""
    return Path(archive_prefix).parent / "chain"


@dataclass
class ChainMinibatch:
    """``feats`` (B, left + F + right, D), ``ivectors`` (B, dim) or None, ``rows``: the
    egs' rows in the archive and its supervision table."""

    feats: torch.Tensor
    ivectors: torch.Tensor | None
    rows: np.ndarray


def frame_shift_offset(frame_shift: int, frame_subsampling_factor: int) -> int:
    """How far a job's ``--frame-shift`` s moves an eg's input window against its
    supervision: ``ShiftChainExampleTimes`` (``nnet3/nnet-chain-example.cc``) adds s to the
    input's times and S = f · ⌊0.5 + s / f⌋ to the output's, so output time u reads the
    input that was at u + (S − s): with f = 3, shifts 0, 1, 2 read the window 0, 1 frame
    earlier, 1 frame later (the egs carry ``f // 2`` extra frames each side for it)."""
    f = int(frame_subsampling_factor)
    return f * int(np.floor(0.5 + frame_shift / f)) - int(frame_shift)


def chain_minibatches(
    archive,
    table: SupervisionTable,
    left_context: int,
    right_context: int,
    sizes: list[int],
    order: np.ndarray | None = None,
    offset: int = 0,
) -> Iterator[ChainMinibatch]:
    """Minibatches of the egs with supervision, in ``order`` (default: archive order),
    of the successive ``sizes`` (``nnet3-chain-merge-egs``: :meth:`MinibatchRule.sizes`,
    the egs beyond their sum dropped), each eg's window cut to the model's context and
    moved by ``offset`` frames (:func:`frame_shift_offset`)."""
    if table.num_rows != archive.num_egs:
        raise ValueError(
            f"{archive.prefix}: {archive.num_egs} egs but {table.num_rows} supervisions"
        )
    lo = archive.left_context - left_context + offset
    hi = archive.left_context + archive.frames_per_eg + right_context + offset
    if (
        left_context < 0
        or lo < 0
        or hi > archive.left_context + archive.frames_per_eg + (archive.right_context)
    ):
        raise ValueError(
            f"{archive.prefix}: the model's context ({left_context}, {right_context}) "
            f"moved by {offset} frames exceeds the egs' ({archive.left_context}, "
            f"{archive.right_context})"
        )
    order = np.arange(archive.num_egs) if order is None else np.asarray(order)
    rows = order[table.has_supervision()[order]]
    start = 0
    for size in sizes:
        if start + size > len(rows):
            return
        index = np.sort(rows[start : start + size])  # memory-map order
        start += size
        feats = torch.from_numpy(np.asarray(archive.feats[index, lo:hi], dtype=np.float32))
        ivec = None
        if archive.ivectors is not None:
            ivec = torch.from_numpy(np.asarray(archive.ivectors[index], dtype=np.float32))
        yield ChainMinibatch(feats, ivec, index)


def fixed_sizes(num_egs: int, size: int) -> list[int]:
    """Minibatches of ``size`` and the rest (diagnostics read every eg)."""
    return [size] * (num_egs // size) + ([num_egs % size] if num_egs % size else [])


@dataclass
class ChainStats:
    """Sums over minibatches: ``objf`` (chain, incl. nothing of l2), ``l2``, ``xent``
    (Σ γ_num · output-xent), ``weight`` (sequences × frames)."""

    objf: float = 0.0
    l2: float = 0.0
    xent: float = 0.0
    weight: float = 0.0
    failed: int = 0
    per_minibatch: list[float] = field(default_factory=list)

    def as_dict(self) -> dict:
        w = self.weight or 1.0
        return {
            "chain_objf": self.objf / w,
            "chain_l2": self.l2 / w,
            "xent_objf": self.xent / w,
            "frames": self.weight,
            "failed_minibatches": self.failed,
        }


class ChainComputer:
    """The chain objective of a model's minibatches: the den graph and the archive's
    supervision table, loaded once per job."""

    def __init__(self, archive, model_cfg: dict, num_pdfs: int, device=None) -> None:
        from paravg.chain.prepare import load_chain

        self.opts, self.sup_opts = chain_options(model_cfg)
        setup = load_chain(chain_dir_of(archive.prefix))
        if setup.num_pdfs != num_pdfs:
            raise ValueError(
                f"the chain setup has {setup.num_pdfs} pdfs, the model {num_pdfs} outputs"
            )
        self.num_pdfs = num_pdfs
        self.den = DenominatorGraph.from_fst(setup.den_fst, num_pdfs).to(device)
        self.table = SupervisionTable.load(archive.prefix)
        self.archive = archive
        self.device = device
        self.stride = self.sup_opts.frame_subsampling_factor
        frames = output_frames(archive.frames_per_eg, self.stride)
        has = self.table.frames[self.table.has_supervision()]
        if len(has) and np.any(has != frames):
            raise ValueError(f"{archive.prefix}: supervision lengths differ from {frames}")

    @property
    def num_supervised(self) -> int:
        """The archive's egs with supervision (the others are skipped, as
        ``nnet3-chain-get-egs`` skips utterances the den graph does not allow)."""
        return int(self.table.has_supervision().sum())

    def minibatches(self, model, sizes: list[int], order=None, frame_shift: int = 0):
        """:func:`chain_minibatches` of ``sizes`` with the job's ``frame_shift``."""
        return chain_minibatches(
            self.archive,
            self.table,
            model.left_context,
            model.right_context,
            sizes,
            order,
            frame_shift_offset(frame_shift, self.stride),
        )

    def objective(self, model, mb: ChainMinibatch, stats: ChainStats) -> torch.Tensor:
        """The loss to call ``backward()`` on (minus what is maximised); adds to ``stats``."""
        feats = mb.feats.to(self.device)
        ivec = (
            mb.ivectors.to(self.device) if (mb.ivectors is not None and model.ivector_dim) else None
        )
        y, xent_lsm = model.chain_forward(feats, ivec, self.stride)
        x = y.transpose(0, 1)  # (T, B, P): Kaldi's rows t·B + b
        num = self.table.numerator_graph(mb.rows, self.num_pdfs, x.dtype).to(self.device)
        obj = chain_objective(self.opts, self.den, num, x)
        xent = xent_objective(xent_lsm.transpose(0, 1), obj.num_post)
        stats.objf += obj.objf
        stats.l2 += obj.l2_term
        stats.xent += float(xent.detach())
        stats.weight += obj.weight
        stats.failed += int(not obj.ok)
        stats.per_minibatch.append(obj.per_frame)
        return obj.loss - self.opts.xent_regularize * xent


@torch.no_grad()
def chain_subset_stats(
    model, prefix: str | os.PathLike, minibatch_size: int = 64, batchnorm_test_mode: bool = True
) -> dict:
    """``nnet3-chain-compute-prob``: the chain and xent objectives per frame of every eg
    with supervision of the egs ``prefix`` (diagnostics; combination scores with
    ``batchnorm_test_mode`` false and dropout off, as ``nnet3-chain-combine``)."""
    from paravg.egs import EgsArchive

    archive = EgsArchive(prefix)
    comp = ChainComputer(archive, model.model_cfg, model.num_targets)
    if batchnorm_test_mode:
        model.eval()
    else:
        model.set_dropout_proportion(0.0)
        model.train()
    stats = ChainStats()
    for mb in comp.minibatches(model, fixed_sizes(comp.num_supervised, minibatch_size)):
        comp.objective(model, mb, stats)
    out = stats.as_dict()
    out["logprob"] = out["chain_objf"]  # the curves' objective (Kaldi logs the chain one)
    return out
