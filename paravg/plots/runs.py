"""Read one experiment directory (``results/exp/<exp>/``) into memory, finished or not.

The file contract (Kaldi numbering: ``<t>.pt`` is the model at the start of iteration t):

* ``<t>/job<j>.json``: job j of iteration t − 1 (objective, accuracy, lr, max-change rates);
* ``sync/<t>.json``: the fan-in of iteration t − 1 that produced ``<t>.pt`` (objectives seen,
  accepted and rejected jobs, method), or ``consensus/<t>.json`` for methods without one;
* ``diag/<t>.json``: train/valid log-prob and accuracy of ``<t>.pt`` and its parameter
  change against ``<t−1>.pt`` (Kaldi's ``nnet3-compute-prob`` and ``nnet3-show-progress``);
* ``init.json``, ``combine.json``, ``final.json``, ``eval/<set>.json`` (``final.pt``) and
  ``eval/<model>/<set>.json`` of other final models (``ema``).

Iterations are keyed by the file name, never by a field inside the file, so a run is read
the same way whatever sync method wrote it. Every file may be missing (training still
running, or a stage that an experiment does not have); unknown keys are kept as they are.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from paravg.io import read_json
from paravg.layout import Layout
from paravg.sync.nodes import node_summary_kinds

log = logging.getLogger(__name__)


@dataclass
class ExperimentRun:
    """Everything the JSON files of one experiment say, keyed by iteration.

    ``jobs[t][j]`` and ``syncs[t]`` belong to iteration t (they are stored under ``t + 1``);
    ``diags[t]`` describes the model ``<t>.pt`` (after t iterations).
    """

    name: str
    path: Path
    jobs: dict[int, dict[int, dict]] = field(default_factory=dict)
    syncs: dict[int, dict] = field(default_factory=dict)
    diags: dict[int, dict] = field(default_factory=dict)
    init: dict | None = None
    combine: dict | None = None
    final: dict | None = None
    evals: dict[str, dict] = field(default_factory=dict)
    #: ``eval/<model>/<set>.json`` of other final models (e.g. ``ema``): model -> set -> JSON
    model_evals: dict[str, dict[str, dict]] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)

    @property
    def iterations(self) -> list[int]:
        """Every iteration with at least one finished job or a finished sync, ascending."""
        return sorted(set(self.jobs) | set(self.syncs))

    @property
    def completed_iterations(self) -> list[int]:
        """Iterations whose sync (fan-in) has finished, ascending."""
        return sorted(self.syncs)

    def num_jobs(self, t: int) -> int:
        """Jobs of iteration t: from the sync when it ran, else the highest job seen + 1."""
        sync = self.syncs.get(t)
        if sync is not None and isinstance(sync.get("objfs"), list):
            return len(sync["objfs"])
        jobs = self.jobs.get(t, {})
        return max(jobs) + 1 if jobs else 0

    @property
    def exp(self) -> str:
        """The experiment's name in its layout (the directory's; ``name`` may differ)."""
        return self.path.name

    @property
    def layout(self) -> Layout:
        """The layout of the run, whose ``exp_dir(exp)`` is ``path``: every other file of
        the experiment is read through it."""
        return Layout.from_exp_dir(self.path)

    @property
    def finished(self) -> bool:
        """True once ``final.json`` exists (training, combination and priors are done)."""
        return self.final is not None


def _read(path: Path, run: ExperimentRun, strict: bool) -> Any | None:
    try:
        data = read_json(path)
    except (OSError, ValueError) as exc:
        if strict:
            raise ValueError(f"{path}: cannot read ({exc})") from exc
        run.problems.append(f"{path}: {exc}")
        log.warning("skipping %s: %s", path, exc)
        return None
    if not isinstance(data, dict):
        msg = f"{path}: expected a JSON object, found {type(data).__name__}"
        if strict:
            raise ValueError(msg)
        run.problems.append(msg)
        log.warning("skipping %s", msg)
        return None
    return data


def load_run(path: str | Path, name: str | None = None, strict: bool = False) -> ExperimentRun:
    """Read ``path`` (an experiment directory) into an :class:`ExperimentRun`.

    ``strict=False`` (the live progress view) skips unreadable files and records them in
    ``run.problems``; ``strict=True`` (the report rule, whose inputs must be complete)
    raises ``ValueError`` naming the file. A missing directory is an empty run unless
    strict; a directory that is no ``<results>/exp/<name>`` is a ValueError (its files are
    found through :meth:`paravg.layout.Layout.from_exp_dir`).
    """
    path = Path(path)
    run = ExperimentRun(name=name or path.name, path=path)
    if not path.is_dir():
        if strict:
            raise ValueError(f"{path}: experiment directory does not exist")
        return run
    layout, exp = run.layout, run.exp
    for (t, j), job_path in layout.existing("job_stats", exp).items():
        data = _read(Path(job_path), run, strict)
        if data is not None:
            run.jobs.setdefault(t - 1, {})[j] = data
    # the per-iteration sync summaries, in the registry's order of node kinds: the fan-in
    # (average, bmuf: sync/<t>.json) first; a decentralized method's consensus fills gaps
    for kind in node_summary_kinds():
        for (n,), p in layout.existing(kind, exp).items():
            if n - 1 in run.syncs:
                continue
            data = _read(Path(p), run, strict)
            if data is not None:
                run.syncs[n - 1] = data
    for (n,), p in layout.existing("diag", exp).items():
        data = _read(Path(p), run, strict)
        if data is not None:
            run.diags[n] = data
    summaries = {
        "init": layout.init_stats(exp),
        "combine": layout.combine_summary(exp),
        "final": layout.final_summary(exp),
    }
    for attr, p in summaries.items():
        if Path(p).is_file():
            setattr(run, attr, _read(Path(p), run, strict))
    run.evals = _read_evals(layout.existing("eval_result", exp), run, strict)
    for (model, s), p in layout.existing("eval_model_result", exp).items():
        data = _read(Path(p), run, strict)
        if data is not None:
            run.model_evals.setdefault(model, {})[s] = data
    return run


def _read_evals(paths: dict[tuple, str], run: ExperimentRun, strict: bool) -> dict[str, dict]:
    """Set -> evaluation, of the files :meth:`Layout.existing` found (keyed ``(set,)``)."""
    out = {}
    for (s,), p in paths.items():
        data = _read(Path(p), run, strict)
        if data is not None:
            out[s] = data
    return out
