"""Kaldi's GMM tools on the command line, as their binaries take them. The tree tools::

    python -m paravg.gmm sum-tree-stats OUT.npz IN.npz [IN.npz ...]
    python -m paravg.gmm build-tree [--max-leaves N] [--thresh 300] [--cluster-thresh -1]
                                    [--no-round-num-leaves] LANG STATS.npz TREE
    python -m paravg.gmm tree-info TREE

* ``sum-tree-stats`` (``src/bin/sum-tree-stats.cc``): the per-job statistics of
  :func:`paravg.gmm.tree_stats.accumulate_tree_stats` (``.npz``, paravg's ``treeacc``)
  added event by event.
* ``build-tree`` runs the tree part of ``steps/train_deltas.sh`` from a lang dir
  (``phones/sets.int``, ``phones/roots.int``, ``phones/extra_questions.int`` if present,
  ``topo``): ``cluster-phones`` on pdf-class 1, the extra questions appended,
  ``compile-questions``, ``build-tree``; the tree is written in Kaldi's binary format (what
  ``tree-info``, ``gmm-init-model`` and vosk's ``tree`` read). The context window (N, P)
  is the one the statistics were gathered with.
* ``tree-info`` (``src/bin/tree-info.cc``): ``num-pdfs``, ``context-width``,
  ``central-position`` of a tree file, read through kaldi-hmm-gmm (so a tree it cannot
  load fails here).

The training steps (``make-lang``, ``feats``, ``init-mono``, ``align-equal``, ``acc-stats``,
``est``, ``align``, ``acc-tree-stats``, ``init-model``, ``convert-ali``, ``ali-to-pdf``,
``ali-to-phones``, ``train-mono``, ``train-deltas``) are in :mod:`paravg.gmm.cli_train`.

A missing or malformed input is reported naming the file, exit status 1.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from paravg.errors import DataError
from paravg.gmm.cli_train import add_commands
from paravg.gmm.train_deltas import grow_tree
from paravg.gmm.tree_io import load_kaldi_tree, write_tree
from paravg.gmm.tree_stats import TreeStats, sum_tree_stats


def _load_stats(path: Path) -> TreeStats:
    try:
        return TreeStats.load(path)
    except FileNotFoundError:
        raise DataError(f"{path}: no such tree statistics file") from None
    except (KeyError, ValueError, OSError) as exc:
        raise DataError(f"{path}: not tree statistics written by paravg ({exc})") from None


def sum_stats_command(args) -> str:
    total = sum_tree_stats([_load_stats(Path(p)) for p in args.inputs])
    total.save(Path(args.output))
    return f"sum-tree-stats: {len(total)} events, {total.count.sum():.0f} frames -> {args.output}"


def build_tree_command(args) -> str:
    stats = _load_stats(Path(args.stats))
    built = grow_tree(
        stats,
        args.lang,
        max_leaves=args.max_leaves,
        thresh=args.thresh,
        cluster_thresh=args.cluster_thresh,
        round_num_leaves=args.round_num_leaves,
    )
    write_tree(Path(args.tree), built.tree, stats.context_width, stats.central_position)
    return (
        f"build-tree: {built.num_leaves} leaves ({built.num_removed} merged by clustering at "
        f"{built.cluster_thresh:.1f}), likelihood gain {built.split_gain:.1f} over "
        f"{built.num_frames:.0f} frames -> {args.tree}"
    )


def tree_info_command(args) -> str:
    try:
        ctx = load_kaldi_tree(Path(args.tree))
    except FileNotFoundError:
        raise DataError(f"{args.tree}: no such tree file") from None
    except (ValueError, RuntimeError) as exc:
        raise DataError(f"{args.tree}: not a tree kaldi-hmm-gmm loads ({exc})") from None
    return (
        f"num-pdfs {ctx.num_pdfs}\ncontext-width {ctx.context_width}\n"
        f"central-position {ctx.central_position}"
    )


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="python -m paravg.gmm", description=__doc__.split("\n")[0])
    commands = top.add_subparsers(dest="command", required=True)
    p = commands.add_parser("sum-tree-stats", help="add several jobs' tree statistics")
    p.add_argument("output")
    p.add_argument("inputs", nargs="+")
    p.set_defaults(run=sum_stats_command)
    p = commands.add_parser("build-tree", help="grow a context-dependent tree (train_deltas.sh)")
    p.add_argument("--max-leaves", type=int, default=0, help="0: no limit (Kaldi's default)")
    p.add_argument("--thresh", type=float, default=300.0)
    p.add_argument("--cluster-thresh", type=float, default=-1.0)
    p.add_argument("--no-round-num-leaves", dest="round_num_leaves", action="store_false")
    p.add_argument("lang")
    p.add_argument("stats")
    p.add_argument("tree")
    p.set_defaults(run=build_tree_command)
    p = commands.add_parser("tree-info", help="num-pdfs, context width, central position")
    p.add_argument("tree")
    p.set_defaults(run=tree_info_command)
    add_commands(commands)
    return top


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        print(args.run(args))
    except DataError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except FileNotFoundError as exc:  # an input of a step (lang, data dir, model) is missing
        print(f"error: {exc.filename}: no such file", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
