"""Monophone training and alignment, as ``steps/train_mono.sh`` and ``steps/align_si.sh``.

train_mono.sh, with its option names (:class:`MonoOptions`):

1. ``gmm-init-mono --shared-phones=phones/sets.int`` on the features of the first 10
   utterances of job 1 -> ``0.mdl``; ``numgauss`` = its Gaussians (one per pdf) and
   ``incgauss = (totgauss - numgauss) / max_iter_inc``.
2. ``compile-train-graphs`` per job; ``align-equal-compiled`` | ``gmm-acc-stats-ali`` per
   job; ``gmm-est --min-gaussian-occupancy=3 --mix-up=numgauss`` -> ``1.mdl``.
3. For ``x = 1 .. num_iters-1``: at the ``realign_iters``, ``gmm-align-compiled`` with the
   ``gmm-boost-silence --boost=boost_silence`` model (beam ``initial_beam`` at x = 1, then
   ``regular_beam``; ``retry_beam``) writes ``ali.JOB``; ``gmm-acc-stats-ali`` per job
   (``x.JOB.acc``), ``gmm-sum-accs`` + ``gmm-est --mix-up=numgauss --power`` ->
   ``x+1.mdl``; ``numgauss += incgauss`` while ``x <= max_iter_inc``.
4. ``final.mdl`` = ``num_iters.mdl``.

align_si.sh (:func:`align_si`): ``gmm-align-compiled`` with the final (boosted) model,
``--beam 10 --retry-beam 40 --careful false``.

Every step is a function of files so that a DAG can run one node per step and per job:
:func:`acc_job` (fan-out: one job's accumulators to ``x.JOB.acc``), :func:`est_iteration`
(fan-in: the jobs' accumulators summed, the model updated), :func:`align_job`.
:func:`train_mono` runs them in order in one process, the jobs one after another.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from paravg.gmm.accumulate import EstOptions, GmmAccs, accumulate, estimate, sum_accs
from paravg.gmm.align import AlignOptions, align, align_equal, compile_graphs, graph_compiler
from paravg.gmm.alignment import TransitionTable, read_alignments, write_alignments
from paravg.gmm.model import GmmModel, boost_silence, init_mono
from paravg.gmm.questions import read_int_sets
from paravg.io import write_text_atomic

log = logging.getLogger(__name__)

REALIGN_ITERS = (1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 12, 14, 16, 18, 20, 23, 26, 29, 32, 35, 38)


@dataclass
class MonoOptions:
    """train_mono.sh's options (its defaults; ``boost_silence`` 1.25 as the recipes pass)."""

    num_iters: int = 40
    max_iter_inc: int = 30
    totgauss: int = 1000
    realign_iters: Sequence[int] = field(default_factory=lambda: list(REALIGN_ITERS))
    boost_silence: float = 1.25
    initial_beam: float = 6.0
    regular_beam: float = 10.0
    retry_beam: float = 40.0
    careful: bool = False
    power: float = 0.25
    num_init_utts: int = 10


def silence_phones(lang_dir: str | Path) -> list[int]:
    """``phones/optional_silence.csl`` (what gmm-boost-silence boosts)."""
    return [
        int(x)
        for x in (Path(lang_dir) / "phones/optional_silence.csl").read_text().strip().split(":")
    ]


def init_mono_model(lang_dir: str | Path, feats: Sequence[np.ndarray]) -> GmmModel:
    """Step 1: ``gmm-init-mono`` from the lang dir's ``topo`` and ``phones/sets.int``."""
    lang = Path(lang_dir)
    return init_mono((lang / "topo").read_text(), read_int_sets(lang / "phones/sets.int"), feats)


def acc_job(model: GmmModel, feats: Mapping[str, np.ndarray] | Iterable[tuple[str, np.ndarray]],
            alignments: Mapping[str, np.ndarray] | Iterable[tuple[str, np.ndarray]],
            out: str | Path | None = None,
            names: tuple[str, str] = ("features", "alignments")) -> GmmAccs:  # fmt: skip
    """``gmm-acc-stats-ali`` of one job (saved to ``out``, paravg's ``x.JOB.acc``):
    mappings, or sorted ``(utt, value)`` streams named ``names`` in errors
    (:func:`paravg.gmm.accumulate.accumulate`, per chunk of frames)."""
    accs = accumulate(model, feats, alignments, TransitionTable.of(model.trans).pdf, names)
    if out is not None:
        accs.save(out)
    return accs


def est_iteration(model: GmmModel, acc_files: Sequence[str | Path], opts: EstOptions,
                  out: str | Path | None = None) -> dict:  # fmt: skip
    """``gmm-est ... "gmm-sum-accs - x.*.acc|" x+1.mdl``: ``model`` updated in place."""
    info = estimate(model, sum_accs([GmmAccs.load(p) for p in acc_files]), opts)
    if out is not None:
        model.save(out)
    return info


def align_job(model: GmmModel, graphs: Mapping, feats: Mapping[str, np.ndarray], opts: AlignOptions,
              silence: Sequence[int], boost: float, out: str | Path | None = None):  # fmt: skip
    """``gmm-align-compiled`` of one job with the ``gmm-boost-silence`` model."""
    result = align(boost_silence(model, silence, boost), graphs, feats, opts)
    if result.failed:
        log.warning("alignment failed for %d utterances: %s", len(result.failed), result.failed[:5])
    if out is not None:
        write_alignments(out, result.alignments)
    return result


@dataclass
class JobData:
    """One job's utterances: features and transcripts (word ids)."""

    feats: dict[str, np.ndarray]
    transcripts: dict[str, list[int]]


def _subset(feats: Mapping[str, np.ndarray], n: int) -> list[np.ndarray]:
    return [feats[u] for u in list(feats)[:n]]


def train_mono(lang_dir: str | Path, jobs: Sequence[JobData], out_dir: str | Path,
               opts: MonoOptions | None = None) -> dict:  # fmt: skip
    """train_mono.sh in one process: writes ``0.mdl … final.mdl``, ``ali.JOB.ark`` and
    ``log.json`` (per iteration: average log-likelihood per frame of the E-step,
    Gaussians, alignment failures) under ``out_dir``; returns that log."""
    opts = opts or MonoOptions()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    silence = silence_phones(lang_dir)
    model = init_mono_model(lang_dir, _subset(jobs[0].feats, opts.num_init_utts))
    model.save(out / "0.mdl")
    numgauss = model.num_gauss
    incgauss = (opts.totgauss - numgauss) // max(opts.max_iter_inc, 1)
    compiler = graph_compiler(model, lang_dir)
    graphs = [compile_graphs(compiler, job.transcripts) for job in jobs]
    history: list[dict] = []
    failed: set[str] = set()
    for j, job in enumerate(jobs, 1):
        result = align_equal(graphs[j - 1], {u: len(x) for u, x in job.feats.items()})
        failed.update(result.failed)
        write_alignments(out / f"ali.{j}.ark", result.alignments)
        acc_job(model, job.feats, result.alignments, out / f"0.{j}.acc")
    info = est_iteration(model, [out / f"0.{j}.acc" for j in range(1, len(jobs) + 1)],
                         EstOptions(min_gaussian_occupancy=3, mix_up=numgauss, power=opts.power),
                         out / "1.mdl")  # fmt: skip
    history.append({"iter": 0, "realigned": True, **info, "failed": sorted(failed)})
    beam = opts.initial_beam
    for x in range(1, opts.num_iters):
        realign = x in opts.realign_iters
        failed = set()
        if realign:
            align_opts = AlignOptions(beam=beam, retry_beam=opts.retry_beam, careful=opts.careful)
            for j, job in enumerate(jobs, 1):
                result = align_job(model, graphs[j - 1], job.feats, align_opts, silence,
                                   opts.boost_silence, out / f"ali.{j}.ark")  # fmt: skip
                failed.update(result.failed)
        for j, job in enumerate(jobs, 1):
            acc_job(model, job.feats, read_alignments(out / f"ali.{j}.ark"), out / f"{x}.{j}.acc")
        info = est_iteration(
            model,
            [out / f"{x}.{j}.acc" for j in range(1, len(jobs) + 1)],
            EstOptions(mix_up=numgauss, power=opts.power, srand=x),
            out / f"{x + 1}.mdl",
        )
        history.append({"iter": x, "realigned": realign, **info, "failed": sorted(failed)})
        log.info(
            "mono iter %d: avg like %.3f, %d Gaussians", x, info["avg_like"], info["num_gauss"]
        )
        for j in range(1, len(jobs) + 1):
            (out / f"{x - 1}.{j}.acc").unlink(missing_ok=True)
        if x <= opts.max_iter_inc:
            numgauss += incgauss
        beam = opts.regular_beam
    for acc in out.glob("*.acc"):  # the last iteration's (Kaldi's scripts delete them too)
        acc.unlink()
    model.save(out / "final.mdl")
    summary = {"options": asdict(opts), "iterations": history, "num_pdfs": model.num_pdfs,
               "num_gauss": model.num_gauss, "num_jobs": len(jobs)}  # fmt: skip
    write_text_atomic(out / "log.json", json.dumps(summary, indent=1, default=list) + "\n")
    return summary


def align_si(model: GmmModel, lang_dir: str | Path, jobs: Sequence[JobData], out_dir: str | Path,
             boost: float = 1.25, opts: AlignOptions | None = None) -> dict:  # fmt: skip
    """align_si.sh: ``ali.JOB.ark`` of every job with the (boosted) model; returns the
    number aligned, failed, and the average log-likelihood per frame."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    compiler = graph_compiler(model, lang_dir)
    silence = silence_phones(lang_dir)
    done, failed, like, frames = 0, [], 0.0, 0
    for j, job in enumerate(jobs, 1):
        graphs = compile_graphs(compiler, job.transcripts)
        r = align_job(
            model, graphs, job.feats, opts or AlignOptions(), silence, boost, out / f"ali.{j}.ark"
        )
        done, failed, like, frames = (
            done + len(r.alignments),
            failed + r.failed,
            like + r.tot_like,
            frames + r.frames,
        )
    return {"aligned": done, "failed": failed, "avg_like": like / max(frames, 1)}
