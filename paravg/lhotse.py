"""lhotse manifests in and out: a ``RecordingSet`` + ``SupervisionSet`` as a data set.

**In** (rule ``lhotse_to_kaldi``, :func:`kaldi_dir_from_manifests`): ``data.sets.<name>``
may name a directory holding ``recordings.jsonl[.gz]`` and ``supervisions.jsonl[.gz]``
(what lhotse's ``RecordingSet.to_file`` / ``SupervisionSet.to_file`` write, and what
:func:`export_manifests` writes) beside a targets file keyed by supervision id (any name
of ``paravg.data.TARGET_FILE_NAMES``; lhotse has no per-frame targets). The manifests
are JSON lines, read here line by line with the standard library (lhotse itself is not
needed to train on them), checked, and written once as a Kaldi data dir under
``results/lhotse/<name>/`` (``wav.scp``, ``utt2spk``, ``segments`` unless every
supervision is its whole recording under the recording's id, ``text`` when every
supervision has one, and a link to the targets file), which rule ``prepare_data`` then
checks and prepares as any Kaldi dir. An error in a manifest names its file and line:

* a recording with more than one source, a source that is not a ``file`` or a
  ``command`` (lhotse's ``url``, ``memory``, ``shar`` are refused), channels other than
  ``[0]`` (mono only, as for Kaldi dirs), ``transforms`` (lhotse's own speed, volume or
  resampling: use ``data.perturb``), another ``sampling_rate`` than ``data.sample_rate``,
  a missing audio file, duplicate ids;
* a supervision of an unknown recording, without ``speaker``, on a channel other than 0,
  with ``start < 0`` or ``duration <= 0``, duplicate ids, or with ``text`` where another
  has none (Kaldi's ``text`` covers every utterance).

A ``command`` source becomes the pipe ``<command> |`` (lhotse runs it through the shell
too, and expects a WAV on its stdout).

**Out** (``python -m paravg.lhotse export <prepared dir> <out dir> [--sample-rate R]``,
:func:`export_manifests`): any prepared set (``results/data/<set>``) as lhotse manifests
written by lhotse's own classes (``Recording``, ``AudioSource``, ``SupervisionSegment``),
plus its targets (``targets.ark`` + ``targets.scp``), so the directory is itself a set
``data.sets`` can name (the round trip gives the same features and targets). lhotse is
an optional dependency: ``pip install .[lhotse]`` (pyproject.toml pins it and ``urllib3``,
which lhotse imports without declaring it). A WAV inside an archive (``file:offset``, e.g.
the perturbed copies' ``wav.ark``) has no lhotse source type and is refused.
"""

from __future__ import annotations

import argparse
import gzip
import json
import logging
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

from paravg.audio import audio_info, check_audio_format
from paravg.data import find_targets_file, read_data_dir, source_files
from paravg.errors import DataError
from paravg.io import write_json_atomic
from paravg.kaldi_io import (
    RxFilename,
    iter_int_vectors,
    parse_rxfilename,
    write_ark_scp,
    write_table,
)

log = logging.getLogger(__name__)

MANIFESTS = ("recordings", "supervisions")
#: What the converted Kaldi dir always holds (rule lhotse_to_kaldi's declared outputs).
CONVERTED_FILES = ("wav.scp", "utt2spk", "report.json")
INSTALL_HINT = "lhotse is an optional dependency of paravg: pip install '.[lhotse]'"


# ------------------------------------------------------------------------------ finding
def manifest_path(src: str | os.PathLike, name: str) -> Path | None:
    """``src/<name>.jsonl.gz`` or ``src/<name>.jsonl``, the one that exists (None: neither)."""
    for suffix in (".jsonl.gz", ".jsonl"):
        if (Path(src) / f"{name}{suffix}").is_file():
            return Path(src) / f"{name}{suffix}"
    return None


def is_manifest_dir(src: str | os.PathLike) -> bool:
    """Whether ``src`` is a set given as lhotse manifests (both files present)."""
    return all(manifest_path(src, name) is not None for name in MANIFESTS)


def manifest_source_files(src: str | os.PathLike) -> list[Path]:
    """What rule lhotse_to_kaldi reads: both manifests, the targets file and the archives
    its scp names (:func:`paravg.data.source_files`' rule for targets)."""
    files = [manifest_path(src, name) for name in MANIFESTS]
    others = [f for f in source_files(src) if f.name not in ("wav.scp", "utt2spk")]
    return [f for f in files if f is not None] + [f for f in others if f.is_file()]


def _lines(path: Path) -> Iterator[tuple[int, dict]]:
    """``(line number, object)`` of each non-empty line of a jsonl[.gz] manifest."""
    opener = gzip.open if path.suffix == ".gz" else open
    try:
        with opener(path, "rt", encoding="utf-8") as f:
            for lineno, raw in enumerate(f, 1):
                if not raw.strip():
                    continue
                try:
                    obj = json.loads(raw)
                except json.JSONDecodeError as exc:
                    raise DataError(f"{path}:{lineno}: not a JSON object ({exc.msg})") from None
                if not isinstance(obj, dict):
                    raise DataError(f"{path}:{lineno}: not a JSON object")
                yield lineno, obj
    except (OSError, EOFError) as exc:
        raise DataError(f"{path}: cannot read the manifest: {exc}") from exc


def _field(obj: dict, key: str, where: str, kind=str):
    value = obj.get(key)
    ok = isinstance(value, kind) and not isinstance(value, bool)
    if not ok or (isinstance(value, str) and (not value or any(c.isspace() for c in value))):
        raise DataError(f"{where}: field {key!r} missing or invalid ({value!r})")
    return value


# ------------------------------------------------------------------------------ in
def _recording(obj: dict, where: str, sample_rate: int) -> tuple[str, RxFilename, float]:
    """A recording's id, its wav.scp entry and its duration, every check naming ``where``."""
    rid = _field(obj, "id", where)
    where = f"{where}: recording {rid!r}"
    if obj.get("transforms"):
        raise DataError(
            f"{where}: lhotse transforms (speed, volume, resampling) are not supported; "
            "perturb the training set with data.perturb instead"
        )
    sources = obj.get("sources")
    if not isinstance(sources, list) or len(sources) != 1:
        raise DataError(f"{where}: expected one audio source, found {sources!r}")
    source = sources[0]
    if source.get("channels", [0]) != [0]:
        raise DataError(f"{where}: channels {source.get('channels')}: only mono audio")
    rate = _field(obj, "sampling_rate", where, int)
    check_audio_format(rate, 1, sample_rate, where)
    if source.get("type") == "file":
        rx = parse_rxfilename(_field(source, "source", where), where)
        if rx.kind != "file":
            raise DataError(f"{where}: source {rx.text!r} is not a plain file name")
        info = audio_info(rx, where)
        check_audio_format(info.sample_rate, info.channels, sample_rate, where)
    elif source.get("type") == "command":
        rx = parse_rxfilename(f"{_field(source, 'source', where, str)} |", where)
    else:
        raise DataError(
            f"{where}: source type {source.get('type')!r} is not supported (file or command)"
        )
    duration = obj.get("duration")
    if not isinstance(duration, (int, float)) or duration <= 0:
        raise DataError(f"{where}: field 'duration' missing or invalid ({duration!r})")
    return rid, rx, float(duration)


def kaldi_dir_from_manifests(src: str | os.PathLike, dst: str | os.PathLike, sample_rate: int):
    """Check the manifests of ``src`` and write the Kaldi data dir ``dst`` atomically
    (module docstring). Returns the report (also ``dst/report.json``)."""
    src, dst = Path(src), Path(dst)
    paths = {name: manifest_path(src, name) for name in MANIFESTS}
    for name, path in paths.items():
        if path is None:
            raise DataError(f"{src}: no {name}.jsonl.gz or {name}.jsonl (lhotse manifests)")
    targets = find_targets_file(src)
    recordings: dict[str, tuple[RxFilename, float]] = {}
    for lineno, obj in _lines(paths["recordings"]):
        where = f"{paths['recordings']}:{lineno}"
        rid, rx, duration = _recording(obj, where, sample_rate)
        if rid in recordings:
            raise DataError(f"{where}: duplicate recording id {rid!r}")
        recordings[rid] = (rx, duration)
    sups: dict[str, tuple[str, float, float, str, str | None]] = {}
    for lineno, obj in _lines(paths["supervisions"]):
        where = f"{paths['supervisions']}:{lineno}"
        sid = _field(obj, "id", where)
        where = f"{where}: supervision {sid!r}"
        rid = _field(obj, "recording_id", where)
        if rid not in recordings:
            raise DataError(f"{where}: recording {rid!r} is not in {paths['recordings']}")
        speaker = _field(obj, "speaker", where)
        if obj.get("channel", 0) not in (0, [0]):
            raise DataError(f"{where}: channel {obj.get('channel')!r}: only mono audio")
        start, duration = obj.get("start"), obj.get("duration")
        if not isinstance(start, (int, float)) or not isinstance(duration, (int, float)):
            raise DataError(f"{where}: fields 'start' and 'duration' must be numbers")
        if start < 0 or duration <= 0:
            raise DataError(f"{where}: invalid segment start {start}, duration {duration}")
        if sid in sups:
            raise DataError(f"{where}: duplicate supervision id {sid!r}")
        text = obj.get("text")
        sups[sid] = (rid, float(start), float(duration), speaker, text)
    if not sups:
        raise DataError(f"{paths['supervisions']}: no supervisions")
    with_text = [s for s, v in sups.items() if v[4] is not None]
    if with_text and len(with_text) != len(sups):
        missing = sorted(set(sups) - set(with_text))
        raise DataError(
            f"{paths['supervisions']}: {len(missing)} of {len(sups)} supervisions have no "
            f"text (first: {missing[0]!r}); give every one a text or none"
        )
    whole = all(
        sid == rid and start == 0 and abs(dur - recordings[rid][1]) < 1.0 / sample_rate
        for sid, (rid, start, dur, _, _) in sups.items()
    )
    used = sorted({v[0] for v in sups.values()})

    dst.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{dst.name}.", suffix=".tmp", dir=dst.parent))
    try:
        write_table(tmp / "wav.scp", ((r, recordings[r][0].text) for r in used))
        write_table(tmp / "utt2spk", ((s, sups[s][3]) for s in sorted(sups)))
        if not whole:
            write_table(
                tmp / "segments",
                (
                    (s, f"{r} {start!r} {start + dur!r}")
                    for s, (r, start, dur, _, _) in sorted(sups.items())
                ),
            )
        if with_text:
            write_table(tmp / "text", ((s, " ".join(sups[s][4].split())) for s in sorted(sups)))
        os.symlink(targets.resolve(), tmp / targets.name)
        report = {
            "manifests": {name: str(path.resolve()) for name, path in paths.items()},
            "targets": str(targets.resolve()),
            "num_recordings": len(used),
            "num_supervisions": len(sups),
            "has_segments": not whole,
            "has_text": bool(with_text),
        }
        write_json_atomic(tmp / "report.json", report)
        if dst.exists():
            shutil.rmtree(dst)
        os.replace(tmp, dst)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    log.info(
        "lhotse manifests %s -> Kaldi dir %s: %d recordings, %d supervisions",
        src,
        dst,
        len(used),
        len(sups),
    )
    return report


# ------------------------------------------------------------------------------ out
def import_lhotse():
    """The lhotse module, or an ImportError naming the extra that installs it."""
    try:
        import lhotse
    except ImportError as exc:
        raise ImportError(f"{INSTALL_HINT} ({exc})") from exc
    return lhotse


def export_manifests(
    prepared: str | os.PathLike, out: str | os.PathLike, sample_rate: int | None = None
) -> dict:
    """Write the prepared set ``prepared`` as ``out/recordings.jsonl.gz``,
    ``out/supervisions.jsonl.gz`` (lhotse's classes) and ``out/targets.{ark,scp}``.
    ``sample_rate`` (default: the prepared set's report) is checked against each file's
    header; a pipe's samples are counted by running it. Returns counts."""
    lhotse = import_lhotse()
    from paravg.audio import read_recording
    from paravg.io import read_json

    prepared, out = Path(prepared), Path(out)
    data = read_data_dir(prepared)
    rate = int(sample_rate or read_json(prepared / "report.json")["sample_rate"])
    recordings = []
    used = sorted({data.recording(u) for u in data.utterances})
    for reco in used:
        rx, where = data.wav[reco], f"{prepared / 'wav.scp'}:{data.wav_lines[reco]}"
        if rx.kind == "offset":
            raise DataError(
                f"{where}: {rx.text!r} is a WAV inside an archive: lhotse has no source type for it"
            )
        if rx.kind == "pipe":
            samples = read_recording(rx, where)[1].shape[0]
            source = lhotse.AudioSource(type="command", channels=[0], source=rx.target)
        else:
            info = audio_info(rx, where)
            check_audio_format(info.sample_rate, info.channels, rate, where)
            samples = info.num_samples
            source = lhotse.AudioSource(type="file", channels=[0], source=str(rx.target))
        recordings.append(
            lhotse.Recording(
                id=reco,
                sources=[source],
                sampling_rate=rate,
                num_samples=samples,
                duration=samples / rate,
            )
        )
    durations = {r.id: r.duration for r in recordings}
    supervisions = []
    for utt in data.utterances:
        seg = data.segment(utt)
        start = seg.start if seg else 0.0
        end = durations[data.recording(utt)] if seg is None or seg.end == -1 else seg.end
        supervisions.append(
            lhotse.SupervisionSegment(
                id=utt,
                recording_id=data.recording(utt),
                start=start,
                duration=end - start,
                channel=0,
                speaker=data.utt2spk[utt],
                text=data.text.get(utt) if data.text is not None else None,
            )
        )
    out.mkdir(parents=True, exist_ok=True)
    lhotse.RecordingSet.from_recordings(recordings).to_file(out / "recordings.jsonl.gz")
    lhotse.SupervisionSet.from_segments(supervisions).to_file(out / "supervisions.jsonl.gz")
    targets = [(k, v) for k, v, _ in iter_int_vectors(prepared / "targets.scp")]
    write_ark_scp(targets, out / "targets.ark", out / "targets.scp")
    log.info(
        "exported %s -> %s: %d recordings, %d supervisions",
        prepared,
        out,
        len(recordings),
        len(supervisions),
    )
    return {"recordings": len(recordings), "supervisions": len(supervisions)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m paravg.lhotse",
        description="Write a prepared set (results/data/<set>) as lhotse manifests.",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    export = sub.add_parser("export", help="prepared set -> recordings/supervisions manifests")
    export.add_argument("prepared", help="a prepared set, e.g. results/data/dev")
    export.add_argument("out", help="the directory to write the manifests and targets to")
    export.add_argument("--sample-rate", type=int, default=None)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    try:
        counts = export_manifests(args.prepared, args.out, args.sample_rate)
    except (DataError, ImportError) as exc:
        print(f"paravg.lhotse: {exc}", file=sys.stderr)
        return 1
    print(
        f"{args.out}: {counts['recordings']} recordings, {counts['supervisions']} "
        "supervisions, targets.ark/scp"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
