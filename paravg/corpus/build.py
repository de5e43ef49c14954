"""Build the demo corpus: synthesize every speaker, perturb, label, write Kaldi data dirs.

Per utterance ``k`` of a speaker (all draws from
``default_rng([seed, crc32(speaker), k + 1])``, so nothing depends on scheduling):

1. the engine speaks the sentence at stretch ``tempo * U(0.96, 1.04)`` (espeak: at the
   speaker's pitch, its noise seeded with :func:`engine_seed`, which takes no draw);
2. ``U(0.05, 0.3)`` s of silence are added before and after (labelled ``sil``);
3. speed perturbation by the speaker's factor ``a`` (segment times / ``a``);
4. coloured noise (``beta ~ U(0, 1.5)``) at ``U(20, 40)`` dB SNR, then scaling to a peak
   of ``U(-9, -2)`` dBFS, 16-bit PCM;
5. per-frame labels in Kaldi's framing (:mod:`paravg.corpus.labels`).

A speaker keeps speaking sentences until its time budget is reached. Speakers are built in
a process pool (results collected in speaker order); the engines are deterministic, so two
builds with the same arguments give byte-identical files (except ``build_seconds`` in
``done``).

Output layout under ``out_dir``: ``wav/<speaker>/<utt>.wav``, ``train/``, ``test/`` (and ``dev/``)
Kaldi data dirs (:mod:`paravg.corpus.kaldi_dir`; wav.scp holds the wav paths as
``out_dir/wav/...``, i.e. relative to the working directory when ``out_dir`` is), a
``phones.txt`` and, written last, ``done`` (JSON summary).
"""

from __future__ import annotations

import logging
import math
import multiprocessing
import os
import shutil
import time
import wave
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

from paravg.corpus.engines import Request, Synthesis, available_voices, synthesize
from paravg.corpus.kaldi_dir import UtteranceRecord, write_data_dir
from paravg.corpus.labels import (
    SAMPLE_RATE,
    Segment,
    frame_labels,
    num_frames,
    tidy_segments,
)
from paravg.corpus.perturb import add_noise, set_peak_level, speed_perturb, to_int16
from paravg.corpus.phones import SILENCE, phones_txt
from paravg.corpus.plan import SpeakerPlan, plan_speakers, speaker_seed
from paravg.corpus.text import kaldi_transcript
from paravg.io import atomic_path, write_json_atomic, write_text_atomic

log = logging.getLogger(__name__)

JITTER = (0.96, 1.04)
PAD_SECONDS = (0.05, 0.3)
SNR_DB = (20.0, 40.0)
NOISE_BETA = (0.0, 1.5)
PEAK_DBFS = (-9.0, -2.0)
FIRST_GUESS_SECONDS = 3.0  # expected utterance length before any is measured


def write_wav(path: str | os.PathLike, pcm: np.ndarray, rate: int = SAMPLE_RATE) -> None:
    """16-bit mono RIFF wav (a plain 44-byte header: same samples, same bytes)."""
    with atomic_path(path, suffix=".wav") as tmp, wave.open(str(tmp), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(np.asarray(pcm, dtype="<i2").tobytes())


def _finish_utterance(
    plan: SpeakerPlan, utt: str, sentence: str, syn: Synthesis, rng: np.random.Generator,
    lead: float, tail: float, wav_path: Path,
) -> tuple[UtteranceRecord, np.ndarray]:  # fmt: skip
    """Steps 2-5 of the module docstring for one synthesized sentence (wav not written)."""
    lead_n, tail_n = round(lead * SAMPLE_RATE), round(tail * SAMPLE_RATE)
    x = np.concatenate([np.zeros(lead_n), syn.samples, np.zeros(tail_n)])
    shift = lead_n / SAMPLE_RATE
    segments = [Segment(SILENCE, 0.0, shift)]
    segments += [Segment(s.phone, s.start + shift, s.end + shift) for s in syn.segments]
    segments.append(Segment(SILENCE, segments[-1].end, len(x) / SAMPLE_RATE))
    x, segments = speed_perturb(x, segments, plan.speed)
    segments = tidy_segments(segments, len(x) / SAMPLE_RATE)
    snr, beta, level = rng.uniform(*SNR_DB), rng.uniform(*NOISE_BETA), rng.uniform(*PEAK_DBFS)
    pcm = to_int16(set_peak_level(add_noise(x, snr, beta, rng), level))
    record = UtteranceRecord(
        utt=utt,
        speaker=plan.speaker,
        wav=str(wav_path),
        text=kaldi_transcript(sentence),
        num_samples=len(pcm),
        segments=segments,
        targets=frame_labels(segments, len(pcm)),
    )
    return record, pcm


def engine_seed(seed: int, speaker: str, k: int) -> int:
    """The 32-bit seed of the engine's own random draws for utterance ``k`` of ``speaker``
    (espeak's glibc ``rand()``), from ``SeedSequence([seed, crc32(speaker), k + 1, 1])``:
    it takes no draw from the utterance's generator, so the other draws stay as they were."""
    sequence = np.random.SeedSequence([*speaker_seed(seed, speaker), k + 1, 1])
    return int(sequence.generate_state(1, np.uint32)[0])


def build_speaker(plan: SpeakerPlan, wav_dir: str) -> list[UtteranceRecord]:
    """All utterances of one speaker, in order, until its time budget is spent.

    The utterance that crosses the budget is kept if that ends closer to the budget than
    stopping before it (and always when it is the speaker's first): the expected total
    is the budget, not the budget plus half an utterance.
    """
    out_dir = Path(wav_dir) / plan.speaker
    out_dir.mkdir(parents=True, exist_ok=True)
    records: list[UtteranceRecord] = []
    spoken, mean_seconds = 0.0, FIRST_GUESS_SECONDS
    full = False
    while not full:
        first = len(records)
        count = max(1, math.ceil((plan.budget_seconds - spoken) / mean_seconds))
        rngs, requests, pads = [], [], []
        for k in range(first, first + count):
            rng = np.random.default_rng([*speaker_seed(plan.seed, plan.speaker), k + 1])
            stretch = round(plan.tempo * rng.uniform(*JITTER), 4)
            pads.append((rng.uniform(*PAD_SECONDS), rng.uniform(*PAD_SECONDS)))
            sentence = plan.sentences[k % len(plan.sentences)]
            requests.append(
                Request(sentence, stretch, plan.pitch, engine_seed(plan.seed, plan.speaker, k))
            )
            rngs.append(rng)
        for i, syn in enumerate(synthesize(plan.voice, requests)):
            k = first + i
            utt = f"{plan.speaker}-{k:04d}"
            record, pcm = _finish_utterance(
                plan, utt, requests[i].text, syn, rngs[i], *pads[i], out_dir / f"{utt}.wav"
            )
            seconds = record.num_samples / SAMPLE_RATE
            over = spoken + seconds - plan.budget_seconds
            if over >= 0:
                full = True
                if records and over > plan.budget_seconds - spoken:
                    break
            write_wav(record.wav, pcm)
            records.append(record)
            spoken += seconds
            if full:
                break
        mean_seconds = spoken / len(records)
    return records


def _build_speaker_args(args: tuple[SpeakerPlan, str]) -> list[UtteranceRecord]:
    return build_speaker(*args)


def _summary(records: dict[str, list[UtteranceRecord]]) -> dict:
    return {
        "speakers": {s: len({r.speaker for r in recs}) for s, recs in records.items()},
        "utterances": {s: len(recs) for s, recs in records.items()},
        "minutes": {
            s: round(sum(r.num_samples for r in recs) / SAMPLE_RATE / 60.0, 3)
            for s, recs in records.items()
        },
        "frames": {s: sum(num_frames(r.num_samples) for r in recs) for s, recs in records.items()},
    }


def build_demo_corpus(
    out_dir: str | os.PathLike,
    minutes: float = 20.0,
    test_fraction: float = 0.2,
    variants: int = 5,
    use_espeak: bool = True,
    seed: int = 0,
    num_workers: int = 2,
    dev_fraction: float = 0.0,
) -> dict:
    """Build the demo corpus under ``out_dir``; return the summary also written to ``done``.

    ``minutes`` of audio in all, ``test_fraction`` of it from held-out voices (and
    ``dev_fraction`` from other held-out voices: the dev set, when > 0);
    ``variants`` per base voice (more when espeak-ng is not used, see
    :mod:`paravg.corpus.plan`); ``num_workers`` processes synthesize speakers in parallel.
    The workers are spawned, so a script calling this with ``num_workers > 1`` needs the
    usual ``if __name__ == "__main__":`` guard.
    """
    start = time.perf_counter()
    out = Path(out_dir)
    voices = available_voices(use_espeak)
    if len(voices) < 2:
        raise RuntimeError(
            f"the demo corpus needs flite and/or festival voices; found {voices} "
            "(apt-get install flite festival festvox-kallpc16k festvox-kdlpc16k "
            "festvox-us-slt-hts festlex-cmu)"
        )
    plans = plan_speakers(voices, minutes, test_fraction, variants, seed, dev_fraction)
    subsets = ["train", "test"] + (["dev"] if dev_fraction > 0 else [])
    log.info(
        "demo corpus: %d voices, %d speakers, %.1f minutes, espeak %s",
        len(voices), len(plans), minutes, any(v.engine == "espeak" for v in voices),
    )  # fmt: skip
    (out / "done").unlink(missing_ok=True)
    shutil.rmtree(out / "wav", ignore_errors=True)
    wav_dir = str(out / "wav")
    # slowest engines first so that the pool ends together; results stay in plan order
    order = sorted(range(len(plans)), key=lambda i: plans[i].voice.engine != "festival")
    jobs = [(plans[i], wav_dir) for i in order]
    if num_workers <= 1:
        results = [_build_speaker_args(job) for job in jobs]
    else:
        context = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(num_workers, mp_context=context) as pool:
            results = list(pool.map(_build_speaker_args, jobs))
    by_plan = dict(zip(order, results, strict=True))
    records: dict[str, list[UtteranceRecord]] = {s: [] for s in subsets}
    for i, plan in enumerate(plans):
        records[plan.subset] += by_plan[i]
    for subset, recs in records.items():
        write_data_dir(out / subset, recs)
    write_text_atomic(out / "phones.txt", phones_txt())
    summary = _summary(records)
    summary.update(
        voices={s: sorted({p.voice.name for p in plans if p.subset == s}) for s in subsets},
        variants_per_voice=len(plans) // len(voices),
        espeak=any(v.engine == "espeak" for v in voices),
        seed=seed,
        build_seconds=round(time.perf_counter() - start, 1),
    )
    write_json_atomic(out / "done", summary)
    log.info("demo corpus written to %s: %s", out, summary)
    return summary
