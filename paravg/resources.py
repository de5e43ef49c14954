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

The GMM stage's rules (:data:`GMM_RULES`, rules/gmm.smk; D = 39, the deltas of 13
MFCCs; G the most Gaussians of the ``gmm`` section; a job's share is ``gmm.nj``'s of
``data.train_set`` before perturbation, "source", or of the ``set`` wildcard's set). Each
job streams its tables (Kaldi's sequential readers), so its working set is bounded by a
chunk, the model and one utterance (:data:`GMM_UTT_FRAMES`, a generous 30 s):

* ``gmm_acc``: one chunk of :data:`paravg.gmm.accumulate.CHUNK_FRAMES` frames (5 x D
  float64 a frame: the utterances, their float64 copy, one pdf's rows and squares) and
  the largest pdf's [T, M] log-likelihoods x 3 (:data:`MAX_GAUSS_PER_PDF`), plus the
  model (4 x G x D float64) and the accumulators (G x (2D + 1) float64).
* ``gmm_tree_acc``: one chunk (4 x D float64 and 4 x (N + 1) int64 a frame) and 3 x
  :data:`TREE_EVENTS` events of stats (the running sum, the chunk's, their concatenation
  in ``sum-tree-stats``'s sum); ``gmm_tree``: ``gmm.nj`` + 4 such copies and the model.
* ``gmm_est``: ``gmm.nj`` + 1 accumulators and 2 models (``gmm-sum-accs | gmm-est``).
* the aligners (``gmm_align_equal``, ``gmm_realign``, ``gmm_mono_align_si``,
  ``gmm_align_set``): the model and its ``gmm-boost-silence`` copy, one utterance's
  features, Viterbi traceback over its training graph (:data:`MAX_GRAPH_STATES` int32 a
  frame) and log-likelihoods of every pdf (float64 a frame).
* ``gmm_feats``, ``gmm_convert_ali``, ``gmm_targets``, ``gmm_phones``: one utterance's
  audio and features, two models; ``gmm_mono_init``: its :data:`MONO_INIT_UTTS`
  utterances; ``gmm_lang``: nothing (the lexicon); ``gmm_dict`` (the demo's lexicon,
  learnt from the training text and phone timings, all held): 12,000 bytes an utterance
  (its RSS grew 39 MB from 2,257 to 9,044 utterances, x 2).

Their CPU per hour of the job's share (:data:`CPU_S_PER_HOUR`; the E-step's and the
aligners' scaled by the Gaussians per pdf over the default's) is the largest job's of
``benchmarks/bench_data_scale.py --minutes 171 686`` (gmm.nj 2) rounded up; the whole
rule's CPU s at 2 h / 8 h of training audio: gmm_feats 33 / 165 (6 jobs), gmm_mono_init
0.2 / 0.6, gmm_align_equal 2.3 / 11.9 (2), gmm_acc 34.7 / 135.5 (38), gmm_est 7.6 / 10.8
(19), gmm_realign 55.4 / 297.9 (16), gmm_mono_align_si 6.1 / 31.6 (2), gmm_tree_acc 3.8 /
18.9 (2), gmm_tree 1.4 / 2.1, gmm_convert_ali 2.6 / 11.3 (2), gmm_align_set 13.1 / 53.3
(6), gmm_targets 2.5 / 3.6 (3), gmm_dict 9.3 / 40.7. ``gmm_lang``, ``gmm_mono_init`` and
``gmm_est`` read no corpus (the floor).

Each formula is checked against the jobs' measured peaks (``max_rss_mb`` of their logs,
:mod:`paravg.logs`) at two corpus sizes in ``tests/pipeline/test_resources.py``; the GMM
rules' on the tiny GMM run of ``tests/pipeline/test_gmm_targets.py``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from paravg.egs.shuffle import BLOCK_BYTES as GATHER_BYTES
from paravg.egs.split import BUFFER_BYTES, DRAW_BLOCK
from paravg.gmm.accumulate import CHUNK_FRAMES as GMM_CHUNK_FRAMES
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
    # the GMM stage (data.targets: gmm): "source" is data.train_set before perturbation
    "gmm_dict": ("source", None),
    "gmm_lang": (None, None),
    "gmm_feats": ("set", "gmm"),
    "gmm_mono_init": (None, None),
    "gmm_align_equal": ("source", "gmm"),
    "gmm_acc": ("source", "gmm"),
    "gmm_est": (None, None),
    "gmm_realign": ("source", "gmm"),
    "gmm_mono_align_si": ("source", "gmm"),
    "gmm_tree_acc": ("source", "gmm"),
    "gmm_tree": ("source", None),
    "gmm_convert_ali": ("source", "gmm"),
    "gmm_align_set": ("set", "gmm"),
    "gmm_targets": ("set", None),
    "gmm_phones": ("set", None),
}

#: The GMM stage's rules (rules/gmm.smk), run only with ``data.targets: gmm``.
GMM_RULES = tuple(r for r in JOB_SHARE if r.startswith("gmm_"))

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
    "gmm_dict": 12_000,
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
    # the GMM stage, per hour of the job's share at the default gmm section (measured per
    # job at 8 h of training audio, gmm.nj 2: 4 h a job; the whole rule's CPU s at 2 h / 8 h
    # in the GMM section of the module docstring)
    "gmm_dict": 8.0,  # 40.7 s at 8 h (one job)
    "gmm_feats": 20.0,  # 58.6 s a job of 4 h
    "gmm_align_equal": 3.0,  # 6.5
    "gmm_acc": 2.0,  # 4.2
    "gmm_realign": 20.0,  # 57.6 (the first realignments, initial_beam 6: the slowest)
    "gmm_mono_align_si": 20.0,  # 16.6
    "gmm_tree_acc": 4.0,  # 9.8 before streaming
    "gmm_tree": 0.5,  # 2.1 at 8 h (one job)
    "gmm_convert_ali": 3.0,  # 5.8
    "gmm_align_set": 20.0,  # 18.3 (train, 4 h)
    "gmm_targets": 0.5,  # 1.2 (train, 8 h)
    "gmm_phones": 0.5,  # as gmm_targets (not in the benchmark's run)
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


# ------------------------------------------------------------------ the GMM stage
GMM_DIM = 39  # 13 MFCCs (conf/mfcc.conf) with deltas and delta-deltas (add-deltas)
GMM_UTT_FRAMES = SUBSET_UTT_FRAMES  # one utterance: a generous 30 s
MAX_GAUSS_PER_PDF = 64  # the largest pdf's Gaussians (mixup: ~5-8 on average)
TREE_EVENTS = 100_000  # a job's tree-stat events (the demo: ~10,000 at 8 h)
MONO_INIT_UTTS = 10  # rule gmm_mono_init's num_utts (train_mono.sh's first 10)
MAX_GRAPH_STATES = 1_000  # states of one utterance's training graph (~10 per phone)


def _gmm_gauss(cfg: dict) -> int:
    g = cfg["gmm"]
    return max(g["mono"]["totgauss"], g["tri"]["tot_gauss"], g["tri"]["num_leaves"])


def _gmm_model_bytes(cfg: dict) -> float:
    """The model in Kaldi's form and its numpy parameters: 4 x Gaussians x dim float64."""
    return 4 * _gmm_gauss(cfg) * GMM_DIM * 8


def _gmm_acc_bytes(cfg: dict) -> float:
    """One job's accumulators (occupancy, Σγx, Σγx² per Gaussian)."""
    return _gmm_gauss(cfg) * (2 * GMM_DIM + 1) * 8


def _gmm_chunk_mem(cfg: dict, job: JobData) -> float:
    """gmm_acc: a chunk of ``CHUNK_FRAMES`` frames (the float32 utterances, their float64
    copy, one pdf's rows and squares: 5 x D float64 a frame), the largest pdf's [T, M]
    log-likelihoods, shifted exponentials and posteriors, the model and accumulators."""
    per_frame = 8 * (5 * GMM_DIM + 3 * MAX_GAUSS_PER_PDF)
    return GMM_CHUNK_FRAMES * per_frame + _gmm_model_bytes(cfg) + _gmm_acc_bytes(cfg)


def _tree_event_bytes(cfg: dict) -> float:
    width = 3  # train_deltas.sh's triphones (context_width 3)
    return 8 * (2 * GMM_DIM + 1 + width + 1)


def _gmm_tree_acc_mem(cfg: dict, job: JobData) -> float:
    """gmm_tree_acc: a chunk's frames (the float64 rows, their squares and the grouped
    sums' flattened copies: 4 x D float64; its windows, pdf-classes and events: 4 x
    (N + 1) int64) and the stats summed so far, the chunk's and their concatenation
    (3 x ``TREE_EVENTS`` events)."""
    per_frame = 8 * (4 * GMM_DIM + 4 * 4)
    return GMM_CHUNK_FRAMES * per_frame + 3 * TREE_EVENTS * _tree_event_bytes(cfg)


def _gmm_tree_mem(cfg: dict, job: JobData) -> float:
    """gmm_tree: the ``gmm.nj`` jobs' stats loaded, their sum, and the tree build's
    per-question sums (~3 copies), plus the new model."""
    copies = cfg["gmm"]["nj"] + 4
    return copies * TREE_EVENTS * _tree_event_bytes(cfg) + _gmm_model_bytes(cfg)


def _gmm_est_mem(cfg: dict, job: JobData) -> float:
    """gmm_est: the ``gmm.nj`` accumulators loaded and their sum (gmm-sum-accs), the
    model and its update."""
    return (cfg["gmm"]["nj"] + 1) * _gmm_acc_bytes(cfg) + 2 * _gmm_model_bytes(cfg)


def _gmm_utt_mem(cfg: dict, job: JobData) -> float:
    """One utterance's features and audio (gmm_feats, gmm_convert_ali, gmm_targets,
    gmm_phones: a table entry at a time), two models (convert-ali's old and new)."""
    audio = 30 * 16_000 * 8  # 30 s at 16 kHz, float64
    return GMM_UTT_FRAMES * GMM_DIM * 8 * 4 + audio + 2 * _gmm_model_bytes(cfg)


def _gmm_align_mem(cfg: dict, job: JobData) -> float:
    """An aligner (gmm_align_equal, gmm_realign, gmm_mono_align_si, gmm_align_set): the
    model (and its gmm-boost-silence copy) and one utterance's decoding: its features,
    its training graph's Viterbi traceback (``MAX_GRAPH_STATES`` x frames int32) and the
    frames' log-likelihoods of every pdf (float64)."""
    pdfs = max(cfg["gmm"]["tri"]["num_leaves"], cfg["gmm"]["mono"]["totgauss"] // 4)
    per_frame = GMM_DIM * 8 * 2 + 4 * MAX_GRAPH_STATES + 8 * pdfs
    return GMM_UTT_FRAMES * per_frame + 2 * _gmm_model_bytes(cfg)


def _gmm_mono_init_mem(cfg: dict, job: JobData) -> float:
    """gmm_mono_init: its first ``MONO_INIT_UTTS`` utterances (float32 and float64)."""
    return MONO_INIT_UTTS * GMM_UTT_FRAMES * GMM_DIM * 12 + _gmm_model_bytes(cfg)


def _gmm_scale(cfg: dict) -> float:
    """Gaussians per pdf over the default config's (mono: totgauss 1000 over the lang's
    ~130 pdfs; tri: tot_gauss 2500 over 500 leaves): the per-frame work of the E-step
    and of the aligners' likelihoods."""
    g = cfg["gmm"]
    return max(g["mono"]["totgauss"] / 1000, g["tri"]["tot_gauss"] / g["tri"]["num_leaves"] / 5)


def _gmm_per_hour(rule: str, scaled: bool = False):
    return lambda cfg, job: CPU_S_PER_HOUR[rule] * job.hours * (_gmm_scale(cfg) if scaled else 1.0)


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
    "gmm_dict": RuleCost(_per_utt("gmm_dict"), _gmm_per_hour("gmm_dict")),  # the demo's
    "gmm_lang": RuleCost(_none, _none),  # the lexicon (prepare_lang.sh)
    "gmm_feats": RuleCost(_gmm_utt_mem, _gmm_per_hour("gmm_feats")),
    "gmm_mono_init": RuleCost(_gmm_mono_init_mem, _none),
    "gmm_align_equal": RuleCost(_gmm_align_mem, _gmm_per_hour("gmm_align_equal")),
    "gmm_acc": RuleCost(_gmm_chunk_mem, _gmm_per_hour("gmm_acc", scaled=True)),
    "gmm_est": RuleCost(_gmm_est_mem, _none),
    "gmm_realign": RuleCost(_gmm_align_mem, _gmm_per_hour("gmm_realign", scaled=True)),
    "gmm_mono_align_si": RuleCost(_gmm_align_mem, _gmm_per_hour("gmm_mono_align_si", scaled=True)),
    "gmm_tree_acc": RuleCost(_gmm_tree_acc_mem, _gmm_per_hour("gmm_tree_acc")),
    "gmm_tree": RuleCost(_gmm_tree_mem, _gmm_per_hour("gmm_tree")),
    "gmm_convert_ali": RuleCost(_gmm_utt_mem, _gmm_per_hour("gmm_convert_ali")),
    "gmm_align_set": RuleCost(_gmm_align_mem, _gmm_per_hour("gmm_align_set", scaled=True)),
    "gmm_targets": RuleCost(_gmm_utt_mem, _gmm_per_hour("gmm_targets")),
    "gmm_phones": RuleCost(_gmm_utt_mem, _gmm_per_hour("gmm_phones")),
}


def rule_mem_mb(rule: str, cfg: dict, job: JobData) -> int:
    """Rule ``rule``'s ``mem_mb`` for a job reading ``job`` (the module docstring)."""
    return _mem_mb(RULES[rule].mem(cfg, job))


def rule_runtime(rule: str, cfg: dict, job: JobData) -> int:
    """Rule ``rule``'s ``runtime`` in minutes for a job reading ``job``."""
    cpu_s = RULES[rule].cpu(cfg, job)
    return max(RUNTIME_FLOOR_MIN, math.ceil(RUNTIME_FACTOR * cpu_s / 60))
