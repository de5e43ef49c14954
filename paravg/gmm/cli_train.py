"""The GMM training steps on the command line (``python -m paravg.gmm <step>``), one
subcommand per Kaldi binary or script, on files, so a user or a DAG stage runs each step
(per job where Kaldi splits by job):

=================  =====================================================================
``make-lang``      ``utils/prepare_lang.sh`` with the GMM topology (``gen_topo.pl 3 5``)
``feats``          ``make_mfcc.sh`` (13-dim, if the data dir has no ``feats.scp``) |
                   ``apply-cmvn`` per speaker | ``add-deltas`` -> ark + scp
``init-mono``      ``gmm-init-mono --shared-phones`` on the first ``--num-utts`` utterances
``align-equal``    ``compile-train-graphs`` + ``align-equal-compiled``
``acc-stats``      ``gmm-acc-stats-ali`` (one job) -> ``.acc``
``est``            ``gmm-sum-accs`` + ``gmm-est [--mix-up] [--power]
                   [--min-gaussian-occupancy]``
``align``          ``gmm-boost-silence`` + ``compile-train-graphs`` + ``gmm-align-compiled``
``acc-tree-stats`` ``acc-tree-stats --ci-phones=phones/context_indep.csl`` -> ``.npz``
``init-model``     ``gmm-init-model`` (+ ``gmm-mixup --mix-up``)
``convert-ali``    ``convert-ali old.mdl new.mdl tree``
``ali-to-pdf``     ``ali-to-pdf`` (text ark)
``ali-to-phones``  ``ali-to-phones [--per-frame]`` (text ark)
``frame-agreement`` the aligned phones against per-frame reference labels (e.g. the
                   demo's TTS phone timings): frames that agree, boundaries within 20 ms
``train-mono``     ``steps/train_mono.sh`` then ``align_si.sh`` (all jobs in this process)
``train-deltas``   ``steps/train_deltas.sh`` then ``align_si.sh``
=================  =====================================================================

Models are paravg's ``.mdl`` (:class:`paravg.gmm.model.GmmModel`, ``.npz``), alignments
Kaldi ark (binary ``.ark`` or text ``.txt``), features a ``feats.scp``/ark of the
``feats`` step (already normalised and with deltas).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from paravg.errors import DataError


def _model(path):
    from paravg.gmm.model import GmmModel

    try:
        return GmmModel.load(path)
    except FileNotFoundError:
        raise DataError(f"{path}: no such model file") from None
    except (KeyError, ValueError, OSError) as exc:
        raise DataError(f"{path}: not a model written by paravg.gmm ({exc})") from None


def _feats(path):
    from paravg.gmm.data import read_feats

    if not Path(path).is_file():
        raise DataError(f"{path}: no such feature table")
    return read_feats(path)


def _alis(path):
    from paravg.gmm.alignment import read_alignments

    return read_alignments(path)


def _jobs_from_data(lang, data, nj, out):
    """Features (computed once into ``out/feats.{ark,scp}``) and transcripts, split in ``nj``."""
    from paravg.gmm.align import read_transcripts
    from paravg.gmm.data import read_utt2spk, split_jobs
    from paravg.gmm.train_mono import JobData

    scp = Path(out) / "feats.scp"
    if not scp.is_file():
        feats_command(
            argparse.Namespace(data=data, ark=Path(out) / "feats.ark", scp=scp, norm_vars=False)
        )
    feats = _feats(scp)
    words = read_transcripts(lang, Path(data) / "text")
    utt2spk = read_utt2spk(Path(data) / "utt2spk")
    return [
        JobData(
            {u: feats[u] for u in us if u in feats and u in words},
            {u: words[u] for u in us if u in words},
        )
        for us in split_jobs({u: s for u, s in utt2spk.items() if u in feats}, nj)
    ]


def make_lang_command(args) -> str:
    from paravg.gmm.data import prepare_gmm_lang

    lang = prepare_gmm_lang(args.dict, args.lang, args.oov)
    return f"make-lang: {len(lang.phones)} phones, {len(lang.words)} words -> {args.lang}"


def feats_command(args) -> str:
    from paravg.gmm.data import gmm_mfcc, read_utt2spk
    from paravg.gmm.deltas import gmm_features
    from paravg.kaldi_io import write_ark_scp

    data = Path(args.data)
    raw = _feats(data / "feats.scp") if (data / "feats.scp").is_file() else gmm_mfcc(data)
    dims = {x.shape[1] for x in raw.values()}
    if dims != {13}:
        raise DataError(
            f"{data}: GMM features must be 13-dim MFCCs (conf/mfcc.conf), got {sorted(dims)}"
        )
    feats = gmm_features(raw, read_utt2spk(data / "utt2spk"), norm_vars=args.norm_vars)
    n = write_ark_scp(sorted(feats.items()), args.ark, args.scp)
    return f"feats: {n} utterances, 39 dims -> {args.scp}"


def init_mono_command(args) -> str:
    from paravg.gmm.train_mono import init_mono_model

    feats = _feats(args.feats)
    model = init_mono_model(args.lang, [feats[u] for u in list(feats)[: args.num_utts]])
    model.save(args.model)
    return f"init-mono: {model.num_pdfs} pdfs, {model.dim} dims -> {args.model}"


def align_equal_command(args) -> str:
    from paravg.gmm.align import align_equal, compile_graphs, graph_compiler, read_transcripts
    from paravg.gmm.alignment import write_alignments

    model, feats = _model(args.model), _feats(args.feats)
    words = {u: w for u, w in read_transcripts(args.lang, args.text).items() if u in feats}
    result = align_equal(
        compile_graphs(graph_compiler(model, args.lang), words),
        {u: len(x) for u, x in feats.items()},
    )
    write_alignments(args.ali, result.alignments)
    return (
        f"align-equal: {len(result.alignments)} aligned, {len(result.failed)} failed -> {args.ali}"
    )


def acc_stats_command(args) -> str:
    from paravg.gmm.train_mono import acc_job

    accs = acc_job(_model(args.model), _feats(args.feats), _alis(args.ali), args.acc)
    like = accs.tot_like / max(accs.frames, 1)
    return f"acc-stats: {accs.frames} frames, avg like {like:.3f} -> {args.acc}"


def est_command(args) -> str:
    from paravg.gmm.accumulate import EstOptions
    from paravg.gmm.train_mono import est_iteration

    model = _model(args.model)
    opts = EstOptions(
        min_gaussian_occupancy=args.min_gaussian_occupancy,
        mix_up=args.mix_up,
        power=args.power,
        srand=args.srand,
    )
    missing = [a for a in args.accs if not Path(a).is_file()]
    if missing:
        raise DataError(f"{missing[0]}: no such accumulator file")
    info = est_iteration(model, args.accs, opts, args.out)
    return (
        f"est: avg like {info['avg_like']:.3f} over {info['frames']} frames, "
        f"{info['num_gauss']} Gaussians -> {args.out}"
    )


def align_command(args) -> str:
    from paravg.gmm.align import AlignOptions, compile_graphs, graph_compiler, read_transcripts
    from paravg.gmm.train_mono import align_job, silence_phones

    model, feats = _model(args.model), _feats(args.feats)
    words = {u: w for u, w in read_transcripts(args.lang, args.text).items() if u in feats}
    graphs = compile_graphs(graph_compiler(model, args.lang), words)
    opts = AlignOptions(beam=args.beam, retry_beam=args.retry_beam, careful=args.careful)
    result = align_job(
        model, graphs, feats, opts, silence_phones(args.lang), args.boost_silence, args.ali
    )
    return (
        f"align: {len(result.alignments)} aligned, {len(result.failed)} failed, "
        f"avg like {result.tot_like / max(result.frames, 1):.3f} -> {args.ali}"
    )


def acc_tree_stats_command(args) -> str:
    from paravg.gmm.alignment import TransitionTable, acc_tree_stats
    from paravg.gmm.train_deltas import ci_phones

    model = _model(args.model)
    stats = acc_tree_stats(
        TransitionTable.of(model.trans), _feats(args.feats), _alis(args.ali), ci_phones(args.lang),
        args.context_width, args.central_position,
    )  # fmt: skip
    stats.save(args.out)
    return f"acc-tree-stats: {len(stats)} events, {stats.count.sum():.0f} frames -> {args.out}"


def init_model_command(args) -> str:
    from paravg.gmm.build_tree import map_stats
    from paravg.gmm.model import init_model, mixup
    from paravg.gmm.tree_io import read_tree
    from paravg.gmm.tree_stats import TreeStats

    tree = read_tree(args.tree)
    stats = TreeStats.load(args.stats)
    model, occs = init_model(
        (Path(args.lang) / "topo").read_text(), tree, stats, map_stats(stats, tree[0])
    )
    if args.mix_up:
        mixup(model, occs, args.mix_up)
    model.save(args.model)
    return f"init-model: {model.num_pdfs} pdfs, {model.num_gauss} Gaussians -> {args.model}"


def convert_ali_command(args) -> str:
    from paravg.gmm.alignment import TransitionTable, convert_alignment, write_alignments

    old, new = _model(args.old), _model(args.new)
    old_t, new_t = TransitionTable.of(old.trans), TransitionTable.of(new.trans)
    alis = {u: convert_alignment(old_t, new_t, new.ctx, a) for u, a in _alis(args.ali_in).items()}
    write_alignments(args.ali_out, alis)
    return f"convert-ali: {len(alis)} alignments -> {args.ali_out}"


def ali_to_pdf_command(args) -> str:
    from paravg.gmm.alignment import TransitionTable, ali_to_pdf, write_alignments

    table = TransitionTable.of(_model(args.model).trans)
    alis = _alis(args.ali)
    write_alignments(args.out, {u: ali_to_pdf(table, a) for u, a in alis.items()})
    return f"ali-to-pdf: {len(alis)} utterances -> {args.out}"


def ali_to_phones_command(args) -> str:
    from paravg.gmm.alignment import TransitionTable, ali_to_phones, write_alignments

    table = TransitionTable.of(_model(args.model).trans)
    alis = _alis(args.ali)
    write_alignments(
        args.out, {u: ali_to_phones(table, a, args.per_frame) for u, a in alis.items()}
    )
    return f"ali-to-phones: {len(alis)} utterances -> {args.out}"


def frame_agreement_command(args) -> str:
    import numpy as np

    from paravg.gmm.alignment import (
        TransitionTable,
        ali_to_phones,
        boundary_agreement,
        frame_agreement,
    )
    from paravg.graph.lang import base_phone, read_symbol_table
    from paravg.kaldi_io import iter_int_vectors

    table = TransitionTable.of(_model(args.model).trans)
    ours = read_symbol_table(Path(args.lang) / "phones.txt")
    ref_ids = read_symbol_table(args.ref_phones)
    phone_map = np.full(max(ours.values()) + 1, -1)
    for name, i in ours.items():
        phone_map[i] = ref_ids.get(base_phone(name), -1)
    per_frame = {}
    for path in args.alis:
        per_frame.update(
            {u: ali_to_phones(table, a, per_frame=True) for u, a in _alis(path).items()}
        )
    reference = {key: vec for key, vec, _place in iter_int_vectors(args.ref)}
    frames = frame_agreement(per_frame, reference, phone_map)
    bounds = boundary_agreement(per_frame, reference, phone_map)
    missing = sum(u not in per_frame for u in reference)
    return (
        f"frame-agreement: {100 * frames:.1f}% of frames, {100 * bounds:.1f}% of reference "
        f"boundaries within 20 ms ({len(reference) - missing} utterances, {missing} not aligned)"
    )


def train_mono_command(args) -> str:
    from paravg.gmm.model import GmmModel
    from paravg.gmm.train_mono import MonoOptions, align_si, train_mono

    jobs = _jobs_from_data(args.lang, args.data, args.nj, args.exp)
    opts = MonoOptions(
        num_iters=args.num_iters,
        max_iter_inc=min(args.max_iter_inc, args.num_iters),
        totgauss=args.totgauss,
        boost_silence=args.boost_silence,
    )
    log = train_mono(args.lang, jobs, args.exp, opts)
    ali = align_si(
        GmmModel.load(Path(args.exp) / "final.mdl"), args.lang, jobs, args.exp, args.boost_silence
    )
    first, last = log["iterations"][0]["avg_like"], log["iterations"][-1]["avg_like"]
    return (
        f"train-mono: {log['num_pdfs']} pdfs, {log['num_gauss']} Gaussians, avg like per frame "
        f"{first:.3f} -> {last:.3f}; align_si: {ali['aligned']} aligned, "
        f"{len(ali['failed'])} failed"
    )


def train_deltas_command(args) -> str:
    from paravg.gmm.model import GmmModel
    from paravg.gmm.train_deltas import DeltasOptions, train_deltas
    from paravg.gmm.train_mono import align_si

    jobs = _jobs_from_data(args.lang, args.data, args.nj, args.exp)
    iters = [int(x) for x in args.realign_iters.split()]
    opts = DeltasOptions(
        num_leaves=args.num_leaves,
        tot_gauss=args.tot_gauss,
        num_iters=args.num_iters,
        max_iter_inc=min(args.max_iter_inc, args.num_iters),
        realign_iters=iters,
        boost_silence=args.boost_silence,
    )
    log = train_deltas(args.lang, jobs, args.ali_dir, args.exp, opts)
    ali = align_si(
        GmmModel.load(Path(args.exp) / "final.mdl"), args.lang, jobs, args.exp, args.boost_silence
    )
    return (
        f"train-deltas: {log['num_leaves']} leaves, {log['num_gauss']} Gaussians, avg like per "
        f"frame {log['iterations'][-1]['avg_like']:.3f}; align_si: {ali['aligned']} aligned, "
        f"{len(ali['failed'])} failed"
    )


def add_commands(commands) -> None:
    """Register the training subcommands on the ``python -m paravg.gmm`` parser."""
    p = commands.add_parser("make-lang", help="lang dir with the GMM topology (prepare_lang.sh)")
    p.add_argument("--oov", default="<unk>")
    p.add_argument("dict")
    p.add_argument("lang")
    p.set_defaults(run=make_lang_command)

    p = commands.add_parser("feats", help="13-dim MFCC, per-speaker CMVN, deltas -> ark + scp")
    p.add_argument("--norm-vars", action="store_true")
    p.add_argument("data")
    p.add_argument("ark")
    p.add_argument("scp")
    p.set_defaults(run=feats_command)

    p = commands.add_parser("init-mono", help="gmm-init-mono")
    p.add_argument("--num-utts", type=int, default=10)
    for name in ("lang", "feats", "model"):
        p.add_argument(name)
    p.set_defaults(run=init_mono_command)

    p = commands.add_parser("align-equal", help="compile-train-graphs + align-equal-compiled")
    for name in ("lang", "model", "feats", "text", "ali"):
        p.add_argument(name)
    p.set_defaults(run=align_equal_command)

    p = commands.add_parser("acc-stats", help="gmm-acc-stats-ali (one job)")
    for name in ("model", "feats", "ali", "acc"):
        p.add_argument(name)
    p.set_defaults(run=acc_stats_command)

    p = commands.add_parser("est", help="gmm-sum-accs + gmm-est")
    p.add_argument("--mix-up", type=int, default=0)
    p.add_argument("--power", type=float, default=0.2)
    p.add_argument("--min-gaussian-occupancy", type=float, default=10.0)
    p.add_argument("--srand", type=int, default=0, help="seed of mixup's perturbations")
    p.add_argument("model")
    p.add_argument("out")
    p.add_argument("accs", nargs="+")
    p.set_defaults(run=est_command)

    p = commands.add_parser("align", help="gmm-boost-silence + gmm-align-compiled")
    p.add_argument("--beam", type=float, default=10.0)
    p.add_argument("--retry-beam", type=float, default=40.0)
    p.add_argument("--careful", action="store_true")
    p.add_argument("--boost-silence", type=float, default=1.0)
    for name in ("lang", "model", "feats", "text", "ali"):
        p.add_argument(name)
    p.set_defaults(run=align_command)

    p = commands.add_parser("acc-tree-stats", help="acc-tree-stats (one job)")
    p.add_argument("--context-width", type=int, default=3)
    p.add_argument("--central-position", type=int, default=1)
    for name in ("lang", "model", "feats", "ali", "out"):
        p.add_argument(name)
    p.set_defaults(run=acc_tree_stats_command)

    p = commands.add_parser("init-model", help="gmm-init-model (+ gmm-mixup)")
    p.add_argument("--mix-up", type=int, default=0)
    for name in ("lang", "tree", "stats", "model"):
        p.add_argument(name)
    p.set_defaults(run=init_model_command)

    p = commands.add_parser("convert-ali", help="convert-ali to a new model's tree")
    for name in ("old", "new", "ali_in", "ali_out"):
        p.add_argument(name)
    p.set_defaults(run=convert_ali_command)

    p = commands.add_parser("ali-to-pdf", help="ali-to-pdf")
    for name in ("model", "ali", "out"):
        p.add_argument(name)
    p.set_defaults(run=ali_to_pdf_command)

    p = commands.add_parser("ali-to-phones", help="ali-to-phones [--per-frame]")
    p.add_argument("--per-frame", action="store_true")
    for name in ("model", "ali", "out"):
        p.add_argument(name)
    p.set_defaults(run=ali_to_phones_command)

    p = commands.add_parser("frame-agreement", help="aligned phones against reference labels")
    for name in ("lang", "model", "ref", "ref_phones"):
        p.add_argument(name)
    p.add_argument("alis", nargs="+")
    p.set_defaults(run=frame_agreement_command)

    p = commands.add_parser("train-mono", help="steps/train_mono.sh + align_si.sh")
    p.add_argument("--nj", type=int, default=4)
    p.add_argument("--num-iters", type=int, default=40)
    p.add_argument("--max-iter-inc", type=int, default=30)
    p.add_argument("--totgauss", type=int, default=1000)
    p.add_argument("--boost-silence", type=float, default=1.25)
    for name in ("data", "lang", "exp"):
        p.add_argument(name)
    p.set_defaults(run=train_mono_command)

    p = commands.add_parser("train-deltas", help="steps/train_deltas.sh + align_si.sh")
    p.add_argument("--nj", type=int, default=4)
    p.add_argument("--num-iters", type=int, default=35)
    p.add_argument("--max-iter-inc", type=int, default=25)
    p.add_argument("--realign-iters", default="10 20 30")
    p.add_argument("--boost-silence", type=float, default=1.25)
    for name in ("num_leaves", "tot_gauss"):
        p.add_argument(name, type=int)
    for name in ("data", "lang", "ali_dir", "exp"):
        p.add_argument(name)
    p.set_defaults(run=train_deltas_command)
