"""One split job of the egs stage: cut its utterances into egs, each into its archive's piece.

Mirrors stage 4 of ``steps/nnet3/get_egs.sh``: job j makes the egs of its share of the
training utterances (``nnet3-get-egs``) and sends every eg to a uniformly random archive
(``nnet3-copy-egs --random=true --srand=j+srand``), writing it once, into that archive's
piece (:mod:`paravg.egs.pieces`). The archive of the k-th eg of the job (utterance order)
is the k-th draw of ``UniformInt[0, A − 1]`` from a generator seeded with srand + j
(:func:`distribute`).

Memory is bounded by a buffer, not by the job's share of the corpus. The job makes two
passes over its utterance list, neither holding it:

1. count: the chunk sizes of each utterance (the first draw of its own generator, cheap)
   give the job's number of egs n and the longest key; the n archive draws, in blocks of
   :data:`DRAW_BLOCK`, give each piece's size (``bincount``);
2. write: the egs of each utterance (features read then), gathered into buffers of about
   :data:`BUFFER_BYTES` of features; each buffer's egs take the next archive draws of a
   generator seeded as in pass 1 (the same sequence: numpy's bounded integers consume
   the bit generator's stream the same way whatever the block sizes, checked by
   ``tests/unit/egs/test_egs_pieces.py``) and go to their pieces.
"""

from __future__ import annotations

import logging
import os

import numpy as np

from paravg.egs.archive import EgsBatch
from paravg.egs.info import EgsInfo
from paravg.egs.inputs import EgsSources
from paravg.egs.make import count_utterance_egs, iter_egs, meta_for
from paravg.egs.pieces import PieceWriter
from paravg.egs.plan import iter_uttlist

log = logging.getLogger(__name__)

DISTRIBUTE_STREAM = 202  # second seed word: keeps this stream apart from other srand+k draws
DRAW_BLOCK = 1 << 20  # archive draws per block when counting the pieces (8 MB of int64)
BUFFER_BYTES = 1 << 23  # features of the egs buffered before they go to their pieces (8 MB)


def archive_draws(srand: int, job: int) -> np.random.Generator:
    """The generator of split job ``job``'s archive draws (seed srand + job)."""
    return np.random.default_rng([srand + job, DISTRIBUTE_STREAM])


def draw_archives(rng: np.random.Generator, num_egs: int, num_archives: int) -> np.ndarray:
    """The next ``num_egs`` archive indices, UniformInt[0, num_archives − 1]."""
    return rng.integers(0, num_archives, size=num_egs).astype(np.int32)


def distribute(num_egs: int, num_archives: int, srand: int, job: int) -> np.ndarray:
    """Uniformly random archive of each eg of job ``job``, all at once (what the job's
    pieces hold, drawn block by block)."""
    return draw_archives(archive_draws(srand, job), num_egs, num_archives)


def piece_sizes(num_egs: int, num_archives: int, srand: int, job: int) -> np.ndarray:
    """Number of egs of job ``job`` sent to each archive (the draws in blocks)."""
    rng = archive_draws(srand, job)
    counts = np.zeros(num_archives, dtype=np.int64)
    for start in range(0, num_egs, DRAW_BLOCK):
        block = draw_archives(rng, min(DRAW_BLOCK, num_egs - start), num_archives)
        counts += np.bincount(block, minlength=num_archives)
    return counts


def write_split_job(
    job: int,
    uttlist: str | os.PathLike,
    info_path: str | os.PathLike,
    feats_scp: str | os.PathLike,
    targets_scp: str | os.PathLike,
    out_prefix: str | os.PathLike,
    ivector_scp: str | os.PathLike | None = None,
    buffer_bytes: int | None = None,
) -> int:
    """Write the egs of split job ``job`` into their archives' pieces; return the count
    (``buffer_bytes``: the buffer's features, default :data:`BUFFER_BYTES`)."""
    buffer_bytes = buffer_bytes or BUFFER_BYTES
    info = EgsInfo.load(info_path)
    if bool(ivector_scp) != bool(info.ivector_dim):
        raise ValueError(
            f"{info_path}: ivector_dim={info.ivector_dim} but ivector_scp={ivector_scp!r}"
        )
    num_egs, key_width = count_utterance_egs(iter_uttlist(uttlist), info)
    counts = piece_sizes(num_egs, info.num_archives, info.srand, job)
    sources = EgsSources(
        feats_scp,
        targets_scp,
        ivector_scp,
        info.ivector_period,
        info.targets_length_tolerance,
        utts={utt for utt, _ in iter_uttlist(uttlist)},
    )
    meta = meta_for(info, num_egs)
    rng = archive_draws(info.srand, job)
    buffer: list[EgsBatch] = []
    buffered = num_utts = 0

    def flush(writer: PieceWriter) -> None:
        batch = EgsBatch.concatenate(buffer, meta)
        writer.write(batch, draw_archives(rng, len(batch), info.num_archives))
        buffer.clear()

    with PieceWriter(out_prefix, meta, counts, key_width) as writer:
        for batch in iter_egs(iter_uttlist(uttlist), None, sources, info):
            buffer.append(batch)
            buffered += batch.feats.nbytes
            num_utts += 1
            if buffered >= buffer_bytes:
                flush(writer)
                buffered = 0
        flush(writer)
    log.info(
        "split job %d: %d utterances with egs -> %d egs over %d archives",
        job,
        num_utts,
        num_egs,
        info.num_archives,
    )
    return num_egs
