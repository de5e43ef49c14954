"""Warm workers on SLURM (``--paravg-slurm-warm-workers K``): the main snakemake runs a
job's Snakemake side itself and hands its script file to a worker allocation.

Without them every SLURM job is a fresh ``snakemake`` on the node (≈ 2 CPU-s: imports, the
Snakefile, the job's DAG) and then a fresh Python for the script (≈ 2.4 CPU-s, torch),
for a training job of a second. With them:

* **Worker allocations.** Up to ``--paravg-slurm-warm-allocations`` (1) sbatch jobs,
  each holding K CPUs (one per worker), ``--paravg-slurm-warm-gpus`` GPUs,
  K × ``--paravg-slurm-warm-mem-mb`` of memory and ``--paravg-slurm-warm-runtime``
  minutes, and each running paravg-warm's server
  (``snakemake_executor_plugin_paravg_warm.worker``: Python's forkserver with torch and
  paravg's job modules imported once). An allocation is submitted when a job needs one,
  and stopped after ``--paravg-slurm-warm-idle-seconds`` without a job, so SLURM can give
  its CPUs to jobs that cannot run warm (e.g. ``combine``, two threads).
* **A job** that can run warm (a ``script:`` in host Python, one thread, no
  conda/container/modules deployment, no group, at most one GPU and the allocation's memory,
  partition and remaining time) is run by Snakemake's own local executor in the main
  snakemake, as a ``localrules`` job would be: ``job.prepare()``, the script file with
  its pickled ``snakemake`` object, the benchmark and log handling, the output checks,
  retries, are Snakemake's. Only the step ``python <script file>`` changes: the file is
  handed to a worker with a free CPU (and a free GPU if the job asks for one) through
  the shared file system (a JSON file in the allocation's directory); a fork of the warm
  server runs it as ``__main__`` in the job's working directory, and its exit status
  comes back the same way. Every other job is submitted with sbatch as before.

The job's guarantees:

* **the same bits**: the same script file (same inputs, params, seeds; threads set by the
  script), one-thread BLAS variables as ``shell()`` sets them, a fresh fork per job;
  ``tests/pipeline/test_slurm.py`` compares ``final.pt`` with the local run's;
* **retries**: a failed job is an exception in the local executor's job thread, so
  Snakemake prints it and reruns the job (``--retries``), as any failed job;
* **time limits**: the worker sends SIGTERM, then SIGKILL, to a job at its own
  ``runtime`` (the attempt-scaled one), and the job fails as a TIMEOUT would; the
  allocation's own limit is SLURM's;
* **a worker's death is noticed**: the job fails, and ``--retries`` reruns it (in another
  or a new allocation), when the allocation's batch script ends (it ends by writing the
  end file of ``with_end_file``, checked every ``end_check_seconds``), when its heartbeat
  stops for ``--paravg-slurm-warm-heartbeat-seconds``, or when SLURM reports it ended
  (``sacct``/``squeue`` every ``max_status_check_seconds``); a job killed by a signal
  inside a living worker reports that signal. The job's processes die with their worker
  (``PR_SET_PDEATHSIG``), and a dead allocation is cancelled, so a rerun never races a
  leftover;
* **cancellation**: Ctrl-C cancels the allocations with the other jobs (``scancel``).

What differs: a warm job is not a SLURM job of its own (``sacct`` lists the allocations,
``paravg_warm_workers``; the job's output goes to the allocation's log, its own log file
is unchanged); memory is enforced per allocation, not per job; ``resources.tmpdir`` is
evaluated by the main snakemake (as for a ``localrules`` job).
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import itertools
import json
import os
import shlex
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import snakemake_executor_plugin_paravg_warm as warm
from snakemake.common.tbdstring import TBDString
from snakemake.executors.local import Executor as LocalExecutor
from snakemake.executors.local import run_wrapper
from snakemake.iocontainers import ResourceList
from snakemake_executor_plugin_paravg_warm.worker import (
    BENCHMARK_FIELDS,
    read_counter,
    write_counter,
    write_json,
)
from snakemake_interface_common.exceptions import WorkflowError

#: How often the main snakemake looks for finished jobs (one listdir per busy allocation).
POLL_S = 0.05
#: At the end of the run, how long to wait for the stopped allocations to end.
STOP_WAIT_S = 15.0
#: SLURM states after which an allocation runs nothing any more.
ENDED_STATES = {
    "BOOT_FAIL",
    "CANCELLED",
    "COMPLETED",
    "DEADLINE",
    "FAILED",
    "NODE_FAIL",
    "OUT_OF_MEMORY",
    "PREEMPTED",
    "REVOKED",
    "SPECIAL_EXIT",
    "TIMEOUT",
}
#: Resources that a worker cannot honour for one job (such a job is submitted with sbatch).
SLURM_ONLY_RESOURCES = (
    "gres",
    "gpu_model",
    "slurm_extra",
    "constraint",
    "qos",
    "mpi",
    "slurm_cluster",
    "clusters",
    "cluster",
)


@dataclass
class Request:
    id: str
    label: str
    gpus: int
    runtime_s: float
    done: threading.Event = field(default_factory=threading.Event)
    result: dict | None = None
    lost: str | None = None
    allocation: Allocation | None = None


@dataclass
class Allocation:
    """One worker allocation: its directory, SLURM job and what runs in it."""

    name: str
    dir: Path
    slots: int
    gpus: int
    runtime_s: float
    jobid: str | None = None
    submitted: float = field(default_factory=time.monotonic)
    ready: dict | None = None
    beat: int | None = None
    beat_changed: float = field(default_factory=time.monotonic)
    idle_since: float = field(default_factory=time.monotonic)
    running: dict[str, Request] = field(default_factory=dict)
    ended: str | None = None

    def free(self, gpus: int) -> bool:
        used_gpus = sum(r.gpus for r in self.running.values())
        return len(self.running) < self.slots and used_gpus + gpus <= self.gpus

    def remaining_s(self, now: float) -> float:
        return self.runtime_s - (now - self.submitted)

    def describe(self) -> str:
        host = f" on {self.ready['host']}" if self.ready else ""
        return f"warm worker allocation {self.name} (SLURM job {self.jobid}{host})"


def resources_with_tmpdir(job) -> ResourceList:
    """The job's resources with ``tmpdir`` evaluated here (a remote job's is left to its
    node's snakemake: ``<TBD>``), as Snakemake evaluates a ``localrules`` job's."""
    resources = job.resources
    if not isinstance(resources.get("tmpdir"), TBDString):
        return resources
    full = job.rule.expand_resources(job.wildcards_dict, job.input, job.attempt)
    values = dict(resources.items())
    values["tmpdir"] = full["tmpdir"]
    return ResourceList(fromdict=values)


class WarmRunner(LocalExecutor):
    """Snakemake's local executor in the main snakemake, for the jobs of the warm pool:
    each job thread routes ``python <script file>`` to :meth:`WarmPool.execute`."""

    def __init__(self, workflow, logger, pool: WarmPool, threads: int):
        self.warm_pool, self.job_threads = pool, threads
        super().__init__(workflow, logger)

    def __post_init__(self):
        super().__post_init__()
        self.pool.shutdown(wait=False)
        self.workers = self.job_threads
        self.pool = concurrent.futures.ThreadPoolExecutor(
            max_workers=self.job_threads, thread_name_prefix="paravg_warm_job"
        )

    def job_args_and_prepare(self, job):
        args = list(super().job_args_and_prepare(job))
        args[6] = resources_with_tmpdir(job)  # run_wrapper's `resources`
        return tuple(args)

    def run_single_job(self, job):
        args = self.job_args_and_prepare(job)
        return self.pool.submit(self._run, job, args)

    def _run(self, job, args):
        warm.remote.run = lambda script, fname: self.warm_pool.execute(job, script, fname)
        try:
            self.cached_or_run(job, run_wrapper, *args)
        finally:
            warm.remote.run = None


class WarmPool:
    """The worker allocations of one run and the jobs handed to them."""

    def __init__(self, executor, settings, end_dir: Path):
        self.executor, self.settings, self.end_dir = executor, settings, end_dir
        self.logger = executor.logger
        self.slots = int(settings.warm_workers)
        self.max_allocations = max(1, int(settings.warm_allocations))
        self.gpus = int(settings.warm_gpus)
        self.mem_mb = int(settings.warm_mem_mb)
        self.runtime_s = 60.0 * float(settings.warm_runtime)
        self.heartbeat_s = float(settings.warm_heartbeat_seconds)
        self.idle_s = float(settings.warm_idle_seconds)
        self.status_s = max(1.0, float(settings.max_status_check_seconds))
        self.root = Path(".snakemake", "paravg-slurm", "warm", executor.run_uuid).resolve()
        self.root.mkdir(parents=True, exist_ok=True)
        self.logdir = Path(executor.slurm_logdir) / "paravg_warm_workers"
        self.logdir.mkdir(parents=True, exist_ok=True)
        self.partition: str | None = None
        self.account: str | None = None
        self.allocations: list[Allocation] = []
        self.names = itertools.count()
        self.ids = itertools.count()
        self.cond = threading.Condition()
        self.submit_lock = threading.Lock()
        self.closed = False
        self.main_beat = 0
        warm.install_script_hook()
        self.runner = WarmRunner(
            executor.workflow,
            executor.logger,
            self,
            threads=self.slots * self.max_allocations + 4,
        )
        self.monitor = threading.Thread(target=self._monitor, name="paravg_warm_monitor")
        self.monitor.daemon = True
        self.monitor.start()

    # ------------------------------------------------------------------ which jobs
    def why_not(self, job) -> str | None:
        """Why ``job`` cannot run in a worker (None: it can)."""
        if job.is_group():
            return "a group job"
        if not job.is_script or not str(job.rule.script).endswith(".py"):
            return "not a Python script: job"
        if job.threads != 1:
            return f"{job.threads} threads"
        if job.is_shadow:
            return "a shadow directory"
        if self.executor.workflow.deployment_settings.deployment_method:
            return "a software deployment method (conda, apptainer, env modules)"
        resources = job.resources
        for name in SLURM_ONLY_RESOURCES:
            if resources.get(name):
                return f"resource {name}"
        for name in ("nodes", "tasks", "tasks_per_node", "cpus_per_task"):
            if int(resources.get(name) or 1) > 1:
                return f"resource {name}"
        gpus = int(resources.get("gpu") or 0)
        if gpus > min(1, self.gpus):
            return f"{gpus} GPUs (a worker allocation has {self.gpus}, one per job)"
        mem_mb = max(int(resources.get(n) or 0) for n in ("mem_mb", "mem_mb_per_cpu"))
        if mem_mb > self.mem_mb:
            return f"mem_mb {mem_mb} > {self.mem_mb}"
        if 60.0 * float(resources.get("runtime") or 0) > self.runtime_s - 60:
            return f"runtime {resources.get('runtime')} min > the allocation's"
        partition = self.executor.get_partition_arg(job)
        if self.partition is not None and partition != self.partition:
            return f"partition {partition.strip()} (the workers': {self.partition.strip()})"
        return None

    def run_job(self, job) -> None:
        if self.partition is None:
            self.partition = self.executor.get_partition_arg(job)
            self.account = next(self.executor.get_account_arg(job))
        self.runner.run_job(job)

    # ------------------------------------------------------------------ one job
    def execute(self, job, script, fname) -> None:
        """In the job's thread: run Snakemake's script file ``fname`` in a worker; raise
        ``CalledProcessError`` if it fails there or its worker is lost."""
        runtime_min = job.resources.get("runtime")
        runtime_s = 60.0 * float(runtime_min) if runtime_min else self.runtime_s
        request = Request(
            id=f"{os.getpid()}-{next(self.ids)}-{job.jobid}",
            label=f"{job.rule.name} {job.wildcards_dict} attempt {job.attempt}",
            gpus=int(job.resources.get("gpu") or 0),
            runtime_s=runtime_s,
        )
        allocation = self._place(request)
        body = {
            "script": os.path.abspath(str(fname)),
            "cwd": os.getcwd(),
            "env": warm._job_environment(script),
            "gpus": request.gpus,
            "runtime_s": runtime_s,
            "benchmark": script.bench_record is not None,
            "label": request.label,
        }
        write_json(allocation.dir / "jobs" / f"{request.id}.json", body)
        request.done.wait()
        with self.cond:
            allocation.running.pop(request.id, None)
            if not allocation.running:
                allocation.idle_since = time.monotonic()
            self.cond.notify_all()
        where = f"{allocation.describe()}, request {request.id}"
        if request.lost is not None:
            raise subprocess.CalledProcessError(
                1, f"python {fname}: {where}: the worker was lost: {request.lost}"
            )
        result = request.result or {}
        if script.bench_record is not None and result.get("benchmark"):
            for name in BENCHMARK_FIELDS:
                setattr(script.bench_record, name, result["benchmark"].get(name))
        code = result.get("exitcode")
        if code == 0:
            return
        if result.get("timed_out"):
            why = f"ended at its runtime limit ({runtime_s / 60:g} min, TIMEOUT)"
        elif code is not None and code < 0:
            why = f"killed by signal {-code}"
        else:
            why = f"failed{': ' + result['error'] if result.get('error') else ''}"
        pid = result.get("pid")
        raise subprocess.CalledProcessError(
            code if code else 1, f"python {fname}: warm worker job (pid {pid}, {where}) {why}"
        )

    def _place(self, request: Request) -> Allocation:
        """A live allocation with room for ``request`` (waiting, or submitting one)."""
        while True:
            submit = False
            with self.cond:
                if self.closed:
                    raise WorkflowError("the warm workers were stopped")
                now = time.monotonic()
                live = [a for a in self.allocations if a.ended is None]
                fits = [a for a in live if a.remaining_s(now) >= request.runtime_s + 60]
                for allocation in sorted(fits, key=lambda a: (a.ready is None, a.submitted)):
                    if allocation.free(request.gpus):
                        allocation.running[request.id] = request
                        request.allocation = allocation
                        return allocation
                if len(live) < self.max_allocations:
                    submit = True
                else:
                    # an idle allocation too short for this job makes room for a new one
                    for allocation in live:
                        if allocation not in fits and not allocation.running:
                            self._stop(allocation, "too little time left for the next job")
                            submit = True
                            break
                    if not submit:
                        self.cond.wait(1.0)
            if submit:
                self._submit()

    # ------------------------------------------------------------------ allocations
    def _submit(self) -> None:
        with self.submit_lock:
            with self.cond:
                if sum(a.ended is None for a in self.allocations) >= self.max_allocations:
                    return
            name = f"w{next(self.names)}"
            directory = self.root / name
            (directory / "jobs").mkdir(parents=True)
            (directory / "done").mkdir()
            write_counter(directory / "main.alive", self.main_beat)
            allocation = Allocation(name, directory, self.slots, self.gpus, self.runtime_s)
            from snakemake_executor_plugin_paravg_slurm import with_end_file

            worker = shlex.join(
                [
                    sys.executable,
                    "-m",
                    "snakemake_executor_plugin_paravg_warm.worker",
                    str(directory),
                ]
            )
            minutes = max(1, int(self.runtime_s // 60))
            call = (
                f"sbatch --parsable --no-requeue --export=ALL"
                f" --job-name {shlex.quote(self.executor.run_uuid + '_warm')}"
                f" --comment paravg_warm_workers"
                f" --output {shlex.quote(str(self.logdir / '%j.log'))}"
                f"{self.partition or ''}{self.account or ''}"
                f" -t {minutes} --mem {self.slots * self.mem_mb}"
                f" --ntasks=1 --cpus-per-task={self.slots}"
                f"{f' --gpus={self.gpus}' if self.gpus else ''}"
                f" -D {shlex.quote(self.executor.workflow.workdir_init)}"
                f" --wrap={shlex.quote(with_end_file(worker, self.end_dir, escaped=False))}"
            )
            proc = subprocess.run(call, shell=True, capture_output=True, text=True)
            if proc.returncode != 0:
                raise WorkflowError(
                    f"sbatch of a warm worker allocation failed: {proc.stderr.strip()}\n"
                    f"    sbatch call: {call}"
                )
            allocation.jobid = proc.stdout.strip().split(";")[0]
            self.logger.info(
                f"{allocation.describe()}: {self.slots} workers, {self.gpus} GPUs, "
                f"log {self.logdir / (allocation.jobid + '.log')}"
            )
            with self.cond:
                self.allocations.append(allocation)
                self.cond.notify_all()

    def _stop(self, allocation: Allocation, why: str) -> None:
        """Ask ``allocation``'s worker to stop (under ``self.cond``)."""
        allocation.ended = f"stopped: {why}"
        with contextlib.suppress(OSError):
            (allocation.dir / "stop").touch()
        self.logger.debug(f"{allocation.describe()} stopped: {why}")

    def _lose(self, allocation: Allocation, why: str) -> None:
        """``allocation`` is gone: fail its jobs and cancel it (under ``self.cond``)."""
        allocation.ended = why
        for request in allocation.running.values():
            if not request.done.is_set():
                request.lost = why
                request.done.set()
        self.logger.warning(
            f"{allocation.describe()} lost ({why}); "
            f"{len(allocation.running)} job(s) failed, to be retried"
        )
        self._scancel([allocation])
        self.cond.notify_all()

    def _scancel(self, allocations: list[Allocation]) -> None:
        ids = [a.jobid for a in allocations if a.jobid]
        if ids:
            subprocess.run(["scancel", *ids], capture_output=True, timeout=60)

    def _slurm_states(self, allocations: list[Allocation]) -> dict[str, str]:
        ids = ",".join(a.jobid for a in allocations if a.jobid)
        if not ids:
            return {}
        if self.executor.get_status_command() == "squeue":
            cmd = ["squeue", "-h", "--states=all", "-o", "%i|%T", "-j", ids]
        else:
            cmd = ["sacct", "-X", "-n", "-P", "-o", "JobIDRaw,State", "-j", ids]
        try:
            out = subprocess.run(cmd, capture_output=True, text=True, timeout=60).stdout
        except (OSError, subprocess.TimeoutExpired):
            return {}
        states = {}
        for line in out.splitlines():
            jobid, _, state = line.partition("|")
            if state:
                states[jobid.strip()] = state.split()[0]
        return states

    # ------------------------------------------------------------------ the monitor
    def _check(self, allocation: Allocation, now: float) -> None:
        """The results of ``allocation``'s finished jobs (under ``self.cond``)."""
        if allocation.running:
            try:
                names = os.listdir(allocation.dir / "done")
            except OSError:
                names = []
            for entry in names:
                request = allocation.running.get(entry[: -len(".json")])
                if request is not None and not request.done.is_set():
                    with contextlib.suppress(OSError, ValueError):
                        request.result = json.loads((allocation.dir / "done" / entry).read_text())
                        request.done.set()

    def _check_health(self, allocation: Allocation, now: float) -> None:
        if allocation.ready is None:
            with contextlib.suppress(OSError, ValueError):
                allocation.ready = json.loads((allocation.dir / "ready.json").read_text())
                allocation.beat_changed = now
        beat = read_counter(allocation.dir / "heartbeat")
        if beat != allocation.beat:
            allocation.beat, allocation.beat_changed = beat, now
        end_file = self.end_dir / f"{allocation.jobid}.ended"
        if end_file.exists():
            self._check(allocation, now)  # results written before the end
            code = end_file.read_text().strip()
            self._lose(allocation, f"its batch script ended (exit status {code})")
        elif allocation.ready is not None and now - allocation.beat_changed > self.heartbeat_s:
            self._lose(allocation, f"no heartbeat for {self.heartbeat_s:g} s")

    def _monitor(self) -> None:
        """The pool's one thread of checks; an error in one round is logged, not fatal (a
        dead monitor would leave every job waiting)."""
        rounds = {"health": 0.0, "status": 0.0}
        while not self.closed:
            try:
                self._monitor_round(rounds)
            except Exception as e:
                self.logger.warning(f"paravg-slurm warm pool: monitor error: {e!r}")
            time.sleep(POLL_S)

    def _monitor_round(self, rounds: dict[str, float]) -> None:
        """Results of every busy allocation; each second, readiness, heartbeats, end files
        and idle allocations; each ``max_status_check_seconds``, SLURM's states."""
        now = time.monotonic()
        with self.cond:
            if self.closed:
                return
            live = [a for a in self.allocations if a.ended is None]
            for allocation in live:
                self._check(allocation, now)
            if now >= rounds["health"]:
                rounds["health"] = now + 1.0
                self.main_beat += 1
                for allocation in live:
                    write_counter(allocation.dir / "main.alive", self.main_beat)
                    if allocation.ended is None:
                        self._check_health(allocation, now)
                    if (
                        allocation.ended is None
                        and not allocation.running
                        and now - allocation.idle_since > self.idle_s
                    ):
                        self._stop(allocation, f"idle for {self.idle_s:g} s")
                        self.cond.notify_all()
            query = [a for a in self.allocations if a.ended is None]
        if query and now >= rounds["status"]:
            rounds["status"] = now + self.status_s
            states = self._slurm_states(query)
            with self.cond:
                for allocation in query:
                    state = states.get(allocation.jobid)
                    if allocation.ended is None and state in ENDED_STATES:
                        # the batch script writes its end file before SLURM sees it end:
                        # its exit status is the better reason, if it is there by now
                        self._check_health(allocation, now)
                    if allocation.ended is None and state in ENDED_STATES:
                        self._check(allocation, now)
                        self._lose(allocation, f"SLURM state {state}")

    # ------------------------------------------------------------------ the end
    def shutdown(self) -> None:
        """Stop every allocation, and wait (at most :data:`STOP_WAIT_S`) until their batch
        scripts have ended, so that none outlives the run; cancel those that have not."""
        with self.cond:
            for allocation in self.allocations:
                if allocation.ended is None:
                    self._stop(allocation, "the run is over")
            self.closed = True
            self.cond.notify_all()
        self.runner.shutdown()
        deadline = time.monotonic() + STOP_WAIT_S
        waiting = [a for a in self.allocations if a.jobid]
        while waiting and time.monotonic() < deadline:
            waiting = [a for a in waiting if not (self.end_dir / f"{a.jobid}.ended").exists()]
            time.sleep(POLL_S)
        self._scancel(waiting)
        for allocation in self.allocations:
            with contextlib.suppress(OSError):
                (self.end_dir / f"{allocation.jobid}.ended").unlink()

    def cancel(self) -> None:
        with self.cond:
            self.closed = True
            for allocation in self.allocations:
                for request in allocation.running.values():
                    if not request.done.is_set():
                        request.lost = "cancelled"
                        request.done.set()
            self._scancel([a for a in self.allocations if a.ended is None])
            for allocation in self.allocations:
                allocation.ended = allocation.ended or "cancelled"
            self.cond.notify_all()
        self.runner.cancel()
