"""Chain tools on the command line, as Kaldi's binaries and scripts take them::

    python -m paravg.chain gen-topo NONSIL SIL                 (> topo)
    python -m paravg.chain est-phone-lm [--ngram-order 4] [--num-extra-lm-states 1000]
                                        [--no-prune-ngram-order 3] PHONES.txt PHONE_LM.fst
    python -m paravg.chain make-den-fst [--tree TREE] TOPO PHONE_LM.fst DEN.fst NORMALIZATION.fst
    python -m paravg.chain info FST [--num-pdfs N]

* ``gen-topo`` (``steps/nnet3/chain/gen_topo.py``): colon-separated phone ids, the chain
  topology on standard output.
* ``est-phone-lm`` (``chain-est-phone-lm``): ``PHONES.txt`` holds one phone sequence per
  line, ``utt-id p1 p2 ...`` (what ``ali-to-phones ... ark,t:-`` prints); the phone LM is
  written as an OpenFst binary FST.
* ``make-den-fst`` (``chain-make-den-fst``): the den FST and the normalisation FST from the
  phone LM, the topology and the tree (a Kaldi binary tree file; without ``--tree``, a
  monophone tree over the topology's phones); the transition model is built from the tree
  and the topology as ``gmm-init-model`` / ``chain`` scripts do.
* ``info``: states, arcs, labels and, for a den FST (``--num-pdfs``), the den graph's
  initial probabilities (``chain-den-graph``'s logging).

A missing or malformed input is reported naming the file, exit status 1.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from paravg.errors import DataError


def _read_fst(path: str):
    import kaldifst

    if not Path(path).is_file():
        raise DataError(f"{path}: FST file does not exist")
    fst = kaldifst.StdVectorFst.read(path)
    if fst is None:
        raise DataError(f"{path}: cannot be read as an OpenFst VectorFst")
    return fst


def _read_phone_sequences(path: Path) -> list[list[int]]:
    if not path.is_file():
        raise DataError(f"{path}: no such phone-sequence file")
    out = []
    for n, line in enumerate(path.read_text().splitlines(), start=1):
        fields = line.split()
        if not fields:
            continue
        try:
            phones = [int(p) for p in fields[1:]]
        except ValueError:
            raise DataError(f"{path}:{n}: expected 'utt-id phone-id ...', got {line!r}") from None
        if any(p <= 0 for p in phones):
            raise DataError(f"{path}:{n}: phone ids must be > 0")
        if phones:
            out.append(phones)
    if not out:
        raise DataError(f"{path}: no phone sequences")
    return out


def _models(topo_path: Path, tree_path: str | None):
    import kaldi_hmm_gmm

    if not topo_path.is_file():
        raise DataError(f"{topo_path}: no such topology file")
    topo = kaldi_hmm_gmm.HmmTopology()
    try:
        topo.read(topo_path.read_text())
    except Exception as exc:  # the binding raises RuntimeError with Kaldi's message
        raise DataError(f"{topo_path}: the topology does not parse ({exc})") from None
    classes = list(topo.get_phone_to_num_pdf_classes())
    if tree_path is None:
        phones = [p for p in range(len(classes)) if classes[p] > 0]
        ctx_dep = kaldi_hmm_gmm.monophone_context_dependency(phones, classes)
    else:
        from paravg.gmm.tree_io import load_kaldi_tree

        try:
            ctx_dep = load_kaldi_tree(Path(tree_path))
        except (OSError, ValueError, RuntimeError) as exc:
            raise DataError(f"{tree_path}: not a Kaldi tree ({exc})") from None
    return ctx_dep, kaldi_hmm_gmm.TransitionModel(ctx_dep, topo)


def gen_topo_command(args) -> str:
    from paravg.chain.topology import chain_topo_text

    def ids(s: str) -> list[int]:
        return [int(p) for p in s.split(":") if p]

    return chain_topo_text(ids(args.nonsilence), ids(args.silence)).rstrip("\n")


def est_phone_lm_command(args) -> str:
    from paravg.chain.phone_lm import LanguageModelOptions, estimate_phone_lm

    opts = LanguageModelOptions(
        args.ngram_order, args.num_extra_lm_states, args.no_prune_ngram_order
    )
    try:
        opts.check()
    except ValueError as exc:
        raise DataError(f"est-phone-lm: {exc}") from None
    fst, est = estimate_phone_lm(_read_phone_sequences(Path(args.phones)), opts)
    fst.write(args.out)
    return "\n".join([*est.log, f"est-phone-lm: {fst.num_states} states -> {args.out}"])


def make_den_fst_command(args) -> str:
    from paravg.chain.den_fst import create_denominator_fst
    from paravg.chain.den_graph import normalization_fst

    ctx_dep, trans_model = _models(Path(args.topo), args.tree)
    den, log = create_denominator_fst(_read_fst(args.phone_lm), ctx_dep, trans_model)
    den.write(args.den)
    normalization_fst(den).write(args.normalization)
    return "\n".join(
        [*log, f"make-den-fst: {trans_model.num_pdfs} pdfs -> {args.den}, {args.normalization}"]
    )


def info_command(args) -> str:
    import numpy as np

    from paravg.chain.den_graph import initial_probs
    from paravg.chain.fst_arrays import fst_to_arrays

    a = fst_to_arrays(_read_fst(args.fst))
    lo, hi = (int(a.ilabel.min()), int(a.ilabel.max())) if a.num_arcs else (0, 0)
    lines = [
        f"num-states {a.num_states}",
        f"num-arcs {a.num_arcs}",
        f"num-final {int(np.isfinite(a.final).sum())}",
        f"acceptor {bool((a.ilabel == a.olabel).all())}",
        f"labels {lo}..{hi}",
    ]
    if args.num_pdfs:
        pdfs = a.ilabel - 1
        if a.num_arcs and (pdfs.min() < 0 or pdfs.max() >= args.num_pdfs):
            raise DataError(f"{args.fst}: labels are not pdf-id + 1 for {args.num_pdfs} pdfs")
        init = initial_probs(a)
        unseen = args.num_pdfs - len(np.unique(pdfs))
        entropy = float(-(init[init > 0] * np.log(init[init > 0])).sum())
        lines += [f"pdfs-not-seen {unseen}", f"initial-prob-entropy {entropy:.4f}"]
    return "\n".join(lines)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m paravg.chain", description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    s = sub.add_parser("gen-topo", help="the chain topology (gen_topo.py)")
    s.add_argument("nonsilence")
    s.add_argument("silence")
    s.set_defaults(func=gen_topo_command)
    s = sub.add_parser("est-phone-lm", help="chain-est-phone-lm")
    s.add_argument("--ngram-order", type=int, default=4)
    s.add_argument("--num-extra-lm-states", type=int, default=1000)
    s.add_argument("--no-prune-ngram-order", type=int, default=3)
    s.add_argument("phones")
    s.add_argument("out")
    s.set_defaults(func=est_phone_lm_command)
    s = sub.add_parser("make-den-fst", help="chain-make-den-fst")
    s.add_argument("--tree", default=None)
    s.add_argument("topo")
    s.add_argument("phone_lm")
    s.add_argument("den")
    s.add_argument("normalization")
    s.set_defaults(func=make_den_fst_command)
    s = sub.add_parser("info", help="sizes of an FST; den graph figures with --num-pdfs")
    s.add_argument("fst")
    s.add_argument("--num-pdfs", type=int, default=0)
    s.set_defaults(func=info_command)
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        print(args.func(args))
    except DataError as exc:
        print(f"ERROR: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
