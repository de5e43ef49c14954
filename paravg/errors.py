"""The one error hierarchy of paravg: every error a user can cause derives from
:class:`ParavgError`.

A user error is raised once, at the boundary where the user's file is read, with the
user's file, the line or utterance and what was expected in its message; callers that
catch errors catch these classes, never a new class per module. Programming errors
(a bug of paravg's) stay ordinary Python exceptions.

The classes also derive from the built-in exception a caller would expect (``ValueError``
for bad values, ``OSError`` for unreadable files), so code written against those keeps
working.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator


class ParavgError(Exception):
    """Base of every error a user can cause (bad config, bad data, damaged file)."""


class ConfigError(ParavgError, ValueError):
    """A configuration value that the schema or a cross-key rule rejects (names the key)."""


class DataError(ParavgError, ValueError):
    """Bad input data: a Kaldi data dir, lang dir, graph, alignment or feature file that
    does not hold what is expected (names the file and the line or utterance)."""


class ModelFileError(ParavgError, OSError):
    """A model or state file that is missing, truncated or corrupt (names the file, the
    rule that produces it and how to rebuild it)."""


class TrainingError(ParavgError, RuntimeError):
    """Training cannot go on with the data it has (e.g. every job of an iteration
    diverged); names the iteration and the jobs."""


class HostError(ParavgError, RuntimeError):
    """This host cannot provide what the run asks of it: an external program that is
    missing or fails (a TTS engine of the demo corpus), or a device (``trainer.device:
    cuda`` with no GPU visible, GPU lock files that cannot be written or stay taken). Names
    the program or device, its own message and what to install, set or change."""


@contextlib.contextmanager
def user_error_ends_the_run() -> Iterator[None]:
    """Around the start-up checks of the Snakefile (config validation, the DAG's plans and
    data dirs): a user error ends snakemake with its message alone on stderr, prefixed by
    its class (``ConfigError: decode.min_active (300) must not exceed ...``), and exit
    status 1, without Snakemake's ``in file ..., line ...`` frame and stack lines.

    Only for code run while the Snakefile is parsed, before any job starts and before
    Snakemake takes its lock: :class:`SystemExit` is what ends it then. (An input function
    evaluated later, e.g. after a checkpoint, must not raise it: Snakemake's scheduler reads
    SystemExit as Ctrl-C and drops the message.)"""
    try:
        yield
    except ParavgError as exc:
        raise SystemExit(f"{type(exc).__name__}: {exc}") from None


@contextlib.contextmanager
def user_error_said_first() -> Iterator[None]:
    """Around an input function (evaluated while Snakemake builds its DAG, or updates it
    after a checkpoint, with jobs running and its lock taken): a user error is printed
    first as the one line it is, ``ConfigError: experiment 'default': ...``, then re-raised.

    Snakemake has no way to end a run from there with the message alone: it wraps any
    exception of an input function in its ``InputFunctionException ... Traceback:`` frame,
    and reads :class:`SystemExit` as Ctrl-C and drops the message. So the line comes first,
    the frame after it. Checks that can run at start-up run there instead
    (:func:`user_error_ends_the_run`); what needs the egs plan (the number of archives) can
    only be checked once the egs checkpoint has run."""
    try:
        yield
    except ParavgError as exc:
        print(f"{type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
        raise
