"""Logging set-up for rule scripts: one log file per job (``logs/<rule>/<wildcards>.log``)."""

from __future__ import annotations

import logging
import sys
import traceback
from pathlib import Path


def setup_logging(log_path: str | None, level: int = logging.INFO) -> None:
    """Send ``logging`` output of the package to the job's log file and to stderr.

    A job that ends with a user error (:class:`paravg.errors.ParavgError`) shows its
    message alone on stderr, where snakemake prints it; the traceback goes to the log file.
    Any other exception (a bug) shows its traceback on both."""
    fmt = "%(asctime)s %(levelname)s %(name)s: %(message)s"
    handlers: list[logging.Handler] = [logging.StreamHandler(sys.stderr)]
    if log_path:
        Path(log_path).parent.mkdir(parents=True, exist_ok=True)
        file_handler = logging.FileHandler(log_path, mode="w")
        file_handler.setFormatter(_WithUserErrorTraceback(fmt))
        handlers.append(file_handler)
    logging.basicConfig(level=level, format=fmt, handlers=handlers, force=True)
    sys.excepthook = _log_uncaught


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
