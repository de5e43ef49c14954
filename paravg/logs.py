"""Logging set-up for rule scripts: one log file per job (``logs/<rule>/<wildcards>.log``)."""

from __future__ import annotations

import logging
import sys
from pathlib import Path


def setup_logging(log_path: str | None, level: int = logging.INFO) -> None:
    """Send ``logging`` output of the package to the job's log file and to stderr."""
    handlers: list[logging.Handler] = [logging.StreamHandler(sys.stderr)]
    if log_path:
        Path(log_path).parent.mkdir(parents=True, exist_ok=True)
        handlers.append(logging.FileHandler(log_path, mode="w"))
    logging.basicConfig(
        level=level,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        handlers=handlers,
        force=True,
    )
    sys.excepthook = _log_uncaught


def _log_uncaught(exc_type, exc, tb) -> None:
    """Put the error that ends a job into its log file too, not only on stderr."""
    if issubclass(exc_type, KeyboardInterrupt):
        sys.__excepthook__(exc_type, exc, tb)
        return
    logging.getLogger("paravg").critical(
        "%s: %s", exc_type.__name__, exc, exc_info=(exc_type, exc, tb)
    )
