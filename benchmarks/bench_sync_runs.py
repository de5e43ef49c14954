"""One row per finished experiment of a sync-methods run: how it converged, how it tests,
how often its jobs hit max-change, and how often the ADPSGD neighbour rule cut an edge.

Read from a run's results directory and its config files (snakemake's order), e.g.

    .venv/bin/python benchmarks/bench_sync_runs.py results/sync_paper_lstm \\
        --configfile config/config.yaml --configfile config/experiments/sync_lstm_bmuf.yaml

Unlike ``bench_sync_paper.py`` it prints every experiment of the config that has trained
to its last iteration and skips the others, so a run cut short (before Kaldi's
combination, the evaluation or the decoding) still gives a table. Columns:

* valid log-prob of the synced model (``diag/<t>.json``; the consensus for the
  decentralized methods) at 25 / 50 / 75 / 100 % of the iterations;
* test frame accuracy / log-prob per frame of the model after the last iteration, before
  Kaldi's combination (:func:`last_synced`), and the differences against the experiment
  named by ``--baseline`` (default: ``average`` at the same N, the first such experiment of
  the config);
* where the pipeline got that far: the final model's (``eval/test.json``) and which of
  Kaldi's combination and the EMA it is (``combine.json``, ``combine.ema: candidate``), the
  EMA alone (``eval/ema/test.json``), and the test WER % where the run
  decoded (``results.tsv``, or the test set's ``scores.json``: the tuning set's LMWT/WIP);
* max-change: over every job of the run, the mean fraction of minibatches in which the
  global max-change (``max_param_change``) scaled the update, and in which a component's
  own max-change did, averaged over components, with the most-limited component's
  fraction (``max_change_global`` / ``max_change_per_component`` of ``<t>/job<j>.json``);
* cut edges: how many ADPSGD starts (the start record in ``<t>/job<j>.json``, the mix
  node's for delay-by-one) had a neighbour cut by the objective rule, of how many.
"""

from __future__ import annotations

import argparse
import csv
import json
from pathlib import Path

import _harness  # noqa: F401  (paravg from this checkout, whatever is installed)


def read_json(path: Path | str) -> dict:
    return json.loads(Path(path).read_text())


def fmt(r: dict) -> str:
    return f"{r['frame_accuracy']:.4f} / {-r['cross_entropy']:.4f}"


def test_wer(layout, exp: str) -> str:
    """The final model's test WER % at the tuning set's LMWT/WIP: ``results.tsv``'s, or,
    when the run stopped before its table, the test set's ``scores.json`` (tuned on the
    tuning set, as the table's)."""
    path = Path(layout.results_table("tsv"))
    if path.exists():
        for row in csv.DictReader(path.open(), delimiter="\t"):
            if row["experiment"] == exp and row["set"] == "test" and row.get("wer"):
                return f"{float(row['wer']):.2f}"
    scores = Path(layout.decode_scores(exp, "test"))
    if scores.exists() and read_json(scores).get("wer") is not None:
        return f"{read_json(scores)['wer']:.2f}"
    return "—"


def last_synced(layout, exp: str, plan) -> dict:
    """Test figures of the model after the last iteration (``plan.synced_model(T)``:
    ``<T>.pt``, ``bmuf/<T>.pt`` or ``consensus/<T>.pt``), before Kaldi's combination,
    by the pipeline's own :func:`paravg.evaluate.evaluate_set` (cached in
    ``<results>/bench_sync_runs/``)."""
    from paravg.evaluate import evaluate_set

    model = Path(plan.synced_model(plan.num_iters))
    out = Path(layout.tool_dir("bench_sync_runs")) / f"{exp}.last.json"
    if out.exists() and out.stat().st_mtime >= model.stat().st_mtime:
        return read_json(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    return evaluate_set(
        model,
        layout.feats_scp("test"),
        layout.targets_scp("test"),
        out,
        ivectors_scp=layout.ivector_scp("test"),
        period_path=layout.ivector_period("test"),
    )


def job_rows(layout, exp: str, plan) -> tuple[list[dict], int, int]:
    jobs, starts, cut = [], 0, 0
    for t in range(plan.num_iters):
        for j in range(plan.num_jobs(t)):
            path = Path(layout.job_stats(exp, t + 1, j))
            if not path.exists():
                continue
            jobs.append(read_json(path))
            start = jobs[-1].get("start")
            if isinstance(start, dict) and "cut" in start:  # an ADPSGD start's record
                starts += 1
                cut += bool(start["cut"])
    return jobs, starts, cut


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("results", type=Path)
    ap.add_argument("--configfile", type=Path, action="append", required=True)
    ap.add_argument("--baseline", help="the experiment the Δ columns compare with")
    args = ap.parse_args()

    from paravg.layout import Layout
    from paravg.plan import experiment_plans
    from paravg.progress import load_config

    config = load_config(args.configfile)
    if Path(config["results"]) != args.results:
        raise SystemExit(f"{args.results}: the config names results {config['results']!r}")
    layout = Layout(config["results"])
    plans = experiment_plans(config, read_json(layout.egs_info()))
    done = {
        e: p
        for e, p in plans.items()
        if Path(layout.diag(e, p.num_iters)).exists() and Path(p.synced_model(p.num_iters)).exists()
    }
    tests = {e: last_synced(layout, e, p) for e, p in done.items()}

    def baseline(exp: str, plan) -> str | None:
        if args.baseline:
            return args.baseline if args.baseline in tests else None
        same_n = [
            e for e, p in done.items()
            if p.sync_cfg["method"] == "average" and p.num_jobs(0) == plan.num_jobs(0)
        ]  # fmt: skip
        return same_n[0] if same_n else None

    print(
        "| experiment | method | N | iterations | valid log-prob at 25 / 50 / 75 / 100 % "
        "| last synced model: test acc / log-prob | vs | Δ acc | Δ log-prob "
        "| final model (combination or EMA): test acc / log-prob | EMA alone | test WER % "
        "| max-change hit: global / per component (mean, worst) | starts with a cut edge |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for exp, plan in done.items():
        curve = [
            read_json(layout.diag(exp, t))["valid"]["logprob"] for t in range(plan.num_iters + 1)
        ]
        marks = [curve[max(0, round(f * (len(curve) - 1)))] for f in (0.25, 0.5, 0.75, 1.0)]
        test = tests[exp]
        base = baseline(exp, plan)
        if base is not None and base != exp:
            b = tests[base]
            d_acc = f"{test['frame_accuracy'] - b['frame_accuracy']:+.4f}"
            d_lp = f"{b['cross_entropy'] - test['cross_entropy']:+.4f}"
        else:
            base, d_acc, d_lp = base or "—", "—", "—"
        jobs, starts, cut = job_rows(layout, exp, plan)
        glob = sum(s["max_change_global"] for s in jobs) / max(1, len(jobs))
        comps: dict[str, float] = {}
        for s in jobs:
            for c, v in s["max_change_per_component"].items():
                comps[c] = comps.get(c, 0.0) + v / len(jobs)
        mean_c = sum(comps.values()) / max(1, len(comps))
        worst = max(comps, key=comps.get) if comps else "—"
        cuts = f"{cut} of {starts}" if starts else "—"
        final, ema = "not run", "—"
        if Path(layout.eval_result(exp, "test")).exists():
            chosen = read_json(layout.combine_summary(exp)).get("chosen", "combined")
            f = read_json(layout.eval_result(exp, "test"))
            final = f"{'EMA' if chosen == 'ema' else 'combination'}: {fmt(f)}"
        if Path(layout.eval_ema_result(exp, "test")).exists():
            ema = fmt(read_json(layout.eval_ema_result(exp, "test")))
        print(
            f"| {exp} | {plan.sync_cfg['method']} | {plan.num_jobs(0)} | {plan.num_iters} "
            f"| {' / '.join(f'{v:.3f}' for v in marks)} "
            f"| {fmt(test)} | {base} | {d_acc} | {d_lp} | {final} | {ema} "
            f"| {test_wer(layout, exp)} "
            f"| {glob:.3f} / {mean_c:.3f} ({worst} {comps.get(worst, 0.0):.3f}) | {cuts} |"
        )
    missing = [e for e in plans if e not in done]
    if missing:
        print(f"\nnot trained to the end: {', '.join(missing)}")


if __name__ == "__main__":
    main()
