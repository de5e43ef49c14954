"""Triphone training, as ``steps/train_deltas.sh <num-leaves> <tot-gauss> data lang ali exp``.

1. ``acc-tree-stats --ci-phones=phones/context_indep.csl`` per job from the alignment
   dir's model and ``ali.JOB`` (:func:`paravg.gmm.alignment.acc_tree_stats`), summed
   (``sum-tree-stats``) -> ``treeacc.npz``.
2. ``cluster-phones`` (pdf-class 1, ``phones/sets.int``) + ``phones/extra_questions.int``,
   ``compile-questions``, ``build-tree --max-leaves=num_leaves --cluster-thresh`` with
   ``phones/roots.int`` and ``topo`` (:func:`grow_tree`) -> ``tree``.
3. ``gmm-init-model`` (one Gaussian per leaf from the tree statistics, ``--write-occs``)
   and ``gmm-mixup --mix-up=num_leaves`` -> ``1.mdl``.
4. ``convert-ali`` of the alignment dir's ``ali.JOB`` to the new tree, and
   ``compile-train-graphs`` with the new tree (now with left and right context).
5. For ``x = 1 .. num_iters-1``: at ``realign_iters`` (10 20 30) ``gmm-align-compiled``
   with the ``gmm-boost-silence`` model (beam 10, retry-beam 40); ``gmm-acc-stats-ali``
   per job; ``gmm-est --mix-up=numgauss --power=0.25`` -> ``x+1.mdl``; ``numgauss``
   starts at num_leaves and grows by ``(tot_gauss - num_leaves) / max_iter_inc`` while
   ``x <= max_iter_inc``.
6. ``final.mdl``; then align_si.sh (:func:`paravg.gmm.train_mono.align_si`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from paravg.errors import DataError
from paravg.gmm.accumulate import EstOptions
from paravg.gmm.align import AlignOptions, compile_graphs, graph_compiler
from paravg.gmm.alignment import (
    TransitionTable,
    acc_tree_stats,
    convert_alignment,
    read_alignments,
    write_alignments,
)
from paravg.gmm.build_tree import BuiltTree, build_tree, map_stats, pdf_class_counts, read_roots
from paravg.gmm.model import GmmModel, init_model, mixup, read_topo
from paravg.gmm.questions import cluster_phones, compile_questions, read_int_sets
from paravg.gmm.train_mono import JobData, acc_job, align_job, est_iteration, silence_phones
from paravg.gmm.tree_io import write_tree
from paravg.gmm.tree_stats import TreeStats, sum_tree_stats
from paravg.io import write_text_atomic

LANG_FILES = ("phones/sets.int", "phones/roots.int", "topo")


@dataclass
class DeltasOptions:
    """train_deltas.sh's options and arguments (its defaults; boost-silence as the recipes)."""

    num_leaves: int = 2000
    tot_gauss: int = 10000
    num_iters: int = 35
    max_iter_inc: int = 25
    realign_iters: Sequence[int] = field(default_factory=lambda: [10, 20, 30])
    beam: float = 10.0
    retry_beam: float = 40.0
    careful: bool = False
    boost_silence: float = 1.25
    power: float = 0.25
    cluster_thresh: float = -1.0
    context_width: int = 3
    central_position: int = 1


def ci_phones(lang_dir: str | Path) -> list[int]:
    """``phones/context_indep.csl``."""
    text = (Path(lang_dir) / "phones/context_indep.csl").read_text().strip()
    return [int(x) for x in text.split(":")] if text else []


def grow_tree(
    stats: TreeStats,
    lang_dir: str | Path,
    max_leaves: int = 0,
    thresh: float = 300.0,
    cluster_thresh: float = -1.0,
    round_num_leaves: bool = True,
) -> BuiltTree:
    """cluster-phones + extra questions, compile-questions and build-tree on a lang dir."""
    lang = Path(lang_dir)
    missing = [name for name in LANG_FILES if not (lang / name).is_file()]
    if missing:
        raise DataError(f"{lang}: not a lang dir for build-tree, missing {', '.join(missing)}")
    questions = cluster_phones(stats, read_int_sets(lang / "phones/sets.int"), pdf_class_list=[1])
    extra = lang / "phones/extra_questions.int"
    if extra.is_file():
        questions += read_int_sets(extra)
    try:
        topo = read_topo((lang / "topo").read_text())
    except Exception as exc:  # the binding raises RuntimeError or its own types
        raise DataError(f"{lang / 'topo'}: the topology does not parse ({exc})") from None
    num_pdf_classes = pdf_class_counts(list(topo.get_phone_to_num_pdf_classes()))
    compiled = compile_questions(questions, stats.context_width, max(num_pdf_classes.values()))
    return build_tree(
        stats, compiled, read_roots(lang / "phones/roots.int"), num_pdf_classes,
        thresh=thresh, max_leaves=max_leaves, cluster_thresh=cluster_thresh,
        round_num_leaves=round_num_leaves,
    )  # fmt: skip


def train_deltas(lang_dir: str | Path, jobs: Sequence[JobData], ali_dir: str | Path,
                 out_dir: str | Path, opts: DeltasOptions | None = None) -> dict:  # fmt: skip
    """train_deltas.sh in one process, jobs in turn; writes ``treeacc.npz``, ``tree``,
    ``1.mdl … final.mdl``, ``ali.JOB.ark``, ``log.json`` under ``out_dir``."""
    opts = opts or DeltasOptions()
    lang, out, ali_dir = Path(lang_dir), Path(out_dir), Path(ali_dir)
    out.mkdir(parents=True, exist_ok=True)
    old = GmmModel.load(ali_dir / "final.mdl")
    old_table = TransitionTable.of(old.trans)
    old_all: dict = {}
    for ali_file in sorted(ali_dir.glob("ali.*.ark")):
        old_all.update(read_alignments(ali_file))
    old_ali = [{u: old_all[u] for u in job.feats if u in old_all} for job in jobs]
    stats = sum_tree_stats([
        acc_tree_stats(old_table, job.feats, ali, ci_phones(lang), opts.context_width,
                       opts.central_position)
        for job, ali in zip(jobs, old_ali, strict=True)
    ])  # fmt: skip
    stats.save(out / "treeacc.npz")
    built = grow_tree(stats, lang, opts.num_leaves, cluster_thresh=opts.cluster_thresh)
    tree = (built.tree, opts.context_width, opts.central_position)
    write_tree(out / "tree", *tree)
    topo_text = (lang / "topo").read_text()
    model, occs = init_model(topo_text, tree, stats, map_stats(stats, built.tree))
    mixup(model, occs, opts.num_leaves)
    model.save(out / "1.mdl")
    new_table = TransitionTable.of(model.trans)
    for j, ali in enumerate(old_ali, 1):
        converted = {
            u: convert_alignment(old_table, new_table, model.ctx, a) for u, a in ali.items()
        }
        write_alignments(out / f"ali.{j}.ark", converted)
    compiler = graph_compiler(model, lang)
    graphs = [compile_graphs(compiler, job.transcripts) for job in jobs]
    silence = silence_phones(lang)
    numgauss = opts.num_leaves
    incgauss = (opts.tot_gauss - numgauss) // max(opts.max_iter_inc, 1)
    history = []
    align_opts = AlignOptions(beam=opts.beam, retry_beam=opts.retry_beam, careful=opts.careful)
    for x in range(1, opts.num_iters):
        realign = x in opts.realign_iters
        failed: list[str] = []
        if realign:
            for j, job in enumerate(jobs, 1):
                result = align_job(model, graphs[j - 1], job.feats, align_opts, silence,
                                   opts.boost_silence, out / f"ali.{j}.ark")  # fmt: skip
                failed += result.failed
        for j, job in enumerate(jobs, 1):
            acc_job(model, job.feats, read_alignments(out / f"ali.{j}.ark"), out / f"{x}.{j}.acc")
        info = est_iteration(
            model, [out / f"{x}.{j}.acc" for j in range(1, len(jobs) + 1)],
            EstOptions(mix_up=numgauss, power=opts.power, srand=x), out / f"{x + 1}.mdl",
        )  # fmt: skip
        history.append({"iter": x, "realigned": realign, **info, "failed": failed})
        for j in range(1, len(jobs) + 1):
            (out / f"{x - 1}.{j}.acc").unlink(missing_ok=True)
        if x <= opts.max_iter_inc:
            numgauss += incgauss
    for acc in out.glob("*.acc"):  # the last iteration's (Kaldi's scripts delete them too)
        acc.unlink()
    model.save(out / "final.mdl")
    summary = {
        "options": asdict(opts), "num_leaves": built.num_leaves, "num_pdfs": model.num_pdfs,
        "num_gauss": model.num_gauss, "tree_stats_events": len(stats),
        "iterations": history, "num_jobs": len(jobs),
    }  # fmt: skip
    write_text_atomic(out / "log.json", json.dumps(summary, indent=1, default=list) + "\n")
    return summary
