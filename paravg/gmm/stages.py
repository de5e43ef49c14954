"""The GMM stages as DAG nodes: one function of files per node (``rules/gmm.smk``).

Each function is one job of a Kaldi script, as the script runs it per ``JOB`` or once
per iteration (``steps/train_mono.sh``, ``train_deltas.sh``, ``align_si.sh``); the
library does the maths (:mod:`paravg.gmm.train_mono`, :mod:`paravg.gmm.train_deltas`):

* :func:`demo_dict` / :func:`make_lang`: ``data/local/dict`` and ``prepare_lang.sh``;
* :func:`job_feats`: ``make_mfcc.sh`` + ``apply-cmvn`` + ``add-deltas`` of job ``j`` of
  ``split_data.sh``'s ``nj`` speaker-disjoint splits (CMVN is per speaker, so a job is
  self-contained);
* :func:`init_mono`, :func:`align_equal`, :func:`acc`, :func:`est`, :func:`realign`:
  ``gmm-init-mono``, ``align-equal-compiled``, ``gmm-acc-stats-ali`` (fan-out per job),
  ``gmm-sum-accs | gmm-est`` (fan-in per iteration), ``gmm-align-compiled``;
* :func:`tree_acc`, :func:`build_tree`, :func:`convert_ali`: ``acc-tree-stats`` per job,
  ``sum-tree-stats`` + ``cluster-phones`` + ``compile-questions`` + ``build-tree`` +
  ``gmm-init-model`` + ``gmm-mixup`` once, ``convert-ali`` per job;
* :func:`targets_dir`: ``ali-to-pdf`` of a set's final alignment, written with the set's
  tables as a Kaldi data dir whose ``targets.ark`` the data stage reads.

The Gaussian schedule of both scripts (:func:`mix_up_target`): ``numgauss`` starts at
``n0`` (mono: the Gaussians of ``0.mdl``, one per pdf; tri: ``num_leaves``), ``incgauss =
(totgauss − n0) // max_iter_inc``, and the estimate of iteration ``x`` mixes up to
``n0 + incgauss · clamp(x − 1, 0, max_iter_inc)``.
"""

from __future__ import annotations

import heapq
import logging
import shutil
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np

from paravg.io import write_text_atomic

log = logging.getLogger(__name__)

# the tables of a source data dir the targets dir carries (paravg.data reads these)
TABLES = ("wav.scp", "utt2spk", "text", "segments", "spk2utt", "utt2uniq", "reco2file_and_channel")


def demo_dict(text: str | Path, phone_ctm: str | Path, out_dir: str | Path) -> int:
    """The demo's ``data/local/dict``: the lexicon learnt from the training set's ``text``
    and the engines' ``phone_ctm`` (:func:`paravg.graph.lexicon.demo_lexicon`), its 39
    phones non-silence, ``sil`` and ``spn`` (``<unk>``) silence. Returns the words."""
    from paravg.corpus.phones import PHONES
    from paravg.gmm.data import write_dict_dir
    from paravg.graph.lexicon import demo_lexicon

    entries = demo_lexicon(text, phone_ctm)
    write_dict_dir(out_dir, [(e.word, e.prob, e.phones) for e in entries], PHONES[1:])
    return len(entries)


def make_lang(dict_dir: str | Path, oov: str, lang_dir: str | Path) -> str:
    """``prepare_lang.sh <dict> <oov> <tmp> <lang>`` with ``gen_topo.pl 3 5``."""
    from paravg.gmm.data import prepare_gmm_lang

    lang = prepare_gmm_lang(dict_dir, lang_dir, oov)
    return f"{len(lang.phones)} phones, {len(lang.words)} words"


def job_feats(data_dir: str | Path, nj: int, j: int, ark: str | Path, scp: str | Path) -> int:
    """Job ``j``'s 39-dim GMM features: 13 MFCCs (``conf/mfcc.conf``), per-speaker CMVN
    (means), deltas of order 2 -> ``ark``/``scp``, in utterance order. Returns the
    utterances.

    As ``make_mfcc.sh``, ``compute-cmvn-stats --spk2utt`` and ``apply-cmvn | add-deltas``
    run it, in two passes over the job's utterances, one utterance in memory: the MFCCs
    are written to ``<ark>.raw.ark`` while each speaker's CMVN statistics are summed (in
    utterance order), then read back, normalised, given their deltas and written; the
    temporary is removed."""
    from paravg.data import scan_data_dir
    from paravg.features import cmvn_stats
    from paravg.gmm.data import job_mfcc, job_rows
    from paravg.gmm.deltas import add_deltas, apply_cmvn
    from paravg.gmm.job_tables import iter_feats, join_sorted
    from paravg.kaldi_io import write_ark_scp

    scan = scan_data_dir(data_dir)
    ark = Path(ark)
    raw_ark, raw_scp = (ark.with_name(f"{ark.name}.raw.{ext}") for ext in ("ark", "scp"))
    stats: dict[str, np.ndarray] = {}

    def raw() -> Iterator[tuple[str, np.ndarray]]:
        for utt, spk, mfcc in job_mfcc(scan, nj, j):
            s = cmvn_stats(mfcc)
            stats[spk] = s if spk not in stats else stats[spk] + s
            yield utt, mfcc

    try:
        write_ark_scp(raw(), raw_ark, raw_scp)
        normalised = (
            (utt, add_deltas(apply_cmvn(mfcc, stats[spk])))
            for utt, mfcc, spk in join_sorted(
                (str(raw_scp), iter_feats(raw_scp)),
                (str(scan.utt2spk_file), ((r.utt, r.speaker) for r in job_rows(scan, nj, j))),
            )
        )
        return write_ark_scp(normalised, ark, scp)
    finally:
        raw_ark.unlink(missing_ok=True)
        raw_scp.unlink(missing_ok=True)


def _transcribed(lang_dir, feats_scp, text) -> Iterator[tuple[str, np.ndarray, list[int]]]:
    """``(utt, feats, word ids)`` of the job's utterances with a transcript, streamed."""
    from paravg.gmm.job_tables import iter_feats, iter_transcripts, join_sorted

    return join_sorted(
        (str(feats_scp), iter_feats(feats_scp)), (str(text), iter_transcripts(lang_dir, text))
    )


def init_mono(lang_dir: str | Path, feats_scp: str | Path, num_utts: int, out: str | Path):
    """``gmm-init-mono --shared-phones`` on the first ``num_utts`` utterances of job 1
    (only those are read of its ``feats.scp``)."""
    from itertools import islice

    from paravg.gmm.job_tables import iter_feats
    from paravg.gmm.train_mono import init_mono_model

    feats = [x for _utt, x in islice(iter_feats(feats_scp), num_utts)]
    model = init_mono_model(lang_dir, feats)
    model.save(out)
    return model


def align_equal(lang_dir, model_path, feats_scp, text, out) -> dict:
    """``compile-train-graphs | align-equal-compiled`` of one job (train_mono.sh's
    start), one utterance at a time."""
    from paravg.gmm import align as gmm_align
    from paravg.gmm.job_tables import AlignmentWriter
    from paravg.gmm.model import GmmModel

    model = GmmModel.load(model_path)  # held: the compiler keeps references into it
    compiler = gmm_align.graph_compiler(model, lang_dir)
    failed: list[str] = []
    with AlignmentWriter(out) as writer:
        for utt, feats, words in _transcribed(lang_dir, feats_scp, text):
            graph = compiler.compile_graph_from_text(words)
            ali = gmm_align.equal_alignment(graph, len(feats), utt)
            if ali is None:
                failed.append(utt)
            else:
                writer.write(utt, ali)
    return {"aligned": writer.count, "failed": failed}


def acc(model_path, feats_scp, ali, out) -> dict:
    """``gmm-acc-stats-ali`` of one job -> ``x.JOB.acc``: its ``feats.scp`` and ``ali.JOB``
    read one utterance at a time and merge-joined (both sorted, as Kaldi's ``ark,s,cs:``
    tables), the E-step per chunk of frames (:data:`paravg.gmm.accumulate.CHUNK_FRAMES`)."""
    from paravg.gmm.job_tables import iter_alignments, iter_feats
    from paravg.gmm.model import GmmModel
    from paravg.gmm.train_mono import acc_job

    accs = acc_job(GmmModel.load(model_path), iter_feats(feats_scp), iter_alignments(ali), out,
                   names=(str(feats_scp), str(ali)))  # fmt: skip
    return {"frames": accs.frames, "avg_like": accs.tot_like / max(accs.frames, 1)}


def mix_up_target(n0: int, totgauss: int, max_iter_inc: int, x: int) -> int:
    """The ``--mix-up`` of iteration ``x``'s ``gmm-est`` (see the module docstring)."""
    incgauss = (totgauss - n0) // max(max_iter_inc, 1)
    return n0 + incgauss * max(0, min(x - 1, max_iter_inc))


def est(model_path, acc_files: Sequence, out, *, x: int, n0, totgauss: int, max_iter_inc: int,
        power: float, first: bool) -> dict:  # fmt: skip
    """``gmm-est --mix-up --power "gmm-sum-accs - x.*.acc|" x.mdl x+1.mdl``; ``n0`` a
    number or the path of the model whose Gaussians start the schedule (mono's
    ``0.mdl``); ``first``: train_mono.sh's first estimate (``--min-gaussian-occupancy=3``,
    no ``--srand``)."""
    from paravg.gmm.accumulate import EstOptions
    from paravg.gmm.model import GmmModel
    from paravg.gmm.train_mono import est_iteration

    model = GmmModel.load(model_path)
    start = n0 if isinstance(n0, int) else GmmModel.load(n0).num_gauss
    mix_up = mix_up_target(start, totgauss, max_iter_inc, x)
    if first:
        opts = EstOptions(min_gaussian_occupancy=3, mix_up=mix_up, power=power)
    else:
        opts = EstOptions(mix_up=mix_up, power=power, srand=x)
    info = est_iteration(model, [Path(a) for a in acc_files], opts, out)
    return {"iter": x, "mix_up": mix_up, **info}


def realign(lang_dir, model_path, feats_scp, text, out, *, boost_silence: float, beam: float,
            retry_beam: float = 40.0, careful: bool = False) -> dict:  # fmt: skip
    """``compile-train-graphs | gmm-boost-silence | gmm-align-compiled`` of one job
    (train_mono.sh's and train_deltas.sh's realignments, and align_si.sh), one utterance
    at a time: its graph compiled, aligned and written before the next is read. An
    utterance that reaches no final state is left out and listed (Kaldi's warning)."""
    from paravg.gmm import align as gmm_align
    from paravg.gmm.job_tables import AlignmentWriter
    from paravg.gmm.model import GmmModel
    from paravg.gmm.model import boost_silence as boost
    from paravg.gmm.train_mono import silence_phones

    model = GmmModel.load(model_path)
    compiler = gmm_align.graph_compiler(model, lang_dir)
    opts = gmm_align.AlignOptions(beam=beam, retry_beam=retry_beam, careful=careful)
    aligner = gmm_align.ViterbiAligner(boost(model, silence_phones(lang_dir), boost_silence), opts)
    failed: list[str] = []
    with AlignmentWriter(out) as writer:
        for utt, feats, words in _transcribed(lang_dir, feats_scp, text):
            ali = aligner(utt, compiler.compile_graph_from_text(words), feats)
            if ali is None:
                failed.append(utt)
            else:
                writer.write(utt, ali)
    if failed:
        log.warning("alignment failed for %d utterances: %s", len(failed), failed[:5])
    like = aligner.tot_like / max(aligner.frames, 1)
    return {"aligned": writer.count, "failed": failed, "avg_like": like}


def tree_acc(lang_dir, model_path, feats_scp, ali, out) -> dict:
    """``acc-tree-stats --ci-phones=phones/context_indep.csl`` of one job -> ``.npz``: its
    sorted ``feats.scp`` and ``ali.JOB`` merge-joined one utterance at a time, the stats
    summed per chunk of frames (:func:`paravg.gmm.alignment.acc_tree_stats`)."""
    from paravg.gmm.alignment import TransitionTable, acc_tree_stats
    from paravg.gmm.job_tables import iter_alignments, iter_feats
    from paravg.gmm.model import GmmModel
    from paravg.gmm.train_deltas import ci_phones

    model = GmmModel.load(model_path)
    stats = acc_tree_stats(
        TransitionTable.of(model.trans), iter_feats(feats_scp), iter_alignments(ali),
        ci_phones(lang_dir), 3, 1, names=(str(feats_scp), str(ali)),
    )  # fmt: skip
    stats.save(Path(out))
    return {"events": len(stats)}


def build_tree(lang_dir, stats_files: Sequence, num_leaves: int, treeacc_out, tree_out,
               model_out, num_pdfs_out) -> dict:  # fmt: skip
    """``sum-tree-stats``, the questions, ``build-tree --max-leaves``, ``gmm-init-model``
    and ``gmm-mixup --mix-up=num_leaves`` (train_deltas.sh's steps 1-3) -> ``1.mdl``; the
    tree's number of pdfs (the network's output dimension) -> ``num_pdfs_out``."""
    from paravg.gmm.build_tree import map_stats
    from paravg.gmm.model import init_model, mixup
    from paravg.gmm.train_deltas import grow_tree
    from paravg.gmm.tree_io import write_tree
    from paravg.gmm.tree_stats import TreeStats, sum_tree_stats

    stats = sum_tree_stats([TreeStats.load(Path(f)) for f in stats_files])
    stats.save(Path(treeacc_out))
    built = grow_tree(stats, lang_dir, num_leaves)
    tree = (built.tree, 3, 1)
    write_tree(tree_out, *tree)
    model, occs = init_model((Path(lang_dir) / "topo").read_text(), tree, stats,
                             map_stats(stats, built.tree))  # fmt: skip
    mixup(model, occs, num_leaves)
    model.save(model_out)
    write_text_atomic(num_pdfs_out, f"{model.num_pdfs}\n")
    return {"num_leaves": built.num_leaves, "num_pdfs": model.num_pdfs, "events": len(stats)}


def convert_ali(old_model, new_model, ali_in, ali_out) -> int:
    """``convert-ali old.mdl new.mdl tree ali.JOB`` of one job, one utterance at a time."""
    from paravg.gmm.alignment import TransitionTable, convert_alignment
    from paravg.gmm.job_tables import AlignmentWriter, iter_alignments
    from paravg.gmm.model import GmmModel

    old, new = GmmModel.load(old_model), GmmModel.load(new_model)
    old_t, new_t = TransitionTable.of(old.trans), TransitionTable.of(new.trans)
    with AlignmentWriter(ali_out) as writer:
        for utt, ali in iter_alignments(ali_in):
            writer.write(utt, convert_alignment(old_t, new_t, new.ctx, ali))
    return writer.count


def _set_alignments(ali_files: Sequence) -> Iterator[tuple[str, np.ndarray]]:
    """A set's alignment, its jobs' files merged in utterance order (each job's file is
    sorted, ``heapq.merge``: one entry of each job held)."""
    from paravg.gmm.job_tables import iter_alignments, join_sorted

    # each file checked sorted as it is read (a merge-join of one stream checks its order)
    streams = [join_sorted((str(f), iter_alignments(f))) for f in ali_files]
    return heapq.merge(*streams, key=lambda entry: entry[0].encode())


def targets_dir(model_path, ali_files: Sequence, src_dir, out_dir) -> dict:
    """``ali-to-pdf`` of a set's final alignment as ``out_dir/targets.ark`` beside a copy
    of the source dir's tables (a Kaldi data dir the data stage prepares as any other),
    in utterance order, one utterance at a time. An utterance whose alignment failed has
    no targets (the data stage skips and counts it, within
    ``data.max_missing_targets_fraction``)."""
    from paravg.gmm.alignment import TransitionTable, ali_to_pdf
    from paravg.gmm.job_tables import AlignmentWriter
    from paravg.gmm.model import GmmModel

    model = GmmModel.load(model_path)
    table = TransitionTable.of(model.trans)
    out, src = Path(out_dir), Path(src_dir)
    out.mkdir(parents=True, exist_ok=True)
    for name in TABLES:
        if (src / name).is_file():
            shutil.copyfile(src / name, out / name)
    with AlignmentWriter(out / "targets.ark") as writer:
        for utt, ali in _set_alignments(ali_files):
            writer.write(utt, ali_to_pdf(table, ali))
    return {"utterances": writer.count, "num_pdfs": model.num_pdfs}


def frame_phones(model_path, ali_files: Sequence, ark, scp) -> dict:
    """``ali-to-phones --per-frame`` of a set's final alignment -> ``ark`` / ``scp``
    (binary int32 vectors, the lang's phone ids, one per frame): the phone alignment a
    chain model is trained from (Kaldi's chain recipes build its tree, phone LM and
    supervision from the GMM alignments; :mod:`paravg.chain.prepare` reads phone ``p`` as
    chain target ``p − 1``). Utterances in sorted order, one at a time."""
    from paravg.gmm.alignment import TransitionTable, ali_to_phones
    from paravg.gmm.model import GmmModel
    from paravg.kaldi_io import write_ark_scp

    table = TransitionTable.of(GmmModel.load(model_path).trans)
    frames = 0

    def phones() -> Iterator[tuple[str, np.ndarray]]:
        nonlocal frames
        for utt, ali in _set_alignments(ali_files):
            per_frame = ali_to_phones(table, ali, per_frame=True)
            frames += len(per_frame)
            yield utt, per_frame

    n = write_ark_scp(phones(), ark, scp)
    return {"utterances": n, "frames": frames}
