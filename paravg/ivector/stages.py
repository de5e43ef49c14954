"""One function per i-vector rule: read the inputs, call the maths, write the outputs.

The stages and the Kaldi scripts they follow (``steps/online/nnet2/``):

=====================  ===========================================================
``train_pca``          ``get_pca_transform.sh`` (global-only online CMN, splice, est-pca)
``init_ubm``           ``train_diag_ubm.sh`` stage: ``gmm-global-init-from-feats``
``ubm_gselect``        ``gmm-gselect`` with the initial UBM, kept for all passes
``ubm_accumulate``     ``gmm-global-acc-stats`` (one job)
``ubm_estimate``       ``gmm-global-sum-accs`` + ``gmm-global-est``
``init_extractor``     ``ivector-extractor-init`` (``gmm-global-to-fgmm`` first)
``extractor_posteriors`` ``gmm-global-get-post | scale-post`` (computed once)
``extractor_accumulate`` ``ivector-extractor-acc-stats`` (one job)
``extractor_estimate``  ``ivector-extractor-sum-accs`` + ``ivector-extractor-est``
``extract_online``     ``extract_ivectors_online.sh`` (one job)
``merge_ivectors``     the final ``ivector_online.scp`` and ``ivector_period``
=====================  ===========================================================

UBM and extractor training read the training set with its real speakers (online CMN
carries speaker statistics across a speaker's utterances, ``apply-cmvn-online
--spk2utt``) and every ``subsample``-th frame; jobs are contiguous speaker blocks.
Every stage holds one utterance's features at a time; the per-frame tables of a job
(Gaussian selection, posteriors) are written and read in chunks of ``chunk_frames``
frames (:mod:`paravg.ivector.frame_table`), as Kaldi streams its gzip archives, so no job's
memory grows with its share of the corpus; ``init_ubm`` holds its ``num_frames`` sample.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator

import numpy as np

from paravg.errors import DataError
from paravg.io import write_json_atomic, write_text_atomic
from paravg.ivector import cmvn, data, extractor_em, ubm
from paravg.ivector.extractor import IvectorExtractor
from paravg.ivector.features import IvectorFeaturePipeline, subsample
from paravg.ivector.frame_table import CHUNK_FRAMES, FrameTableReader, FrameTableWriter
from paravg.ivector.online import OnlineIvectorOptions, extract_speaker
from paravg.ivector.pca import PcaStats, splice
from paravg.ivector.posteriors import SparsePosteriors, posteriors_from_loglikes

log = logging.getLogger(__name__)

PathLike = str | os.PathLike

# Distinct streams of random numbers per stage, all derived from config srand.
_SEED_UBM_INIT = 1
_SEED_EXTRACTOR_INIT = 2


# ---------------------------------------------------------------- shared readers
def global_cmvn_stats(cmvn_scp: PathLike) -> np.ndarray:
    """Sum of every entry of ``cmvn.scp`` (``matrix-sum``: Kaldi's ``global_cmvn.stats``)."""
    from paravg.kaldi_io import load_scp

    total = None
    for key, stats in load_scp(cmvn_scp).items():
        stats = np.asarray(stats, dtype=np.float64)
        if stats.ndim != 2 or stats.shape[0] != 2:
            raise DataError(
                f"{cmvn_scp}: entry {key!r} has shape {stats.shape}, expected 2 x (D+1)"
            )
        if total is not None and stats.shape != total.shape:
            raise DataError(
                f"{cmvn_scp}: entry {key!r} has shape {stats.shape}, others {total.shape}"
            )
        total = stats.copy() if total is None else total + stats
    if total is None or total[0, -1] <= 0:
        raise DataError(f"{cmvn_scp}: no CMVN statistics with a positive count")
    return total


def speaker_posterior_stream(
    pipeline: IvectorFeaturePipeline,
    feats: data.FeatureSource,
    speakers: dict[str, list[str]],
    every: int,
) -> Iterator[tuple[str, np.ndarray]]:
    """Posterior-stream features (speaker-level online CMN, no limit), subsampled."""
    for utts in speakers.values():
        speaker_stats = None
        for utt in utts:
            x = feats[utt]
            pipeline.check(x, f"{feats.path}: {utt}")
            yield utt, subsample(pipeline.posterior_stream(x, speaker_stats), every)
            speaker_stats = cmvn.add_utterance(speaker_stats, x)


def _job(feats_scp: PathLike, spk2utt: PathLike, job: int, nj: int):
    """The feature reader of job ``job``'s speakers and the speakers
    (:func:`paravg.ivector.data.job_features`): the job holds its ``spk2utt`` lines
    (its share of the set's utterance names), and its ``feats.scp`` lines only when its
    utterances are not in the file's order."""
    job_spk2utt = data.read_job_spk2utt(spk2utt, job, nj)
    return data.job_features(feats_scp, job_spk2utt, job, str(spk2utt))


# ---------------------------------------------------------------- UBM subset
def subset_training_data(
    feats_scp: PathLike,
    spk2utt: PathLike,
    cmvn_scp: PathLike,
    num_utts: int,
    out_feats_scp: PathLike,
    out_spk2utt: PathLike,
    out_cmvn_scp: PathLike,
) -> dict:
    """``utils/subset_data_dir.sh <data> <num_utts> <subset>`` as Kaldi's recipes run it
    before ``train_diag_ubm.sh``: ``num_utts`` utterances spread evenly over the sorted
    utterances that have features (:func:`paravg.ivector.data.even_subset`, as
    ``utils/subset_scp.pl`` spreads them: no seed, the same subset for the same data; all
    when there are not more), their ``feats.scp`` lines, ``spk2utt`` with only them (a
    speaker without one dropped) and the ``cmvn.scp`` lines of the speakers kept.
    Streams the tables: holds the utterance names and the chosen lines."""
    from paravg.kaldi_io import iter_table

    utts = sorted(r.key for r in iter_table(feats_scp, require_sorted=False))
    chosen = set(data.even_subset(utts, num_utts))
    del utts
    write_text_atomic(
        out_feats_scp,
        "".join(
            f"{r.key} {r.rest}\n" for r in iter_table(feats_scp, require_sorted=False, keys=chosen)
        ),
    )
    speakers = {}
    for spk, spk_utts in data.read_spk2utt(spk2utt).items():
        mine = [u for u in spk_utts if u in chosen]
        if mine:
            speakers[spk] = mine
    write_text_atomic(out_spk2utt, "".join(f"{s} {' '.join(us)}\n" for s, us in speakers.items()))
    cmvn_lines = [
        f"{r.key} {r.rest}\n" for r in iter_table(cmvn_scp, require_sorted=False, keys=speakers)
    ]
    missing = sorted(set(speakers) - {line.split(" ", 1)[0] for line in cmvn_lines})
    if missing:
        raise DataError(f"{cmvn_scp}: no CMVN statistics for speaker(s) {missing[:5]}")
    write_text_atomic(out_cmvn_scp, "".join(cmvn_lines))
    info = {"utterances": len(chosen), "speakers": len(speakers)}
    log.info("UBM subset of %s: %s", feats_scp, info)
    return info


# ---------------------------------------------------------------- PCA
def train_pca(
    feats_scp: PathLike,
    cmvn_scp: PathLike,
    out: PathLike,
    dim: int,
    context: int,
    max_utts: int,
    every: int,
) -> dict:
    """``get_pca_transform.sh``: per-utterance online CMN with global statistics only, splice
    ``+-context``, every ``every``-th frame of ``max_utts`` evenly spread utterances."""
    source = data.FeatureSource(feats_scp)
    global_stats = global_cmvn_stats(cmvn_scp)
    pipeline_dim = global_stats.shape[1] - 1
    utts = data.even_subset(sorted(source.keys()), max_utts)
    stats = PcaStats(pipeline_dim * (2 * context + 1))
    for utt in utts:
        x = source[utt]
        if x.shape[1] != pipeline_dim:
            raise DataError(
                f"{feats_scp}: utterance {utt!r} has dimension {x.shape[1]}, but {cmvn_scp} is "
                f"for {pipeline_dim}-dimensional features"
            )
        normalised = cmvn.apply_online_cmn(x, global_stats)
        stats.add(subsample(splice(normalised, context), every))
    transform = stats.estimate(dim)
    IvectorFeaturePipeline(transform, context, global_stats).save(out)
    info = {"utterances": len(utts), "frames": stats.count, "dim": transform.shape[0]}
    log.info("PCA %s", info)
    return info


# ---------------------------------------------------------------- UBM
def init_ubm(
    pca: PathLike,
    feats_scp: PathLike,
    spk2utt: PathLike,
    out: PathLike,
    out_json: PathLike,
    num_gauss: int,
    num_iters_init: int,
    num_frames: int,
    every: int,
    srand: int,
    min_gaussian_weight: float = 1.0e-4,
) -> dict:
    """``gmm-global-init-from-feats`` on a reservoir sample of the posterior stream."""
    pipeline = IvectorFeaturePipeline.load(pca)
    source, speakers = _job(feats_scp, spk2utt, 0, 1)
    rng = np.random.default_rng([srand, _SEED_UBM_INIT])
    reservoir = ubm.Reservoir(num_frames, rng)
    for _, x in speaker_posterior_stream(pipeline, source, speakers, every):
        reservoir.add(x)
    frames = reservoir.sample()
    log.info("UBM init on %d of %d frames", frames.shape[0], reservoir.num_seen)
    gmm, history = ubm.train_in_memory(
        frames,
        num_gauss,
        num_iters_init,
        rng,
        opts=ubm.UbmUpdateOptions(min_gaussian_weight=min_gaussian_weight),
    )
    gmm.save(out)
    info = {
        "frames": int(frames.shape[0]),
        "frames_seen": reservoir.num_seen,
        "iterations": history,
    }
    write_json_atomic(out_json, _jsonable(info))
    return info


def ubm_gselect(
    ubm_path: PathLike,
    pca: PathLike,
    feats_scp: PathLike,
    spk2utt: PathLike,
    job: int,
    nj: int,
    num_gselect: int,
    every: int,
    out: PathLike,
    chunk_frames: int = CHUNK_FRAMES,
) -> None:
    """``gmm-gselect``: the top ``num_gselect`` Gaussians of every kept frame of one job,
    written ``chunk_frames`` frames at a time (column ``index``, int32)."""
    gmm = ubm.DiagGmm.load(ubm_path)
    pipeline = IvectorFeaturePipeline.load(pca)
    source, speakers = _job(feats_scp, spk2utt, job, nj)
    width = min(num_gselect, gmm.num_gauss)
    empty = {"index": np.zeros((0, width), np.int32)}
    with FrameTableWriter(out, "gselect", empty, chunk_frames) as table:
        for utt, x in speaker_posterior_stream(pipeline, source, speakers, every):
            table.add(utt, index=gmm.gaussian_selection(x, num_gselect))


def ubm_accumulate(
    ubm_path: PathLike,
    pca: PathLike,
    feats_scp: PathLike,
    spk2utt: PathLike,
    gselect: PathLike,
    job: int,
    nj: int,
    every: int,
    out: PathLike,
) -> None:
    """``gmm-global-acc-stats --gselect``: EM statistics of one job, reading its gselect
    table chunk by chunk in step with the features."""
    gmm = ubm.DiagGmm.load(ubm_path)
    pipeline = IvectorFeaturePipeline.load(pca)
    source, speakers = _job(feats_scp, spk2utt, job, nj)
    stats = ubm.UbmStats.zeros(gmm.num_gauss, gmm.dim)
    with FrameTableReader(gselect, "gselect", "a gselect table", ("index",)) as table:
        for utt, x in speaker_posterior_stream(pipeline, source, speakers, every):
            sel = table.take(utt, x.shape[0])["index"]
            if sel.size and sel.max() >= gmm.num_gauss:
                raise DataError(
                    f"{gselect}: Gaussian indices exceed the {gmm.num_gauss} of {ubm_path}"
                )
            stats.accumulate(gmm, x, sel)
    stats.save(out)


def ubm_estimate(
    ubm_path: PathLike,
    accs: list[PathLike],
    out: PathLike,
    out_json: PathLike,
    remove_low_count_gaussians: bool,
    min_gaussian_weight: float = 1.0e-4,
) -> dict:
    """``gmm-global-sum-accs`` + ``gmm-global-est``."""
    gmm = ubm.DiagGmm.load(ubm_path)
    stats = ubm.sum_stats([ubm.UbmStats.load(p) for p in accs])
    opts = ubm.UbmUpdateOptions(
        min_gaussian_weight=min_gaussian_weight,
        remove_low_count_gaussians=remove_low_count_gaussians,
    )
    new, info = ubm.update(gmm, stats, opts)
    log.info("UBM update %s", info)
    new.save(out)
    write_json_atomic(out_json, _jsonable(info))
    return info


# ---------------------------------------------------------------- extractor
def init_extractor(ubm_path: PathLike, out: PathLike, ivector_dim: int, srand: int) -> None:
    """``ivector-extractor-init --use-weights=false`` from the final UBM."""
    gmm = ubm.DiagGmm.load(ubm_path)
    rng = np.random.default_rng([srand, _SEED_EXTRACTOR_INIT])
    IvectorExtractor.from_ubm(gmm, ivector_dim, rng).save(out)


def extractor_posteriors(
    ubm_path: PathLike,
    pca: PathLike,
    feats_scp: PathLike,
    spk2utt: PathLike,
    job: int,
    nj: int,
    every: int,
    num_gselect: int,
    min_post: float,
    posterior_scale: float,
    out: PathLike,
    chunk_frames: int = CHUNK_FRAMES,
) -> None:
    """``gmm-global-get-post --n --min-post | scale-post`` with scale
    ``posterior_scale * subsample`` (keeps the data weight of using every frame), written
    ``chunk_frames`` frames at a time (columns ``index`` int32, -1 = empty, and ``value``)."""
    gmm = ubm.DiagGmm.load(ubm_path)
    pipeline = IvectorFeaturePipeline.load(pca)
    source, speakers = _job(feats_scp, spk2utt, job, nj)
    width = min(num_gselect, gmm.num_gauss)
    empty = SparsePosteriors.concatenate([], width)
    columns = {"index": empty.index, "value": empty.value}
    with FrameTableWriter(out, "posteriors", columns, chunk_frames) as table:
        for utt, x in speaker_posterior_stream(pipeline, source, speakers, every):
            post, _ = posteriors_from_loglikes(
                gmm.log_likelihoods(x), num_gselect, min_post, posterior_scale * every
            )
            post = SparsePosteriors.concatenate([post], width)
            table.add(utt, index=post.index, value=post.value)


def extractor_accumulate(
    extractor_path: PathLike,
    pca: PathLike,
    feats_scp: PathLike,
    spk2utt: PathLike,
    posteriors: PathLike,
    job: int,
    nj: int,
    every: int,
    out: PathLike,
) -> None:
    """``ivector-extractor-acc-stats``: EM statistics of one job (stats stream, no CMN),
    reading its posteriors table chunk by chunk in step with the features."""
    extractor = IvectorExtractor.load(extractor_path)
    pipeline = IvectorFeaturePipeline.load(pca)
    if pipeline.output_dim != extractor.feat_dim:
        raise DataError(
            f"{pca} gives {pipeline.output_dim}-dim features; {extractor_path} expects "
            f"{extractor.feat_dim}"
        )
    source, speakers = _job(feats_scp, spk2utt, job, nj)
    stats = extractor_em.IvectorExtractorStats.zeros(extractor)
    reader = FrameTableReader(posteriors, "posteriors", "a posteriors table", ("index", "value"))
    with reader as table:
        for utts in speakers.values():
            for utt in utts:
                x = source[utt]
                pipeline.check(x, f"{feats_scp}: {utt}")
                feats = subsample(pipeline.stats_stream(x), every)
                rows = table.take(utt, feats.shape[0])
                post = SparsePosteriors(rows["index"], rows["value"].astype(np.float64))
                stats.accumulate(extractor, feats, post)
    stats.save(out)


def extractor_estimate(
    extractor_path: PathLike,
    accs: list[PathLike],
    out: PathLike,
    out_json: PathLike,
    gaussian_min_count: float,
) -> dict:
    """``ivector-extractor-sum-accs`` + ``ivector-extractor-est``."""
    extractor = IvectorExtractor.load(extractor_path)
    stats = extractor_em.sum_stats([extractor_em.IvectorExtractorStats.load(p) for p in accs])
    new, info = extractor_em.update(
        extractor, stats, extractor_em.ExtractorUpdateOptions(gaussian_min_count=gaussian_min_count)
    )
    new.save(out)
    write_json_atomic(out_json, _jsonable(info))
    return info


# ---------------------------------------------------------------- online extraction
def extract_online(
    extractor_path: PathLike,
    ubm_path: PathLike,
    pca: PathLike,
    feats_scp: PathLike,
    spk2utt: PathLike,
    job: int,
    nj: int,
    utts_per_spk_max: int,
    opts: OnlineIvectorOptions,
    out_ark: PathLike,
    out_scp: PathLike,
) -> dict:
    """``extract_ivectors_online.sh`` for one job: ``utts_per_spk_max > 0`` first cuts the
    speakers into pseudo-speakers (training data; 1: every utterance alone, the eval sets
    with ``ivector.eval_per_utt``), 0 keeps the real speakers."""
    from paravg.kaldi_io import write_ark_scp

    extractor = IvectorExtractor.load(extractor_path)
    gmm = ubm.DiagGmm.load(ubm_path)
    pipeline = IvectorFeaturePipeline.load(pca)
    source, speakers = _job(feats_scp, spk2utt, job, nj)
    if utts_per_spk_max > 0:
        speakers = data.pseudo_speakers(speakers, utts_per_spk_max)

    def ivectors():
        for utts in speakers.values():
            pairs = ((u, source[u]) for u in utts)
            for utt, result in extract_speaker(extractor, gmm, pipeline, pairs, opts):
                yield utt, result.ivectors

    num_utts = write_ark_scp(ivectors(), out_ark, out_scp, absolute=False)
    info = {"utterances": num_utts, "speakers": len(speakers)}
    log.info("extracted %s", info)
    return info


def merge_ivectors(
    scps: list[PathLike], out_scp: PathLike, period: int, out_period: PathLike
) -> int:
    """Concatenate the per-job scp files (sorted by utterance) and write ``ivector_period``."""
    from paravg.kaldi_io import merge_scps

    keys = merge_scps(scps, out_scp, sort=True)
    write_text_atomic(out_period, f"{period}\n")
    return len(keys)


def _jsonable(obj):
    if isinstance(obj, dict):
        return {k: _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, np.generic):
        return obj.item()
    return obj
