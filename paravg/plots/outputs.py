"""Entry points of the report rules (``rules/report.smk``): one call per rule script.

Each takes plain paths and plain values (the rule's params), so the ``snakemake`` object
never enters the package.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from pathlib import Path

from paravg.plan import PlannedSchedule
from paravg.plots.compare import ComparisonRow, write_comparison
from paravg.plots.config_view import write_experiment_config
from paravg.plots.figures import write_experiment_figures
from paravg.plots.runs import load_run

log = logging.getLogger(__name__)


def schedule_from_params(params: Mapping | None) -> PlannedSchedule | None:
    """Rebuild the :class:`~paravg.plan.PlannedSchedule` from ``dataclasses.asdict``."""
    if not params:
        return None
    return PlannedSchedule.from_dict(dict(params))


def schedule_summary(schedule: PlannedSchedule) -> dict:
    """The derived numbers worth reading: iterations, job ramp, rates, models combined."""
    n = schedule.num_iters
    lr0, lr1 = schedule.effective_lrate(0), schedule.effective_lrate(n - 1)
    return {
        "num_iters": n,
        "num_archives": schedule.num_archives,
        "frames_per_eg": schedule.frames_per_eg,
        "num_archives_to_process": schedule.num_archives_to_process,
        "num_jobs": f"{schedule.num_jobs(0)} -> {schedule.num_jobs(n - 1)}",
        "effective_lrate": f"{lr0:.3g} -> {lr1:.3g}",
        "models_to_combine": schedule.models_to_combine(),
    }


def experiment_figures(
    exp_dir: str | Path,
    outputs: Mapping[str, str | Path],
    name: str | None = None,
    schedule_params: Mapping | None = None,
) -> dict[str, Path]:
    """Rule ``experiment_figures``: every per-experiment PNG of a finished training run."""
    run = load_run(exp_dir, name=name, strict=True)
    schedule = schedule_from_params(schedule_params)
    written = write_experiment_figures(run, dict(outputs), schedule)
    log.info("%s: %d iterations, %d figures", run.name, len(run.completed_iterations), len(written))
    return written


def experiment_config(
    name: str,
    resolved: dict,
    overrides: dict | None,
    yaml_out: str | Path,
    html_out: str | Path,
    schedule_params: Mapping | None = None,
) -> None:
    """Rule ``experiment_config``: the effective config of one experiment (YAML + HTML)."""
    schedule = schedule_from_params(schedule_params)
    write_experiment_config(
        name,
        resolved,
        overrides,
        yaml_out,
        html_out,
        schedule_summary(schedule) if schedule else None,
    )


def comparison(
    exp_dirs: Mapping[str, str | Path],
    eval_sets: Sequence[str],
    figure_out: str | Path,
    html_out: str | Path,
    markdown_out: str | Path | None = None,
) -> dict[str, list[ComparisonRow]]:
    """Rule ``report_comparison``: overlaid curves of all experiments and the table."""
    runs = [load_run(path, name=name, strict=True) for name, path in exp_dirs.items()]
    return write_comparison(runs, eval_sets, figure_out, html_out, markdown_out)
