"""Every job a dry run would run, as sorted JSON lines: rule, wildcards, inputs, outputs, log,
params and resources (the contract the middle of the workflow — ``paravg/dag/``, the
layout, the plan — gives to the rules).

A refactor of that middle must not change it: dump the job lists of a few scenarios before
and after and diff them (docs/architecture.md, "Changing the middle")::

    .venv/bin/python tools/dry_run_jobs.py WORKDIR [snakemake arguments ...] > before.jsonl

Any ``snakemake`` arguments pass through (``--configfile``, ``--config``, targets,
``--forcerun``); ``-n`` and ``-s Snakefile`` (this checkout's) are added. A path under
WORKDIR is written relative to it, and a resource that names a temporary directory is
left out, so two checkouts' dumps compare equal.
"""

from __future__ import annotations

import contextlib
import json
import sys
from pathlib import Path

from snakemake.cli import main as snakemake_main
from snakemake.executors import dryrun

ROOT = Path(__file__).resolve().parent.parent
SKIPPED_RESOURCES = {"tmpdir", "_cores", "_nodes"}


def _plain(value, workdir: str):
    """``value`` as JSON-able data, with ``workdir`` and this checkout's root made relative."""
    if isinstance(value, dict):
        return {str(k): _plain(v, workdir) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v, workdir) for v in value]
    if isinstance(value, (int, float, bool)) or value is None:
        return value
    text = str(value)
    return text.replace(workdir + "/", "").replace(str(ROOT) + "/", "<root>/")


def _record(job, workdir: str) -> dict:
    params = dict(job.params.items())  # a Namedlist: iterating it gives values
    resources = {
        name: value for name, value in job.resources.items() if name not in SKIPPED_RESOURCES
    }
    return _plain(
        {
            "rule": job.rule.name,
            "wildcards": dict(job.wildcards_dict),
            "input": sorted(str(f) for f in job.input),
            "output": sorted(str(f) for f in job.output),
            "log": sorted(str(f) for f in job.log),
            "params": params,
            "resources": resources,
        },
        workdir,
    )


def main(argv: list[str]) -> int:
    workdir, *args = argv
    workdir = str(Path(workdir).resolve())
    records: list[str] = []

    def run_job(self, job):
        jobs = job.jobs if job.is_group() else [job]
        records.extend(json.dumps(_record(j, workdir), sort_keys=True) for j in jobs)
        dryrun.Executor.__original_run_job(self, job)

    dryrun.Executor.__original_run_job = dryrun.Executor.run_job
    dryrun.Executor.run_job = run_job
    try:
        with contextlib.redirect_stdout(sys.stderr):  # snakemake's own log
            snakemake_main(["-n", "-s", str(ROOT / "Snakefile"), "-d", workdir, *args])
    except SystemExit as end:
        if end.code:
            print(end.code, file=sys.stderr)
            return end.code if isinstance(end.code, int) else 1
    sys.stdout.write("".join(line + "\n" for line in sorted(records)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
