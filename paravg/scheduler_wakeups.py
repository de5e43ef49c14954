"""One pending re-evaluation timer for Snakemake's scheduler, not one per finished job.

Snakemake 9's scheduler loop (``snakemake/scheduling/job_scheduler.py``,
``JobScheduler.schedule``) waits on a semaphore that three things release: a job that
finishes, a job that fails, and a timer. With a job rate limiter, which the command line
always sets (``--max-jobs-per-timespan``, default 100/1s), every pass through the loop
that found a job waiting ends by starting a new timer
(``_schedule_reevalutation(timespan)``) to come back after the timespan. A pass woken by a
finished job starts its own timer beside the one already pending, so each finished job,
while other jobs wait for cores, adds one more chain of 1-second timers, and a chain dies
only on a pass that finds no job waiting. A long sync run always has jobs waiting (N
train jobs of each of several experiments for 2 cores): on
``config/experiments/sync_paper_lstm.yaml`` at 675 of 1,494 steps the snakemake process
held 154 timer threads and used 42 % of a core, most of it passes that re-read every
waiting job's resources and input sizes only to find no free core. The timers are not
daemon threads either, so a run's interpreter waits for the last one at its end.

:func:`coalesce_scheduler_wakeups` keeps at most one pending timer per scheduler (a pass
that wants one while one is pending relies on it: it fires within the timespan, which is
all the rate limiter needs) and makes it a daemon thread. Jobs start as before: a finished
job still wakes the loop at once through its own release. Measured with
``benchmarks/bench_scheduler_wakeups.py``.
"""

from __future__ import annotations

import threading

_TIMER_LOCK = threading.Lock()


def _schedule_one_reevaluation(scheduler, delay: float) -> None:
    """Start the scheduler's re-evaluation timer unless one is already pending. The timer
    marks itself fired before it wakes the loop, so the pass it wakes may start the next
    one (a check of the timer thread's liveness would still see it alive there, and the
    re-evaluation a rate-limited run waits for would be lost)."""

    def fire() -> None:
        with _TIMER_LOCK:
            scheduler._paravg_reevaluation_timer = None
        scheduler._open_jobs.release()

    with _TIMER_LOCK:
        if getattr(scheduler, "_paravg_reevaluation_timer", None) is not None:
            return
        timer = threading.Timer(delay, fire)
        timer.daemon = True
        scheduler._paravg_reevaluation_timer = timer
        timer.start()


def coalesce_scheduler_wakeups() -> bool:
    """Replace ``JobScheduler._schedule_reevalutation`` (Snakemake's spelling) by
    :func:`_schedule_one_reevaluation`. Returns False, changing nothing, when the installed
    Snakemake has no such method (another version's scheduler: its own timers stay)."""
    from snakemake.scheduling.job_scheduler import JobScheduler

    if not callable(getattr(JobScheduler, "_schedule_reevalutation", None)):
        return False
    JobScheduler._schedule_reevalutation = _schedule_one_reevaluation
    return True
