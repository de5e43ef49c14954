"""A warm worker: paravg-warm's forkserver, taking its jobs from files on a shared file system.

``python -m snakemake_executor_plugin_paravg_warm.worker DIR`` is what each worker
allocation of ``paravg-slurm --paravg-slurm-warm-workers K`` runs (its batch script, on a
compute node). It starts Python's ``multiprocessing`` forkserver with paravg-warm's
preload (torch, Snakemake's script module, paravg's job modules: :func:`start_forkserver`)
and then serves the requests that the main snakemake writes into ``DIR``:

``DIR/jobs/<id>.json``
    a request: the script file Snakemake wrote for the job, its working directory and
    environment, its runtime limit in seconds, whether it holds a GPU and whether a
    ``benchmark:`` record is wanted. Each request becomes one fork of the forkserver that
    runs the file as ``__main__`` (paravg-warm's ``_run_file``), so no state passes
    between jobs.
``DIR/done/<id>.json``
    the result, written when the child has ended: its exit status (negative: the signal
    that killed it), whether the worker ended it at its runtime limit, and the benchmark
    measures.
``DIR/ready.json``, ``DIR/heartbeat``
    written once the forkserver is up (host, pid, SLURM job id, GPUs), then a counter
    rewritten every :data:`HEARTBEAT_S`: the main snakemake takes a worker whose counter
    stops for its heartbeat timeout for dead, as it does an allocation SLURM has ended.
``DIR/main.alive``, ``DIR/stop``
    the main snakemake's own counter, and its request to stop. A worker stops on ``stop``,
    and by itself when it is idle and ``main.alive`` has not changed for
    :data:`ORPHAN_S` (the main snakemake was killed: the allocation is not left to its
    time limit).

What a job keeps, as in a process of its own:

* **time limit**: a child still running at its runtime gets SIGTERM, and SIGKILL
  :data:`KILL_WAIT_S` later (SLURM's own order at a job's time limit); its result says
  ``timed_out`` and the main snakemake fails the job, so ``--retries`` reruns it with
  the attempt-scaled runtime;
* **death**: a child killed by a signal reports it (a negative exit status); if the worker
  itself dies, every child kills itself at once (it waits in a thread for the EOF of a
  pipe whose write end only the worker holds, and also has ``PR_SET_PDEATHSIG`` for the
  forkserver's end), so no job outlives the worker that would report it;
* **GPUs**: a job that asks for none sees none (``CUDA_VISIBLE_DEVICES`` empty); one that
  asks for a GPU sees the allocation's and claims one of them (paravg.devices: a lock per
  GPU, scoped to the SLURM job), the main snakemake never sending more GPU jobs than the
  allocation has GPUs.

Files are written to a temporary name and renamed, so neither side reads half a file.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import multiprocessing.connection
import os
import signal
import socket
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

#: Seconds between two rewrites of ``heartbeat``.
HEARTBEAT_S = 1.0
#: A child still running this long after its SIGTERM at its time limit gets SIGKILL.
KILL_WAIT_S = 10.0
#: An idle worker whose main snakemake's counter has not changed for this long stops.
ORPHAN_S = 120.0
#: The benchmark measures returned to the main snakemake (``snakemake.benchmark``).
BENCHMARK_FIELDS = (
    "running_time",
    "max_rss",
    "max_vms",
    "max_uss",
    "max_pss",
    "io_in",
    "io_out",
    "cpu_usage",
    "cpu_time",
    "data_collected",
)


def write_json(path: Path, data: dict) -> None:
    """Write ``data`` to ``path`` through a hidden temporary name and a rename."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data))
    os.replace(tmp, path)


def write_counter(path: Path, value: int) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(str(value))
    os.replace(tmp, path)


def read_counter(path: Path) -> int | None:
    try:
        return int(path.read_text())
    except (OSError, ValueError):
        return None


@dataclass
class Child:
    """A running job: its process, its deadline and its benchmark."""

    id: str
    process: multiprocessing.process.BaseProcess
    deadline: float
    bench: contextlib.ExitStack | None = None
    record: object = None
    terminated_at: float | None = None
    started_at: float = field(default_factory=time.time)


class Worker:
    """The loop of one worker allocation (see the module docstring)."""

    def __init__(self, directory: Path, poll_s: float = 0.05, orphan_s: float = ORPHAN_S):
        self.dir = directory
        self.jobs, self.done = directory / "jobs", directory / "done"
        self.poll_s, self.orphan_s = poll_s, orphan_s
        self.running: dict[str, Child] = {}
        self.seen: set[str] = set()
        self.gpus = os.environ.get("CUDA_VISIBLE_DEVICES", "")
        self.host = socket.gethostname()
        self.context = None

    def log(self, message: str) -> None:
        print(f"[{time.strftime('%H:%M:%S')}] paravg warm worker: {message}", flush=True)

    def start(self) -> None:
        import snakemake_executor_plugin_paravg_warm as warm

        self.warm = warm
        self.jobs.mkdir(parents=True, exist_ok=True)
        self.done.mkdir(parents=True, exist_ok=True)
        self.context = warm.start_forkserver()
        # every child reads this pipe and dies at its EOF: when this process dies
        self.lifeline, self.lifeline_w = self.context.Pipe(duplex=False)
        info = {
            "host": self.host,
            "pid": os.getpid(),
            "slurm_job_id": os.environ.get("SLURM_JOB_ID"),
            "cuda_visible_devices": self.gpus,
            "started_at": time.time(),
        }
        write_json(self.dir / "ready.json", info)
        self.log(f"ready: {info}")

    def launch(self, job_id: str) -> None:
        """Start the job of ``jobs/<job_id>.json`` in a fork of the forkserver."""
        self.seen.add(job_id)
        try:
            request = json.loads((self.jobs / f"{job_id}.json").read_text())
            environment = dict(request["env"])
            if not request.get("gpus"):
                environment["CUDA_VISIBLE_DEVICES"] = ""
            process = self.context.Process(
                target=self.warm._run_file,
                args=(request["script"], environment, request["cwd"], self.lifeline),
            )
        except (OSError, ValueError, KeyError) as e:
            self.finish_with(job_id, {"exitcode": 1, "error": f"unreadable request: {e}"})
            return
        with self.warm._without_main_module():
            process.start()
        child = Child(job_id, process, time.monotonic() + float(request["runtime_s"]))
        if request.get("benchmark"):
            from snakemake.benchmark import BenchmarkRecord

            child.record = BenchmarkRecord()
            child.bench = contextlib.ExitStack()
            child.bench.enter_context(self.warm.benchmarked_child(process.pid, child.record))
        self.running[job_id] = child
        self.log(f"job {job_id} ({request.get('label', '')}): pid {process.pid}")

    def finish_with(self, job_id: str, result: dict) -> None:
        result.setdefault("host", self.host)
        write_json(self.done / f"{job_id}.json", result)
        with contextlib.suppress(FileNotFoundError):
            (self.jobs / f"{job_id}.json").unlink()

    def reap(self, child: Child) -> None:
        child.process.join()
        if child.bench is not None:
            child.bench.close()
        result = {
            "exitcode": child.process.exitcode,
            "timed_out": child.terminated_at is not None,
            "pid": child.process.pid,
            "seconds": time.time() - child.started_at,
        }
        if child.record is not None:
            result["benchmark"] = {f: getattr(child.record, f, None) for f in BENCHMARK_FIELDS}
        child.process.close()
        del self.running[child.id]
        self.finish_with(child.id, result)
        self.log(f"job {child.id}: exit status {result['exitcode']}")

    def enforce_limits(self, now: float) -> None:
        for child in self.running.values():
            if child.terminated_at is None and now >= child.deadline:
                self.log(f"job {child.id}: runtime limit reached; SIGTERM")
                child.terminated_at = now
                child.process.terminate()
            elif child.terminated_at is not None and now >= child.terminated_at + KILL_WAIT_S:
                child.process.kill()

    def serve(self) -> int:
        self.start()
        try:
            return self.loop()
        finally:
            # wait for the forkserver: its CPU time and its children's then count for
            # this batch script's (sacct's TotalCPU), as a job's own process would
            self.warm.stop_forkserver()

    def loop(self) -> int:
        beat, next_beat = 0, 0.0
        main_alive, main_changed = None, time.monotonic()
        while True:
            now = time.monotonic()
            if now >= next_beat:
                beat += 1
                write_counter(self.dir / "heartbeat", beat)
                next_beat = now + HEARTBEAT_S
                alive = read_counter(self.dir / "main.alive")
                if alive != main_alive:
                    main_alive, main_changed = alive, now
                if not self.running and now - main_changed > self.orphan_s:
                    self.log(f"the main snakemake has been silent for {self.orphan_s:g} s; stop")
                    return 0
            if (self.dir / "stop").exists():
                for child in list(self.running.values()):
                    child.process.kill()
                    self.reap(child)
                self.log("stopped by the main snakemake")
                return 0
            for entry in sorted(os.listdir(self.jobs)):
                if entry.endswith(".json") and not entry.startswith("."):
                    job_id = entry[: -len(".json")]
                    if job_id not in self.seen:
                        self.launch(job_id)
            for child in list(self.running.values()):
                if child.process.exitcode is not None:
                    self.reap(child)
            self.enforce_limits(now)
            sentinels = [c.process.sentinel for c in self.running.values()]
            if sentinels:
                multiprocessing.connection.wait(sentinels, timeout=self.poll_s)
            else:
                time.sleep(self.poll_s)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("directory", type=Path)
    parser.add_argument("--poll-seconds", type=float, default=0.05)
    parser.add_argument("--orphan-seconds", type=float, default=ORPHAN_S)
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))
    worker = Worker(args.directory.resolve(), args.poll_seconds, args.orphan_seconds)
    return worker.serve()


if __name__ == "__main__":
    sys.exit(main())
