"""Per-experiment figures (PNG), drawn from :mod:`paravg.plots.series`.

The figures of Kaldi's ``steps/nnet3/report/generate_plots.py`` (log-prob and accuracy
per iteration, parameter change per component from ``nnet3-show-progress``) plus what a
parallel run adds: the spread of the jobs' objectives and the sync's rejections, the
learning-rate / job-count schedule, and how often max-change limited the update.

Drawn on ``matplotlib.figure.Figure`` with the Agg canvas (no pyplot, no display, no global
state), saved atomically. Every figure draws something on an empty or half-finished run: a
"no data yet" note in place of an empty axis.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from pathlib import Path

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, MaxNLocator

from paravg.io import atomic_path
from paravg.plan import PlannedSchedule
from paravg.plots import FIGURES, series
from paravg.plots.runs import ExperimentRun

LOGPROB_LABEL = "log-probability (nats/frame)"
TRAIN_STYLE = {"color": "tab:blue", "linestyle": "--", "label": "train subset"}
VALID_STYLE = {"color": "tab:orange", "linestyle": "-", "label": "validation (held-out)"}
DPI = 110


def blank_figure(width: float, height: float) -> Figure:
    """An empty figure (inches) on the Agg canvas, laid out without overlaps."""
    fig = Figure(figsize=(width, height), dpi=DPI, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def new_figure(rows: int = 1, height: float = 3.2, width: float = 9.0) -> tuple[Figure, list]:
    """A figure of ``rows`` stacked axes sharing x, on the Agg canvas."""
    fig = blank_figure(width, 0.9 + height * rows)
    axes = fig.subplots(rows, 1, sharex=True, squeeze=False)[:, 0]
    for ax in axes:
        ax.grid(True, alpha=0.3)
    return fig, list(axes)


def save_png(fig: Figure, path: str | Path) -> Path:
    """Write ``fig`` to ``path`` as PNG, atomically (a reader never sees half a file)."""
    path = Path(path)
    with atomic_path(path, suffix=".png") as tmp:
        fig.savefig(tmp, format="png", dpi=DPI)
    return path


def no_data(ax, text: str = "no data yet") -> None:
    ax.text(
        0.5, 0.5, text, ha="center", va="center", transform=ax.transAxes, color="0.4", fontsize=11
    )


def _marker(n: int) -> dict:
    """Markers only when there are few points (a long run would be a smear)."""
    return {"marker": "o", "markersize": 3.5} if n <= 60 else {}


def _finite(values: Sequence[float]) -> list[float]:
    return [v for v in values if not math.isnan(v)]


def _integer_x(ax) -> None:
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))


def _plain_log_labels(ax) -> None:
    """Tick labels 0.002 / 0.5 / 3 instead of 2×10⁻³ on a log axis (no-op on linear)."""
    if ax.get_yscale() != "log":
        return
    lo, hi = ax.get_ylim()
    few_decades = lo > 0 and math.log10(hi / lo) < 2

    def minor(v: float, _pos) -> str:
        mantissa = round(v / 10 ** math.floor(math.log10(v) + 1e-9), 6) if v > 0 else 0
        return f"{v:g}" if few_decades and mantissa in (2, 5) else ""

    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.yaxis.set_minor_formatter(FuncFormatter(minor))


def component_colors(names: Sequence[str]) -> dict[str, str]:
    """A fixed colour per component (network order), the same in every figure."""
    return {name: f"C{i % 10}" for i, name in enumerate(names)}


def _title(fig: Figure, run: ExperimentRun, what: str) -> None:
    state = (
        "" if run.finished else f"  [in progress: {len(run.completed_iterations)} iterations done]"
    )
    fig.suptitle(f"{run.name}: {what}{state}", fontsize=12)


# ----------------------------------------------------------------- figures
def plot_objective(run: ExperimentRun) -> Figure:
    """Train/valid log-prob and frame accuracy of each model (``diag/<t>.json``)."""
    c = series.diagnostic_curves(run)
    fig, (ax_lp, ax_acc) = new_figure(2)
    _title(fig, run, "log-probability and frame accuracy per iteration")
    if not c.model:
        no_data(ax_lp, "no diagnostics yet")
        no_data(ax_acc, "no diagnostics yet")
    else:
        m = _marker(len(c.model))
        ax_lp.plot(c.model, c.train_logprob, **TRAIN_STYLE, **m)
        ax_lp.plot(c.model, c.valid_logprob, **VALID_STYLE, **m)
        ax_acc.plot(c.model, [100 * a for a in c.train_accuracy], **TRAIN_STYLE, **m)
        ax_acc.plot(c.model, [100 * a for a in c.valid_accuracy], **VALID_STYLE, **m)
        ax_lp.legend(loc="lower right")
        ax_acc.legend(loc="lower right")
        _plain_log_labels(ax_lp)
        valid = _finite(c.valid_logprob)
        if valid:
            best = max(valid)
            at = c.model[c.valid_logprob.index(best)]
            ax_lp.axhline(best, color="tab:orange", alpha=0.3, linewidth=0.8)
            ax_lp.set_title(
                f"best validation: {best:.3f} nats/frame (model {at})",
                loc="left",
                fontsize=9,
                color="tab:orange",
            )
    if run.combine and isinstance(run.combine.get("objective"), int | float):
        n = run.combine.get("num_models")
        what = "the newest model alone" if n == 1 else f"mean of the {n} newest models"
        ax_lp.set_title(
            f"final: {what}, {run.combine['objective']:.3f} nats/frame (combine subset)",
            loc="right",
            fontsize=9,
            color="0.3",
        )
    ax_lp.set_ylabel(LOGPROB_LABEL)
    ax_acc.set_ylabel("frame accuracy (%)")
    ax_acc.set_xlabel("model <t>.pt (iterations completed)")
    _integer_x(ax_acc)
    return fig


_STATUS_STYLE = {
    series.ACCEPTED: {"marker": "o", "color": "tab:blue", "label": "accepted"},
    series.PENDING: {"marker": "o", "color": "0.55", "label": "sync not run yet"},
    series.NOT_CHOSEN: {
        "marker": "o",
        "color": "tab:olive",
        "label": "iteration 0: not the best job",
    },
    series.REJECTED: {"marker": "x", "color": "tab:red", "label": "rejected by the sync"},
    series.UNUSABLE: {"marker": "v", "color": "black", "label": "no usable objective"},
}


def _job_ylim(core: list[float], everything: list[float]) -> tuple[float, float] | None:
    """y range of the job plot: every job when the outliers are near, else the core jobs.

    Outliers (rejected jobs) are included when that at most triples the range, so a
    rejected job 1–2 nats below the others is seen where it is; a diverged one at −1e5
    is not allowed to flatten the rest.
    """
    if not everything:
        return None
    core = core or everything
    lo, hi = min(core), max(core)
    span = max(hi - lo, 0.1)
    full_lo = min(min(everything), lo)
    if hi - full_lo <= 3 * span:
        lo = full_lo
    margin = 0.08 * max(hi - lo, 0.1)
    return lo - margin, hi + margin


def plot_job_objectives(run: ExperimentRun) -> Figure:
    """Every job's training objective per iteration; the sync's decision as the marker.

    The y range follows the accepted (and not yet synced) jobs; a rejected job far below
    them is drawn on the lower edge with a ▼ so that one diverged job does not flatten
    the rest.
    """
    points = series.job_points(run)
    spread = series.objective_spread(points)
    fig, (ax,) = new_figure(1, height=4.2)
    _title(fig, run, "training objective of every job, per iteration")
    ax.set_ylabel("job objective: mean log-prob\nduring training (nats/frame)")
    ax.set_xlabel("iteration (jobs start from <t>.pt)")
    _integer_x(ax)
    if not points:
        no_data(ax, "no job has finished yet")
        return fig
    dense = len(points) > 400
    if len(spread.iteration) > 1:
        ax.fill_between(
            spread.iteration,
            spread.lowest,
            spread.highest,
            color="tab:blue",
            alpha=0.15,
            linewidth=0,
            label="lowest–highest job",
        )
        ax.plot(
            spread.iteration,
            spread.mean,
            color="navy" if dense else "tab:blue",
            linewidth=1.0,
            zorder=4,  # above a dense cloud of points
            label="mean of jobs",
        )
    core = [
        p.objf
        for p in points
        if p.status in (series.ACCEPTED, series.PENDING) and not math.isnan(p.objf)
    ]
    ylim = _job_ylim(core, _finite([p.objf for p in points]))
    edge = ylim[0] + 0.02 * (ylim[1] - ylim[0]) if ylim else 0.0
    size = 4 if dense else 14
    for status, style in _STATUS_STYLE.items():
        inside, below = [], []
        for p in points:
            if p.status == status:
                ok = not math.isnan(p.objf) and (not ylim or p.objf >= ylim[0])
                (inside if ok else below).append(p)
        if not inside and not below:
            continue
        label = f"{style['label']} ({len(inside) + len(below)})"
        if below and status != series.UNUSABLE:
            label += f", {len(below)} far below: ▼ on the axis"
        common = {"color": style["color"], "zorder": 3}
        if status == series.ACCEPTED and dense:
            common["alpha"] = 0.35  # the outliers stay visible in a cloud of thousands
        big = 2.5 if style["marker"] == "x" else 1.0
        if status != series.ACCEPTED:
            big *= 2 if dense else 1
        if inside:
            ax.scatter(
                [p.iteration for p in inside],
                [p.objf for p in inside],
                marker=style["marker"],
                s=size * big,
                label=label,
                **common,
            )
        if below:
            ax.scatter(
                [p.iteration for p in below],
                [edge] * len(below),
                marker="v",
                s=size * 2 * (2 if dense else 1),
                label=None if inside else label,
                **common,
            )
    if ylim:
        ax.set_ylim(*ylim)
    ax.legend(loc="lower right", fontsize=9)
    return fig


def plot_schedule(run: ExperimentRun, schedule: PlannedSchedule | None = None) -> Figure:
    """Per-job and effective learning rate (log scale) and the number of jobs; the
    recorded effective rate needs the plan (it holds the sync method's factor)."""
    s = series.schedule_series(run, schedule)
    fig, (ax_lr, ax_n) = new_figure(2, height=2.8)
    _title(fig, run, "learning-rate schedule and number of parallel jobs")
    if s.planned_iteration:
        ax_lr.plot(
            s.planned_iteration,
            s.planned_lr,
            color="tab:blue",
            alpha=0.35,
            linestyle=":",
            label="per-job lr, planned",
        )
        ax_lr.plot(
            s.planned_iteration,
            s.planned_effective_lr,
            color="tab:green",
            alpha=0.35,
            linestyle=":",
            label="effective lr, planned",
        )
        ax_n.step(
            s.planned_iteration,
            s.planned_num_jobs,
            where="post",
            color="tab:purple",
            alpha=0.35,
            linestyle=":",
            label="planned",
        )
    if s.iteration:
        m = _marker(len(s.iteration))
        ax_lr.plot(s.iteration, s.lr, color="tab:blue", label="per-job lr (job JSON)", **m)
        if _finite(s.effective_lr):  # needs the plan: the sync method's factor
            ax_lr.plot(
                s.iteration,
                s.effective_lr,
                color="tab:green",
                label="effective lr = per-job lr / (N · sync factor)",
                **m,
            )
        ax_n.step(s.iteration, s.num_jobs, where="post", color="tab:purple", label="as run")
    if not s.iteration and not s.planned_iteration:
        no_data(ax_lr)
        no_data(ax_n)
    if _finite(s.lr) or s.planned_lr:
        ax_lr.set_yscale("log")
        _plain_log_labels(ax_lr)
        ax_lr.legend(loc="lower left", fontsize=9)
    if s.iteration or s.planned_iteration:
        ax_n.legend(loc="lower right", fontsize=9)
        ax_n.set_ylim(bottom=0)
        ax_n.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax_lr.set_ylabel("learning rate")
    ax_n.set_ylabel("jobs N (parallel models)")
    ax_n.set_xlabel("iteration")
    _integer_x(ax_n)
    return fig


def _plot_components(ax, comps: series.ComponentSeries, log_y: bool) -> None:
    n = max((len(v) for v in comps.x.values()), default=0)
    colors = component_colors(comps.components)
    for comp in comps.components:
        ax.plot(comps.x[comp], comps.y[comp], label=comp, color=colors[comp], **_marker(n))
    if log_y and any(v > 0 for ys in comps.y.values() for v in _finite(ys)):
        ax.set_yscale("log")
        _plain_log_labels(ax)


def plot_parameter_change(run: ExperimentRun) -> Figure:
    """Relative and absolute parameter change of every layer between consecutive models."""
    rel = series.parameter_change(run, relative=True)
    abs_ = series.parameter_change(run, relative=False)
    fig, (ax_rel, ax_abs) = new_figure(2)
    _title(fig, run, "parameter change per layer between iterations (nnet3-show-progress)")
    if not rel.components:
        no_data(ax_rel, "no parameter change yet (needs diag/<t>.json for t ≥ 1)")
        no_data(ax_abs, "no parameter change yet")
    else:
        _plot_components(ax_rel, rel, log_y=True)
        _plot_components(ax_abs, abs_, log_y=True)
        ax_rel.legend(loc="upper right", fontsize=9, title="component")
    ax_rel.set_ylabel("relative change\n‖θₜ − θₜ₋₁‖ / ‖θₜ₋₁‖")
    ax_abs.set_ylabel("absolute change\n‖θₜ − θₜ₋₁‖ (Frobenius)")
    ax_abs.set_xlabel("model <t>.pt (change from <t−1>.pt)")
    _integer_x(ax_abs)
    return fig


def plot_max_change(run: ExperimentRun) -> Figure:
    """Share of minibatches where per-layer or global max-change shrank the update."""
    r = series.max_change_rates(run)
    fig, (ax,) = new_figure(1, height=4.0)
    _title(fig, run, "how often max-change limited the update")
    if not r.iteration:
        no_data(ax, "no job has finished yet")
    else:
        comps = r.per_component
        n = len(r.iteration)
        colors = component_colors(comps.components)
        for comp in comps.components:
            ax.plot(
                comps.x[comp],
                [100 * v for v in comps.y[comp]],
                label=comp,
                color=colors[comp],
                **_marker(n),
            )
        ax.plot(
            r.iteration,
            [100 * v for v in r.global_],
            color="0.15",
            linestyle="--",
            label="whole model (max-param-change)",
            **_marker(n),
        )
        values = _finite([v for ys in comps.y.values() for v in ys] + r.global_)
        peak = 100 * max(values, default=0.0)
        top = 102.0 if peak > 50 else max(5.0, 1.15 * peak)  # zoom in on rare activation
        ax.set_ylim(-0.02 * top, top)
        ax.legend(loc="upper right", fontsize=9, title="limited by")
        if peak == 0:
            ax.set_title("max-change never activated", loc="right", fontsize=9, color="0.3")
        skipped = sum(r.skipped)
        if skipped:
            ax.set_title(
                f"{skipped} update{'s' if skipped != 1 else ''} skipped (non-finite gradient)",
                loc="left",
                fontsize=9,
                color="tab:red",
            )
    ax.set_ylabel("minibatches where max-change\nwas active (%, mean over jobs)")
    ax.set_xlabel("iteration")
    _integer_x(ax)
    return fig


DRAWERS: dict[str, Callable[..., Figure]] = {
    "objective": plot_objective,
    "job_objectives": plot_job_objectives,
    "schedule": plot_schedule,
    "parameter_change": plot_parameter_change,
    "max_change": plot_max_change,
}


def write_experiment_figures(
    run: ExperimentRun,
    outputs: dict[str, str | Path] | str | Path,
    schedule: PlannedSchedule | None = None,
) -> dict[str, Path]:
    """Draw every figure of :data:`FIGURES` for ``run``; return name -> PNG path.

    ``outputs`` is a directory (files ``<name>.png``) or a mapping name -> path (the
    rule's named outputs); a mapping may name a subset of the figures.
    """
    if isinstance(outputs, str | Path):
        outputs = {name: Path(outputs) / f"{name}.png" for name in FIGURES}
    unknown = set(outputs) - set(DRAWERS)
    if unknown:
        raise ValueError(f"unknown figure(s) {sorted(unknown)}; known: {list(DRAWERS)}")
    written = {}
    for name, path in outputs.items():
        fig = DRAWERS[name](run, schedule) if name == "schedule" else DRAWERS[name](run)
        written[name] = save_png(fig, path)
    return written
