"""The sync methods' papers on the demo, read from a finished run of ``sync_paper.yaml``.

Run the workflow first (one command; the eight experiments share data, features,
i-vectors and egs):

    .venv/bin/snakemake --cores all --configfile config/experiments/sync_paper.yaml
    .venv/bin/python benchmarks/bench_sync_paper.py results/sync_paper

Prints two tables, both on the held-out test speakers (frame accuracy, log-prob per frame
= −cross-entropy; when the run decodes, the final model's test WER at the tuning set's
LMWT/WIP from ``results.tsv``) and the validation diagnostics of the synced models:

1. **Tian et al.** (EMA vs model averaging vs BMUF, N = 4 and 8): Kaldi's combination of
   the synced models (``combined.pt``), the EMA alone (``ema/<T>.pt``, α = 0.9 per archive
   as configured), the final model the pipeline chose between the two (``final.pt``,
   ``combine.ema: candidate``: better combine-egs objective), and the EMA at the decay per
   archive picked on the combine egs from a sweep (the EMA recomputed offline over the
   synced models m_1 … m_T, :func:`paravg.sync.ema.ema_update` with the decay the plan
   gives ``sync.ema: {decay: α, decay_per: archive}``, α^N per iteration).
2. **Cui et al.** (delay-by-one and d-psgd vs ring, random ring and averaging, N = 4,
   equally fast learners): validation log-prob of the synced model at 25/50/75/100 % of
   the iterations, the first iteration at which it is within 0.05 of the run's best final
   value, and the test figures of the combination, with differences against ``average``.

3. **The learners of the decentralized methods** (experiments run with
   ``run.keep_job_models: true``, ``config/experiments/sync_paper_learners.yaml``): per
   iteration, how far the learners' models are from their mean in the ring's *flipping
   mode* — the eigenvectors of the mixing matrix M with its most negative eigenvalue λ
   (−1/3 on a ring of 4: the pattern +, −, +, − around the ring) — and in all other modes,
   and for the methods that keep their start models the measured restoring factor of one
   job in that mode,

       γ = −⟨P Δ̃, P ẽ⟩ / ‖P ẽ‖²      (ẽ = s_j − mean s, Δ̃ = Δ_j − mean Δ, P its projector).

   d-psgd's deviation in that mode evolves as e ← (λ − γ) e + noise: mixing flips its sign
   and shrinks it by |λ|, the own (unmixed) displacement pulls it back by γ, and the two
   corrections overshoot once γ > 1 + λ (2/3 on a ring of 4): the learners diverge from
   each other although every other mode contracts.

Test figures of models that the pipeline did not evaluate (``combined.pt`` when the EMA was
chosen, the swept EMAs) are computed here by :func:`paravg.evaluate.evaluate_set`, the
pipeline's own evaluation, into ``<results>/bench_sync_paper/``. The results directory
is the config's (``results: results/sync_paper``); every path comes from its layout.
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
from pathlib import Path

from _harness import REPO

EMA_SWEEP = (0.5, 0.7, 0.8, 0.9, 0.95, 0.98)  # decay per archive processed
TIAN = ("average", "bmuf")
CUI = (
    "average", "ring", "random-ring", "delay-by-one", "d-psgd", "gossip-average",
    "random-gossip-average",
)  # fmt: skip


def read_json(path: Path) -> dict:
    return json.loads(Path(path).read_text())


class Run:
    """A finished ``sync_paper`` run: its config, plans and the test set's files."""

    def __init__(self, results: Path | None, configs: list[Path]) -> None:
        from paravg.layout import Layout
        from paravg.plan import experiment_plans
        from paravg.progress import load_config

        self.config = load_config(configs)
        if results is not None and Path(self.config["results"]) != results:
            sys.exit(f"{results}: the config names results {self.config['results']!r}")
        self.layout = Layout(self.config["results"])
        self.egs_info = read_json(Path(self.layout.egs_info()))
        self.plans = experiment_plans(self.config, self.egs_info)
        self.scratch = Path(self.layout.tool_dir("bench_sync_paper"))

    def ema_plan(self, exp: str, alpha: float):
        """``exp``'s plan with its EMA at decay α per archive processed (one of the sweep)."""
        from paravg.config import deep_merge
        from paravg.plan import experiment_plans

        config = dict(self.config)
        ema = {"sync": {"ema": {"decay": alpha, "decay_per": "archive"}}}
        experiments = dict(config["experiments"])
        experiments[exp] = deep_merge(experiments[exp] or {}, ema)
        config["experiments"] = experiments
        return experiment_plans(config, self.egs_info)[exp]

    def evaluate(self, model: Path | str, name: str) -> dict:
        """Test-set frame accuracy and log-prob of ``model`` (cached by ``name``)."""
        from paravg.evaluate import evaluate_set

        out = self.scratch / f"{name}.json"
        if out.exists() and out.stat().st_mtime >= Path(model).stat().st_mtime:
            return read_json(out)
        lay = self.layout
        return evaluate_set(
            model,
            lay.feats_scp("test"),
            lay.targets_scp("test"),
            out,
            ivectors_scp=lay.ivector_scp("test"),
            period_path=lay.ivector_period("test"),
        )

    def test_wer(self, exp: str) -> str:
        """The final model's test WER % at the tuning set's LMWT/WIP (``results.tsv``,
        when the run decodes), as a table cell."""
        path = Path(self.layout.results_table("tsv"))
        if not path.exists():
            return "—"
        for row in csv.DictReader(path.open(), delimiter="\t"):
            if row["experiment"] == exp and row["set"] == "test" and row.get("wer"):
                return f"{float(row['wer']):.2f}"
        return "—"

    def valid_curve(self, exp: str) -> list[float]:
        plan = self.plans[exp]
        return [
            read_json(Path(self.layout.diag(exp, t)))["valid"]["logprob"]
            for t in range(plan.num_iters + 1)
        ]

    def combination(self, exp: str) -> dict:
        """Test figures of Kaldi's combination of the synced models (``combined.pt``)."""
        lay = self.layout
        summary = read_json(Path(lay.combine_summary(exp)))
        if summary["chosen"] == "combined":
            return read_json(Path(lay.eval_result(exp, "test")))
        return self.evaluate(lay.combined_model(exp), f"{exp}.combined")

    def ema_sweep(self, exp: str) -> tuple[float, dict, dict[float, float]]:
        """The EMA at each decay per archive of ``EMA_SWEEP`` over the synced models: the
        decay with the best combine-egs objective, its test figures, all objectives."""
        import torch

        from paravg.combine import combine_objective
        from paravg.egs import EgsArchive
        from paravg.io import save_torch_atomic
        from paravg.nnet.model_file import load_model_file
        from paravg.sync.ema import ema_update

        plan = self.plans[exp]
        models = [load_model_file(plan.synced_model(t)) for t in range(1, plan.num_iters + 1)]
        archive = EgsArchive(self.layout.egs_subset_prefix("combine"))
        objectives, emas = {}, {}
        with torch.no_grad():
            for alpha in EMA_SWEEP:
                ema_plan = self.ema_plan(exp, alpha)
                ema = dict(models[0]["state_dict"])
                for t, m in enumerate(models[1:], start=2):  # m_t = the model after t
                    ema = ema_update(ema, m["state_dict"], ema_plan.ema_decay(t))  # as stored
                file_dict = {**models[-1], "state_dict": ema}
                objectives[alpha] = combine_objective(file_dict, archive)
                emas[alpha] = file_dict
        best = max(objectives, key=objectives.get)
        path = self.scratch / f"{exp}.ema{best:g}.pt"
        save_torch_atomic(path, emas[best])
        return best, self.evaluate(path, f"{exp}.ema{best:g}"), objectives


def flipping_projector(num_jobs: int):
    """P = V Vᵀ over the eigenvectors V of the fixed ring's mixing matrix with its most
    negative eigenvalue λ; returns (P, λ)."""
    import numpy as np

    from paravg.sync.ring import fixed_ring_order, mixing_matrix, ring_neighbourhoods

    m = np.array(mixing_matrix(ring_neighbourhoods(fixed_ring_order(num_jobs))))
    values, vectors = np.linalg.eigh((m + m.T) / 2)
    v = vectors[:, values <= values.min() + 1e-9]
    return v @ v.T, float(values.min())


def learner_modes(run: Run, exp: str) -> list[dict] | None:
    """Per iteration t: ‖P ẽ‖ and the root-mean-square over the other modes,
    ‖(1 − P) ẽ‖ / (N − 1 − rank P)^½, of the learners' models (start models s^t where the
    method keeps them, else end models w^t), γ where both exist, and the jobs' mean
    training objective; None when the job models were not kept."""
    import torch

    from paravg.nnet.model_file import load_model_file

    plan, lay = run.plans[exp], run.layout
    n = plan.num_jobs(0)
    if not Path(lay.job_model(exp, 1, 0)).exists():
        return None
    # delay-by-one's jobs of index 1 start from 0.pt (its mix nodes write from index 2 on)
    kind = "job_start" if Path(lay.job_start(exp, 2, 0)).exists() else "job_model"
    proj, _ = flipping_projector(n)
    proj = torch.as_tensor(proj)
    other_modes = max(n - 1 - round(float(proj.trace())), 1)  # the mean is no mode of ẽ

    def stacked(layout_kind: str, t: int) -> torch.Tensor:
        rows = []
        for j in range(n):
            path = getattr(lay, layout_kind)(exp, t + 1, j)
            if layout_kind == "job_start" and not Path(path).exists() and t == 0:
                path = lay.init_model(exp)
            sd = load_model_file(path)["state_dict"]
            rows.append(torch.cat([v.double().flatten() for v in sd.values()]))
        x = torch.stack(rows)
        return x - x.mean(0)

    out = []
    for t in range(plan.num_iters):
        dev = stacked(kind, t)
        flip = proj @ dev
        row = {
            "t": t,
            "flip": float(flip.norm()),
            "other": float((dev - flip).norm()) / other_modes**0.5,
            "objf": sum(read_json(Path(lay.job_stats(exp, t + 1, j)))["objf"] for j in range(n))
            / n,
        }
        if kind == "job_start" and float(flip.norm()) > 0:
            disp = proj @ (stacked("job_model", t) - dev)  # P Δ̃ (the means cancel in Δ̃)
            row["gamma"] = -float((disp * flip).sum()) / float((flip * flip).sum())
        out.append(row)
    return out


def learners_table(run: Run) -> None:
    rows = {}
    for exp, plan in run.plans.items():
        if plan.sync_cfg["method"] in ("ring", "delay-by-one", "d-psgd", "gossip-average"):
            modes = learner_modes(run, exp)
            if modes:
                rows[exp] = (plan, modes)
    if not rows:
        return
    _, lam = flipping_projector(next(iter(rows.values()))[0].num_jobs(0))
    print(
        "\n## The learners: distance from their mean in the ring's flipping mode "
        f"(λ = {lam:.3f}) and in the other modes (start models s^t where the method keeps them, "
        "else end models w^t), γ, mean job objective\n"
    )
    print("| experiment | t | flipping mode | other modes (rms) | γ (unstable > 1 + λ) | objf |")
    print("|---|---|---|---|---|---|")
    for exp, (_, modes) in rows.items():
        for r in modes:
            gamma = f"{r['gamma']:.3f}" if "gamma" in r else "—"
            print(
                f"| {exp} | {r['t']} | {r['flip']:.3f} | {r['other']:.3f} | {gamma} "
                f"| {r['objf']:.3f} |"
            )


def fmt(r: dict) -> str:
    return f"{r['frame_accuracy']:.4f} / {-r['cross_entropy']:.4f}"


def tian_table(run: Run) -> None:
    print("\n## Tian et al.: EMA vs model averaging vs BMUF (test acc / log-prob per frame)\n")
    print(
        "| method | jobs | iterations | final valid log-prob | combination "
        "| EMA alone (α = 0.9/archive) | chosen by combine.ema: candidate "
        "| its test WER % | EMA, α picked on combine egs |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for exp, plan in run.plans.items():
        method = plan.sync_cfg["method"]
        if method not in TIAN or not plan.sync_cfg["ema"]["enabled"]:
            continue
        lay = run.layout
        summary = read_json(Path(lay.combine_summary(exp)))
        final = read_json(Path(lay.eval_result(exp, "test")))
        ema = read_json(Path(lay.eval_ema_result(exp, "test")))
        alpha, swept, objectives = run.ema_sweep(exp)
        chosen = "EMA" if summary["chosen"] == "ema" else "combination"
        print(
            f"| {method} | {plan.num_jobs(0)} | {plan.num_iters} | {run.valid_curve(exp)[-1]:.4f} "
            f"| {fmt(run.combination(exp))} | {fmt(ema)} | {chosen}: {fmt(final)} "
            f"| {run.test_wer(exp)} | α = {alpha:g}: {fmt(swept)} |"
        )
        sweep = ", ".join(f"{a:g}: {o:.4f}" for a, o in objectives.items())
        print(
            f"|  | combine-egs objective: combination {summary['combined']['objective']:.4f}, "
            f"EMA {summary['ema']['objective']:.4f}; sweep {sweep} |  |  |  |  |  |  |  |"
        )


def cui_table(run: Run) -> None:
    rows = [
        (exp, plan, run.valid_curve(exp), run.combination(exp))
        for exp, plan in run.plans.items()
        if plan.sync_cfg["method"] in CUI and plan.num_jobs(0) == 4
    ]
    if not rows:
        return
    rows.sort(key=lambda r: CUI.index(r[1].sync_cfg["method"]))
    best_final = max(curve[-1] for _, _, curve, _ in rows)
    base = next((test for _, plan, _, test in rows if plan.sync_cfg["method"] == "average"), None)
    print(
        "\n## Cui et al.: decentralized vs averaging, N = 4, equally fast learners\n\n"
        "| experiment | method | valid log-prob at 25 / 50 / 75 / 100 % | first iteration "
        f"within 0.05 of {best_final:.4f} | test acc | test log-prob | Δ acc vs average "
        "| Δ log-prob | final model's test WER % |\n|---|---|---|---|---|---|---|---|---|"
    )
    for exp, plan, curve, test in rows:
        marks = [curve[max(0, round(f * (len(curve) - 1)))] for f in (0.25, 0.5, 0.75, 1.0)]
        reach = next((t for t, v in enumerate(curve) if v >= best_final - 0.05), None)
        d_acc = test["frame_accuracy"] - base["frame_accuracy"] if base else float("nan")
        d_lp = base["cross_entropy"] - test["cross_entropy"] if base else float("nan")
        print(
            f"| {exp} | {plan.sync_cfg['method']} | {' / '.join(f'{v:.3f}' for v in marks)} "
            f"| {reach if reach is not None else '—'} of {plan.num_iters} "
            f"| {test['frame_accuracy']:.4f} | {-test['cross_entropy']:.4f} "
            f"| {d_acc:+.4f} | {d_lp:+.4f} | {run.test_wer(exp)} |"
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument(
        "results",
        type=Path,
        nargs="?",
        default=None,
        help="the run's results directory (default: the config's, results/sync_paper)",
    )
    ap.add_argument(
        "--configfile",
        type=Path,
        action="append",
        help="the run's config files in snakemake's order "
        "(default: config/config.yaml, config/experiments/sync_paper.yaml)",
    )
    args = ap.parse_args()
    configs = args.configfile or [
        REPO / "config" / "config.yaml",
        REPO / "config" / "experiments" / "sync_paper.yaml",
    ]
    run = Run(args.results, configs)
    tian_table(run)
    cui_table(run)
    learners_table(run)


if __name__ == "__main__":
    main()
