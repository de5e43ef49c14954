"""Feature extraction speed: x real time per core, our full path vs knf alone.

Usage: .venv/bin/python benchmarks/bench_features.py [--seconds 120] [--repeats 3]

Builds a temporary data dir of 16 kHz utterances cut from the golden speech and noise
signals (tests/fixtures/golden/mfcc), then times, on one core and in one run:

* ``knf alone``: kaldi-native-fbank ``OnlineMfcc`` on the in-memory samples, dither 0
  (the baseline: the lower bound for any knf-based front end);
* ``compute_mfcc, dither 0``: our wrapper (options, frame collection);
* ``compute_mfcc, dither 1``: the seeded per-frame dither path (framing + Gaussian noise);
* ``full job``: ``compute_features_split`` = read the data dir, read every WAV, seeded
  dither, MFCC, write the ark/scp/utt2num_frames (what the Snakemake rule runs);
* ``full job, compressed``: the same writing Kaldi's compressed matrices;
* ``full job, cat pipes``: the same with every wav.scp entry a ``cat file |`` pipe.

x real time = seconds of audio / seconds of CPU of this process (single-threaded code;
for the pipe row the pipes' own CPU is not counted, so wall time is shown too). Each
row is the best of ``--repeats``. Target: >= 100x real time per core for the full job.
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import dataclasses  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable  # noqa: E402
from pathlib import Path  # noqa: E402

import kaldi_native_fbank as knf  # noqa: E402
import numpy as np  # noqa: E402
import soundfile  # noqa: E402

from paravg.features import (  # noqa: E402
    MfccOptions,
    compute_features_split,
    compute_mfcc,
    utterance_rng,
)
from paravg.prepare_data import prepare_data_dir  # noqa: E402

GOLDEN = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "golden" / "mfcc"
RATE = 16000
TARGET_XRT = 100.0


def make_corpus(root: Path, seconds: float, pipes: bool) -> tuple[Path, list[np.ndarray]]:
    """A data dir of 4 s utterances (2 speakers) cut from the golden signals, prepared."""
    sigs = [
        np.load(GOLDEN / f"{n}.npz")["wav"]
        for n in ("flite_awb_fox", "flite_slt_suit", "white_noise_1s")
    ]
    pool = np.concatenate(sigs)
    n_utt = max(1, round(seconds / 4.0))
    src = root / "src"
    (src / "wav").mkdir(parents=True)
    wav, u2s, tg, audio = [], [], [], []
    for i in range(n_utt):
        utt = f"spk{i % 2}-u{i:04d}"
        samples = np.resize(np.roll(pool, 7919 * i), 4 * RATE)
        path = src / "wav" / f"{utt}.wav"
        soundfile.write(str(path), samples, RATE, subtype="PCM_16")
        wav.append(f"{utt} cat {path} |" if pipes else f"{utt} {path}")
        u2s.append(f"{utt} spk{i % 2}")
        tg.append(f"{utt} 0")
        audio.append(samples.astype(np.float32))
    order = np.argsort([line.split()[0] for line in wav])
    for name, lines in (("wav.scp", wav), ("utt2spk", u2s), ("targets.txt", tg)):
        (src / name).write_text("".join(lines[k] + "\n" for k in order))
    prepare_data_dir(src, root / "data", RATE, 0.0)
    return root / "data", audio


def knf_alone(audio: list[np.ndarray], opts: MfccOptions) -> None:
    kopts = opts.to_knf()
    for samples in audio:
        m = knf.OnlineMfcc(kopts)
        m.accept_waveform(RATE, samples)
        m.input_finished()
        for t in range(m.num_frames_ready):
            m.get_frame(t)


def best_of(fn: Callable[[], None], repeats: int) -> tuple[float, float]:
    """Best (cpu seconds, wall seconds) of ``repeats`` runs."""
    cpu, wall = [], []
    for _ in range(repeats):
        c0, w0 = time.process_time(), time.perf_counter()
        fn()
        cpu.append(time.process_time() - c0)
        wall.append(time.perf_counter() - w0)
    return min(cpu), min(wall)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=float, default=120.0, help="audio in the corpus")
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()

    with tempfile.TemporaryDirectory(prefix="bench_features.") as tmp:
        tmp = Path(tmp)
        data, audio = make_corpus(tmp / "files", args.seconds, pipes=False)
        data_pipes, _ = make_corpus(tmp / "pipes", args.seconds, pipes=True)
        seconds = sum(a.size for a in audio) / RATE
        opts = MfccOptions()
        plain = dataclasses.replace(opts, dither=0.0)
        out = tmp / "out"

        def job(d: Path, compress: bool = False) -> Callable[[], None]:
            return lambda: compute_features_split(
                d, 1, 1, opts, 0, out / "f.ark", out / "f.scp", out / "u2nf", compress=compress
            )

        rows = [
            ("knf alone, dither 0 (baseline)", lambda: knf_alone(audio, plain)),
            ("compute_mfcc, dither 0", lambda: [compute_mfcc(a, plain) for a in audio]),
            (
                "compute_mfcc, seeded dither 1",
                lambda: [
                    compute_mfcc(a, opts, utterance_rng(0, str(i))) for i, a in enumerate(audio)
                ],
            ),
            ("full job: read wav + dither + write ark", job(data)),
            ("full job, compressed ark", job(data, compress=True)),
            ("full job, wav.scp 'cat file |' pipes", job(data_pipes)),
        ]
        results = [(name, *best_of(fn, args.repeats)) for name, fn in rows]

    base_cpu = results[0][1]
    print(f"\nMFCC hires (40x40), {seconds:.0f} s of 16 kHz audio in {len(audio)} utterances, "
          f"best of {args.repeats}, one core\n")  # fmt: skip
    head = f"{'path':<42} {'cpu s':>7} {'x RT/core':>10} {'wall x RT':>10} {'cpu vs knf':>11}"
    print(head)
    print("-" * len(head))
    for name, cpu, wall in results:
        print(f"{name:<42} {cpu:7.3f} {seconds / cpu:10.0f} {seconds / wall:10.0f} "
              f"{cpu / base_cpu:10.2f}x")  # fmt: skip
    full = seconds / results[3][1]
    verdict = "meets" if full >= TARGET_XRT else "MISSES"
    print(f"\nfull job: {full:.0f}x real time per core, {verdict} the {TARGET_XRT:.0f}x target")


if __name__ == "__main__":
    main()
