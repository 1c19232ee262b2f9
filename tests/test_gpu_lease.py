"""GPU leases with real processes, real flocks and real kills."""

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from genjudge.gpu_lease import acquire, lease_status, resolve_inventory

HOLDER = textwrap.dedent("""
    import sys, time
    from genjudge.gpu_lease import acquire
    lease = acquire(int(sys.argv[1]), sys.argv[2].split(","), sys.argv[3], label="holder")
    print(lease.cuda_visible_devices, flush=True)
    time.sleep(600)
""")


def start_holder(n, inventory, lock_dir):
    env = {k: v for k, v in os.environ.items() if k not in ("CUDA_VISIBLE_DEVICES", "SLURM_JOB_ID")}
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(n), ",".join(inventory), str(lock_dir)],
                            stdout=subprocess.PIPE, text=True, env=env)
    devices = proc.stdout.readline().strip()
    return proc, devices


@pytest.fixture(autouse=True)
def no_outer_pinning(monkeypatch):
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)


def test_sigkilled_holder_releases_its_gpu_without_cleanup(tmp_path):
    proc, devices = start_holder(1, ["0"], tmp_path)
    try:
        assert devices == "0"
        assert "pid=" in lease_status(["0"], tmp_path)["0"]
        with pytest.raises(TimeoutError):
            acquire(1, ["0"], tmp_path, poll_seconds=0.05, timeout=0.5)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        t0 = time.monotonic()
        lease = acquire(1, ["0"], tmp_path, poll_seconds=0.05, timeout=10)
        assert lease.devices == ["0"] and os.environ["CUDA_VISIBLE_DEVICES"] == "0"
        assert time.monotonic() - t0 < 5
        lease.release()
    finally:
        proc.kill()
        proc.wait()


def test_two_gpu_lease_is_all_or_nothing_and_skips_held_devices(tmp_path):
    a, dev_a = start_holder(1, ["0", "1", "2", "3"], tmp_path)
    b, dev_b = start_holder(2, ["0", "1", "2", "3"], tmp_path)
    try:
        assert dev_a == "0" and dev_b == "1,2"
        lease = acquire(1, ["0", "1", "2", "3"], tmp_path, timeout=5)
        assert lease.devices == ["3"]
        with pytest.raises(TimeoutError):
            acquire(2, ["0", "1", "2", "3"], tmp_path, poll_seconds=0.05, timeout=0.5)
        lease.release()
        status = lease_status(["0", "1", "2", "3"], tmp_path)
        assert status["3"] is None and all(status[g] for g in "012")
    finally:
        for p in (a, b):
            p.kill()
            p.wait()


def test_inventory_is_limited_by_an_outer_cuda_visible_devices(monkeypatch):
    assert resolve_inventory([0, 1, 2, 3]) == ["0", "1", "2", "3"]
    assert resolve_inventory(2) == ["0", "1"]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,3")
    assert resolve_inventory([0, 1, 2, 3]) == ["2", "3"]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert resolve_inventory([0, 1, 2, 3]) == []


def test_inside_slurm_nothing_is_leased(monkeypatch, tmp_path):
    monkeypatch.setenv("SLURM_JOB_ID", "42")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    lease = acquire(1, ["0", "1"], tmp_path)
    assert lease.source == "slurm" and lease.devices == ["1"]
    assert not list(tmp_path.glob("gpu-*.lock"))


def test_no_gpus_runs_on_cpu_and_hides_nothing(tmp_path):
    lease = acquire(1, [], tmp_path)
    assert lease.source == "none" and lease.devices == []
