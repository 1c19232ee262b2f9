"""GPU leases with real processes, real flocks and real kills."""

import logging
import os
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import fake_nvidia_smi
import pytest
from conftest import wait_until
from fake_nvidia_smi import UUID0, UUID1

from genjudge.cluster.gpu_lease import acquire, lease_status, nvidia_smi_gpus, resolve_inventory

SRC = str(Path(__file__).resolve().parents[1] / "src")

HOLDER = textwrap.dedent("""
    import sys, time
    from genjudge.cluster.gpu_lease import acquire
    lease = acquire(int(sys.argv[1]), sys.argv[2].split(","), sys.argv[3], label=sys.argv[4])
    print(lease.cuda_visible_devices, flush=True)
    time.sleep(600)
""")

# Keeps taking one GPU for a short while, releasing it and coming back at once:
# shards arriving one after another.
CHURNER = textwrap.dedent("""
    import sys, time
    from genjudge.cluster.gpu_lease import acquire
    print("started", flush=True)
    while True:
        lease = acquire(1, sys.argv[1].split(","), sys.argv[2], label="churner", poll_seconds=0.01)
        time.sleep(0.3)
        lease.release()
""")

WAITER = textwrap.dedent("""
    import sys
    from genjudge.cluster.gpu_lease import acquire
    print("waiting", flush=True)
    lease = acquire(int(sys.argv[1]), sys.argv[2].split(","), sys.argv[3], label="waiter",
                    poll_seconds=0.05, queue_after=0)
    print(lease.cuda_visible_devices, flush=True)
""")


def child_env(**extra):
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("CUDA_VISIBLE_DEVICES", "SLURM_JOB_ID", "GENJUDGE_LEASE_TIMEOUT")
    }
    env["PYTHONPATH"] = SRC
    env.update(extra)
    return env


def start_holder(n, inventory, lock_dir, label="holder", python=sys.executable, **popen):
    proc = subprocess.Popen(
        [python, "-c", HOLDER, str(n), ",".join(inventory), str(lock_dir), label],
        stdout=subprocess.PIPE,
        text=True,
        env=child_env(),
        **popen,
    )
    devices = proc.stdout.readline().strip()
    return proc, devices


def stop(*procs):
    for p in procs:
        p.kill()
        p.wait()


@pytest.fixture(autouse=True)
def no_outer_pinning(monkeypatch):
    for name in ("CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "SLURM_JOB_ID", "GENJUDGE_LEASE_TIMEOUT"):
        monkeypatch.delenv(name, raising=False)
    yield
    # acquire() pins this process; a test module run after this one in the same process must not
    # inherit the pinning (monkeypatch then restores whatever was set before).
    for name in ("CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER"):
        os.environ.pop(name, None)


def test_sigkilled_holder_releases_its_gpu_without_cleanup(tmp_path):
    proc, devices = start_holder(1, ["0"], tmp_path)
    try:
        assert devices == "0"
        assert "pid=" in lease_status(["0"], tmp_path)["0"]
        with pytest.raises(TimeoutError):
            acquire(1, ["0"], tmp_path, poll_seconds=0.05, timeout=0.5)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        assert lease_status(["0"], tmp_path)["0"] is None
        # Free at the first look: a timeout of 0 tries once and raises rather than wait.
        lease = acquire(1, ["0"], tmp_path, poll_seconds=0.05, timeout=0)
        assert lease.devices == ["0"] and os.environ["CUDA_VISIBLE_DEVICES"] == "0"
        lease.release()
    finally:
        stop(proc)


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
        stop(a, b)


def test_inventory_is_limited_by_an_outer_cuda_visible_devices(monkeypatch):
    assert resolve_inventory([0, 1, 2, 3]) == ["0", "1", "2", "3"]
    assert resolve_inventory(2) == ["0", "1"]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,3")
    assert resolve_inventory([0, 1, 2, 3]) == ["2", "3"]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert resolve_inventory([0, 1, 2, 3]) == []


# --- device ids: indices, GPU UUIDs, MIG UUIDs ------------------------------------------------


def test_uuid_and_mig_ids_in_cuda_visible_devices_make_the_inventory(tmp_path, monkeypatch):
    smi = fake_nvidia_smi.install(tmp_path / "bin", monkeypatch)
    assert resolve_inventory("auto") == ["0", "1"]
    assert "--query-gpu=index,uuid" in smi.with_name("nvidia-smi.calls").read_text()
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", UUID1)
    assert resolve_inventory("auto") == [UUID1]  # the id the user gave, not an empty inventory
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", f"{UUID0[:12]},{UUID1}")  # CUDA takes unique prefixes
    assert resolve_inventory("auto") == [UUID0[:12], UUID1]
    mig = "MIG-9a7b3c2d-11e2-5f60-a1b2-c3d4e5f60718"
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", mig)
    assert resolve_inventory("auto") == [mig]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "GPU-00000000-dead-beef-0000-000000000000")
    assert resolve_inventory("auto") == []  # no such board
    # A configured inventory of indices, limited by an outer UUID: the board it names.
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", UUID1)
    assert resolve_inventory([0, 1]) == ["1"]


def test_a_uuid_lease_excludes_the_same_board_leased_by_index(tmp_path, monkeypatch):
    fake_nvidia_smi.install(tmp_path / "bin", monkeypatch)
    locks = tmp_path / "locks"
    proc, devices = start_holder(1, ["0", "1"], locks)  # another workflow names board 0 by index
    try:
        assert devices == "0"
        lease = acquire(1, [UUID0, UUID1], locks, timeout=5)
        assert lease.devices == [UUID1]
        assert os.environ["CUDA_VISIBLE_DEVICES"] == UUID1
        # Indices and meta ids name the boards nvidia-smi shows, not CUDA's fastest-first order.
        assert os.environ["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID"
        lease.release()
    finally:
        stop(proc)


def test_a_failing_nvidia_smi_is_reported_and_hides_every_gpu(tmp_path, monkeypatch, caplog):
    fake_nvidia_smi.install(
        tmp_path / "bin",
        monkeypatch,
        stdout="",
        exit_code=9,
        stderr="NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver",
    )
    with caplog.at_level(logging.WARNING, logger="genjudge.cluster.gpu_lease"):
        assert resolve_inventory("auto") == []
    assert any(r.levelno == logging.WARNING and "couldn't communicate" in r.getMessage() for r in caplog.records)
    caplog.clear()
    fake_nvidia_smi.install(tmp_path / "bin2", monkeypatch, sleep=5)
    with caplog.at_level(logging.WARNING, logger="genjudge.cluster.gpu_lease"):
        assert nvidia_smi_gpus(timeout=0.5) == []
    # The hang was cut by the timeout, not waited out.
    assert any(r.levelno == logging.WARNING and "did not answer within" in r.getMessage() for r in caplog.records)


def test_no_gpus_runs_on_cpu_and_hides_every_gpu(tmp_path, monkeypatch):
    lease = acquire(1, [], tmp_path)
    assert lease.source == "none" and lease.devices == []
    assert os.environ["CUDA_VISIBLE_DEVICES"] == ""  # not "every GPU of the machine"
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    lease = acquire(0, ["0", "1"], tmp_path)
    assert lease.source == "none" and os.environ["CUDA_VISIBLE_DEVICES"] == ""


# --- SLURM ------------------------------------------------------------------------------------


def test_under_the_slurm_executor_nothing_is_leased(monkeypatch, tmp_path):
    monkeypatch.setenv("SLURM_JOB_ID", "42")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    lease = acquire(1, ["0", "1"], tmp_path, slurm_executor=True)
    assert lease.source == "slurm" and lease.devices == ["1"]
    assert not list(tmp_path.glob("gpu-*.lock"))


def test_inside_an_allocation_with_the_local_executor_jobs_lease(monkeypatch, tmp_path):
    # snakemake started inside salloc/sbatch: SLURM_JOB_ID is set, but the jobs share the allocation's GPUs.
    monkeypatch.setenv("SLURM_JOB_ID", "42")
    first = acquire(1, ["0", "1"], tmp_path, slurm_executor=False)
    try:
        assert first.source == "lease" and first.devices == ["0"]
        second = acquire(1, ["0", "1"], tmp_path, slurm_executor=False, timeout=1)
        assert second.devices == ["1"]
        second.release()
    finally:
        first.release()


# --- the lock directory -----------------------------------------------------------------------


def test_the_default_lock_directory_does_not_follow_tmpdir(tmp_path):
    code = "from genjudge.cluster.gpu_lease import default_lock_dir; print(default_lock_dir())"
    env = child_env()
    env.pop("GENJUDGE_LOCK_DIR", None)
    out = [
        subprocess.run(
            [sys.executable, "-c", code],
            env={**env, "TMPDIR": str(tmp_path / d)},
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        for d in ("alice", "bob")
    ]
    (tmp_path / "alice").mkdir()
    (tmp_path / "bob").mkdir()
    out += [
        subprocess.run(
            [sys.executable, "-c", code],
            env={**env, "TMPDIR": str(tmp_path / d)},
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        for d in ("alice", "bob")
    ]
    assert len(set(out)) == 1 and not out[0].startswith(str(tmp_path)), out
    override = subprocess.run(
        [sys.executable, "-c", code],
        env={**env, "GENJUDGE_LOCK_DIR": str(tmp_path)},
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert override == str(tmp_path)


NOBODY = 65534


@pytest.fixture
def protected_regular():
    """fs.protected_regular=1 (systemd's default) for the test, where this machine lets us set it."""
    path = Path("/proc/sys/fs/protected_regular")
    try:
        old = path.read_text().strip()
    except OSError:
        pytest.skip("no fs.protected_regular here")
    if old != "1":
        try:
            path.write_text("1")
        except OSError:
            pytest.skip("fs.protected_regular is 0 and cannot be set here")
    try:
        yield
    finally:
        if old != "1":
            path.write_text(old)


@pytest.fixture
def shared_dir():
    """A mode-1777 directory that another user can reach (pytest's tmp_path is 0700)."""
    if os.geteuid() != 0:
        pytest.skip("needs root to act as a second user")
    d = Path(tempfile.mkdtemp(prefix="genjudge-locks-", dir="/tmp"))
    d.chmod(0o1777)
    yield d
    for p in d.iterdir():
        p.unlink()
    d.rmdir()


def python_for_nobody():
    """An interpreter another user may run (this one may live under root's 0700 home); the lease needs only the stdlib."""
    for candidate in (os.path.realpath(sys.executable), "/usr/bin/python3", "/usr/local/bin/python3"):
        try:
            subprocess.run([candidate, "-c", ""], preexec_fn=as_nobody, check=True, capture_output=True)
        except (OSError, subprocess.CalledProcessError):
            continue
        return candidate
    pytest.skip("no Python interpreter that another user can run")


def as_nobody():
    os.setgroups([])
    os.setgid(NOBODY)
    os.setuid(NOBODY)


def test_lock_files_of_another_user_open_under_protected_regular(protected_regular, shared_dir):
    # Lock files left by another user, one of them not writable by us (an older umask).
    for name, mode in (("allocate.lock", 0o666), ("gpu-0.lock", 0o666), ("gpu-1.lock", 0o644)):
        (shared_dir / name).touch()
        os.chown(shared_dir / name, NOBODY, NOBODY)
        os.chmod(shared_dir / name, mode)
    lease = acquire(2, ["0", "1"], shared_dir, timeout=2)
    assert lease.devices == ["0", "1"]
    assert "pid=" in lease_status(["0"], shared_dir)["0"]
    lease.release()


def test_a_second_user_leases_beside_the_first(protected_regular, shared_dir):
    mine = acquire(1, ["0", "1"], shared_dir, timeout=2)  # creates allocate.lock, gpu-0.lock as root
    try:
        proc, devices = start_holder(
            1, ["0", "1"], shared_dir, label="nobody", python=python_for_nobody(), preexec_fn=as_nobody
        )
        try:
            assert devices == "1"
            status = lease_status(["0", "1"], shared_dir)
            assert f"pid={proc.pid}" in status["1"] and "job=nobody" in status["1"]
        finally:
            stop(proc)
    finally:
        mine.release()
    # gpu-1.lock now belongs to the other user; we still lease it.
    assert (shared_dir / "gpu-1.lock").stat().st_uid == NOBODY
    lease = acquire(2, ["0", "1"], shared_dir, timeout=2)
    assert lease.devices == ["0", "1"]
    lease.release()


# --- waiting ------------------------------------------------------------------------------------


def test_a_waiting_job_reports_the_holders_and_its_timeout_names_them(tmp_path, monkeypatch, caplog):
    proc, _ = start_holder(1, ["0"], tmp_path, label="run/generate/3")
    try:
        with caplog.at_level(logging.INFO, logger="genjudge.cluster.gpu_lease"):
            t0 = time.monotonic()
            with pytest.raises(TimeoutError) as err:
                acquire(1, ["0"], tmp_path, poll_seconds=0.05, timeout=2.2, report_every=1)
            assert time.monotonic() - t0 >= 2.2  # it waited its timeout out
        assert "after 2.2s" in str(err.value)
        assert f"pid={proc.pid}" in str(err.value) and "job=run/generate/3" in str(err.value)
        reports = [r for r in caplog.records if "job=run/generate/3" in r.getMessage()]
        # At the start, then each time a poll finds another second gone: at least once more before the
        # timeout, however late a busy machine runs the polls.
        assert len(reports) >= 2
        monkeypatch.setenv("GENJUDGE_LEASE_TIMEOUT", "0.5")
        with pytest.raises(TimeoutError, match="job=run/generate/3"):
            acquire(1, ["0"], tmp_path, poll_seconds=0.05)
    finally:
        stop(proc)


def test_a_job_waiting_for_every_gpu_is_not_starved_by_one_gpu_jobs(tmp_path):
    inventory = "0,1"
    churners = []
    try:
        for _ in range(3):  # three one-GPU jobs for two GPUs: a freed GPU never stays free
            p = subprocess.Popen(
                [sys.executable, "-c", CHURNER, inventory, str(tmp_path)],
                stdout=subprocess.PIPE,
                text=True,
                env=child_env(),
            )
            assert p.stdout.readline().strip() == "started"
            churners.append(p)
        time.sleep(0.5)
        # Starved, it would wait for ever: the timeout (generous, so that a busy machine is no failure) says so.
        lease = acquire(2, ["0", "1"], tmp_path, label="judge", poll_seconds=0.05, timeout=60, queue_after=0.5)
        assert lease.devices == ["0", "1"]
        lease.release()
    finally:
        stop(*churners)


def test_a_queued_waiter_keeps_its_place_and_a_killed_one_leaves_nothing_behind(tmp_path):
    holder, devices = start_holder(1, ["0", "1"], tmp_path)
    waiter = subprocess.Popen(
        [sys.executable, "-c", WAITER, "2", "0,1", str(tmp_path)], stdout=subprocess.PIPE, text=True, env=child_env()
    )
    try:
        assert devices == "0" and waiter.stdout.readline().strip() == "waiting"
        queued = "the waiter queued for both GPUs"
        wait_until(lambda: any("need=2" in p.read_text() for p in tmp_path.glob("wait-*.lock")), queued, waiter, 60)
        # GPU 1 is free, but the job queued first needs it: a later one-GPU job waits behind it.
        with pytest.raises(TimeoutError, match="job=waiter"):
            acquire(1, ["0", "1"], tmp_path, poll_seconds=0.05, timeout=1)
        waiter.send_signal(signal.SIGKILL)
        waiter.wait()
        # The killed waiter's place in the queue went with it.
        lease = acquire(1, ["0", "1"], tmp_path, poll_seconds=0.05, timeout=2)
        assert lease.devices == ["1"]
        lease.release()
    finally:
        stop(holder, waiter)
