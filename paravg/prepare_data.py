"""Preparing a data set: check a user's Kaldi data dir and write ``results/data/<set>``.

What rules ``prepare_data`` (:func:`prepare_data_dir`) and ``check_data_sets``
(:func:`record_checked_sets`) do. Mirrors Kaldi's ``utils/validate_data_dir.sh`` (every
check of :mod:`paravg.data`: tables, targets; and of :mod:`paravg.audio`: headers, segment
ranges, all before anything is written) and the part of ``steps/nnet3/get_egs.sh`` that
skips utterances without targets (a warning each); then writes the normalised copy of the
kept utterances (sorted tables as ``utils/subset_data_dir.sh`` writes them, the targets as
a binary int32 ark + scp, an :class:`paravg.data.Origin` and ``report.json``) atomically.

The source files this reads are listed by :func:`paravg.data.source_files` (the inputs of
rule ``prepare_data``).
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path

import numpy as np

from paravg.audio import check_audio
from paravg.data import (
    OPTIONAL_COPIED_FILES,
    ORIGIN_FILE,
    Origin,
    find_targets_file,
    first_keys,
    iter_checked_targets,
    read_data_dir,
    write_origin,
)
from paravg.errors import DataError
from paravg.io import write_json_atomic
from paravg.kaldi_io import Place, iter_int_vectors, iter_table, write_ark_scp, write_table

log = logging.getLogger(__name__)


# ------------------------------------------------------------------------------ prepare
# Every file a prepared dir may hold (the declared outputs of rule prepare_data and the
# optional copies); only these are ever removed from it.
#: Utterances longer than this are warned about: decoding holds a whole utterance's lattice
#: (paravg.decode.split), and Kaldi recipes segment recordings into utterances of seconds.
LONG_UTTERANCE_S = 180.0
FRAMES_PER_SECOND = 100  # targets are per 10-ms frame

PREPARED_FILES = (
    "wav.scp",
    "utt2spk",
    "spk2utt",
    "utt2uniq",
    "targets.ark",
    "targets.scp",
    ORIGIN_FILE,
    "report.json",
    *OPTIONAL_COPIED_FILES,
)


def prepare_data_dir(
    src: str | os.PathLike,
    dst: str | os.PathLike,
    sample_rate: int,
    max_missing_fraction: float,
    num_targets: int = 0,
) -> dict:
    """Validate the Kaldi data dir ``src`` and write the normalised prepared dir ``dst``.

    All checks run before anything is written: the tables
    (:func:`paravg.data.read_data_dir`), the targets
    (:func:`paravg.data.iter_checked_targets`: ids in ``[0, num_targets)`` when
    ``data.num_targets`` is set), the audio headers (:func:`paravg.audio.check_audio`).
    Utterances without targets are skipped and counted, as Kaldi's ``get_egs.sh`` does (it
    warns per utterance); more than ``max_missing_fraction`` of them is an error.

    ``dst`` gets ``wav.scp`` (recordings still used; plain paths made absolute), ``utt2spk``,
    ``spk2utt``, ``utt2uniq`` (the source's, or the identity: every utterance its own
    source, which is what Kaldi assumes without one), ``targets.ark`` + ``targets.scp``
    (binary int32 vectors), ``origin`` (:class:`Origin`), ``segments``, ``text`` and
    ``reco2file_and_channel`` when ``src`` has them, and ``report.json``. Returns the report.

    Atomic: the files are built in a temporary directory beside ``dst`` that replaces
    ``dst`` at the end; on any error ``dst`` keeps no prepared file at all (no stale
    ``text`` beside a failed preparation).
    """
    src, dst = Path(src), Path(dst)
    if src.resolve() == dst.resolve():
        raise DataError(f"{dst}: the prepared dir must differ from the source dir")
    dst.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{dst.name}.", suffix=".tmp", dir=dst.parent))
    try:
        report = _prepare_into(src, tmp, dst, sample_rate, max_missing_fraction, num_targets)
        _replace_dir(tmp, dst)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        _remove_prepared(dst)
        raise
    return report


def _remove_prepared(dst: Path) -> None:
    for name in PREPARED_FILES:
        with contextlib.suppress(FileNotFoundError):
            (dst / name).unlink()


def _replace_dir(tmp: Path, dst: Path) -> None:
    """Move the finished ``tmp`` to ``dst``: prepared files of ``dst`` are dropped, other
    entries (none are expected) kept; ``tmp`` is renamed in one step when ``dst`` is gone
    or empty."""
    _remove_prepared(dst)
    with contextlib.suppress(FileNotFoundError, OSError):
        dst.rmdir()  # only if empty
    if not dst.exists():
        os.replace(tmp, dst)
        return
    for f in sorted(tmp.iterdir(), key=lambda p: p.name == "report.json"):
        os.replace(f, dst / f.name)  # report.json last: it marks completion
    tmp.rmdir()


def _prepare_into(
    src: Path,
    out: Path,
    dst: Path,
    sample_rate: int,
    max_missing_fraction: float,
    num_targets: int,
) -> dict:
    """Check ``src`` and write the prepared files into ``out`` (which becomes ``dst``)."""
    data = read_data_dir(src, hold_text=False)  # text is streamed when written
    targets_file = find_targets_file(src)
    utts = data.utterances
    # First pass over the targets: every check, and per utterance only its length and
    # place (a vector is read, checked and dropped); whether the file gives the data
    # dir's utterances in their (sorted) order, which lets the second pass stream them.
    places: dict[str, Place] = {}
    sizes: dict[str, int] = {}
    in_order, prev = True, None
    for key, vec, _ in iter_checked_targets(targets_file, num_targets, places):
        sizes[key] = vec.size
        if key in data.utt2spk:
            in_order &= prev is None or key > prev
            prev = key
    audio = check_audio(data, sample_rate)

    missing = [u for u in utts if u not in sizes]
    kept = [u for u in utts if u in sizes]
    fraction = len(missing) / len(utts)
    if not kept or fraction > max_missing_fraction:
        raise DataError(
            f"{targets_file}: {len(missing)} of {len(utts)} utterances "
            f"({100 * fraction:.1f}%) have no targets, more than "
            f"data.max_missing_targets_fraction = {max_missing_fraction}; first: "
            f"{first_keys(missing)}"
        )
    for utt in missing:
        log.warning("%s: no targets for utterance %s, skipping it", targets_file, utt)
    for msg in data.warnings:
        log.warning("%s", msg)
    extra_count = len(sizes) - len(kept)  # the keys of sizes are unique

    # an utterance is kept when it has targets: ``u in sizes`` for the utterances of
    # the data dir (no second table of the kept keys)
    recos = sorted({data.recording(u) for u in kept})

    def wav_value(reco: str) -> str:
        # os.path.realpath (what Path.resolve runs) on the string: pathlib would intern
        # every file name of the corpus
        rx = data.wav[reco]
        if rx.kind == "file":
            return os.path.realpath(rx.target)
        if rx.kind == "offset":
            return f"{os.path.realpath(rx.target)}:{rx.offset}"
        return rx.text

    write_table(out / "wav.scp", ((r, wav_value(r)) for r in recos))
    write_table(out / "utt2spk", ((u, data.utt2spk[u]) for u in kept))
    spk2utt = {}
    for spk, spk_utts in data.spk2utt.items():
        mine = [u for u in spk_utts if u in sizes]
        if mine:
            spk2utt[spk] = mine
    write_table(out / "spk2utt", ((s, " ".join(us)) for s, us in spk2utt.items()))
    num_speakers = len(spk2utt)
    del spk2utt
    uniq = data.utt2uniq or {}
    write_table(out / "utt2uniq", ((u, uniq.get(u, u)) for u in kept))
    if data.segments is not None:
        write_table(out / "segments", ((u, data.segments[u].text) for u in kept))
    if data.text_file is not None:
        # the source's lines of kept utterances, in its (checked, sorted) order: the order
        # of ``kept``; every key of text is an utterance (read_data_dir checked it)
        write_table(
            out / "text",
            (
                (line.key, line.rest)
                for line in iter_table(data.text_file, min_fields=1)
                if line.key in sizes
            ),
        )
    if data.reco2file_and_channel is not None:
        r2fc = data.reco2file_and_channel
        write_table(out / "reco2file_and_channel", ((r, r2fc[r]) for r in recos if r in r2fc))
    largest = {"max": -1}

    def kept_targets() -> Iterator[tuple[str, np.ndarray]]:
        """Second pass: the kept utterances' vectors in their order. Streamed when the
        file has them in that order (Kaldi's tables are sorted); else the kept vectors
        are read into a table first (the memory of one copy of the set's targets)."""
        every = ((k, v.astype(np.int32)) for k, v, _ in iter_int_vectors(targets_file))
        if in_order:
            vectors = ((k, v) for k, v in every if k in data.utt2spk)
        else:
            table = {k: v for k, v in every if k in data.utt2spk}
            vectors = ((u, table.pop(u)) for u in kept)
        for key, vec in vectors:
            largest["max"] = max(largest["max"], int(vec.max()))
            yield key, vec

    write_ark_scp(
        kept_targets(),
        out / "targets.ark",
        out / "targets.scp",
        scp_ark_path=dst / "targets.ark",
    )
    seg_file = src / "segments"
    segments = data.segments
    origin_files = {
        "wav.scp": str((src / "wav.scp").resolve()),
        "segments": str(seg_file.resolve()) if segments is not None else None,
        "targets": str(targets_file.resolve()),
    }
    write_origin(
        out,
        (
            (
                u,
                data.wav_lines[data.recording(u)],
                segments[u].lineno if segments else 0,
                places[u],
            )
            for u in kept
        ),
    )
    long_utts = [u for u in kept if sizes[u] > LONG_UTTERANCE_S * FRAMES_PER_SECOND]
    if long_utts:
        longest = max(long_utts, key=lambda u: sizes[u])
        origin = Origin(
            wav_scp=origin_files["wav.scp"],
            segments=origin_files["segments"],
            targets=origin_files["targets"],
            wav_line={longest: data.wav_lines[data.recording(longest)]},
            segment_line={longest: segments[longest].lineno} if segments else {},
            targets_place={longest: places[longest]},
        )
        long_warning = (
            f"{len(long_utts)} utterance(s) longer than {LONG_UTTERANCE_S / 60:g} minutes, the "
            f"longest {sizes[longest] / FRAMES_PER_SECOND / 60:.1f} minutes "
            f"({origin.wav(longest)}): decoding holds a whole utterance's "
            "lattice (decode.mem_mb_per_minute, decode.max_mem_mb); Kaldi recipes segment "
            "recordings into utterances of seconds (a segments file)"
        )
        log.warning("%s", long_warning)
        data.warnings.append(long_warning)

    frames = int(sum(sizes[u] for u in kept))
    report = {
        "source": str(src.resolve()),
        "source_files": origin_files,
        "targets_source": str(targets_file.resolve()),
        "sample_rate": sample_rate,
        "num_recordings": len(recos),
        "num_utterances": len(utts),
        "num_utterances_kept": len(kept),
        "num_speakers": num_speakers,
        "num_missing_targets": len(missing),
        "missing_targets_fraction": round(fraction, 6),
        "skipped_utterances": missing,
        "num_targets_without_utterance": extra_count,
        "num_target_frames": frames,
        "num_targets_configured": num_targets,
        "max_target": largest["max"],
        "duration_s_checked": audio["duration_s"],
        "unchecked_pipe_recordings": len(audio["unchecked_pipes"]),
        "has_segments": data.segments is not None,
        "has_text": data.text_file is not None,
        "has_utt2uniq": data.utt2uniq is not None,
        "warnings": data.warnings,
    }
    write_json_atomic(out / "report.json", report)
    log.info(
        "prepared %s -> %s: %d of %d utterances kept, %d speakers, %d target frames",
        src,
        dst,
        len(kept),
        len(utts),
        num_speakers,
        frames,
    )
    return report


def record_checked_sets(reports: Mapping[str, str], out: str | Path) -> None:
    """Write ``out``: the configured sets, each with the report :func:`prepare_data_dir`
    wrote after every check passed. The file is the gate every feature job waits for
    (rule ``check_data_sets``); its content only documents it."""
    sets = {name: str(path) for name, path in sorted(reports.items())}
    write_json_atomic(out, {"sets": sets})
    log.info("checked sets: %s", ", ".join(sets))
