"""``--executor paravg-slurm``: the SLURM executor plugin, tuned for iteration chains.

paravg's training is a chain of short stages (an iteration's jobs, then the next
iteration's), and each stage starts only when the main snakemake notices that the one
before has finished. Two properties of ``snakemake-executor-plugin-slurm`` (2.8.0) make
that slow, and this plugin changes exactly those two, inheriting everything else
(submission, resources, GPUs, accounting, cancellation, every ``--slurm-*`` setting
under the ``--paravg-slurm-*`` prefix):

1. **Status polling.** The plugin polls ``sacct`` ``init_seconds_before_status_checks``
   after a submission and then 10 s later each time no job has finished (up to 180 s),
   so a stage of 30–120 s jobs is noticed 20–40 s late. Here the interval never exceeds
   ``max_status_check_seconds`` (default 5: one ``sacct`` call for all jobs every 5 s,
   about as often as Kaldi's ``queue.pl`` looks for its done files).
2. **One snakemake start-up per job.** Each SLURM job ran ``snakemake`` (the jobstep
   executor) which ran ``srun snakemake`` again for the job itself: two start-ups of a
   few CPU-seconds each. By default here the batch script's snakemake
   runs the job itself (``--executor local``), inside the allocation that SLURM already
   confines to the job's CPUs, memory and GPUs (``CUDA_VISIBLE_DEVICES`` is set for the
   batch step). ``--paravg-slurm-srun-jobs`` restores the jobstep/srun path
   (e.g. for MPI jobs or sites that require ``srun``).
3. **Noticing a job's end.** Kaldi's ``queue.pl`` waits for a ``done`` file that the job
   script writes as its last act. Here each batch script ends by touching
   ``.snakemake/paravg-slurm/<SLURM job id>.ended`` (its exit status kept), and the main
   snakemake looks for those files every ``end_check_seconds`` (a ``stat`` per running
   job: no load on the cluster). A file only *triggers* a status query: ``sacct`` (or
   ``squeue``) still decides success or failure, and runs at least every
   ``max_status_check_seconds``, so a job killed before its last line (time limit, node
   failure, ``scancel``) is noticed as before. An iteration is thus noticed within about
   a second of its last job's end instead of up to ``max_status_check_seconds``.
4. **Node failures with requeue.** After a ``NODE_FAIL`` the plugin adds the job's node to
   an ``--exclude`` list for every later submission, even when SLURM requeues the job
   itself (``--paravg-slurm-requeue``, paravg's profile), and it reads the node from
   ``sacct``, which says ``None assigned`` for a job already requeued: every later
   ``sbatch`` then failed (``--exclude=None assigned,…``). Here, with requeue, node health
   is left to SLURM (a down node gets no jobs; one that is back is usable) and only the
   nodes the user excludes (``--paravg-slurm-exclude-failed-nodes``) stay excluded; without
   requeue, only real node names are kept.
5. **Status queries ask about the active jobs only.** The plugin's ``sacct`` (``squeue``)
   call lists every job of the run from the last two days: near the end of a
   128 × 1,000 run, about 130,000 rows per poll. Here the same call names the active
   jobs (``--jobs``), so its answer is as long as the queue.
6. **No array jobs.** With ``--paravg-slurm-array-jobs`` the plugin dispatches the tasks
   of an array through the jobstep executor, but the batch script's snakemake runs the
   job itself (point 2), and the array option would come after the script's last line
   (point 3): every task would run the first task's job. The option is refused.
7. **Warm workers** (opt-in, ``--paravg-slurm-warm-workers K``): one-thread Python
   ``script:`` jobs run in forks of paravg-warm's server inside worker allocations of K
   CPUs, the main snakemake doing each job's Snakemake side itself, instead of a fresh
   snakemake and a fresh Python per SLURM job (:mod:`.warm`: the design and the
   guarantees kept: same bits, retries, time limits, a lost worker's jobs rerun).
"""

# No `from __future__ import annotations`: Snakemake turns each settings field's type into
# an argparse type, which must be the class itself, not its name.
import contextlib
import shlex
import time
from dataclasses import dataclass, field
from pathlib import Path

import snakemake_executor_plugin_slurm as slurm_plugin
from snakemake_executor_plugin_slurm import Executor as SlurmExecutor
from snakemake_executor_plugin_slurm import ExecutorSettings as SlurmExecutorSettings
from snakemake_executor_plugin_slurm import common_settings  # noqa: F401 (plugin interface)
from snakemake_interface_common.exceptions import WorkflowError


def _setting(default, help_text: str):
    """A plugin setting: a dataclass field with its ``--paravg-slurm-*`` help text, neither
    read from the environment nor required (the SLURM plugin's own fields' metadata)."""
    return field(default=default, metadata={"help": help_text, "env_var": False, "required": False})


@dataclass
class ExecutorSettings(SlurmExecutorSettings):
    max_status_check_seconds: int = _setting(
        5,
        "Never wait longer than this between two status checks (sacct/squeue "
        "calls for all jobs); the SLURM plugin's own back-off grows to 180 s.",
    )
    end_check_seconds: float = _setting(
        0.5,
        "Look this often for the files that ending batch scripts leave in "
        ".snakemake/paravg-slurm/ (a file system stat per running job); a file "
        "found triggers a status query at once.",
    )
    srun_jobs: bool = _setting(
        False,
        "Run each job through the jobstep executor and srun, as the SLURM "
        "plugin does (two snakemake start-ups per job), instead of in the batch "
        "script's snakemake (one).",
    )
    warm_workers: int = _setting(
        0,
        "Run one-thread Python script jobs in warm workers: allocations of this "
        "many CPUs (one job each) running a forkserver that has imported torch and "
        "paravg, fed by the main snakemake (see the warm module); 0: off.",
    )
    warm_allocations: int = _setting(
        1,
        "At most this many warm worker allocations at once.",
    )
    warm_gpus: int = _setting(
        0,
        "GPUs of each warm worker allocation (sbatch --gpus); jobs asking for "
        "one GPU (resource gpu=1) run warm only where one is free.",
    )
    warm_mem_mb: int = _setting(
        2000,
        "Memory per warm worker (the allocation asks workers x this); a job "
        "with a larger mem_mb is submitted on its own.",
    )
    warm_runtime: int = _setting(
        1440,
        "Time limit of a warm worker allocation in minutes; a job runs warm "
        "only in an allocation with its runtime left.",
    )
    warm_heartbeat_seconds: float = _setting(
        30.0,
        "A warm worker whose heartbeat (a file it rewrites every second) stops "
        "this long is taken for dead: its jobs fail (and are retried).",
    )
    warm_idle_seconds: float = _setting(
        60.0,
        "Stop a warm worker allocation after this long without a job, so "
        "SLURM can give its CPUs to jobs that cannot run warm.",
    )


def with_end_file(command: str, end_dir: Path, escaped: bool) -> str:
    """``command``, then ``<end_dir>/$SLURM_JOB_ID.ended`` holding its exit status, which
    stays the script's.

    ``escaped``: the text goes through the submitting shell inside double quotes (sbatch
    ``--wrap="…"``), so its ``$`` are written ``\\$``; a command passed as a script is
    literal.
    """
    dollar = "\\$" if escaped else "$"
    end_file = f"{shlex.quote(str(end_dir))}/{dollar}{{SLURM_JOB_ID}}.ended"
    return f"{command}; rc={dollar}?; echo {dollar}rc > {end_file}; exit {dollar}rc"


def excluded_nodes(tracked: set, by_user: set, requeue: bool) -> set:
    """The nodes later submissions exclude: the user's; with ``requeue`` no others (SLURM
    requeues a job of a failed node and knows the node's health); else the failed nodes
    the plugin tracked, without what is not a node name (``None assigned``)."""
    if requeue:
        return set(by_user)
    return set(by_user) | {n for n in tracked if n and " " not in n and n != "None"}


@contextlib.contextmanager
def status_queries_for(job_ids):
    """Within: the plugin's ``sacct``/``squeue`` status commands name ``job_ids`` only."""
    sacct, squeue = slurm_plugin.query_job_status_sacct, slurm_plugin.query_job_status_squeue
    jobs = ",".join(sorted(job_ids, key=lambda i: (len(i), i)))

    def only(query):
        return lambda runid: f"{query(runid)} --jobs {shlex.quote(jobs)}"

    slurm_plugin.query_job_status_sacct = only(sacct)
    slurm_plugin.query_job_status_squeue = only(squeue)
    try:
        yield
    finally:
        slurm_plugin.query_job_status_sacct = sacct
        slurm_plugin.query_job_status_squeue = squeue


class Executor(SlurmExecutor):
    """The SLURM executor with end files, a capped poll interval and direct job execution."""

    # The status thread starts before __post_init__ runs: until then, the plain plugin's.
    end_dir: Path | None = None
    next_status_query = 0.0
    user_excluded_nodes: frozenset = frozenset()
    warm_pool = None

    def __post_init__(self, test_mode: bool = False):
        settings = self.workflow.executor_settings
        if settings.array_jobs:
            raise WorkflowError(
                "--paravg-slurm-array-jobs is not supported by paravg-slurm: the batch "
                "script's snakemake runs its job itself, so every task of an array would "
                "run the first task's job. Leave it out: jobs are submitted one by one."
            )
        self.user_excluded_nodes = frozenset(
            n.strip() for n in (settings.exclude_failed_nodes or "").split(",") if n.strip()
        )
        # absolute: the batch script runs on a compute node (same shared file system)
        end_dir = Path(".snakemake", "paravg-slurm").resolve()
        end_dir.mkdir(parents=True, exist_ok=True)
        super().__post_init__(test_mode=test_mode)
        self.end_dir = end_dir
        if settings.warm_workers > 0:
            from snakemake_executor_plugin_paravg_slurm.warm import WarmPool

            self.warm_pool = WarmPool(self, settings, end_dir)

    def run_jobs(self, jobs):
        """Jobs that can run warm go to the warm pool; the others are submitted."""
        if self.warm_pool is None:
            return super().run_jobs(jobs)
        submitted = []
        for job in jobs:
            why = self.warm_pool.why_not(job)
            if why is None:
                self.run_job_pre(job)
                self.warm_pool.run_job(job)
            else:
                self.logger.debug(f"job {job.jobid} ({job.rule.name}) is not run warm: {why}")
                submitted.append(job)
        if submitted:
            super().run_jobs(submitted)
        return None

    def shutdown(self):
        if self.warm_pool is not None:
            self.warm_pool.shutdown()
        super().shutdown()

    def cancel(self):
        if self.warm_pool is not None:
            self.warm_pool.cancel()
        super().cancel()

    def additional_general_args(self):
        if self.workflow.executor_settings.srun_jobs:
            return super().additional_general_args()
        return "--executor local --jobs 1"

    def format_job_exec(self, job):
        escaped = not self.workflow.executor_settings.pass_command_as_script
        return with_end_file(super().format_job_exec(job), self.end_dir, escaped)

    def end_file(self, job_info) -> Path:
        return self.end_dir / f"{job_info.external_jobid}.ended"

    async def check_active_jobs(self, active_jobs):
        if self.end_dir is None:  # not initialised yet
            async for job in super().check_active_jobs(active_jobs):
                yield job
            return
        settings = self.workflow.executor_settings
        cap = max(1, int(settings.max_status_check_seconds))
        fast = max(0.1, float(settings.end_check_seconds))
        ended = {j.external_jobid for j in active_jobs if self.end_file(j).exists()}
        if active_jobs and not ended and time.monotonic() < self.next_status_query:
            for job in active_jobs:
                yield job
            self.next_seconds_between_status_checks = fast
            return
        still_active = set()
        with status_queries_for({j.external_jobid for j in active_jobs}):
            async for job in super().check_active_jobs(active_jobs):
                still_active.add(job.external_jobid)
                yield job
        for job in active_jobs:
            if job.external_jobid not in still_active:
                self.end_file(job).unlink(missing_ok=True)
        self._failed_nodes = excluded_nodes(
            self._failed_nodes, self.user_excluded_nodes, settings.requeue
        )
        self.next_status_query = time.monotonic() + cap
        self.next_seconds_between_status_checks = fast
