"""The paper's experiment: {plain SGD, NG-SGD} x {1, 2, 4, 8 jobs}, read from a finished run.

Run the workflow first (one command, all eight experiments share the data, features,
i-vectors and egs):

    .venv/bin/snakemake --cores all --configfile config/experiments/ngsgd_paper.yaml
    .venv/bin/python benchmarks/bench_ngsgd_paper.py results/ngsgd_paper

Prints, per experiment: final valid (held-out utterances of training speakers) log-prob
and accuracy of the final model's last iteration, held-out-speaker (test set) frame
accuracy and cross-entropy of final.pt, the loss from 1 to N jobs relative to 1 job, and
the valid log-prob along training (at 25/50/75/100 % of the iterations).

Plain SGD runs at several initial effective learning rates (`sgd_<N>_lr<f>`, f = 1, 1/3,
1/10, 1/30 of Kaldi's); per N the rate with the best final valid log-prob is its tuned
rate, and only that run enters the comparison with NG-SGD (the sweep is printed first).
The results directory is the config's (``results: results/ngsgd_paper``); every path comes
from its layout (:class:`paravg.layout.Layout`).
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from _harness import REPO

from paravg.io import read_json
from paravg.layout import Layout

CONFIGS = [REPO / "config" / "config.yaml", REPO / "config" / "experiments" / "ngsgd_paper.yaml"]


def load(layout: Layout, exp: str) -> dict:
    """The valid curve (``diag/<t>.json``) and test figures of experiment ``exp``."""
    diags = list(layout.existing("diag", exp).values())  # by model index t
    valid = [read_json(p)["valid"]["logprob"] for p in diags]
    test = read_json(layout.eval_result(exp, "test"))
    last = read_json(diags[-1])["valid"]
    return {
        "valid_curve": valid,
        "valid_logprob": last["logprob"],
        "valid_accuracy": last["accuracy"],
        "test_accuracy": test["frame_accuracy"],
        "test_ce": test["cross_entropy"],
        "iterations": len(valid) - 1,
    }


LR_FACTORS = {"1": 1.0, "1_3": 1 / 3, "1_10": 1 / 10, "1_30": 1 / 30}


def main(layout: Layout) -> None:
    runs, sweep = {}, {}
    for (exp,) in layout.existing("eval_result", set_="test"):  # every evaluated experiment
        if m := re.fullmatch(r"ng_(\d+)", exp):
            runs["ng", int(m.group(1))] = load(layout, exp)
        elif m := re.fullmatch(r"sgd_(\d+)_lr([0-9_]+)", exp):
            sweep[int(m.group(1)), m.group(2)] = load(layout, exp)
    if sweep:
        print("plain SGD learning-rate sweep (final valid log-prob; * = tuned rate for that N)")
        print(f"{'jobs':>5}" + "".join(f"{'x' + f.replace('_', '/'):>10}" for f in LR_FACTORS))
    for n in (1, 2, 4, 8):
        mine = {f: r for (m, f), r in sweep.items() if m == n}
        if not mine:
            continue
        best = max(mine, key=lambda f: mine[f]["valid_logprob"])
        runs["sgd", n] = mine[best] | {"lr_factor": best}
        mark = {f: "*" if f == best else " " for f in mine}
        cells = [
            f"{mine[f]['valid_logprob']:>9.3f}{mark[f]}" if f in mine else " " * 10
            for f in LR_FACTORS
        ]
        print(f"{n:>5}" + "".join(cells))
    print()
    print(
        f"{'optimiser':<8}{'jobs':>5}{'lr':>7}{'iters':>6}{'valid logprob':>15}{'valid acc':>11}"
        f"{'test acc':>10}{'test CE':>9}{'acc vs 1 job':>14}{'logprob vs 1 job':>18}"
        "   valid log-prob at 25/50/75/100 %"
    )
    for opt in ("sgd", "ng"):
        base = runs.get((opt, 1))
        for n in (1, 2, 4, 8):
            r = runs.get((opt, n))
            if r is None:
                continue
            curve = r["valid_curve"]
            marks = [curve[max(0, round(f * (len(curve) - 1)))] for f in (0.25, 0.5, 0.75, 1.0)]
            rel = r["test_accuracy"] - base["test_accuracy"] if base else float("nan")
            rel_lp = r["valid_logprob"] - base["valid_logprob"] if base else float("nan")
            name = "NG-SGD" if opt == "ng" else "SGD"
            lr = "x" + r["lr_factor"].replace("_", "/") if "lr_factor" in r else "x1"
            print(
                f"{name:<8}{n:>5}{lr:>7}{r['iterations']:>6}{r['valid_logprob']:>15.4f}"
                f"{r['valid_accuracy']:>11.4f}{r['test_accuracy']:>10.4f}{r['test_ce']:>9.4f}"
                f"{rel:>+14.4f}{rel_lp:>+18.4f}   " + " ".join(f"{v:.3f}" for v in marks)
            )
    for n in (1, 2, 4, 8):
        if ("sgd", n) in runs and ("ng", n) in runs:
            d = runs["ng", n]["test_accuracy"] - runs["sgd", n]["test_accuracy"]
            print(f"NG-SGD minus tuned SGD, {n} jobs: test accuracy {d:+.4f}")


def cli() -> None:
    from paravg.progress import load_config

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument(
        "results",
        nargs="?",
        default=None,
        help="the run's results directory (default: the config's, results/ngsgd_paper)",
    )
    ap.add_argument(
        "--configfile",
        type=Path,
        action="append",
        help="the run's config files in snakemake's order "
        "(default: config/config.yaml, config/experiments/ngsgd_paper.yaml)",
    )
    args = ap.parse_args()
    main(Layout(args.results or load_config(args.configfile or CONFIGS)["results"]))


if __name__ == "__main__":
    cli()
