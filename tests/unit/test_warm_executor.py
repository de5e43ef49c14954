"""paravg-warm's child processes (executor/snakemake_executor_plugin_paravg_warm): many
jobs started and waited for from several threads at once each get their own exit status."""

import concurrent.futures
import multiprocessing
import os
import signal

import snakemake_executor_plugin_paravg_warm as warm


def test_concurrent_children_each_report_their_own_exit_status():
    """Process.start polls every other child, so two threads could read one child's status
    pipe and the loser would take EOF for status 255 (measured: 8 of 200 jobs before the
    lock covered the reads). Every child here must report exactly its own code."""
    context = multiprocessing.get_context("forkserver")
    codes = [0, 3, 0, -signal.SIGABRT, 0, 1] * 25

    def run(code):
        # standard-library targets: the child imports nothing of this test module
        target, args = (os.abort, ()) if code < 0 else (os._exit, (code,))
        child = context.Process(target=target, args=args)
        with warm._lock, warm._without_main_module():
            child.start()
        warm._wait(child)
        return child.exitcode

    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        assert list(pool.map(run, codes)) == codes


def test_a_job_that_ends_before_its_benchmark_attaches_does_not_fail():
    """A forkserver child is reaped by the server as soon as it exits, so a job faster
    than a fork is gone when Snakemake's benchmark monitor looks its pid up (psutil's
    NoSuchProcess: 2 of about 10 bench_main_snakemake runs at 128 jobs failed a job with it).
    The job keeps its exit status and its record its running time."""
    from snakemake.benchmark import BenchmarkRecord

    context = multiprocessing.get_context("forkserver")
    child = context.Process(target=os._exit, args=(0,))
    with warm._lock, warm._without_main_module():
        child.start()
    warm._wait(child)  # reaped by the server: the pid is gone
    record = BenchmarkRecord()
    with warm.benchmarked_child(child.pid, record):
        pass
    assert child.exitcode == 0 and record.running_time is not None
    # a live job is measured by Snakemake's monitor as before
    record = BenchmarkRecord()
    with warm.benchmarked_child(os.getpid(), record):
        sum(range(10**6))
    assert record.running_time > 0
