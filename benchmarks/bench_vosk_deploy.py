"""vosk on the export: Kaldi's decode.sh beams against the deployment beams model.conf
carries, side by side in one run.

Needs a finished run with its export (``results/exp/<exp>/kaldi``):

    .venv/bin/python benchmarks/bench_vosk_deploy.py --results results [--exp default] \
        [--set test] [--max-utts 20] [--beams 15,8,7000 11,4,3000]

For each setting (``beam,lattice_beam,max_active``; the first two are Kaldi's
``steps/nnet3/decode.sh`` beams and the export's own ``conf/model.conf``), the export is
copied, its model.conf given the beams, and vosk (Kaldi's online features, i-vectors,
nnet3 and lattice decoder, in a process of its own, one thread) decodes the set's first
``--max-utts`` wav files. Printed per setting: vosk's CPU seconds and real-time factor
(CPU s / audio s), how many utterances logged Kaldi's "Did not reach requested beam in
determinize-lattice" warning, and the WER against the set's text. Targets (issue 22):
the deployment setting at RTF ≤ 0.3 with no such warning, WER within 0.5 of Kaldi's
beams.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import wave
from pathlib import Path

import kaldialign

from paravg.layout import Layout


def set_decoder_options(model_dir: Path, beam: float, lattice_beam: float, max_active: int):
    conf = model_dir / "conf" / "model.conf"
    text = conf.read_text()
    for key, value in (("beam", beam), ("lattice-beam", lattice_beam), ("max-active", max_active)):
        text = re.sub(rf"^--{key}=\S+$", f"--{key}={value}", text, flags=re.M)
    conf.write_text(text)


def run_vosk(model_dir: Path, wavs: dict[str, str]) -> tuple[dict[str, str], float, int]:
    """(hypotheses, CPU seconds of the vosk process, utterances that warned)."""
    with tempfile.TemporaryDirectory() as tmp:
        jobs, out = Path(tmp) / "jobs.json", Path(tmp) / "hyps.json"
        jobs.write_text(
            json.dumps({"model": str(model_dir), "rate": 16000, "wavs": wavs, "log_level": 0})
        )
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
        proc = subprocess.run(
            [sys.executable, "-m", "paravg.export.vosk_run", str(jobs), str(out)],
            capture_output=True,
            text=True,
            env=env,
            check=True,
        )
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        warned = proc.stderr.count("Did not reach requested beam")
        return json.loads(out.read_text()), cpu, warned


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--results", default="results")
    ap.add_argument("--exp", default="default")
    ap.add_argument("--set", default="test")
    ap.add_argument("--max-utts", type=int, default=20)
    ap.add_argument("--beams", nargs="+", default=None, help="beam,lattice_beam,max_active")
    args = ap.parse_args()
    r = Path(args.results).resolve()
    os.chdir(r.parent)  # the run's scp files hold paths relative to its directory
    L = Layout(r.name)
    export = L.kaldi_dir(args.exp)
    conf = Path(L.kaldi_file(args.exp, "conf/model.conf")).read_text()
    own = [
        re.search(rf"^--{k}=(\S+)$", conf, re.M).group(1)
        for k in ("beam", "lattice-beam", "max-active")
    ]
    settings = args.beams or ["15,8,7000", ",".join(own)]
    wav_scp = Path(L.data_file(args.set, "wav.scp")).read_text().splitlines()
    wav_scp = dict(line.split(maxsplit=1) for line in wav_scp)
    utts = sorted(wav_scp)[: args.max_utts]
    wavs = {u: wav_scp[u].strip() for u in utts}
    audio = 0.0
    for path in wavs.values():
        with wave.open(path) as w:
            audio += w.getnframes() / w.getframerate()
    refs = {}
    for line in Path(L.text(args.set)).read_text().splitlines():
        utt, *words = line.split()
        if utt in wavs:
            refs[utt] = words
    print(f"vosk on {len(utts)} utterances of {args.set} ({audio:.1f} s of audio), 1 thread")
    head = ("beam,lattice-beam,max-active", "CPU s", "RTF", "warned", "WER %")
    print(f"{head[0]:30s} {head[1]:>8s} {head[2]:>7s} {head[3]:>7s} {head[4]:>7s}")
    for setting in settings:
        beam, lattice_beam, max_active = setting.split(",")
        with tempfile.TemporaryDirectory() as tmp:
            model = Path(tmp) / "kaldi"
            shutil.copytree(export, model)
            set_decoder_options(model, float(beam), float(lattice_beam), int(max_active))
            hyps, cpu, warned = run_vosk(model, wavs)
        errors = sum(
            kaldialign.edit_distance(refs[u], hyps.get(u, "").split())["total"] for u in refs
        )
        wer = 100.0 * errors / sum(len(w) for w in refs.values())
        label = setting + (" (model.conf)" if setting == ",".join(own) else "")
        print(f"{label:30s} {cpu:8.1f} {cpu / audio:7.3f} {warned:>4d}/{len(utts):<2d} {wer:7.2f}")


if __name__ == "__main__":
    main()
