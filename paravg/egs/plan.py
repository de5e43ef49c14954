"""The egs plan: held-out utterances, split jobs and the number of archives.

Mirrors the first stages of Kaldi's ``steps/nnet3/get_egs.sh``:

* ``num_archives = num_frames // (frames_per_eg · samples_per_iter) + 1`` and
  ``egs_per_archive = num_frames // (frames_per_eg · num_archives)`` (≤ samples_per_iter),
  with num_frames the total frames of the data (``get_num_frames.sh``). Kaldi's rounding
  to a multiple of ``archives_multiple`` (a file-handle limit) is not needed here.
* ``valid``: ``n`` random utterances, expanded over ``utt2uniq`` to every perturbed copy
  of the same source utterance; they are excluded from the training archives.
  ``train_subset``: ``n`` random utterances of the rest, not excluded (training-set
  diagnostics and the final combination).
* Subset size. Kaldi aborts unless the data has more than 4·n utterances. Here the size
  is reduced instead: n = min(egs.num_utts_subset, (N − 1) // 4) for N usable utterances,
  the largest size Kaldi would accept, so at most a quarter of the data is held out. The
  reduction is logged and recorded in ``info.notes``; fewer than 5 usable utterances is
  an error.
* Usable utterances are those of ``feats.scp`` with targets (and i-vectors when used)
  and at least ``frames_per_eg`` frames; others give no egs (Kaldi skips them with a
  warning) and are counted in ``info``. Held-out utterances are drawn among usable ones.
* Split jobs: the training utterances are split into ``egs.nj`` jobs by speaker, keeping
  each speaker in one job (``split_data.sh``), contiguous in sorted speaker order.

Chunk egs (``egs.chunk_width``, ``steps/nnet3/train_rnn.py`` → ``get_egs.sh``): F above
is the principal (first) width, as get_egs.sh sizes the archives with it (samples_per_iter
counts chunks); an utterance is usable with at least the smallest width; the contexts
are the chunk contexts plus the model's (:class:`paravg.egs.chunking.ChunkOptions`), the
model's being ``left_context`` / ``right_context`` of :class:`EgsOptions`.

All draws are seeded from ``egs.srand``. The plan reads every target vector and i-vector
matrix once to check lengths before any eg is written.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from paravg.egs.chunking import ChunkOptions, UtteranceSplitter, utterance_rng
from paravg.egs.info import EgsInfo
from paravg.egs.inputs import (
    check_ivector_rows,
    read_int_table,
    read_ivector_period,
    read_lengths,
    read_scp_keys,
    read_utt2spk,
    read_utt2uniq,
)
from paravg.errors import ConfigError, DataError
from paravg.kaldi_io import iter_scp, load_scp, write_table

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class EgsOptions:
    """The ``egs`` config section plus the context and the number of targets (with chunk
    egs the context is the model's; the chunk keys as :class:`ChunkOptions` reads them,
    None when absent)."""

    frames_per_eg: int = 8
    left_context: int = 4
    right_context: int = 4
    samples_per_iter: int = 400000
    num_utts_subset: int = 300
    num_frames_diagnostic: int = 10000
    num_train_frames_combine: int = 60000
    targets_length_tolerance: int = 2
    compress: bool = True
    nj: int = 2
    srand: int = 0
    num_targets: int = 0  # 0 = 1 + the largest target seen
    chunk_width: int | str | None = None
    chunk_left_context: int | None = None
    chunk_right_context: int | None = None
    chunk_left_context_initial: int | None = None
    chunk_right_context_final: int | None = None

    @property
    def chunks(self) -> ChunkOptions | None:
        """The chunk egs options (None: frame egs)."""
        return ChunkOptions.from_egs_config(
            {k: v for k, v in dataclasses.asdict(self).items() if k.startswith("chunk_")}
        )

    def info_fields(self) -> dict:
        """The ``info.json`` fields these options alone decide (the egs geometry before
        any data is read): egs made with other options differ in one of them."""
        chunks = self.chunks
        widths = chunks.widths if chunks else (self.frames_per_eg,)
        left, right, left_initial, right_final = (
            chunks.contexts(self.left_context, self.right_context)
            if chunks
            else (self.left_context, self.right_context, None, None)
        )
        return {
            "frames_per_eg": widths[0],  # archive sizing: the principal width
            "left_context": left,
            "right_context": right,
            "samples_per_iter": self.samples_per_iter,
            "srand": self.srand,
            "compress": self.compress,
            "nj": self.nj,
            "targets_length_tolerance": self.targets_length_tolerance,
            "num_utts_subset_requested": self.num_utts_subset,
            "num_egs_diagnostic": self.num_frames_diagnostic // widths[0],
            "num_egs_combine": self.num_train_frames_combine // widths[0],
            "chunk_widths": list(chunks.widths) if chunks else None,
            "left_context_initial": left_initial,
            "right_context_final": right_final,
        }

    def stale_fields(self, info: dict) -> list[str]:
        """The fields of an existing ``info.json`` that these options would not write (a
        field it lacks counts only for the chunk fields, absent from frame egs' info)."""
        return [
            k
            for k, v in self.info_fields().items()
            if (k in info or k.startswith(("chunk_", "left_context_", "right_context_")))
            and info.get(k) != v
        ]

    @classmethod
    def from_config(
        cls, egs: dict, left_context: int, right_context: int, num_targets: int = 0
    ) -> EgsOptions:
        known = {f.name for f in dataclasses.fields(cls)} - {"left_context", "right_context"}
        unknown = sorted(set(egs) - known)
        if unknown:
            raise ConfigError(f"egs: unknown option(s) {unknown}; known: {sorted(known)}")
        return cls(
            left_context=left_context, right_context=right_context, num_targets=num_targets, **egs
        )


def num_archives_for(num_frames: int, frames_per_eg: int, samples_per_iter: int) -> int:
    """Kaldi: ``num_frames // (frames_per_eg · samples_per_iter) + 1``."""
    return num_frames // (frames_per_eg * samples_per_iter) + 1


#: Kaldi's ``--samples-per-iter`` (get_egs.sh, train_dnn.py): the archive size of real corpora.
KALDI_SAMPLES_PER_ITER = 400_000
#: How far (a factor) the archive count may be from Kaldi's before the plan warns.
ARCHIVE_FACTOR = 10


def archive_count_warning(num_frames: int, frames_per_eg: int, samples_per_iter: int) -> str | None:
    """A warning when ``egs.samples_per_iter`` gives an archive count more than
    :data:`ARCHIVE_FACTOR` times off the count Kaldi's 400,000 would give for the same
    frames (:func:`num_archives_for` both); None when within. The demo's 2,500 gives 18,001
    archives at 1,000 h where Kaldi makes 113 (and as many times the iterations)."""
    ours = num_archives_for(num_frames, frames_per_eg, samples_per_iter)
    kaldi = num_archives_for(num_frames, frames_per_eg, KALDI_SAMPLES_PER_ITER)
    if max(ours, kaldi) <= ARCHIVE_FACTOR * min(ours, kaldi):
        return None
    return (
        f"egs.samples_per_iter = {samples_per_iter} gives {ours:,} archives for "
        f"{num_frames:,} frames, Kaldi's {KALDI_SAMPLES_PER_ITER} would give {kaldi:,} "
        f"(more than {ARCHIVE_FACTOR}x apart): on a real corpus set egs.samples_per_iter "
        "near 400000 (config/experiments/kaldi_scale.yaml, docs/kaldi-scale.md)"
    )


def egs_per_archive_for(num_frames: int, frames_per_eg: int, num_archives: int) -> int:
    """Kaldi: ``num_frames // (frames_per_eg · num_archives)``."""
    return num_frames // (frames_per_eg * num_archives)


def effective_subset_size(num_utts: int, requested: int) -> int:
    """min(requested, (N − 1) // 4): Kaldi requires N > 4·n; error below 5 utterances."""
    n = min(requested, (num_utts - 1) // 4)
    if n < 1:
        raise DataError(
            f"only {num_utts} usable utterances for egs: need at least 5 (Kaldi needs more "
            f"than 4 x egs.num_utts_subset to hold out validation utterances)"
        )
    return n


def choose_heldout(
    utts: list[str], n: int, srand: int, utt2uniq: dict[str, str] | None = None
) -> tuple[list[str], list[str]]:
    """(valid, train_subset), both sorted. valid is expanded over ``utt2uniq`` copies."""
    rng = np.random.default_rng([srand, 101])
    pool = sorted(utts)
    valid = {pool[i] for i in rng.permutation(len(pool))[:n]}
    if utt2uniq:
        sources = {utt2uniq.get(u, u) for u in valid}
        valid = {u for u in pool if utt2uniq.get(u, u) in sources}
    rest = [u for u in pool if u not in valid]
    subset = [rest[i] for i in rng.permutation(len(rest))[:n]]
    return sorted(valid), sorted(subset)


def split_by_speaker(utts: Iterable[str], utt2spk: dict[str, str], nj: int) -> list[list[str]]:
    """Split utterances into ``nj`` lists, each speaker in one list, balanced by count."""
    by_spk: dict[str, list[str]] = {}
    for u in sorted(utts):
        by_spk.setdefault(utt2spk[u], []).append(u)
    total = sum(len(v) for v in by_spk.values())
    jobs: list[list[str]] = [[] for _ in range(nj)]
    done = 0
    for spk in sorted(by_spk):
        j = min(nj - 1, done * nj // max(total, 1))
        jobs[j].extend(by_spk[spk])
        done += len(by_spk[spk])
    return [sorted(j) for j in jobs]


def write_uttlist(path: str | os.PathLike, utts: list[str], lengths: dict[str, int]) -> None:
    """``<utt> <num_frames>`` per line (a subset of ``utt2num_frames``), written as it goes."""
    write_table(path, ((u, lengths[u]) for u in utts))


def read_uttlist(path: str | os.PathLike) -> list[tuple[str, int]]:
    return list(read_int_table(path).items())


def iter_uttlist(path: str | os.PathLike) -> Iterator[tuple[str, int]]:
    """``(utt, num_frames)`` of each line of an utterance list, read as it goes (the
    list is not held: a split job reads it once to count, once to write)."""
    with open(path, encoding="utf-8") as f:
        for lineno, line in enumerate(f, start=1):
            parts = line.split()
            if len(parts) != 2 or not parts[1].isdigit():
                raise DataError(f"{path}:{lineno}: expected '<utt> <num_frames>', got {line!r}")
            yield parts[0], int(parts[1])


def count_egs(
    utts: Iterable[tuple[str, int]], frames_per_eg: int, srand: int, alternatives: tuple = ()
) -> int:
    """Number of egs the chunker gives these utterances (same draws as the writer)."""
    splitter = UtteranceSplitter(frames_per_eg, tuple(alternatives))
    return sum(len(splitter.chunk_sizes(T, utterance_rng(srand, u))) for u, T in utts)


def _scan_targets(
    targets_scp: str, wanted: dict[str, int], tolerance: int
) -> tuple[set[str], int, str]:
    """The wanted utterances that have targets, each checked against its feature length
    (``egs.targets_length_tolerance``), the largest target id among them and the
    ``scp:line: utterance`` that holds it."""
    have: set[str] = set()
    largest, where_largest = -1, ""
    for utt, where, vec in iter_scp(targets_scp, wanted):  # streamed: no table held
        vec = np.asarray(vec)
        if vec.ndim != 1:
            raise DataError(f"{targets_scp}: utterance {utt}: expected an int vector")
        if len(vec) and vec.min() < 0:
            raise DataError(f"{targets_scp}: utterance {utt}: negative target {vec.min()}")
        if abs(len(vec) - wanted[utt]) > tolerance:
            raise DataError(
                f"{targets_scp}: utterance {utt}: {len(vec)} targets but {wanted[utt]} feature "
                f"frames (tolerance {tolerance} frames, egs.targets_length_tolerance)"
            )
        have.add(sys.intern(utt))
        if len(vec) and int(vec.max()) > largest:
            largest, where_largest = int(vec.max()), where
    return have, largest, where_largest


def plan_egs(
    feats_scp: str | os.PathLike,
    utt2num_frames: str | os.PathLike,
    targets_scp: str | os.PathLike,
    utt2spk: str | os.PathLike,
    info_out: str | os.PathLike,
    lists_dir: str | os.PathLike,
    options: EgsOptions,
    ivector_scp: str | os.PathLike | None = None,
    ivector_period_file: str | os.PathLike | None = None,
    utt2uniq: str | os.PathLike | None = None,
) -> EgsInfo:
    """Check the inputs, choose held-out utterances and jobs, write lists and ``info``.

    Writes ``lists_dir/valid``, ``lists_dir/train_subset``, ``lists_dir/job.<j>``
    (j = 0 .. nj − 1; ``<utt> <num_frames>`` lines) and then ``info_out``.
    """
    o = options
    F = o.frames_per_eg
    chunks = o.chunks
    widths = chunks.widths if chunks else (F,)
    F = widths[0]  # archive sizing: the principal width
    # Per utterance this holds its name (once, shared by every table below), its frame
    # count and its speaker (one string per speaker); the other tables are streamed.
    lengths = read_lengths(utt2num_frames)
    utts = read_scp_keys(feats_scp)
    missing = next((u for u in utts if u not in lengths), None)
    if missing is not None:
        raise DataError(f"{utt2num_frames}: no entry for utterance {missing} of {feats_scp}")
    spk = read_utt2spk(utt2spk)
    no_spk = next((u for u in utts if u not in spk), None)
    if no_spk is not None:
        raise DataError(f"{utt2spk}: no speaker for utterance {no_spk} of {feats_scp}")
    num_frames = sum(lengths[u] for u in utts)
    # the same keys when every length is of an utterance: no copy
    wanted = lengths if len(lengths) == len(utts) else {u: lengths[u] for u in utts}

    have, largest, where_largest = _scan_targets(
        str(targets_scp), wanted, o.targets_length_tolerance
    )
    num_targets = o.num_targets or largest + 1
    if largest >= num_targets:
        raise DataError(f"{where_largest}: target id {largest} >= data.num_targets ({num_targets})")

    ivector_dim = period = 0
    if ivector_scp:
        if not ivector_period_file:
            raise ValueError("ivector_scp given without ivector_period_file")
        period = read_ivector_period(ivector_period_file)
        ivec_have = set()
        for u, _, mat in iter_scp(ivector_scp, wanted):  # streamed: no table held
            mat = np.asarray(mat)
            check_ivector_rows(u, mat.shape[0], wanted[u], period, str(ivector_scp))
            if ivector_dim and mat.shape[1] != ivector_dim:
                raise DataError(
                    f"{ivector_scp}: utterance {u}: i-vector dim {mat.shape[1]}, others have "
                    f"{ivector_dim}"
                )
            ivector_dim = mat.shape[1]
            ivec_have.add(u)
        have &= ivec_have

    skipped = [u for u in utts if u not in have]
    too_short = [u for u in utts if u in have and wanted[u] < min(widths)]
    usable = [u for u in utts if u in have and wanted[u] >= min(widths)]
    for u in skipped[:10]:
        log.warning(
            "utterance %s has no targets%s: no egs", u, " or i-vectors" if ivector_scp else ""
        )
    if too_short:
        log.warning(
            "%d utterances shorter than %d frames give no egs (e.g. %s)",
            len(too_short),
            min(widths),
            too_short[0],
        )

    notes: list[str] = []
    n_subset = effective_subset_size(len(usable), o.num_utts_subset)
    if n_subset < o.num_utts_subset:
        note = (
            f"egs.num_utts_subset reduced from {o.num_utts_subset} to {n_subset}: only "
            f"{len(usable)} usable utterances (Kaldi needs more than 4 x the subset size)"
        )
        log.warning(note)
        notes.append(note)
    uniq = read_utt2uniq(utt2uniq) if utt2uniq and Path(utt2uniq).exists() else None
    valid, train_subset = choose_heldout(usable, n_subset, o.srand, uniq)
    valid_set = set(valid)
    train = [u for u in usable if u not in valid_set]
    jobs = split_by_speaker(train, spk, o.nj)

    lists_dir = Path(lists_dir)
    write_uttlist(lists_dir / "valid", valid, lengths)
    write_uttlist(lists_dir / "train_subset", train_subset, lengths)
    for j, job in enumerate(jobs):
        write_uttlist(lists_dir / f"job.{j}", job, lengths)

    feat_dim = int(np.asarray(load_scp(feats_scp, keys={utts[0]})[utts[0]]).shape[1])
    num_archives = num_archives_for(num_frames, F, o.samples_per_iter)
    if warning := archive_count_warning(num_frames, F, o.samples_per_iter):
        log.warning(warning)
    info = EgsInfo(
        **o.info_fields(),
        num_archives=num_archives,
        egs_per_archive=egs_per_archive_for(num_frames, F, num_archives),
        num_frames=num_frames,
        feat_dim=feat_dim,
        ivector_dim=ivector_dim,
        ivector_period=period,
        num_targets=num_targets,
        num_utts=len(usable),
        num_utts_subset=n_subset,
        num_valid_utts=len(valid),
        num_train_subset_utts=len(train_subset),
        num_train_utts=len(train),
        num_train_egs=count_egs(((u, lengths[u]) for u in train), F, o.srand, widths[1:]),
        num_utts_too_short=len(too_short),
        num_utts_skipped=len(skipped),
        notes=notes,
    )
    info.save(info_out)
    log.info(
        "egs plan: %d frames, %d archives of ~%d egs, %d train / %d valid / %d train-subset "
        "utterances, %d train egs",
        num_frames,
        num_archives,
        info.egs_per_archive,
        len(train),
        len(valid),
        len(train_subset),
        info.num_train_egs,
    )
    return info
