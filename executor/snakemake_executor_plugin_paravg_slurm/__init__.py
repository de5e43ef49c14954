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
"""

# No `from __future__ import annotations`: Snakemake turns each settings field's type into
# an argparse type, which must be the class itself, not its name.
from dataclasses import dataclass, field

from snakemake_executor_plugin_slurm import Executor as SlurmExecutor
from snakemake_executor_plugin_slurm import ExecutorSettings as SlurmExecutorSettings
from snakemake_executor_plugin_slurm import common_settings  # noqa: F401 (plugin interface)


@dataclass
class ExecutorSettings(SlurmExecutorSettings):
    max_status_check_seconds: int = field(
        default=5,
        metadata={
            "help": "Never wait longer than this between two status checks (sacct/squeue "
            "calls for all jobs); the SLURM plugin's own back-off grows to 180 s.",
            "env_var": False,
            "required": False,
        },
    )
    srun_jobs: bool = field(
        default=False,
        metadata={
            "help": "Run each job through the jobstep executor and srun, as the SLURM "
            "plugin does (two snakemake start-ups per job), instead of in the batch "
            "script's snakemake (one).",
            "env_var": False,
            "required": False,
        },
    )


class Executor(SlurmExecutor):
    """The SLURM executor with a capped poll interval and direct job execution."""

    def additional_general_args(self):
        if self.workflow.executor_settings.srun_jobs:
            return super().additional_general_args()
        return "--executor local --jobs 1"

    async def check_active_jobs(self, active_jobs):
        async for job in super().check_active_jobs(active_jobs):
            yield job
        cap = max(1, int(self.workflow.executor_settings.max_status_check_seconds))
        self.next_seconds_between_status_checks = min(
            self.next_seconds_between_status_checks or cap, cap
        )
