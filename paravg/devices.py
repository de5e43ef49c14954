"""Which device a training job runs on: a GPU of its own, or the CPU.

Kaldi's ``steps/nnet3/train_dnn.py`` gives each of the N parallel jobs of an iteration its
own GPU through the queue (``--gpu 1``) and, on one machine, relies on the GPUs being in
compute-exclusive mode so that ``nnet3-train`` picks a free one. Here the same guarantee
comes from lock files, and works whatever mode the GPUs are in:

- **A scheduler assigned the GPU** (SLURM with ``--gpus``/``--gres``): it sets
  ``CUDA_VISIBLE_DEVICES`` to the job's own GPU(s), so the job only sees its allocation.
  Locks are then scoped to the allocation (``slurm-<job id>/``), never shared with other jobs
  on the node, so a job never waits for a GPU that belongs to someone else.
- **A host with several GPUs and no scheduler** (``snakemake --cores N``): every training job
  claims one visible GPU by taking an exclusive ``flock`` on ``<lock dir>/host/gpu-<id>.lock``,
  where ``<id>`` is the GPU's entry in ``CUDA_VISIBLE_DEVICES`` (its physical index or UUID)
  or its index when that is unset. The lock dir is ``$PARAVG_GPU_LOCK_DIR`` or
  ``/tmp/paravg-gpu-locks``. The kernel drops a flock when its process exits, so a crashed
  or killed job never leaves a GPU claimed. When every GPU is taken the job waits for one;
  ``snakemake --resources gpu=N`` (with ``gpu: 1`` on the training rule) keeps at most N
  training jobs running, so none waits.
- **No CUDA** (a CPU-only machine or CPU-only torch): the CPU, with no configuration.

Whether a training job trains on a GPU of this host is decided twice: by the rule, before
the job runs, to reserve ``resources: gpu`` (:func:`training_gpus`, torch-free: an NVIDIA
driver is installed, i.e. ``nvidia-smi`` is on the PATH), and by the job itself
(:func:`select_device`: torch sees a GPU). Both follow ``trainer.device`` the same way
(``cuda``: a GPU, ``cpu``: none, ``auto``: a GPU when this host has one); when the two
answers for ``auto`` differ on a host (a driver but a CPU-only torch build, or GPUs torch
sees without ``nvidia-smi``) the job says so in its log. This module imports torch only
when a device is selected.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import logging
import os
import re
import shutil
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from paravg.errors import ConfigError, HostError

if TYPE_CHECKING:
    import torch

LOCK_DIR_ENV = "PARAVG_GPU_LOCK_DIR"
DEFAULT_LOCK_DIR = "/tmp/paravg-gpu-locks"
PREFERENCES = ("auto", "cpu", "cuda")

logger = logging.getLogger(__name__)


class DeviceUnavailableError(HostError):
    """The requested device cannot be used (no CUDA, or no GPU became free in time)."""


def check_preference(device: str) -> None:
    """Raise :class:`ConfigError` unless ``device`` is one of :data:`PREFERENCES`."""
    if device not in PREFERENCES:
        raise ConfigError(f"trainer.device = {device!r}; expected one of {', '.join(PREFERENCES)}")


def nvidia_driver_installed() -> bool:
    """Whether an NVIDIA driver is installed on this host: ``nvidia-smi``, which is
    installed with it, is on the PATH. Torch-free, so that a rule can ask it."""
    return shutil.which("nvidia-smi") is not None


def training_gpus(device: str) -> int:
    """GPUs a training job of an experiment with ``trainer.device = device`` takes on
    this host (the train rule's ``resources: gpu``): 1 when it trains on a GPU, else 0.

    ``"cuda"``: 1; ``"cpu"``: 0; ``"auto"``: 1 when an NVIDIA driver is installed
    (:func:`nvidia_driver_installed`), else 0. Torch-free; :func:`select_device` warns
    when torch's answer for ``"auto"`` differs from this one.
    """
    check_preference(device)
    if device == "cuda":
        return 1
    if device == "auto":
        return int(nvidia_driver_installed())
    return 0


def cuda_device_count() -> int:
    """Number of GPUs this process can use (0 when torch has no working CUDA)."""
    import torch

    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def gpu_ids(count: int) -> list[str]:
    """Stable names of the ``count`` visible GPUs, used to name their lock files.

    The entries of ``CUDA_VISIBLE_DEVICES`` (physical indices or UUIDs) when it lists at
    least ``count`` of them, else the indices ``0 .. count-1``; characters other than
    letters, digits, ``-`` and ``_`` become ``_``.
    """
    visible = [v.strip() for v in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",")]
    visible = [v for v in visible if v]
    names = visible[:count] if len(visible) >= count else [str(i) for i in range(count)]
    return [re.sub(r"[^A-Za-z0-9_-]", "_", name) for name in names]


def lock_namespace() -> str:
    """``slurm-<job id>`` inside a SLURM allocation that set CUDA_VISIBLE_DEVICES, else ``host``.

    SLURM renumbers the GPUs a job sees (with device cgroups every job's GPU may be ``0``), so
    locks of different allocations must not share names.
    """
    job = os.environ.get("SLURM_JOB_ID")
    if job and os.environ.get("CUDA_VISIBLE_DEVICES"):
        return f"slurm-{re.sub(r'[^A-Za-z0-9_-]', '_', job)}"
    return "host"


def lock_dir() -> Path:
    """The directory holding the per-GPU lock files: ``$PARAVG_GPU_LOCK_DIR`` or the default."""
    return Path(os.environ.get(LOCK_DIR_ENV) or DEFAULT_LOCK_DIR)


def _make_shared_dir(path: Path) -> None:
    """Create ``path`` (and parents) writable by every user, like /tmp (mode 1777)."""
    missing = []
    for p in (path, *path.parents):
        if p.exists():
            break
        missing.append(p)
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise DeviceUnavailableError(
            f"cannot create the GPU lock directory {path}: {e}; set ${LOCK_DIR_ENV} "
            "to a writable directory shared by the jobs of this host"
        ) from e
    for p in missing:
        with contextlib.suppress(PermissionError):
            p.chmod(0o1777)


def _try_lock(path: Path) -> int | None:
    """Take an exclusive non-blocking flock on ``path``; the open fd, or None if held."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    except OSError as e:
        raise DeviceUnavailableError(
            f"cannot open the GPU lock file {path}: {e}; set ${LOCK_DIR_ENV} to a "
            "directory every user of this host can write"
        ) from e
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as e:
        os.close(fd)
        if e.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
            return None
        raise
    with contextlib.suppress(PermissionError):
        os.fchmod(fd, 0o666)
    # Who holds it, for a human looking at the lock dir (the lock itself is the flock).
    os.ftruncate(fd, 0)
    os.write(fd, f"pid={os.getpid()} host={socket.gethostname()}\n".encode())
    return fd


@contextlib.contextmanager
def claim_gpu(count: int, *, timeout_s: float | None = None, poll_s: float = 1.0) -> Iterator[int]:
    """Claim one of ``count`` visible GPUs for the duration of the block; yield its index.

    Tries the GPUs in index order and takes the first whose lock is free; when all are
    held, retries every ``poll_s`` seconds, for at most ``timeout_s`` seconds (None: wait
    forever), then raises DeviceUnavailableError. The lock is released when the block
    ends, by an exception too, and by the kernel if the process dies.
    """
    if count < 1:
        raise DeviceUnavailableError("no GPU to claim (0 visible)")
    directory = lock_dir() / lock_namespace()
    _make_shared_dir(directory)
    paths = [directory / f"gpu-{name}.lock" for name in gpu_ids(count)]
    start = time.monotonic()
    waited = False
    while True:
        for index, path in enumerate(paths):
            fd = _try_lock(path)
            if fd is None:
                continue
            if waited:
                logger.info("GPU %d became free after %.1f s", index, time.monotonic() - start)
            try:
                yield index
            finally:
                os.close(fd)  # closing the only descriptor drops the flock
            return
        if timeout_s is not None and time.monotonic() - start >= timeout_s:
            raise DeviceUnavailableError(
                f"all {count} GPUs stayed locked for {timeout_s:g} s (locks in {directory}); "
                "bound concurrent training jobs with `snakemake --resources gpu=N`"
            )
        if not waited:
            logger.info("all %d GPUs are in use (locks in %s); waiting", count, directory)
            waited = True
        time.sleep(poll_s)


@contextlib.contextmanager
def select_device(
    preference: str = "auto", *, timeout_s: float | None = None, poll_s: float = 1.0
) -> Iterator[torch.device]:
    """Yield the torch device a training job should use, holding its GPU for the block.

    ``preference``: ``"auto"`` (a free GPU if CUDA works, else the CPU), ``"cpu"``, or
    ``"cuda"`` (a free GPU; DeviceUnavailableError if CUDA is unavailable). See the module
    docstring for how GPUs are shared; ``timeout_s``/``poll_s`` are passed to claim_gpu.
    """
    import torch

    check_preference(preference)
    count = 0 if preference == "cpu" else cuda_device_count()
    if preference == "auto":
        _warn_if_reservation_differs(count)
    if count == 0:
        if preference == "cuda":
            raise DeviceUnavailableError(
                "device 'cuda' was requested but torch sees no GPU (torch "
                f"{torch.__version__}, torch.version.cuda={torch.version.cuda}, "
                f"CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES')!r}); "
                "use 'auto' to fall back to the CPU"
            )
        logger.info("using the CPU")
        yield torch.device("cpu")
        return
    with claim_gpu(count, timeout_s=timeout_s, poll_s=poll_s) as index:
        device = torch.device("cuda", index)
        if torch.cuda.is_available():
            torch.cuda.set_device(device)
        logger.info("using %s (GPU %s of %d visible)", device, gpu_ids(count)[index], count)
        yield device


def _warn_if_reservation_differs(count: int) -> None:
    """Log when the GPU this job found (``count`` > 0 or not) is not what
    :func:`training_gpus` reserved for ``"auto"`` on this host."""
    reserved = training_gpus("auto")
    if reserved and not count:
        logger.warning(
            "trainer.device 'auto': this host has an NVIDIA driver (nvidia-smi), so the train "
            "rule reserves a GPU here (resources gpu=1), but torch sees none (a CPU-only torch "
            "build?); training on the CPU. Install a CUDA build of torch, or set "
            "trainer.device: cpu"
        )
    elif count and not reserved:
        logger.warning(
            "trainer.device 'auto': torch sees %d GPU(s) but nvidia-smi is not on the PATH, so "
            "the train rule reserves no GPU here (resources gpu=0) and `--resources gpu=N` "
            "does not bound the training jobs; set trainer.device: cuda to reserve one",
            count,
        )
