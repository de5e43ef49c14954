"""The ``mem_mb`` each upstream rule declares (what SLURM grants), from the sizes that
bound the job's memory: the chunk and buffer constants of the streamed stages, the model
sizes, the UBM init's frame cap. One formula per rule, in MiB, rounded up to 100::

    mem_mb = BASE_MB + the stage's bounded working set

``BASE_MB`` (2,000, what these rules declared before) is the job's interpreter, numpy and
paravg (40-60 MB measured; a job forked from paravg-warm counts the forkserver's shared
pages too), one utterance's matrices, and the tables that still grow with the corpus by
the utterance: scp indices and utterance lists, ~1-1.5 KB per utterance, at most
1.1 MB per training hour in these stages (``../shared/reference/scale-review.md``,
finding 5): about 1.1 GB at 1,000 h of 3-s utterances.

The working sets (bytes; I Gaussians, D feature dim, R i-vector dim):

* ``ubm_init``: the reservoir of ``ubm_num_frames`` x ``pca_dim`` float64 frames and its
  sample (x 2), plus one E-step block of frames x Gaussians temporaries,
  :data:`paravg.ivector.ubm.BLOCK_BYTES` (Kaldi's ``gmm-global-init-from-feats
  --num-frames`` holds the frames and accumulates frame by frame).
* ``ubm_gselect`` / ``ubm_acc``: one chunk of the Gaussian-selection table,
  :data:`~paravg.ivector.frame_table.CHUNK_FRAMES` x ``num_gselect`` int32, twice (the
  chunk and the array written or read), plus the UBM and its statistics: 3 x I x D float64.
* ``extractor_post``: one chunk of posteriors (``num_gselect_post`` int32 + float64 per
  frame), twice, plus the UBM.
* ``extractor_acc``: one chunk of posteriors, plus 3 x the extractor's size
  (the model, the per-Gaussian R x R products it precomputes, the accumulators):
  8 x I x (D·R + R² + D²) bytes each (Kaldi's 512 x 40 x 100: 64 MB).
* ``egs_split``: the egs buffer :data:`paravg.egs.split.BUFFER_BYTES` twice (the buffer
  and its rows sorted into pieces) plus one block of archive draws
  (:data:`~paravg.egs.split.DRAW_BLOCK` int64).
* ``egs_archive``: one archive, ``samples_per_iter`` egs of ``window`` x D feature values
  (float16 when ``egs.compress``, else float32) plus its i-vector rows, twice (its pieces
  mapped and its output mapped), its keys (~100 bytes an eg), and one gather block
  :data:`paravg.egs.shuffle.BLOCK_BYTES` (Kaldi's ``nnet3-shuffle-egs`` holds its archive).

Each formula is checked against the job's measured peak (``max_rss_mb`` of its log,
:mod:`paravg.logs`) in ``tests/pipeline/test_resources.py``.
"""

from __future__ import annotations

import math

from paravg.egs.shuffle import BLOCK_BYTES as GATHER_BYTES
from paravg.egs.split import BUFFER_BYTES, DRAW_BLOCK
from paravg.ivector.frame_table import CHUNK_FRAMES
from paravg.ivector.ubm import BLOCK_BYTES as UBM_BLOCK_BYTES

BASE_MB = 2000
MB = 2**20
KEY_BYTES = 100  # an eg's key and index in an archive


def _mem_mb(working_set_bytes: float) -> int:
    """``BASE_MB`` + the working set, in MiB rounded up to a multiple of 100."""
    return int(math.ceil((BASE_MB + working_set_bytes / MB) / 100) * 100)


def _ubm_bytes(iv: dict) -> int:
    return 3 * iv["num_gauss"] * iv["pca_dim"] * 8


def _extractor_bytes(iv: dict) -> int:
    i, d, r = iv["num_gauss"], iv["pca_dim"], iv["dim"]
    return 8 * i * (d * r + r * r + d * d)


def ubm_init_mem_mb(iv: dict) -> int:
    """Rule ``ubm_init`` (``iv``: the config's ``ivector`` section)."""
    return _mem_mb(2 * iv["ubm_num_frames"] * iv["pca_dim"] * 8 + UBM_BLOCK_BYTES)


def ubm_gselect_mem_mb(iv: dict) -> int:
    """Rules ``ubm_gselect`` and ``ubm_acc``."""
    return _mem_mb(2 * CHUNK_FRAMES * iv["num_gselect"] * 4 + _ubm_bytes(iv))


ubm_acc_mem_mb = ubm_gselect_mem_mb


def extractor_post_mem_mb(iv: dict) -> int:
    """Rule ``extractor_post``."""
    return _mem_mb(2 * CHUNK_FRAMES * iv["num_gselect_post"] * 12 + _ubm_bytes(iv))


def extractor_acc_mem_mb(iv: dict) -> int:
    """Rule ``extractor_acc``."""
    return _mem_mb(2 * CHUNK_FRAMES * iv["num_gselect_post"] * 12 + 3 * _extractor_bytes(iv))


#: The i-vector rules' formulas, each a function of the config's ``ivector`` section.
IVECTOR_MEM_MB = {
    "ubm_init": ubm_init_mem_mb,
    "ubm_gselect": ubm_gselect_mem_mb,
    "ubm_acc": ubm_acc_mem_mb,
    "extractor_post": extractor_post_mem_mb,
    "extractor_acc": extractor_acc_mem_mb,
}


def egs_split_mem_mb() -> int:
    """Rule ``egs_split``."""
    return _mem_mb(2 * BUFFER_BYTES + 8 * DRAW_BLOCK)


def egs_archive_mem_mb(
    samples_per_iter: int, window: int, feat_dim: int, ivector_dim: int, compress: bool
) -> int:
    """Rule ``egs_archive``: ``window`` input frames per eg (left context + frames per eg
    + right context), ``feat_dim`` features, ``ivector_dim`` (0: none) float32 per eg."""
    eg = window * feat_dim * (2 if compress else 4) + 4 * ivector_dim
    return _mem_mb(samples_per_iter * (2 * eg + KEY_BYTES) + GATHER_BYTES)
