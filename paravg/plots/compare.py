"""Several experiments side by side: overlaid validation curves and the comparison table.

The curves are drawn twice: against the iteration, and against the data processed
(archive-passes, Σ N_t over the iterations before the model), which is the fair x axis
when experiments run different numbers of jobs. The table has one section per eval set:
held-out frame accuracy and cross-entropy of ``final.pt`` (``eval/<set>.json``), the last
validation diagnostics, how many models the final combination averaged, and how many
jobs the syncs rejected. The best value of each column is marked.
"""

from __future__ import annotations

import html
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from matplotlib.lines import Line2D

from paravg.io import write_text_atomic
from paravg.plots import series
from paravg.plots.figures import LOGPROB_LABEL, blank_figure, no_data, save_png
from paravg.plots.runs import ExperimentRun


@dataclass
class ComparisonCurves:
    """Validation/train curves of one experiment on both x axes."""

    model: list[int] = field(default_factory=list)
    archives: list[float] = field(default_factory=list)
    valid_logprob: list[float] = field(default_factory=list)
    valid_accuracy: list[float] = field(default_factory=list)
    train_logprob: list[float] = field(default_factory=list)


def comparison_curves(run: ExperimentRun) -> ComparisonCurves:
    """Curves of ``run``; ``archives`` is nan where an earlier sync is missing."""
    c = series.diagnostic_curves(run)
    processed = series.archives_processed(run)
    return ComparisonCurves(
        model=list(c.model),
        archives=[float(processed[t]) if t in processed else math.nan for t in c.model],
        valid_logprob=list(c.valid_logprob),
        valid_accuracy=list(c.valid_accuracy),
        train_logprob=list(c.train_logprob),
    )


def plot_comparison(runs: Sequence[ExperimentRun]):
    """2 × 2: validation log-prob and accuracy against iteration and against data seen."""
    fig = blank_figure(12.0, 7.5)
    axes = fig.subplots(2, 2, sharex="col")
    names = ", ".join(r.name for r in runs)
    fig.suptitle(f"Experiments compared: {names}", fontsize=12)
    any_data = False
    for i, run in enumerate(runs):
        c = comparison_curves(run)
        if not c.model:
            continue
        any_data = True
        color = f"C{i % 10}"
        marker = {"marker": "o", "markersize": 3} if len(c.model) <= 60 else {}
        for col, x in enumerate((c.model, c.archives)):
            axes[0, col].plot(x, c.valid_logprob, color=color, **marker)
            axes[0, col].plot(
                x, c.train_logprob, color=color, linestyle=":", linewidth=1.0, alpha=0.8
            )
            axes[1, col].plot(x, [100 * a for a in c.valid_accuracy], color=color, **marker)
    for ax in axes.flat:
        ax.grid(True, alpha=0.3)
        if not any_data:
            no_data(ax, "no diagnostics yet")
    axes[0, 0].set_ylabel(LOGPROB_LABEL)
    axes[1, 0].set_ylabel("validation frame accuracy (%)")
    axes[1, 0].set_xlabel("model <t>.pt (iterations completed)")
    axes[1, 1].set_xlabel("training data processed (archive-passes, Σ jobs)")
    axes[0, 0].set_title("against iteration", fontsize=10)
    axes[0, 1].set_title("against data processed", fontsize=10)
    if any_data:
        handles = [Line2D([], [], color=f"C{i % 10}", label=run.name) for i, run in enumerate(runs)]
        styles = [
            Line2D([], [], color="0.3", label="validation"),
            Line2D([], [], color="0.3", linestyle=":", label="train subset"),
        ]
        axes[0, 1].legend(
            handles=handles + styles, loc="lower right", fontsize=8, ncol=2 if len(runs) > 4 else 1
        )
    return fig


# ----------------------------------------------------------------- table
@dataclass
class ComparisonRow:
    experiment: str
    eval_set: str
    frame_accuracy: float
    cross_entropy: float
    frames: int | None
    utterances: int | None
    valid_logprob: float
    valid_accuracy: float
    iterations: int
    jobs_rejected: int
    combined_models: int | None
    wer: float = math.nan  # percent, decode/<set>/scores.json (nan: not decoded)
    per: float = math.nan


def _f(value) -> float:
    return series._num(value)


def comparison_rows(
    runs: Sequence[ExperimentRun], eval_sets: Sequence[str]
) -> dict[str, list[ComparisonRow]]:
    """Eval set -> one row per experiment (nan where an experiment has no result yet).

    Other final models of an experiment with their own evaluation (``eval/ema/<set>.json``)
    get a row of their own right below it, named ``<experiment> (<model>)``.
    """
    table: dict[str, list[ComparisonRow]] = {}
    for s in eval_sets:
        rows = []
        for run in runs:
            summary = series.run_summary(run)
            models = [(run.name, run.evals.get(s) or {})]
            models += [
                (f"{run.name} ({model})", evals[s])
                for model, evals in sorted(run.model_evals.items())
                if s in evals
            ]
            for name, ev in models:
                rows.append(_row(name, s, ev, summary))
            rows[len(rows) - len(models)].__dict__.update(_decode_scores(run, s))
        table[s] = rows
    return table


def _decode_scores(run: ExperimentRun, eval_set: str) -> dict:
    """WER and PER (percent) of the experiment's final model, where decoded."""
    import json

    path = Path(run.layout.decode_scores(run.exp, eval_set))
    if not path.is_file():
        return {}
    scores = json.loads(path.read_text())
    return {"wer": _f(scores.get("wer")), "per": _f(scores.get("per"))}


def _row(name: str, eval_set: str, ev: dict, summary: series.RunSummary) -> ComparisonRow:
    frames, utts = ev.get("frames"), ev.get("utterances")
    return ComparisonRow(
        experiment=name,
        eval_set=eval_set,
        frame_accuracy=_f(ev.get("frame_accuracy")),
        cross_entropy=_f(ev.get("cross_entropy")),
        frames=frames if isinstance(frames, int) else None,
        utterances=utts if isinstance(utts, int) else None,
        valid_logprob=summary.valid_logprob,
        valid_accuracy=summary.valid_accuracy,
        iterations=summary.iterations_done,
        jobs_rejected=summary.jobs_rejected,
        combined_models=summary.combined_models,
    )


# column key, header, format, which direction is better (None: no best mark)
_COLUMNS = [
    ("experiment", "experiment", "{}", None),
    ("frame_accuracy", "frame accuracy (%)", "pct", max),
    ("cross_entropy", "cross-entropy (nats/frame)", "{:.4f}", min),
    ("wer", "WER (%)", "{:.2f}", min),
    ("per", "PER (%)", "{:.2f}", min),
    ("valid_logprob", "last valid log-prob (nats/frame)", "{:.4f}", max),
    ("valid_accuracy", "last valid accuracy (%)", "pct", max),
    ("iterations", "iterations", "{}", None),
    ("jobs_rejected", "jobs rejected", "{}", None),
    ("combined_models", "models combined", "{}", None),
    ("frames", "frames", "{}", None),
    ("utterances", "utterances", "{}", None),
]


def _fmt(value, fmt: str) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    if fmt == "pct":
        return f"{100 * value:.2f}"
    return fmt.format(value)


def _best(rows: list[ComparisonRow], key: str, pick) -> float | None:
    values = [getattr(r, key) for r in rows]
    values = [v for v in values if isinstance(v, int | float) and not math.isnan(v)]
    return pick(values) if pick and len(values) > 1 else None


def format_comparison_markdown(table: dict[str, list[ComparisonRow]]) -> str:
    """One markdown table per eval set; the best value of a column in bold."""
    parts = []
    for s, rows in table.items():
        parts.append(f"### eval set `{s}`\n")
        parts.append("| " + " | ".join(h for _, h, _, _ in _COLUMNS) + " |")
        parts.append("|" + "---|" * len(_COLUMNS))
        bests = {k: _best(rows, k, pick) for k, _, _, pick in _COLUMNS}
        for r in rows:
            cells = []
            for key, _, fmt, _ in _COLUMNS:
                v = getattr(r, key)
                text = _fmt(v, fmt)
                cells.append(f"**{text}**" if bests[key] is not None and v == bests[key] else text)
            parts.append("| " + " | ".join(cells) + " |")
        parts.append("")
    return "\n".join(parts)


_CSS = """
body { font-family: sans-serif; margin: 1.5em; color: #222; }
table { border-collapse: collapse; margin-bottom: 1.5em; }
th, td { border: 1px solid #bbb; padding: 0.3em 0.7em; text-align: right; }
th { background: #eee; } td:first-child, th:first-child { text-align: left; }
td.best { font-weight: bold; background: #e6f4e6; }
p.note { color: #555; font-size: 0.9em; max-width: 50em; }
"""


def format_comparison_html(table: dict[str, list[ComparisonRow]], title: str = "Results") -> str:
    """A self-contained HTML page: one table per eval set, best values highlighted."""
    out = [
        f"<!DOCTYPE html>\n<html><head><meta charset='utf-8'><title>{html.escape(title)}"
        f"</title><style>{_CSS}</style></head><body>",
        f"<h1>{html.escape(title)}</h1>",
    ]
    for s, rows in table.items():
        out.append(f"<h2>eval set <code>{html.escape(s)}</code></h2><table><tr>")
        out.extend(f"<th>{html.escape(h)}</th>" for _, h, _, _ in _COLUMNS)
        out.append("</tr>")
        bests = {k: _best(rows, k, pick) for k, _, _, pick in _COLUMNS}
        for r in rows:
            out.append("<tr>")
            for key, _, fmt, _ in _COLUMNS:
                v = getattr(r, key)
                cls = " class='best'" if bests[key] is not None and v == bests[key] else ""
                out.append(f"<td{cls}>{html.escape(_fmt(v, fmt))}</td>")
            out.append("</tr>")
        out.append("</table>")
    out.append(
        "<p class='note'>Frame accuracy and cross-entropy: <code>final.pt</code> on the eval "
        "set (<code>eval/&lt;set&gt;.json</code>). Last valid: the held-out diagnostic subset "
        "on the last iteration's model (<code>diag/&lt;t&gt;.json</code>), before combination. "
        "Jobs rejected: summed over iterations ≥ 1 (iteration 0 keeps the best job by design). "
        "Best value per column highlighted.</p></body></html>\n"
    )
    return "".join(out)


def write_comparison(
    runs: Sequence[ExperimentRun],
    eval_sets: Sequence[str],
    figure_out: str | Path | None = None,
    html_out: str | Path | None = None,
    markdown_out: str | Path | None = None,
) -> dict[str, list[ComparisonRow]]:
    """Write the overlay figure and the comparison table (each output optional)."""
    table = comparison_rows(runs, eval_sets)
    if figure_out is not None:
        save_png(plot_comparison(runs), figure_out)
    if html_out is not None:
        write_text_atomic(html_out, format_comparison_html(table, "paravg: experiments compared"))
    if markdown_out is not None:
        write_text_atomic(markdown_out, format_comparison_markdown(table))
    return table
