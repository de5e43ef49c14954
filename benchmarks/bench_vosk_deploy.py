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
import os
import re
import shutil
import tempfile
from pathlib import Path

from _harness import add_run_arguments, run_vosk, test_utterances, wer

from paravg.layout import Layout


def set_decoder_options(model_dir: Path, beam: float, lattice_beam: float, max_active: int):
    conf = model_dir / "conf" / "model.conf"
    text = conf.read_text()
    for key, value in (("beam", beam), ("lattice-beam", lattice_beam), ("max-active", max_active)):
        text = re.sub(rf"^--{key}=\S+$", f"--{key}={value}", text, flags=re.M)
    conf.write_text(text)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_run_arguments(ap)
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
    wavs, audio, refs = test_utterances(L, args.set, args.max_utts)
    utts = list(wavs)
    print(f"vosk on {len(utts)} utterances of {args.set} ({audio:.1f} s of audio), 1 thread")
    head = ("beam,lattice-beam,max-active", "CPU s", "RTF", "warned", "WER %")
    print(f"{head[0]:30s} {head[1]:>8s} {head[2]:>7s} {head[3]:>7s} {head[4]:>7s}")
    for setting in settings:
        beam, lattice_beam, max_active = setting.split(",")
        with tempfile.TemporaryDirectory() as tmp:
            model = Path(tmp) / "kaldi"
            shutil.copytree(export, model)
            set_decoder_options(model, float(beam), float(lattice_beam), int(max_active))
            run = run_vosk(model, wavs, log_level=0)
        cpu, warned = run.cpu, run.stderr.count("Did not reach requested beam")
        rate = wer(refs, run.hyps)
        label = setting + (" (model.conf)" if setting == ",".join(own) else "")
        print(f"{label:30s} {cpu:8.1f} {cpu / audio:7.3f} {warned:>4d}/{len(utts):<2d} {rate:7.2f}")


if __name__ == "__main__":
    main()
