"""The ``mem_mb`` and ``runtime`` each upstream rule declares (what SLURM grants), from
the sizes that bound the job: the chunk and buffer constants of the streamed stages, the
model sizes, the UBM init's frame cap, and what the job reads of the corpus. One entry per
rule in :data:`RULES`, reached through ``PARAVG.mem_mb(rule)`` / ``PARAVG.runtime(rule)``
(:class:`paravg.dag.core.RunCore`, which measures the job's share of the corpus,
:class:`JobData`, from the prepared set's ``report.json``).

``mem_mb``, in MiB rounded up to 100::

    mem_mb = BASE_MB + the job's working set (bytes) / 2^20

``BASE_MB`` (2,000, what these rules declared before) is the job's interpreter, numpy and
paravg (40-60 MB measured; a job forked from paravg-warm counts the forkserver's shared
pages too), one utterance's matrices and the ``spk2utt`` lines of the job's share of the
set (each i-vector job reads its own speakers' lines of ``spk2utt`` and ``feats.scp`` in
step with them: ~120 bytes per utterance of the set at the job's peak, ~5 MB at 1,000 h
of 3-s utterances with ``ivector.nj`` 30). A feature job reads its split's lines as it
goes, ``merge_features`` streams the splits and ``compute_cmvn`` reads ``spk2utt`` and
``feats.scp`` in step (nothing per utterance). Where a job holds
a table per utterance (the egs plan's lists), its working set counts
:data:`PER_UTT_BYTES` for each utterance it holds. ``prepare_data`` joins the source's
sorted tables as it reads them (nothing per utterance: its measured peak is flat) but
holds a table per utterance and the kept target vectors when the targets file lists the
utterances out of their sorted order, which it learns only by reading it: it declares
that case, :data:`PER_UTT_BYTES` an utterance plus :data:`PREPARE_BYTES_PER_FRAME` a
frame (~4.3 GB at 1,000 h of 3-s utterances); the others stay near ``BASE_MB``
(``../shared/reference/scale-review.md``).

``runtime``, in minutes (SLURM's ``--time``)::

    runtime = max(RUNTIME_FLOOR_MIN, ceil(RUNTIME_FACTOR x cpu_s / 60))

``cpu_s`` is the job's CPU seconds at the default config measured by
``benchmarks/bench_data_scale.py`` (:data:`CPU_S_PER_HOUR`: per hour of audio the job
reads, scaled by the model sizes that set the per-frame work: Gaussians x feature dim for
the full-UBM likelihoods, the extractor's D·R + R² for its statistics), or per frame x
Gaussian x iteration for ``ubm_init``, per eg for ``egs_archive``. ``RUNTIME_FACTOR`` (10)
covers a slower core, a shared file system and a longer-than-average job; the floor (10
minutes) a job's start on a busy node.

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
* ``extractor_est``: the ``ivector.nj`` accumulators it sums, all loaded (as
  ``ivector-extractor-sum-accs`` reads them), plus the model and its update: (nj + 3) x
  the extractor's size. ``extract_ivectors``: the UBM and 3 x the extractor.
* ``egs_split``: the egs buffer :data:`paravg.egs.split.BUFFER_BYTES` twice (the buffer
  and its rows sorted into pieces), one block of archive draws
  (:data:`~paravg.egs.split.DRAW_BLOCK` int64) and its own utterances' scp lines.
* ``egs_archive``: one archive, ``samples_per_iter`` egs of ``window`` x D feature values
  (float16 when ``egs.compress``, else float32) plus its i-vector rows, twice (its pieces
  mapped and its output mapped), its keys (~100 bytes an eg), and one gather block
  :data:`paravg.egs.shuffle.BLOCK_BYTES` (Kaldi's ``nnet3-shuffle-egs`` holds its archive).
* ``egs_subsets``: the egs of its 2 x ``num_utts_subset`` utterances, float32, at a
  generous 30 s an utterance, x ``window`` / ``frames_per_eg`` (the egs overlap), twice.

Each formula is checked against the jobs' measured peaks (``max_rss_mb`` of their logs,
:mod:`paravg.logs`) at two corpus sizes in ``tests/pipeline/test_resources.py``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

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


# ------------------------------------------------------------------ the table of rules
FRAMES_PER_HOUR = 360_000  # 10-ms frames
RUNTIME_FACTOR = 10
RUNTIME_FLOOR_MIN = 10
SUBSET_UTT_FRAMES = 3000  # egs_subsets: a generous 30-s utterance


@dataclass(frozen=True)
class JobData:
    """What one job reads of the corpus: the utterances whose table lines it holds, the
    hours of audio it reads, and the egs' input frames per eg (``window``)."""

    utterances: int = 0
    hours: float = 0.0
    window: int = 0

    @property
    def frames(self) -> float:
        return self.hours * FRAMES_PER_HOUR


#: Per rule: the set whose data a job reads ("train": the training set, "set": the
#: job's ``set`` wildcard, None: no corpus data) and the config section whose ``nj``
#: splits it among the jobs (None: one job reads it all).
JOB_SHARE: dict[str, tuple[str | None, str | None]] = {
    "prepare_data": ("set", None),
    "compute_features": ("set", "features"),
    "merge_features": ("set", None),
    "compute_cmvn": ("set", None),
    "ubm_subset": ("train", None),
    "ivector_pca": ("train", None),
    "ubm_init": ("train", None),
    "ubm_gselect": ("train", "ivector"),
    "ubm_acc": ("train", "ivector"),
    "ubm_est": (None, None),
    "extractor_init": (None, None),
    "extractor_post": ("train", "ivector"),
    "extractor_acc": ("train", "ivector"),
    "extractor_est": (None, None),
    "extract_ivectors": ("set", "ivector"),
    "merge_ivectors": ("set", None),
    "egs": ("train", None),
    "egs_split": ("train", "egs"),
    "egs_archive": (None, None),
    "egs_subsets": (None, None),
}

#: Rules that read the UBM's data: with ``ivector.ubm_subset_utts`` only the subset.
UBM_SUBSET_RULES = ("ivector_pca", "ubm_init", "ubm_gselect", "ubm_acc")

#: Bytes each held utterance adds (the job's traced peak per utterance, x 2; measured
#: on the demo at 2 h with benchmarks/bench_data_scale.py's workspace, docs/benchmarks.md).
#: ``prepare_data``: nothing per utterance for a data dir in Kaldi's sorted order (the
#: traced peak flat from 2,257 to 9,028 utterances of the demo); for a targets file out
#: of order, each key's length and place and each kept vector's array (560 bytes an
#: utterance of the traced peak's growth, 2,257 -> 9,028 shuffled utterances), x 2, plus
#: :data:`PREPARE_BYTES_PER_FRAME`. ``egs``: the
#: plan's utterance lists and lengths (793). ``extract_ivectors``: its share of
#: ``spk2utt`` and the pseudo-speakers (~250 per utterance of the job). ``merge_features``,
#: ``compute_features`` and ``compute_cmvn`` stream (nothing per utterance).
PER_UTT_BYTES = {
    "prepare_data": 1_200,
    "egs": 2_000,
    "egs_split": 3_000,
    "extract_ivectors": 1_000,
    "merge_ivectors": 2_000,
    "ubm_subset": 1_000,
}

#: ``prepare_data``'s kept target vectors, held only for a targets file out of order:
#: 4 bytes an int32 frame, x 2 (the measured RSS grows 1.7 x the traced peak there).
PREPARE_BYTES_PER_FRAME = 8

#: CPU seconds per hour of audio the job reads, at the default config (64 Gaussians,
#: 40-dim features and i-vectors), measured by benchmarks/bench_data_scale.py.
CPU_S_PER_HOUR = {
    "prepare_data": 2.0,
    "compute_features": 20.0,
    "merge_features": 1.0,
    "compute_cmvn": 2.0,
    "ivector_pca": 3.0,
    "ubm_gselect": 3.0,
    "ubm_acc": 3.0,
    "extractor_post": 3.0,
    "extractor_acc": 6.0,
    "extract_ivectors": 12.0,
    "egs": 1.0,
    "egs_split": 2.0,
}
UBM_INIT_CPU_S = 1.3e-9  # per frame x Gaussian x feature dim x iteration (measured 1e-9)
EGS_ARCHIVE_CPU_S = 2.0e-4  # per eg (measured 1e-4)
DEFAULT_GAUSS_DIM = 64 * 40
DEFAULT_EXTRACTOR = 40 * 40 + 40 * 40  # D·R + R² at the default sizes


def _model_scale(rule: str, iv: dict) -> float:
    """How much more per-frame work the configured model sizes make than the default's."""
    if rule in ("ubm_gselect", "extractor_post"):  # every Gaussian's likelihood
        return iv["num_gauss"] * iv["pca_dim"] / DEFAULT_GAUSS_DIM
    if rule in ("ubm_acc",):  # the selected Gaussians only
        return iv["num_gselect"] / 30 * iv["pca_dim"] / 40
    extractor = (iv["pca_dim"] * iv["dim"] + iv["dim"] ** 2) / DEFAULT_EXTRACTOR
    if rule == "extractor_acc":  # statistics of the num_gselect_post Gaussians kept
        return extractor
    if rule == "extract_ivectors":  # the UBM's likelihoods, then the online estimates
        return 0.5 * iv["num_gauss"] * iv["pca_dim"] / DEFAULT_GAUSS_DIM + 0.5 * extractor
    return 1.0


@dataclass(frozen=True)
class RuleCost:
    """One rule's working set (bytes) and CPU seconds, each a function of the config and
    the job's :class:`JobData`."""

    mem: Callable[[dict, JobData], float]
    cpu: Callable[[dict, JobData], float]


def _per_utt(rule: str, fixed: Callable[[dict, JobData], float] = lambda c, j: 0.0):
    return lambda cfg, job: fixed(cfg, job) + PER_UTT_BYTES[rule] * job.utterances


def _per_hour(rule: str):
    return lambda cfg, job: CPU_S_PER_HOUR[rule] * job.hours * _model_scale(rule, cfg["ivector"])


def _none(cfg: dict, job: JobData) -> float:
    return 0.0


def _pca_cpu(cfg: dict, job: JobData) -> float:
    """The PCA reads at most ``pca_max_utts`` utterances (Kaldi's ``--max-utts``)."""
    iv = cfg["ivector"]
    share = min(1.0, iv["pca_max_utts"] / job.utterances) if job.utterances else 1.0
    return CPU_S_PER_HOUR["ivector_pca"] * job.hours * share


def _ubm_init_cpu(cfg: dict, job: JobData) -> float:
    iv = cfg["ivector"]
    frames = min(iv["ubm_num_frames"], job.frames / iv["subsample"])
    return UBM_INIT_CPU_S * frames * iv["num_gauss"] * iv["pca_dim"] * iv["ubm_num_iters_init"]


def _egs_archive_mem(cfg: dict, job: JobData) -> float:
    egs = cfg["egs"]
    dim = cfg["ivector"]["dim"] if cfg["ivector"]["enabled"] else 0
    mb = egs_archive_mem_mb(
        egs["samples_per_iter"], job.window, cfg["features"]["num_ceps"], dim, egs["compress"]
    )
    return (mb - BASE_MB) * MB


def _egs_subsets_mem(cfg: dict, job: JobData) -> float:
    egs = cfg["egs"]
    feats = SUBSET_UTT_FRAMES * job.window / egs["frames_per_eg"] * cfg["features"]["num_ceps"]
    return 2 * 2 * egs["num_utts_subset"] * feats * 4


def _iv(fn: Callable[[dict], int]) -> Callable[[dict, JobData], float]:
    return lambda cfg, job: (fn(cfg["ivector"]) - BASE_MB) * MB


RULES: dict[str, RuleCost] = {
    "prepare_data": RuleCost(
        _per_utt("prepare_data", lambda c, j: PREPARE_BYTES_PER_FRAME * j.frames),
        _per_hour("prepare_data"),
    ),
    "compute_features": RuleCost(_none, _per_hour("compute_features")),
    "merge_features": RuleCost(_none, _per_hour("merge_features")),  # streamed
    "compute_cmvn": RuleCost(_none, _per_hour("compute_cmvn")),  # spk2utt and feats in step
    "ubm_subset": RuleCost(_per_utt("ubm_subset"), _none),
    "ivector_pca": RuleCost(_none, _pca_cpu),
    "ubm_init": RuleCost(_iv(ubm_init_mem_mb), _ubm_init_cpu),
    "ubm_gselect": RuleCost(_iv(ubm_gselect_mem_mb), _per_hour("ubm_gselect")),
    "ubm_acc": RuleCost(_iv(ubm_acc_mem_mb), _per_hour("ubm_acc")),
    "ubm_est": RuleCost(lambda c, j: c["ivector"]["nj"] * _ubm_bytes(c["ivector"]), _none),
    "extractor_init": RuleCost(lambda c, j: 2 * _extractor_bytes(c["ivector"]), _none),
    "extractor_post": RuleCost(_iv(extractor_post_mem_mb), _per_hour("extractor_post")),
    "extractor_acc": RuleCost(_iv(extractor_acc_mem_mb), _per_hour("extractor_acc")),
    "extractor_est": RuleCost(
        lambda c, j: (c["ivector"]["nj"] + 3) * _extractor_bytes(c["ivector"]), _none
    ),
    "extract_ivectors": RuleCost(
        _per_utt(
            "extract_ivectors",
            lambda c, j: _ubm_bytes(c["ivector"]) + 3 * _extractor_bytes(c["ivector"]),
        ),
        _per_hour("extract_ivectors"),
    ),
    "merge_ivectors": RuleCost(_per_utt("merge_ivectors"), _none),
    "egs": RuleCost(_per_utt("egs"), _per_hour("egs")),
    "egs_split": RuleCost(
        _per_utt("egs_split", lambda c, j: (egs_split_mem_mb() - BASE_MB) * MB),
        _per_hour("egs_split"),
    ),
    "egs_archive": RuleCost(
        _egs_archive_mem, lambda c, j: EGS_ARCHIVE_CPU_S * c["egs"]["samples_per_iter"]
    ),
    "egs_subsets": RuleCost(_egs_subsets_mem, _none),  # bounded by num_utts_subset
}


def rule_mem_mb(rule: str, cfg: dict, job: JobData) -> int:
    """Rule ``rule``'s ``mem_mb`` for a job reading ``job`` (the module docstring)."""
    return _mem_mb(RULES[rule].mem(cfg, job))


def rule_runtime(rule: str, cfg: dict, job: JobData) -> int:
    """Rule ``rule``'s ``runtime`` in minutes for a job reading ``job``."""
    cpu_s = RULES[rule].cpu(cfg, job)
    return max(RUNTIME_FLOOR_MIN, math.ceil(RUNTIME_FACTOR * cpu_s / 60))
