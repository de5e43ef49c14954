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
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from paravg.audio import check_audio_rows
from paravg.data import (
    OPTIONAL_COPIED_FILES,
    ORIGIN_FILE,
    Origin,
    ScannedDataDir,
    UtteranceRow,
    find_targets_file,
    iter_checked_targets,
    iter_utterance_rows,
    scan_data_dir,
)
from paravg.errors import DataError
from paravg.io import write_json_atomic
from paravg.kaldi_io import (
    Place,
    RxFilename,
    iter_int_vectors,
    iter_table,
    parse_rxfilename,
    write_ark_scp,
)

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
    (:func:`paravg.data.scan_data_dir`: those of :func:`paravg.data.read_data_dir`, read
    line by line), the targets (:func:`paravg.data.iter_checked_targets`: ids in
    ``[0, num_targets)`` when ``data.num_targets`` is set), the audio headers
    (:func:`paravg.audio.check_audio_rows`). Nothing is held per utterance for a data dir
    in Kaldi's sorted order (:func:`_prepare_into`).
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


class _Skipped:
    """The utterances without targets, in utterance order: their count and their names
    up to ``limit`` (what ``report.json`` lists when their fraction is allowed; beyond
    it the preparation fails, naming the first few)."""

    def __init__(self, limit: int):
        self.limit, self.count, self.keys = max(limit, 5), 0, []

    def add(self, key: str) -> None:
        self.count += 1
        if self.count <= self.limit:
            self.keys.append(key)

    def __str__(self) -> str:  # as paravg.data.first_keys shows a sorted list
        more = f" ... ({self.count} in all)" if self.count > 5 else ""
        return ", ".join(repr(x) for x in self.keys[:5]) + more


@dataclass
class _TargetsScan:
    """The first pass over a targets file (every check), joined with the utterances."""

    kept: int  # utterances with targets
    extra: int  # targets of no utterance
    skipped: _Skipped
    #: None when the keys ascend (Kaldi's tables are sorted): the second pass joins the
    #: file with the utterances as it reads them. Else per key its length, place and
    #: whether it is an utterance's (the memory of a table per utterance)
    table: dict[str, tuple[int, Place, bool]] | None


def _scan_targets(targets_file: Path, num_targets: int, scan: ScannedDataDir, limit: int):
    """Every check of the targets (:func:`paravg.data.iter_checked_targets`) and which
    utterances have them: a merge-join of the file with ``utt2spk`` while its keys
    ascend, nothing held per utterance; a file out of order is read again into a table
    of its keys' lengths and places."""
    joined = _scan_sorted_targets(targets_file, num_targets, scan, limit)
    if joined is not None:
        return joined
    table: dict[str, tuple[int, Place, bool]] = {}
    for key, vec, place in iter_checked_targets(targets_file, num_targets):
        table[key] = (vec.size, place, False)
    skipped, kept = _Skipped(limit), 0
    for row in iter_table(scan.utt2spk_file, num_fields=2):
        entry = table.get(row.key)
        if entry is None:
            skipped.add(row.key)
        else:
            table[row.key] = (entry[0], entry[1], True)
            kept += 1
    return _TargetsScan(kept, len(table) - kept, skipped, table)


def _scan_sorted_targets(
    targets_file: Path, num_targets: int, scan: ScannedDataDir, limit: int
) -> _TargetsScan | None:
    """The merge-join of :func:`_scan_targets`; None at the first key out of order."""
    utts = (row.key for row in iter_table(scan.utt2spk_file, num_fields=2))
    utt = next(utts, None)
    skipped, kept, extra, prev = _Skipped(limit), 0, 0, None
    for key, _, _ in iter_checked_targets(targets_file, num_targets):
        if prev is not None and key < prev:
            return None
        prev = key
        while utt is not None and utt < key:
            skipped.add(utt)
            utt = next(utts, None)
        if utt == key:
            kept += 1
            utt = next(utts, None)
        else:
            extra += 1
    while utt is not None:
        skipped.add(utt)
        utt = next(utts, None)
    return _TargetsScan(kept, extra, skipped, None)


def _with_targets(
    scan: ScannedDataDir, targets_file: Path, targets: _TargetsScan
) -> Iterator[tuple[UtteranceRow, np.ndarray | None, Place | None]]:
    """Second pass: each utterance (:func:`paravg.data.iter_utterance_rows`) with its
    int32 target vector and place, or ``None`` without targets. Streamed when the
    file's keys ascend; else the kept vectors are read into a table first (the memory
    of one copy of the set's targets)."""
    rows = iter_utterance_rows(scan)
    if targets.table is None:
        vectors = iter_int_vectors(targets_file)
        cur = next(vectors, None)
        for row in rows:
            while cur is not None and cur[0] < row.utt:
                cur = next(vectors, None)
            if cur is not None and cur[0] == row.utt:
                yield row, cur[1].astype(np.int32), cur[2]
                cur = next(vectors, None)
            else:
                yield row, None, None
        return
    info = targets.table
    kept_vectors = {
        k: v.astype(np.int32)
        for k, v, _ in iter_int_vectors(targets_file)
        if k in info and info[k][2]
    }
    for row in rows:
        vec = kept_vectors.pop(row.utt, None)
        yield row, vec, (info[row.utt][1] if vec is not None else None)


def _wav_value(rx: RxFilename) -> str:
    """A prepared ``wav.scp`` value: plain paths (of files and of WAVs at an offset) made
    absolute; pipes as written. ``os.path.realpath`` (what Path.resolve runs) on the
    string: pathlib would intern every file name of the corpus."""
    if rx.kind == "file":
        return os.path.realpath(rx.target)
    if rx.kind == "offset":
        return f"{os.path.realpath(rx.target)}:{rx.offset}"
    return rx.text


def _prepare_into(
    src: Path,
    out: Path,
    dst: Path,
    sample_rate: int,
    max_missing_fraction: float,
    num_targets: int,
) -> dict:
    """Check ``src`` and write the prepared files into ``out`` (which becomes ``dst``).

    Every pass reads the source's sorted tables line by line and joins them as it reads
    them (``join`` of sorted files): the checks (:func:`paravg.data.scan_data_dir`), the
    targets (:func:`_scan_targets`), the audio headers
    (:func:`paravg.audio.check_audio_rows`), then one pass that writes every prepared
    file as it goes. Held per utterance: nothing, but the names of skipped utterances
    (at most ``data.max_missing_targets_fraction`` of them, which ``report.json``
    lists); one speaker's kept utterances (``spk2utt``) and one recording's header. Only
    for tables out of Kaldi's order (allowed), a table per speaker (speakers not in
    utterance order), per recording (segments not in recording order) or per utterance
    (targets out of order: their lengths and places, then the kept vectors)."""
    scan = scan_data_dir(src)
    targets_file = find_targets_file(src)
    num_utts = scan.num_utterances
    targets = _scan_targets(
        targets_file, num_targets, scan, int(max_missing_fraction * num_utts) + 1
    )
    audio = check_audio_rows(
        ((r.utt, r.recording, r.wav_lineno, r.wav, r.segment) for r in iter_utterance_rows(scan)),
        sample_rate,
        scan.wav_file,
        scan.segments_file,
        scan.recordings_in_order,
    )

    skipped = targets.skipped
    fraction = skipped.count / num_utts
    if not targets.kept or fraction > max_missing_fraction:
        raise DataError(
            f"{targets_file}: {skipped.count} of {num_utts} utterances "
            f"({100 * fraction:.1f}%) have no targets, more than "
            f"data.max_missing_targets_fraction = {max_missing_fraction}; first: {skipped}"
        )
    for utt in skipped.keys:
        log.warning("%s: no targets for utterance %s, skipping it", targets_file, utt)
    warnings = list(scan.warnings)
    for msg in warnings:
        log.warning("%s", msg)

    written = _write_prepared(scan, targets_file, targets, out, dst)

    seg_file = src / "segments"
    has_segments = scan.segments_file is not None
    origin_files = {
        "wav.scp": str((src / "wav.scp").resolve()),
        "segments": str(seg_file.resolve()) if has_segments else None,
        "targets": str(targets_file.resolve()),
    }
    if written.num_long:
        longest, size, wav_line, seg_line, place = written.longest
        origin = Origin(
            wav_scp=origin_files["wav.scp"],
            segments=origin_files["segments"],
            targets=origin_files["targets"],
            wav_line={longest: wav_line},
            segment_line={longest: seg_line} if has_segments else {},
            targets_place={longest: place},
        )
        long_warning = (
            f"{written.num_long} utterance(s) longer than {LONG_UTTERANCE_S / 60:g} minutes, "
            f"the longest {size / FRAMES_PER_SECOND / 60:.1f} minutes "
            f"({origin.wav(longest)}): decoding holds a whole utterance's "
            "lattice (decode.mem_mb_per_minute, decode.max_mem_mb); Kaldi recipes segment "
            "recordings into utterances of seconds (a segments file)"
        )
        log.warning("%s", long_warning)
        warnings.append(long_warning)

    report = {
        "source": str(src.resolve()),
        "source_files": origin_files,
        "targets_source": str(targets_file.resolve()),
        "sample_rate": sample_rate,
        "num_recordings": written.num_recordings,
        "num_utterances": num_utts,
        "num_utterances_kept": targets.kept,
        "num_speakers": written.num_speakers,
        "num_missing_targets": skipped.count,
        "missing_targets_fraction": round(fraction, 6),
        "skipped_utterances": skipped.keys,
        "num_targets_without_utterance": targets.extra,
        "num_target_frames": written.frames,
        "num_targets_configured": num_targets,
        "max_target": written.max_target,
        "duration_s_checked": audio["duration_s"],
        "unchecked_pipe_recordings": audio["num_unchecked_pipes"],
        "has_segments": has_segments,
        "has_text": scan.text_file is not None,
        "has_utt2uniq": scan.utt2uniq_file is not None,
        "warnings": warnings,
    }
    write_json_atomic(out / "report.json", report)
    log.info(
        "prepared %s -> %s: %d of %d utterances kept, %d speakers, %d target frames",
        src,
        dst,
        targets.kept,
        num_utts,
        written.num_speakers,
        written.frames,
    )
    return report


@dataclass
class _Written:
    """What the writing pass counted (the figures of ``report.json``)."""

    num_recordings: int = 0
    num_speakers: int = 0
    frames: int = 0
    max_target: int = -1
    num_long: int = 0
    #: the longest utterance over LONG_UTTERANCE_S (the first of the longest):
    #: (utt, frames, wav.scp line, segments line, targets place)
    longest: tuple[str, int, int, int, Place] | None = None


def _write_prepared(
    scan: ScannedDataDir, targets_file: Path, targets: _TargetsScan, out: Path, dst: Path
) -> _Written:
    """The one writing pass: every prepared file of the kept utterances (those with
    targets) in utterance order, the source's tables joined as they are read, as
    ``utils/subset_data_dir.sh`` writes them: ``wav.scp`` (the kept recordings, sorted),
    ``utt2spk``, ``spk2utt``, ``utt2uniq`` (the identity where the source has none),
    ``segments``, ``text`` and ``reco2file_and_channel`` when the source has them,
    ``origin`` and the targets (``targets.ark`` + ``targets.scp``)."""
    w = _Written()
    long_frames = LONG_UTTERANCE_S * FRAMES_PER_SECOND
    with contextlib.ExitStack() as stack:

        def create(name: str, wanted: bool = True):
            return stack.enter_context(open(out / name, "w")) if wanted else None

        wav_out, u2s_out, s2u_out = create("wav.scp"), create("utt2spk"), create("spk2utt")
        uniq_out, origin_out = create("utt2uniq"), create(ORIGIN_FILE)
        seg_out = create("segments", scan.segments_file is not None)
        text_out = create("text", scan.text_file is not None)
        r2fc_out = create("reco2file_and_channel", scan.reco2file_and_channel_file is not None)
        # every key of text is an utterance and it covers them all (scan_data_dir): its
        # lines are the utterances' lines, in order
        text_rows = iter_table(scan.text_file, min_fields=1) if text_out else iter(())
        uniq_rows = iter_table(scan.utt2uniq_file, num_fields=2) if scan.utt2uniq_file else iter(())
        uniq_row = next(uniq_rows, None)
        r2fc_rows = (
            iter_table(scan.reco2file_and_channel_file, num_fields=3) if r2fc_out else iter(())
        )
        r2fc_row = next(r2fc_rows, None)
        recos_in_order = scan.recordings_in_order
        kept_recos: set[str] = set()  # recordings out of order only
        last_reco: str | None = None
        speakers: dict[str, list[str]] = {}  # speakers out of utterance order only
        speaker: tuple[str, list[str]] | None = None  # the current run of one speaker

        def write_speaker(spk: str, utts: list[str]) -> None:
            s2u_out.write(f"{spk} {' '.join(utts)}\n")
            w.num_speakers += 1

        def kept_vectors() -> Iterator[tuple[str, np.ndarray]]:
            nonlocal uniq_row, r2fc_row, last_reco, speaker
            for row, vec, place in _with_targets(scan, targets_file, targets):
                text = next(text_rows, None) if text_out else None
                if vec is None:
                    continue
                utt = row.utt
                if row.recording != last_reco:  # a kept recording's first utterance
                    last_reco = row.recording
                    if not recos_in_order:
                        kept_recos.add(row.recording)
                    else:
                        w.num_recordings += 1
                        wav_out.write(f"{row.recording} {_wav_value(row.wav)}\n")
                        while r2fc_row is not None and r2fc_row.key < row.recording:
                            r2fc_row = next(r2fc_rows, None)
                        if r2fc_row is not None and r2fc_row.key == row.recording:
                            r2fc_out.write(f"{r2fc_row.key} {r2fc_row.rest}\n")
                u2s_out.write(f"{utt} {row.speaker}\n")
                if not scan.speakers_in_order:
                    speakers.setdefault(row.speaker, []).append(utt)
                elif speaker is not None and speaker[0] == row.speaker:
                    speaker[1].append(utt)
                else:
                    if speaker is not None:
                        write_speaker(*speaker)
                    speaker = (row.speaker, [utt])
                while uniq_row is not None and uniq_row.key < utt:
                    uniq_row = next(uniq_rows, None)
                uniq = uniq_row.fields[0] if uniq_row is not None and uniq_row.key == utt else utt
                uniq_out.write(f"{utt} {uniq}\n")
                seg_line = 0
                if row.segment is not None:
                    seg_out.write(f"{utt} {row.segment.text}\n")
                    seg_line = row.segment.lineno
                if text_out:
                    text_out.write(f"{text.key} {text.rest}\n")
                origin_out.write(f"{utt} {row.wav_lineno} {seg_line} {place.token()}\n")
                w.frames += vec.size
                w.max_target = max(w.max_target, int(vec.max()))
                if vec.size > long_frames:
                    w.num_long += 1
                    if w.longest is None or vec.size > w.longest[1]:
                        w.longest = (utt, vec.size, row.wav_lineno, seg_line, place)
                yield utt, vec
            if speaker is not None:
                write_speaker(*speaker)

        write_ark_scp(
            kept_vectors(),
            out / "targets.ark",
            out / "targets.scp",
            scp_ark_path=dst / "targets.ark",
        )
        for spk in sorted(speakers):
            write_speaker(spk, speakers.pop(spk))
        if not recos_in_order:  # the kept recordings in wav.scp's (sorted) order
            w.num_recordings = len(kept_recos)
            for line in iter_table(scan.wav_file, keys=kept_recos):
                wav_out.write(f"{line.key} {_wav_value(parse_rxfilename(line.rest))}\n")
            if r2fc_out:
                for line in iter_table(
                    scan.reco2file_and_channel_file, num_fields=3, keys=kept_recos
                ):
                    r2fc_out.write(f"{line.key} {line.rest}\n")
    return w


def record_checked_sets(reports: Mapping[str, str], out: str | Path) -> None:
    """Write ``out``: the configured sets, each with the report :func:`prepare_data_dir`
    wrote after every check passed. The file is the gate every feature job waits for
    (rule ``check_data_sets``); its content only documents it."""
    sets = {name: str(path) for name, path in sorted(reports.items())}
    write_json_atomic(out, {"sets": sets})
    log.info("checked sets: %s", ", ".join(sets))
