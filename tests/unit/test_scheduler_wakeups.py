"""paravg.scheduler_wakeups: Snakemake's scheduler keeps one pending re-evaluation timer
(not one more per finished job), a daemon thread, and the Snakefile installs it."""

import subprocess
import sys
import threading
import types
from pathlib import Path

from paravg.scheduler_wakeups import _schedule_one_reevaluation

REPO = Path(__file__).resolve().parents[2]


def test_one_pending_timer_however_many_passes_ask_for_one():
    """Fifty passes of the scheduler loop asking for a re-evaluation while one is pending
    start one timer, which wakes the loop once; after it fired, the next ask starts a new
    one. Snakemake's own method started fifty (330 threads in bench_scheduler_wakeups)."""
    scheduler = types.SimpleNamespace(_open_jobs=threading.Semaphore(0))
    before = threading.active_count()
    for _ in range(50):
        _schedule_one_reevaluation(scheduler, 0.2)
    first = scheduler._paravg_reevaluation_timer
    assert threading.active_count() == before + 1
    assert first.daemon, "a non-daemon timer holds the run's interpreter at its end"
    first.join(5)
    assert scheduler._paravg_reevaluation_timer is None, "a fired timer still counts as pending"
    assert scheduler._open_jobs.acquire(blocking=False), "the timer woke the loop"
    assert not scheduler._open_jobs.acquire(blocking=False), "the loop was woken twice"
    _schedule_one_reevaluation(scheduler, 0.01)
    second = scheduler._paravg_reevaluation_timer
    assert second is not first and second.daemon
    second.join(5)
    assert scheduler._open_jobs.acquire(blocking=False)


def test_the_pass_a_timer_wakes_can_start_the_next_timer():
    """The loop's pass woken by the timer runs while the timer's thread is still alive; its
    ask for the next re-evaluation must start one, or a run held by the rate limiter waits
    for a job to end instead of the timespan."""
    started = []

    class WakeAndAskAgain:
        def release(self):
            if not started:
                _schedule_one_reevaluation(scheduler, 0.01)
                started.append(scheduler._paravg_reevaluation_timer)

    scheduler = types.SimpleNamespace(_open_jobs=WakeAndAskAgain())
    _schedule_one_reevaluation(scheduler, 0.01)
    first = scheduler._paravg_reevaluation_timer
    first.join(5)
    assert started and started[0] not in (None, first), "the woken pass started no timer"
    started[0].join(5)


def test_each_scheduler_has_its_own_pending_timer():
    """A pending timer of one scheduler does not stand in for another's."""
    a = types.SimpleNamespace(_open_jobs=threading.Semaphore(0))
    b = types.SimpleNamespace(_open_jobs=threading.Semaphore(0))
    _schedule_one_reevaluation(a, 0.05)
    timer_a = a._paravg_reevaluation_timer
    _schedule_one_reevaluation(b, 0.05)
    timer_b = b._paravg_reevaluation_timer
    assert timer_a is not None and timer_b is not None and timer_a is not timer_b
    timer_a.join(5)
    timer_b.join(5)
    assert a._open_jobs.acquire(blocking=False) and b._open_jobs.acquire(blocking=False)


def test_the_snakefile_installs_the_single_timer_in_snakemakes_scheduler(tmp_path):
    """Wiring: reading the real Snakefile (``--list-rules``) replaces Snakemake's
    ``JobScheduler._schedule_reevalutation`` in the snakemake process by paravg's."""
    probe = (
        "import atexit, sys\n"
        "from snakemake.scheduling.job_scheduler import JobScheduler as S\n"
        "atexit.register(lambda: print('METHOD', S._schedule_reevalutation.__module__, "
        "S._schedule_reevalutation.__name__))\n"
        "from snakemake.cli import main\n"
        "sys.argv[0] = 'snakemake'\n"
        "main()\n"
    )
    snakefile, workdir = str(REPO / "Snakefile"), str(tmp_path)
    proc = subprocess.run(
        [sys.executable, "-c", probe, "-s", snakefile, "--directory", workdir, "--list-rules"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "METHOD paravg.scheduler_wakeups _schedule_one_reevaluation" in proc.stdout, proc.stdout[
        -2000:
    ]
