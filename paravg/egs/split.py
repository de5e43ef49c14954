"""One split job of the egs stage: cut its utterances into egs, send each to an archive.

Mirrors stage 4 of ``steps/nnet3/get_egs.sh``: job j makes the egs of its share of the
training utterances (``nnet3-get-egs``) and sends every eg to a uniformly random archive
(``nnet3-copy-egs --random=true --srand=j+srand``). Here the job writes its egs once, in
utterance order, as an archive with prefix ``P`` plus ``P.archive.npy`` (int32, the
archive index of each eg, drawn from a generator seeded with srand + j). The archive
rule then gathers its rows from every job (:func:`paravg.egs.shuffle.merge_archive`),
which is Kaldi's "concatenate the pieces in job order" without one file per piece.
"""

from __future__ import annotations

import logging
import os

import numpy as np

from paravg.egs.archive import ArchiveWriter, save_npy_atomic
from paravg.egs.info import EgsInfo
from paravg.egs.inputs import EgsSources
from paravg.egs.make import chunk_utterances, iter_egs, meta_for
from paravg.egs.plan import read_uttlist

log = logging.getLogger(__name__)

DISTRIBUTE_STREAM = 202  # second seed word: keeps this stream apart from other srand+k draws


def assignment_path(prefix: str | os.PathLike) -> str:
    """File holding the archive index of each eg of a split job."""
    return f"{prefix}.archive.npy"


def distribute(num_egs: int, num_archives: int, srand: int, job: int) -> np.ndarray:
    """Uniformly random archive of each eg of job ``job`` (seed srand + job)."""
    rng = np.random.default_rng([srand + job, DISTRIBUTE_STREAM])
    return rng.integers(0, num_archives, size=num_egs).astype(np.int32)


def write_split_job(
    job: int,
    uttlist: str | os.PathLike,
    info_path: str | os.PathLike,
    feats_scp: str | os.PathLike,
    targets_scp: str | os.PathLike,
    out_prefix: str | os.PathLike,
    ivector_scp: str | os.PathLike | None = None,
) -> int:
    """Write the egs of split job ``job`` and their archive assignment; return the count."""
    info = EgsInfo.load(info_path)
    if bool(ivector_scp) != bool(info.ivector_dim):
        raise ValueError(
            f"{info_path}: ivector_dim={info.ivector_dim} but ivector_scp={ivector_scp!r}"
        )
    utts = read_uttlist(uttlist)
    chunks = chunk_utterances(utts, info)
    num_egs = sum(c.num_chunks for c in chunks)
    sources = EgsSources(
        feats_scp, targets_scp, ivector_scp, info.ivector_period, info.targets_length_tolerance
    )
    assignment = distribute(num_egs, info.num_archives, info.srand, job)
    with ArchiveWriter(out_prefix, meta_for(info, num_egs)) as writer:
        for batch in iter_egs(utts, chunks, sources, info):
            writer.append(batch)
        save_npy_atomic(assignment_path(out_prefix), assignment)
    log.info(
        "split job %d: %d utterances -> %d egs over %d archives",
        job,
        len(utts),
        num_egs,
        info.num_archives,
    )
    return num_egs
