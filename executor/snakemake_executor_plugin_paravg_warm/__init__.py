"""paravg-warm: Snakemake's local executor, with Python ``script:`` jobs run in processes
forked from a warm server instead of a fresh interpreter each.

A paravg job that trains for a second paid about three CPU-seconds to start: a new Python,
Snakemake's script preamble, and ``import torch`` (1.5 s). Here the job runs in a child of
Python's own ``multiprocessing`` forkserver, started once per run with torch, Snakemake's
script module and paravg's job modules imported (``set_forkserver_preload``): each job is a
fresh ``fork`` of that server, so no state passes from one job to the next.

Everything else is Snakemake's local executor, unchanged: Snakemake writes the script file
(its preamble unpickles the ``snakemake`` object) exactly as for ``python <file>``, and the
child runs that file as ``__main__``. So a job keeps every guarantee of a job in its own
process:

* the same bits: the same file runs with the same environment (the CPU kernel pins of
  ``paravg.cpu_kernels`` are in the Snakefile's environment before the executor starts the
  server, so torch, numpy and OpenBLAS load under them in the server, whose forks keep
  the kernels it chose; the BLAS thread variables are those ``shell()`` sets
  for a one-thread job, so only one-thread jobs run warm) and the script sets its own
  threads and seeds;
* benchmarks: ``benchmark:`` files measure the child, as they measure ``python <file>``
  (a job that ends before its monitor attaches records its running time alone:
  :func:`benchmarked_child`);
* failures: a non-zero exit, or a child killed by a signal (a dead worker), fails the job
  with the exit status, and Snakemake reruns it as any failed job (``--retries``);
* cancellation: Ctrl-C / SIGTERM of snakemake terminates the running children.

Jobs with a conda env, a container or environment modules, and every non-Python job, run
as Snakemake's local executor runs them. Select it with ``--executor paravg-warm`` (the
``profiles/local`` profile does).

The same server runs on SLURM: ``paravg-slurm --paravg-slurm-warm-workers K`` keeps
allocations that each run :mod:`.worker` (this forkserver, and a loop that takes job files
from the shared file system); there the main snakemake prepares each job as here, and the
script file runs in a fork on a compute node (``snakemake_executor_plugin_paravg_slurm.warm``).
"""

from __future__ import annotations

import contextlib
import ctypes
import multiprocessing
import multiprocessing.connection
import multiprocessing.forkserver
import os
import runpy
import signal
import subprocess
import sys
import threading
import time
import types
from dataclasses import dataclass

from snakemake.benchmark import benchmarked
from snakemake.executors.local import Executor as LocalExecutor
from snakemake.executors.local import common_settings  # noqa: F401 (the plugin's settings)
from snakemake.script import PythonScript
from snakemake_interface_executor_plugins.settings import ExecutorSettingsBase

#: Imported once by the server, so that a job's fork has them: torch, Snakemake's script
#: module (the preamble unpickles the ``snakemake`` object with it) and paravg's job modules.
PRELOAD = (
    "torch",
    "snakemake.script",
    __name__,  # _run_file, the child's target
    "paravg.train_job",
    "paravg.diagnostics",
    "paravg.sync.average",
    "paravg.sync.bmuf",
    "paravg.sync.consensus",
    "paravg.sync.ema",
    "paravg.sync.decentralized",
    "paravg.logs",
    "paravg.devices",
)


@dataclass
class ExecutorSettings(ExecutorSettingsBase):
    """No settings: the server imports :data:`PRELOAD`."""


#: The thread variables Snakemake's ``shell()`` sets to a job's ``threads`` for
#: ``python <file>``; the server starts with them at 1 (numpy's BLAS reads them once, at
#: import), so it serves the jobs of one thread: the others run as Snakemake runs them.
THREAD_VARIABLES = (
    "OMP_NUM_THREADS",
    "GOTO_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "MKL_NUM_THREADS",
    "VECLIB_MAXIMUM_THREADS",
    "NUMEXPR_NUM_THREADS",
)

_context: multiprocessing.context.ForkServerContext | None = None
_running: set[multiprocessing.process.BaseProcess] = set()
_lock = threading.Lock()
_python_execute_script = PythonScript.execute_script


def _run_file(
    path: str, environment: dict[str, str], cwd: str | None = None, lifeline=None
) -> None:
    """In the forked child: run Snakemake's script file as ``python <path>`` would, with
    the environment ``shell()`` would give it (in ``cwd``, when given).

    ``lifeline``: the read end of a pipe whose write end only the SLURM worker holds
    (:mod:`.worker`). The child kills itself when the pipe reaches EOF, i.e. as soon as
    the worker dies, so no job of a lost worker outlives it (a job rerun elsewhere never
    races a leftover); and it gets SIGKILL when the forkserver ends (Linux
    ``PR_SET_PDEATHSIG``). The forkserver ends when the pipe from its client (the worker)
    reaches EOF; every child is handed a copy of that pipe's write end, so the child closes
    its copy, or a running job would keep the forkserver alive."""
    if lifeline is not None:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
        server = multiprocessing.forkserver._forkserver
        if server._forkserver_alive_fd is not None:
            os.close(server._forkserver_alive_fd)
            server._forkserver_alive_fd = None
        threading.Thread(target=_die_with, args=(lifeline,), daemon=True).start()
    if cwd is not None:
        os.chdir(cwd)
    os.environ.update(environment)
    try:
        runpy.run_path(path, run_name="__main__")
    except (SystemExit, KeyboardInterrupt):
        raise
    except BaseException:
        # as `python <path>` ends on an uncaught error: through sys.excepthook, which the
        # script may have set (paravg.logs puts the error into the job's log file), with
        # exit status 1. multiprocessing would print the traceback and bypass the hook.
        sys.excepthook(*sys.exc_info())
        raise SystemExit(1) from None


def _die_with(lifeline) -> None:
    """Block until ``lifeline`` reaches EOF (its writer died), then SIGKILL this process."""
    with contextlib.suppress(EOFError, OSError):
        while True:
            lifeline.recv_bytes()
    os.kill(os.getpid(), signal.SIGKILL)


def _job_environment(script: PythonScript) -> dict[str, str]:
    """What Snakemake's ``shell()`` adds to a one-thread job's environment."""
    environment = dict.fromkeys(THREAD_VARIABLES, "1")
    tmpdir = script.resources.get("tmpdir", None)
    if tmpdir:
        environment.update(TMPDIR=tmpdir, TMP=tmpdir, TEMPDIR=tmpdir, TEMP=tmpdir)
    return environment


@contextlib.contextmanager
def _without_main_module():
    """While a child starts: no ``__main__`` for multiprocessing to import in it. The
    parent's is the ``snakemake`` command, whose import loads every executor plugin (the
    SLURM plugin runs ``scontrol``, 10 s without a controller) for nothing."""
    main = sys.modules["__main__"]
    sys.modules["__main__"] = types.ModuleType("__main__")
    try:
        yield
    finally:
        sys.modules["__main__"] = main


@contextlib.contextmanager
def benchmarked_child(pid: int, record):
    """Snakemake's ``benchmarked(pid, record)`` for a forked job, which may have ended
    before its monitor attaches: a job faster than a fork (a simulated one, a tiny sync
    node on a loaded machine) is reaped at once by the forkserver, so ``psutil`` finds no
    process, and Snakemake's monitor raises ``NoSuchProcess`` (the job failed with it).
    Then the record keeps the running time alone, as for a process gone between samples."""
    import psutil

    started = time.time()
    with contextlib.ExitStack() as stack:
        try:
            stack.enter_context(benchmarked(pid, record))
            attached = True
        except psutil.NoSuchProcess:
            attached = False
        yield record
    if not attached:
        record.running_time = time.time() - started


def _wait(child: multiprocessing.process.BaseProcess) -> None:
    """Wait for ``child`` to end, and take its exit status under the lock.

    A forkserver child's status is a few bytes on a pipe from the server, read by the
    first ``poll`` that finds the pipe readable: ``Process.start`` polls every other
    child, so two threads could read one pipe, and the loser would see EOF and the status
    255 (as if the server had died). Every start and every status read hold the lock."""
    multiprocessing.connection.wait([child.sentinel])
    with _lock:
        child.join()


#: Set by paravg-slurm's warm pool in the thread that runs a job of its worker allocations:
#: ``remote.run(script, fname)`` runs the script file there (``..._paravg_slurm.warm``).
remote = threading.local()


def runs_warm(script: PythonScript, edit: bool = False) -> bool:
    """Whether a forked warm worker may run ``script``: host Python, one thread."""
    return not (
        edit
        or script.threads != 1
        or script.conda_env
        or script.container_img
        or script.env_modules
    )


def _warm_execute_script(self: PythonScript, fname, edit=False) -> None:
    """``PythonScript.execute_script`` through the warm server (host Python jobs only), or
    through a SLURM worker when this thread runs a job of paravg-slurm's warm pool."""
    run_remote = getattr(remote, "run", None)
    if run_remote is not None:
        if not runs_warm(self, edit):
            raise subprocess.CalledProcessError(
                1, f"python {fname}: not a one-thread host Python job, cannot run warm"
            )
        return run_remote(self, fname)
    if _context is None or not runs_warm(self, edit):
        return _python_execute_script(self, fname, edit)
    child = _context.Process(target=_run_file, args=(str(fname), _job_environment(self)))
    with _lock, _without_main_module():
        child.start()
        _running.add(child)
    try:
        if self.bench_record is not None:
            with benchmarked_child(child.pid, self.bench_record):
                _wait(child)
        else:
            _wait(child)
    finally:
        with _lock:
            _running.discard(child)
    if child.exitcode != 0:
        why = f"killed by signal {-child.exitcode}" if child.exitcode < 0 else "failed"
        raise subprocess.CalledProcessError(
            child.exitcode, f"warm worker (pid {child.pid}) {why}: python {fname}"
        )
    return None


def start_forkserver() -> multiprocessing.context.ForkServerContext:
    """Start this process's ``multiprocessing`` forkserver with :data:`PRELOAD` imported
    under one-thread BLAS settings (:data:`THREAD_VARIABLES`); return its context."""
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(list(PRELOAD))
    saved = {name: os.environ.get(name) for name in THREAD_VARIABLES}
    os.environ.update(dict.fromkeys(THREAD_VARIABLES, "1"))
    try:
        multiprocessing.forkserver.ensure_running()  # imports PRELOAD, one thread each
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
    return context


def stop_forkserver() -> None:
    """Stop the forkserver and wait for it (the standard library's own stop)."""
    multiprocessing.forkserver._forkserver._stop()


def install_script_hook() -> None:
    """Route ``PythonScript.execute_script`` through :func:`_warm_execute_script`."""
    PythonScript.execute_script = _warm_execute_script


class Executor(LocalExecutor):
    """Snakemake's local executor; Python scripts run in forks of a warm server."""

    def __post_init__(self):
        global _context
        super().__post_init__()
        _context = start_forkserver()
        install_script_hook()

    def _terminate_children(self) -> None:
        with _lock:
            for child in list(_running):
                child.terminate()

    @staticmethod
    def _stop_server() -> None:
        """Stop the forkserver and wait for it (no orphan process; its CPU time and its
        children's count for snakemake's own, as a job run in a fresh process does)."""
        global _context
        _context = None
        PythonScript.execute_script = _python_execute_script
        stop_forkserver()

    def cancel(self):
        self._terminate_children()
        super().cancel()
        self._stop_server()

    def shutdown(self):
        super().shutdown()
        self._stop_server()
