"""Figures and tables of training runs, from the per-iteration JSON files only.

Three layers, each usable alone:

* :mod:`paravg.plots.runs` reads an experiment directory (``results/exp/<exp>/``) into an
  :class:`~paravg.plots.runs.ExperimentRun`, tolerating files that do not exist yet;
* :mod:`paravg.plots.series` turns a run into the numbers a figure shows (pure functions,
  tested against the JSON);
* :mod:`paravg.plots.figures` and :mod:`paravg.plots.compare` draw them (matplotlib, Agg).

Nothing here parses a log: the data are ``<t>/job<j>.json``, ``sync/<t>.json``,
``diag/<t>.json``, ``combine.json``, ``final.json`` and ``eval/<set>.json``.
"""

from paravg.plots.runs import ExperimentRun, load_run

#: Per-experiment figure (file stem) -> what it shows; the rules name the same files.
FIGURES: dict[str, str] = {
    "objective": "log-prob and frame accuracy per iteration",
    "job_objectives": "job objectives and rejected jobs per iteration",
    "schedule": "learning rate and number of jobs per iteration",
    "parameter_change": "parameter change per layer between iterations",
    "max_change": "max-change activation rate per layer",
}

__all__ = ["FIGURES", "ExperimentRun", "load_run"]
