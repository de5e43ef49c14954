"""paravg.devices: CPU fallback, one GPU per training job via lock files, scheduler scoping.

The machine running these tests has no GPU: GPU counts are faked by monkeypatching
``cuda_device_count`` (torch.device("cuda", i) objects need no CUDA).
"""

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time

import pytest
import torch

from paravg import devices
from paravg.devices import DeviceUnavailableError, select_device, training_gpus
from paravg.errors import ConfigError, HostError, ParavgError


@pytest.fixture
def locks(tmp_path, monkeypatch):
    """A private lock dir, no scheduler and no CUDA_VISIBLE_DEVICES in the environment."""
    lock_dir = tmp_path / "locks"
    monkeypatch.setenv(devices.LOCK_DIR_ENV, str(lock_dir))
    for var in ("SLURM_JOB_ID", "CUDA_VISIBLE_DEVICES"):
        monkeypatch.delenv(var, raising=False)
    return lock_dir


@pytest.fixture
def fake_gpus(monkeypatch, locks):
    """Pretend torch sees ``n`` GPUs; returns a setter."""

    def set_count(n):
        monkeypatch.setattr(devices, "cuda_device_count", lambda: n)

    set_count(2)
    return set_count


def test_auto_on_a_machine_without_cuda_is_cpu_and_takes_no_lock(locks):
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    with select_device() as device:
        assert device == torch.device("cpu")
    assert not locks.exists()


def test_cpu_preference_ignores_gpus(fake_gpus, locks):
    with select_device("cpu") as device:
        assert device.type == "cpu"
    assert not locks.exists()


def test_cuda_preference_without_gpu_is_a_clear_error(fake_gpus):
    fake_gpus(0)
    with pytest.raises(DeviceUnavailableError, match="'cuda' was requested"), select_device("cuda"):
        pass


def test_unknown_preference_is_a_config_error():
    expected = r"trainer\.device = 'gpu'; expected one of auto, cpu, cuda"
    with pytest.raises(ConfigError, match=expected), select_device("gpu"):
        pass


def test_concurrent_claims_get_different_gpus_and_exit_releases(fake_gpus, locks):
    fake_gpus(3)
    with select_device() as a, select_device("cuda") as b, select_device() as c:
        assert [a, b, c] == [torch.device("cuda", i) for i in range(3)]
        assert sorted(p.name for p in (locks / "host").iterdir()) == [
            "gpu-0.lock",
            "gpu-1.lock",
            "gpu-2.lock",
        ]
    with select_device() as again:
        assert again == torch.device("cuda", 0)


def test_an_exception_in_the_block_releases_the_gpu(fake_gpus):
    with pytest.raises(RuntimeError, match="training diverged"), select_device() as device:
        assert device.index == 0
        raise RuntimeError("training diverged")
    with select_device() as device:
        assert device.index == 0


def test_all_gpus_busy_times_out_with_advice(fake_gpus):
    fake_gpus(1)
    with select_device():
        t0 = time.monotonic()
        with (
            pytest.raises(DeviceUnavailableError, match="--resources gpu=N"),
            select_device(timeout_s=0.3, poll_s=0.05),
        ):
            pass
        assert time.monotonic() - t0 >= 0.3


def test_a_waiting_job_gets_the_gpu_when_it_is_released(fake_gpus):
    fake_gpus(1)
    held = select_device()
    assert held.__enter__().index == 0
    threading.Timer(0.3, held.__exit__, args=(None, None, None)).start()
    with select_device(timeout_s=10, poll_s=0.05) as device:
        assert device.index == 0


def test_locks_are_named_by_the_physical_gpus_in_cuda_visible_devices(
    fake_gpus, locks, monkeypatch
):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,GPU-ab:cd")
    with select_device() as a, select_device() as b:
        assert (a.index, b.index) == (0, 1)
        assert sorted(p.name for p in (locks / "host").iterdir()) == [
            "gpu-3.lock",
            "gpu-GPU-ab_cd.lock",
        ]


def test_a_slurm_allocation_uses_its_own_gpu_even_if_the_host_lock_is_held(
    fake_gpus, locks, monkeypatch
):
    fake_gpus(1)
    with select_device() as host_job:  # a local job holds host GPU 0
        assert host_job.index == 0
        # SLURM renumbers: the allocation's GPU is also "0", but it is this job's own.
        monkeypatch.setenv("SLURM_JOB_ID", "42")
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
        with select_device(timeout_s=0) as slurm_job:
            assert slurm_job == torch.device("cuda", 0)
        assert (locks / "slurm-42" / "gpu-0.lock").exists()


_HOLDER = textwrap.dedent(
    """
    import sys, time
    from paravg import devices
    devices.cuda_device_count = lambda: 2
    with devices.select_device() as device:
        print(device.index, flush=True)
        time.sleep(60)
    """
)


def _start_holder():
    proc = subprocess.Popen(
        [sys.executable, "-c", _HOLDER], stdout=subprocess.PIPE, text=True, env=os.environ
    )
    line = proc.stdout.readline()
    assert line.strip(), f"holder process died (rc={proc.poll()})"
    return proc, int(line)


def test_processes_get_different_gpus_and_a_killed_process_frees_its_gpu(fake_gpus, locks):
    first, index_first = _start_holder()
    try:
        second, index_second = _start_holder()
        try:
            assert {index_first, index_second} == {0, 1}
            with pytest.raises(DeviceUnavailableError), select_device(timeout_s=0):
                pass
        finally:
            second.kill()
            second.wait()
        # SIGKILL: no cleanup code runs, the kernel drops the flock.
        with select_device(timeout_s=5, poll_s=0.05) as device:
            assert device.index == index_second
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait()
    with select_device(timeout_s=0) as a, select_device(timeout_s=0) as b:
        assert {a.index, b.index} == {0, 1}


def test_lock_dir_that_cannot_be_created_is_a_clear_error(fake_gpus, tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    monkeypatch.setenv(devices.LOCK_DIR_ENV, str(blocker / "locks"))
    with pytest.raises(DeviceUnavailableError, match="PARAVG_GPU_LOCK_DIR"), select_device():
        pass


# ------------------------------------------------------------------ the train rule's resources
@pytest.fixture
def driver(monkeypatch):
    """Pretend this host has (True) or lacks (False) nvidia-smi; returns a setter."""

    def set_driver(present: bool):
        path = "/usr/bin/nvidia-smi" if present else None
        real = devices.shutil.which
        monkeypatch.setattr(
            devices.shutil, "which", lambda name: path if name == "nvidia-smi" else real(name)
        )

    return set_driver


@pytest.mark.parametrize("present", [True, False])
def test_training_gpus_follows_trainer_device_and_the_driver(driver, present):
    driver(present)
    assert devices.nvidia_driver_installed() is present
    assert training_gpus("cuda") == 1
    assert training_gpus("cpu") == 0
    assert training_gpus("auto") == int(present)


def test_training_gpus_rejects_an_unknown_device():
    with pytest.raises(ConfigError, match=r"trainer\.device = 'gpu'; expected one of auto"):
        training_gpus("gpu")


@pytest.mark.parametrize("present, gpus", [(True, 0), (False, 2)])
def test_auto_warns_when_torch_and_the_reservation_disagree(
    driver, fake_gpus, locks, caplog, present, gpus
):
    driver(present)
    fake_gpus(gpus)
    with caplog.at_level("WARNING", logger="paravg.devices"), select_device():
        pass
    assert "trainer.device 'auto'" in caplog.text
    assert ("CPU-only torch" if present else "nvidia-smi is not on the PATH") in caplog.text


@pytest.mark.parametrize("present, gpus", [(True, 2), (False, 0)])
def test_auto_is_silent_when_they_agree(driver, fake_gpus, locks, caplog, present, gpus):
    driver(present)
    fake_gpus(gpus)
    with caplog.at_level("WARNING", logger="paravg.devices"), select_device():
        pass
    assert "trainer.device" not in caplog.text


def test_device_errors_are_host_errors_and_the_module_needs_no_torch():
    assert issubclass(DeviceUnavailableError, HostError)
    assert issubclass(HostError, ParavgError) and issubclass(HostError, RuntimeError)
    code = "import sys, paravg.devices; assert 'torch' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)
