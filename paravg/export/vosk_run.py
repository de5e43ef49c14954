"""Child process of :func:`paravg.export.verify.vosk_decode`: decode wav files with vosk.

``python -m paravg.export.vosk_run JOBS.json OUT.json``; JOBS holds ``model`` (an exported
directory), ``rate``, ``wavs`` (utterance -> 16-bit PCM wav path) and optionally
``log_level`` (vosk's, default -1: silent; 0 shows Kaldi's warnings on stderr). One fresh
``KaldiRecognizer`` per utterance (no adaptation carried between utterances), fed in
0.1 s pieces; OUT maps
each utterance to the best path of vosk's final lattice (``SetMaxAlternatives(1)``; with
0 vosk returns its minimum-Bayes-risk hypothesis, which can differ from the best path).
Never downloads: the model is a local directory.
"""

from __future__ import annotations

import json
import sys
import wave


def main(jobs_path: str, out_path: str) -> None:
    import vosk

    with open(jobs_path) as f:
        jobs = json.load(f)
    vosk.SetLogLevel(jobs.get("log_level", -1))
    model = vosk.Model(jobs["model"])
    hyps = {}
    for utt, path in sorted(jobs["wavs"].items()):
        with wave.open(path) as f:
            if f.getsampwidth() != 2 or f.getnchannels() != 1:
                raise SystemExit(f"{path}: vosk needs 16-bit mono PCM")
            rate, data = f.getframerate(), f.readframes(f.getnframes())
        rec = vosk.KaldiRecognizer(model, rate)
        rec.SetMaxAlternatives(1)  # the best path (0 would give vosk's MBR result)
        # Streamed in 0.1 s pieces, as a live recogniser sees audio. Given all the audio in
        # one call, vosk computes every i-vector before the decoder has a traceback, when
        # its silence weighting weights every frame 1e-3: the i-vectors stay at the prior.
        step = 2 * rate // 10
        for i in range(0, len(data), step):
            rec.AcceptWaveform(data[i : i + step])
        result = json.loads(rec.FinalResult())
        best = result.get("alternatives", [{}])[0]
        hyps[utt] = best.get("text", "")
    with open(out_path, "w") as f:
        json.dump(hyps, f, indent=1)


if __name__ == "__main__":
    main(*sys.argv[1:3])
