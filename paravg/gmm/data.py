"""Inputs of the GMM stages: 13-dim MFCCs of a data dir, feature tables, job splits, and a
Kaldi dict dir for a lexicon.

* :func:`gmm_mfcc` computes Kaldi's ``conf/mfcc.conf`` features (``compute-mfcc-feats
  --use-energy=false``: 23 mel bins, 13 cepstra, Kaldi's other defaults, dither seeded per
  utterance as :func:`paravg.features.compute_features_split` seeds it) of every
  utterance of a data dir, for users without a ``feats.scp`` of low-resolution MFCCs.
* :func:`read_feats` reads a ``feats.scp`` / ark (:func:`paravg.kaldi_io.load_scp`).
* :func:`split_jobs` splits utterances into ``nj`` contiguous parts by speaker, as
  ``utils/split_data.sh`` does (a speaker's utterances stay in one job);
  :func:`job_rows` is job ``j``'s part read from a scanned data dir as its files are
  read, and :func:`job_mfcc` its MFCCs, one utterance at a time.
* :func:`write_dict_dir` writes Kaldi's ``data/local/dict`` for a lexicon: the
  ``lexiconp.txt``, one base phone per line of ``nonsilence_phones.txt``, the silence
  phones (``sil`` and ``spn`` for the OOV word ``<unk>``), ``optional_silence.txt``.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

import numpy as np

from paravg.data import PreparedUtterance, ScannedDataDir, UtteranceRow, iter_utterance_rows
from paravg.features import MfccOptions, OneUtteranceAudio, compute_mfcc, utterance_rng
from paravg.io import write_text_atomic
from paravg.kaldi_io import iter_table, load_scp

MFCC_CONF = "--use-energy=false"
OOV_WORD, OOV_PHONE = "<unk>", "spn"


def gmm_mfcc(
    data_dir: str | Path,
    options: str = MFCC_CONF,
    srand: int = 0,
    utts: Sequence[str] | None = None,
) -> dict[str, np.ndarray]:
    """``steps/make_mfcc.sh`` with ``conf/mfcc.conf``: utt -> float32 [T, 13], of every
    utterance or of ``utts`` (one job's)."""
    from paravg.audio import AudioReader
    from paravg.data import read_data_dir

    data = read_data_dir(data_dir)
    opts = MfccOptions.from_kaldi_options(options)
    reader = AudioReader(data, int(opts.sample_frequency))
    return {
        utt: compute_mfcc(reader(utt), opts, utterance_rng(srand, utt))
        for utt in sorted(data.utt2spk if utts is None else utts)
    }


def read_feats(path: str | Path) -> dict[str, np.ndarray]:
    """A ``feats.scp`` (or ark) as utt -> float32 matrix."""
    table = load_scp(path)
    return {utt: np.asarray(table[utt], np.float32) for utt in table}


def read_utt2spk(path: str | Path) -> dict[str, str]:
    rows = [line.split() for line in Path(path).read_text().splitlines() if line.strip()]
    return {r[0]: r[1] for r in rows}


def split_jobs(utt2spk: Mapping[str, str], nj: int) -> list[list[str]]:
    """``split_data.sh --per-spk``-like: sorted utterances cut into ``nj`` parts of about
    equal size at speaker boundaries (a part may be empty with fewer speakers than jobs)."""
    if nj < 1:
        raise ValueError(f"nj must be >= 1, got {nj}")
    speakers: dict[str, list[str]] = {}
    for utt in sorted(utt2spk):
        speakers.setdefault(utt2spk[utt], []).append(utt)
    spks = sorted(speakers)
    jobs: list[list[str]] = [[] for _ in range(nj)]
    for i, spk in enumerate(spks):
        jobs[i * nj // max(len(spks), 1)].extend(speakers[spk])
    return jobs


def job_rows(scan: ScannedDataDir, nj: int, j: int) -> Iterator[UtteranceRow]:
    """The utterances of job ``j`` (1-based) of :func:`split_jobs`' ``nj`` parts, in
    utterance order, read from the data dir's tables as they come. With speakers in
    utterance order (Kaldi's convention, :attr:`ScannedDataDir.speakers_in_order`),
    speaker ``i`` of ``S`` (sorted) goes to job ``i·nj // S + 1`` and nothing is held per
    utterance (``utt2spk`` read twice: the speakers counted, then the job's run kept);
    otherwise the job's utterances are the ``split_jobs`` part of the whole ``utt2spk``."""
    if nj < 1:
        raise ValueError(f"nj must be >= 1, got {nj}")
    if not scan.speakers_in_order:
        keep = set(split_jobs(read_utt2spk(scan.utt2spk_file), nj)[j - 1])
        yield from (row for row in iter_utterance_rows(scan) if row.utt in keep)
        return
    lines = iter_table(scan.utt2spk_file, num_fields=2)
    num_speakers = sum(1 for _ in itertools.groupby(line.fields[0] for line in lines))
    index, previous = -1, None
    for row in iter_utterance_rows(scan):
        if row.speaker != previous:
            index, previous = index + 1, row.speaker
        job = index * nj // num_speakers
        if job == j - 1:
            yield row
        elif job > j - 1:
            return


def job_mfcc(
    scan: ScannedDataDir, nj: int, j: int, options: str = MFCC_CONF, srand: int = 0
) -> Iterator[tuple[str, str, np.ndarray]]:
    """``(utt, speaker, float32 [T, 13])`` of job ``j``'s utterances (:func:`job_rows`),
    as :func:`gmm_mfcc` computes them, one utterance at a time (a recording read once for
    its consecutive segments)."""
    from paravg.audio import AudioReader

    opts = MfccOptions.from_kaldi_options(options)
    current = OneUtteranceAudio()
    reader = AudioReader(current, int(opts.sample_frequency))
    for row in job_rows(scan, nj, j):
        seg = f" (segments line {row.segment.lineno})" if row.segment is not None else ""
        where = f"{scan.wav_file}:{row.wav_lineno}: utterance {row.utt!r}{seg}"
        current.utt = PreparedUtterance(row.utt, row.recording, row.wav, row.segment, where)
        rng = utterance_rng(srand, row.utt)
        yield row.utt, row.speaker, compute_mfcc(reader(row.utt), opts, rng)


def write_dict_dir(
    directory: str | Path,
    lexicon: Sequence[tuple[str, float, Sequence[str]]],
    nonsilence: Sequence[str],
    silence: str = "sil",
) -> None:
    """Kaldi's ``data/local/dict`` for ``(word, prob, phones)`` entries (plus
    ``<unk> spn``)."""
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    lines = [f"{w} {p:g} {' '.join(ph)}\n" for w, p, ph in lexicon]
    lines.append(f"{OOV_WORD} 1 {OOV_PHONE}\n")
    write_text_atomic(d / "lexiconp.txt", "".join(lines))
    write_text_atomic(d / "silence_phones.txt", f"{silence}\n{OOV_PHONE}\n")
    write_text_atomic(d / "optional_silence.txt", f"{silence}\n")
    write_text_atomic(d / "nonsilence_phones.txt", "".join(f"{p}\n" for p in nonsilence))


def prepare_gmm_lang(
    dict_dir: str | Path,
    lang_dir: str | Path,
    oov: str = OOV_WORD,
    num_nonsil_states: int = 3,
    num_sil_states: int = 5,
):
    """``utils/prepare_lang.sh <dict> <oov> <tmp> <lang>`` with the GMM topology of
    ``utils/gen_topo.pl`` (3 states per non-silence phone, 5 per silence phone)."""
    from paravg.gmm.model import gen_topo
    from paravg.graph.dict_dir import lang_from_dict, read_dict_dir
    from paravg.graph.lang import write_lang

    lang = lang_from_dict(read_dict_dir(dict_dir), oov)
    sil = sorted(lang.phones[v] for s in lang.silence for v in lang.variants(s))
    nonsil = sorted(lang.phones[v] for s in lang.nonsilence for v in lang.variants(s))
    write_lang(lang, lang_dir, gen_topo(nonsil, sil, num_nonsil_states, num_sil_states))
    return lang
