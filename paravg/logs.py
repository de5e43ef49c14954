"""Logging set-up for rule scripts: one log file per job (``logs/<rule>/<wildcards>.log``).

Every job's log ends with its own resources, measured exactly by the process itself when
it ends (Snakemake's ``benchmark:`` samples every 0.5 s and misses short jobs)::

    job resources: cpu_s=12.34 max_rss_mb=456.7 children_max_rss_mb=0.0

``cpu_s``: user + system CPU seconds of the job's process and the children it waited for
(``getrusage``); ``max_rss_mb``: its peak resident set, ``VmHWM`` of ``/proc/self/status``
(``ru_maxrss`` where there is no ``/proc``), in MiB; ``children_max_rss_mb``: the peak of
its largest waited-for child process (the demo corpus's synthesis workers). A job forked
from paravg-warm's forkserver starts with the RSS of the pages it shares with the forkserver.
"""

from __future__ import annotations

import atexit
import logging
import multiprocessing.util
import os
import re
import resource
import sys
import traceback
from pathlib import Path

#: The resource line's message (a prefix of the log line, after logging's own fields).
RESOURCES = "job resources:"
_RESOURCES_RE = re.compile(
    r"job resources: cpu_s=([0-9.]+) max_rss_mb=([0-9.]+)(?: children_max_rss_mb=([0-9.]+))?"
)
_registered_pid = 0  # the process whose end reports (a fork registers anew)
_reported_pid = 0


def setup_logging(log_path: str | None, level: int = logging.INFO) -> None:
    """Send ``logging`` output of the package to the job's log file and to stderr, and
    the job's resource line to the log file when the process ends.

    A job that ends with a user error (:class:`paravg.errors.ParavgError`) shows its
    message alone on stderr, where snakemake prints it; the traceback goes to the log file.
    Any other exception (a bug) shows its traceback on both."""
    fmt = "%(asctime)s %(levelname)s %(name)s: %(message)s"
    screen = logging.StreamHandler(sys.stderr)
    screen.addFilter(lambda record: not getattr(record, "file_only", False))
    handlers: list[logging.Handler] = [screen]
    if log_path:
        Path(log_path).parent.mkdir(parents=True, exist_ok=True)
        file_handler = logging.FileHandler(log_path, mode="w")
        file_handler.setFormatter(_WithUserErrorTraceback(fmt))
        handlers.append(file_handler)
    logging.basicConfig(level=level, format=fmt, handlers=handlers, force=True)
    sys.excepthook = _log_uncaught
    report_resources_at_exit()


def job_resources() -> dict[str, float]:
    """This process's CPU seconds (with its waited-for children) and peak RSS in MiB."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime
    return {
        "cpu_s": cpu,
        "max_rss_mb": _peak_rss_kib(own) / 1024.0,
        "children_max_rss_mb": _kib(kids.ru_maxrss) / 1024.0,
    }


def _peak_rss_kib(own: resource.struct_rusage) -> float:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return float(line.split()[1])
    except OSError:
        pass
    return _kib(own.ru_maxrss)


def _kib(ru_maxrss: int) -> float:
    return ru_maxrss / 1024.0 if sys.platform == "darwin" else float(ru_maxrss)


def read_job_resources(log_path: str | Path) -> dict[str, float] | None:
    """The resource line of a job's log (the last one), or None if it has none."""
    found = None
    try:
        text = Path(log_path).read_text(errors="replace")
    except OSError:
        return None
    for m in _RESOURCES_RE.finditer(text):
        found = {
            "cpu_s": float(m.group(1)),
            "max_rss_mb": float(m.group(2)),
            "children_max_rss_mb": float(m.group(3) or 0.0),
        }
    return found


def _log_resources() -> None:
    global _reported_pid
    if _reported_pid == os.getpid():
        return
    _reported_pid = os.getpid()
    r = job_resources()
    logging.getLogger("paravg.logs").info(
        "%s cpu_s=%.2f max_rss_mb=%.1f children_max_rss_mb=%.1f",
        RESOURCES,
        r["cpu_s"],
        r["max_rss_mb"],
        r["children_max_rss_mb"],
        extra={"file_only": True},  # the log file's, not snakemake's screen
    )


def report_resources_at_exit() -> None:
    """Log the resource line when the process ends (:func:`setup_logging` calls it; a
    script with its own logging set-up calls it itself): at interpreter exit (a fresh Python
    per job) or when a ``multiprocessing`` child ends (paravg-warm's forked jobs end with
    ``os._exit`` after the finalizers, skipping ``atexit``); once either way."""
    global _registered_pid
    if _registered_pid == os.getpid():
        return
    _registered_pid = os.getpid()
    atexit.register(_log_resources)
    multiprocessing.util.Finalize(None, _log_resources, exitpriority=100)


class _WithUserErrorTraceback(logging.Formatter):
    """The log file's format: a user error's record carries its traceback for it alone."""

    def format(self, record: logging.LogRecord) -> str:
        text = super().format(record)
        tb = getattr(record, "user_error", None)
        if tb:
            text += "\n" + "".join(traceback.format_exception(*tb)).rstrip()
        return text


def _log_uncaught(exc_type, exc, tb) -> None:
    """Put the error that ends a job into its log file too, not only on stderr."""
    from paravg.errors import ParavgError

    if issubclass(exc_type, KeyboardInterrupt):
        sys.__excepthook__(exc_type, exc, tb)
        return
    log = logging.getLogger("paravg")
    if issubclass(exc_type, ParavgError):
        log.critical("%s: %s", exc_type.__name__, exc, extra={"user_error": (exc_type, exc, tb)})
    else:
        log.critical("%s: %s", exc_type.__name__, exc, exc_info=(exc_type, exc, tb))
