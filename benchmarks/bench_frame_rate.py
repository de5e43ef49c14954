"""A low frame rate (``model.frame_subsampling_factor: 3``) against the full rate, for
each model family, from one finished run of ``config/experiments/frame_rate.yaml``:
training cost, decoding cost, frame accuracy and WER side by side, f = 3 as ratios of
its f = 1 twin, and vosk's real-time factor on every export.

    nice -n 10 .venv/bin/snakemake --profile profiles/local \\
        --configfile config/experiments/frame_rate.yaml
    .venv/bin/python benchmarks/bench_frame_rate.py results/frame_rate [--set test] \\
        [--vosk-utts 20]

Per experiment:

* training: iterations and train jobs of the plan, the frames the jobs trained on (their
  JSONs' ``frames``) and the jobs' CPU seconds (Snakemake's ``benchmark:`` files of
  ``train_job``, column ``cpu_time``);
* paravg's decoding of ``--set``: the network's and the word and phone searches' CPU
  seconds (the split jobs' ``time.process_time``, ``scores.json`` ``timing``), the real-time
  factor (network + search) / audio, audio = feature frames × 10 ms, and the scoring
  job's CPU seconds (the LMWT × WIP grid and the CTM on the lattices);
* frame accuracy and cross-entropy on ``--set`` (``eval/<set>.json``: on the model's
  output frames, every third frame at f = 3), the validation accuracy of the last
  iteration's diagnostics (same), and the WER on ``--set`` (tuned on the dev set when the
  run has one);
* vosk (Kaldi's online MFCC and i-vectors, nnet3 looped computation, lattice decoder, one
  thread, in a process of its own) on the export as written (``conf/model.conf``: its
  beams, its ``--frame-subsampling-factor`` and acoustic scale), over the first
  ``--vosk-utts`` utterances of ``--set``: CPU seconds, RTF = CPU s / audio s, and WER
  on those utterances beside paravg's on the same ones.

Two tables: the figures, and the f = 3 experiment of each family over its f = 1 twin.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import yaml
from _harness import REPO, benchmark_cpu_seconds, run_vosk, test_utterances, wer


def experiment_models(results: Path) -> dict[str, dict]:
    """Each experiment's model config, as its final.pt header has it."""
    import torch

    out = {}
    for exp_dir in sorted((results / "exp").iterdir()):
        final = exp_dir / "final.pt"
        if final.is_file():
            out[exp_dir.name] = torch.load(final, weights_only=True, map_location="cpu")["model"]
    return out


def training(results: Path, exp: str) -> dict:
    exp_dir = results / "exp" / exp
    jobs = sorted(exp_dir.glob("[0-9]*/job*.json"))
    frames = sum(json.loads(p.read_text()).get("frames", 0.0) for p in jobs)
    iterations = len({p.parent.name for p in jobs})
    tsvs = sorted((results / "benchmarks" / "train_job" / exp).glob("**/*.tsv"))
    return {
        "iterations": iterations,
        "jobs": len(jobs),
        "frames": frames,
        "cpu": benchmark_cpu_seconds(tsvs),
        "timed_jobs": len(tsvs),
    }


def decoding(results: Path, exp: str, set_: str) -> dict:
    scores = json.loads((results / "exp" / exp / "decode" / set_ / "scores.json").read_text())
    timing = scores["timing"]
    audio = 0.01 * timing["frames"]
    cpu = timing["nnet_seconds"] + timing["search_seconds"]
    return {
        "audio": audio,
        "nnet": timing["nnet_seconds"],
        "search": timing["search_seconds"],
        "scoring": timing.get("scoring_seconds", float("nan")),
        "rtf": cpu / audio,
        "wer": scores.get("wer"),
        "lmwt": scores.get("lmwt"),
        "setting": scores.get("wer_setting"),
        "per": scores.get("per"),
    }


def accuracy(results: Path, exp: str, set_: str) -> dict:
    exp_dir = results / "exp" / exp
    ev = json.loads((exp_dir / "eval" / f"{set_}.json").read_text())
    diags = sorted(exp_dir.glob("diag/*.json"), key=lambda p: int(p.stem))
    last = json.loads(diags[-1].read_text()) if diags else {}
    return {
        "frame_accuracy": ev["frame_accuracy"],
        "cross_entropy": ev["cross_entropy"],
        "eval_frames": ev["frames"],
        "valid_accuracy": last.get("valid", {}).get("accuracy", float("nan")),
    }


def vosk(results: Path, exp: str, set_: str, num_utts: int, setting: str | None) -> dict:
    from paravg.layout import Layout

    L = Layout(results.name)
    wavs, audio, refs = test_utterances(L, set_, num_utts)
    utts = list(wavs)
    conf = Path(L.kaldi_file(exp, "conf/model.conf")).read_text().split()
    with tempfile.TemporaryDirectory() as tmp:
        model = Path(tmp) / "kaldi"
        shutil.copytree(L.kaldi_dir(exp), model)
        run = run_vosk(model, wavs)
        hyps, cpu = run.hyps, run.cpu
    ours = {}
    if setting is not None:
        all_hyps = json.loads(Path(L.decode_hyps(exp, set_)).read_text())["words"][setting]
        ours = {u: all_hyps.get(u, "") for u in utts}
    return {
        "utts": len(utts),
        "audio": audio,
        "cpu": cpu,
        "rtf": cpu / audio,
        "wer": wer(refs, hyps),
        "paravg_wer": wer(refs, ours) if ours else float("nan"),
        "conf": [o for o in conf if o.startswith(("--frame-subsampling", "--acoustic-scale"))],
    }


def pairs(models: dict[str, dict]) -> list[tuple[str, str]]:
    """(f = 1 experiment, f = 3 twin): the same model config but the factor."""
    out = []
    for name, cfg in models.items():
        if cfg.get("frame_subsampling_factor", 1) == 1:
            continue
        base = {k: v for k, v in cfg.items() if k != "frame_subsampling_factor"}
        for other, other_cfg in models.items():
            if other_cfg == base:
                out.append((other, name))
    return sorted(out)


def fmt(v, digits=2) -> str:
    return "n/a" if v is None else f"{v:.{digits}f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("results", type=Path, nargs="?", default=Path("results/frame_rate"))
    ap.add_argument("--set", default="test")
    ap.add_argument("--vosk-utts", type=int, default=20)
    ap.add_argument("--no-vosk", action="store_true")
    args = ap.parse_args()
    started = time.perf_counter()
    results = args.results.resolve()
    os.chdir(results.parent)  # the run's scp files and wav.scp hold paths relative to it
    models = experiment_models(results)
    rows = {}
    for exp, cfg in models.items():
        row = {
            "family": cfg.get("family", "tdnn"),
            "f": cfg.get("frame_subsampling_factor", 1),
            "train": training(results, exp),
            "decode": decoding(results, exp, args.set),
            "acc": accuracy(results, exp, args.set),
        }
        if not args.no_vosk:
            row["vosk"] = vosk(results, exp, args.set, args.vosk_utts, row["decode"]["setting"])
        rows[exp] = row
        print(f"# {exp}: {json.dumps(row)}", file=sys.stderr)
    print(f"\n## Figures ({results.name}, {args.set} set)\n")
    print(
        "| experiment | family | f | iterations | train jobs | frames trained | train CPU s "
        "| nnet CPU s | search CPU s | decode RTF | scoring CPU s | frame acc | CE | valid acc "
        "| WER % "
        "| vosk CPU s | vosk RTF | vosk WER % | paravg WER % (same utts) |"
    )
    print("|" + "---|" * 19)
    for exp, r in rows.items():
        t, d, a, v = r["train"], r["decode"], r["acc"], r.get("vosk", {})
        print(
            f"| {exp} | {r['family']} | {r['f']} | {t['iterations']} | {t['jobs']} "
            f"| {t['frames']:,.0f} | {t['cpu']:.0f} | {d['nnet']:.1f} | {d['search']:.1f} "
            f"| {d['rtf']:.4f} | {d['scoring']:.1f} | {a['frame_accuracy']:.4f} "
            f"| {a['cross_entropy']:.3f} "
            f"| {a['valid_accuracy']:.4f} | {fmt(d['wer'])} | {fmt(v.get('cpu'), 1)} "
            f"| {fmt(v.get('rtf'), 3)} | {fmt(v.get('wer'))} | {fmt(v.get('paravg_wer'))} |"
        )
    print("\n## f = 3 over f = 1 (ratios; accuracy and WER: differences)\n")
    print(
        "| family | train CPU | frames trained | iterations | nnet CPU | search CPU "
        "| decode RTF | scoring CPU | vosk RTF | Δ frame acc | Δ valid acc | Δ WER (points) "
        "| Δ vosk WER |"
    )
    print("|" + "---|" * 13)
    for full, lfr in pairs(models):
        a, b = rows[full], rows[lfr]

        def ratio(part, key, a=a, b=b):
            x, y = a.get(part, {}).get(key), b.get(part, {}).get(key)
            return "n/a" if not x or y is None else f"{y / x:.2f}"

        def diff(part, key, digits, a=a, b=b):
            x, y = a.get(part, {}).get(key), b.get(part, {}).get(key)
            return "n/a" if x is None or y is None else f"{y - x:+.{digits}f}"

        print(
            f"| {a['family']} ({full} → {lfr}) | {ratio('train', 'cpu')} "
            f"| {ratio('train', 'frames')} | {ratio('train', 'iterations')} "
            f"| {ratio('decode', 'nnet')} | {ratio('decode', 'search')} "
            f"| {ratio('decode', 'rtf')} | {ratio('decode', 'scoring')} | {ratio('vosk', 'rtf')} "
            f"| {diff('acc', 'frame_accuracy', 4)} | {diff('acc', 'valid_accuracy', 4)} "
            f"| {diff('decode', 'wer', 2)} | {diff('vosk', 'wer', 2)} |"
        )
    config = yaml.safe_load((REPO / "config/experiments/frame_rate.yaml").read_text())
    print(
        f"\n(experiments of config/experiments/frame_rate.yaml: {', '.join(config['experiments'])};"
    )
    print(f" benchmark wall time {time.perf_counter() - started:.0f} s)")


if __name__ == "__main__":
    main()
