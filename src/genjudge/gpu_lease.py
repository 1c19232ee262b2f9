"""GPU leases: which GPUs a job may use, pinned through CUDA_VISIBLE_DEVICES.

Snakemake's `gpu` resource only caps how many GPUs running jobs hold in total;
it never says which. A lease is an exclusive advisory lock (flock) on one file
per GPU in a per-machine directory. The kernel drops the lock when the holding
process exits for any reason, SIGKILL included, so no lease can go stale.
Scanning for free GPUs happens under one allocation lock, so a job either gets
all the GPUs it asks for or none, and two workflows on one machine sharing the
lock directory never hand out the same GPU twice.
"""

from __future__ import annotations

import fcntl
import logging
import os
import shutil
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

log = logging.getLogger(__name__)

LOCK_DIR_ENV = "GENJUDGE_LOCK_DIR"


def default_lock_dir() -> Path:
    # Must be local to the machine and shared by all its users: not the
    # (possibly network-mounted) workflow directory, not a per-user runtime dir.
    return Path(os.environ.get(LOCK_DIR_ENV) or Path(tempfile.gettempdir()) / "genjudge-gpu-locks")


def nvidia_smi_gpu_ids() -> list[str]:
    """Physical GPU indices seen by nvidia-smi, without initialising CUDA."""
    if shutil.which("nvidia-smi") is None:
        return []
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=index", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=30, check=True).stdout
    except (subprocess.SubprocessError, OSError):
        return []
    return [line.strip() for line in out.splitlines() if line.strip()]


def visible_restriction() -> list[str] | None:
    """The devices allowed by a CUDA_VISIBLE_DEVICES set before the workflow started."""
    value = os.environ.get("CUDA_VISIBLE_DEVICES")
    if value is None:
        return None
    return [x.strip() for x in value.split(",") if x.strip() and x.strip() != "-1"]


def resolve_inventory(configured="auto") -> list[str]:
    """GPU ids this machine offers to the workflow.

    `configured` is "auto" (nvidia-smi), a list of ids, or an int n (ids 0..n-1).
    A CUDA_VISIBLE_DEVICES already set limits the inventory to those devices.
    """
    if configured == "auto" or configured is None:
        ids = nvidia_smi_gpu_ids()
        allowed = visible_restriction()
        if allowed is not None and not ids:
            ids = allowed  # no nvidia-smi (containers): trust the caller's list
    elif isinstance(configured, int):
        ids = [str(i) for i in range(configured)]
    else:
        ids = [str(x) for x in configured]
    allowed = visible_restriction()
    if allowed is not None:
        ids = [i for i in ids if i in allowed]
    return ids


def in_slurm_allocation() -> bool:
    return bool(os.environ.get("SLURM_JOB_ID"))


@dataclass
class Lease:
    """GPUs held by this process; `devices` is what CUDA_VISIBLE_DEVICES was set to."""

    devices: list[str]
    source: str  # "lease", "slurm", "none"
    waited_seconds: float = 0.0
    _fds: list[int] = field(default_factory=list, repr=False)

    @property
    def cuda_visible_devices(self) -> str | None:
        return os.environ.get("CUDA_VISIBLE_DEVICES")

    def release(self) -> None:
        for fd in self._fds:
            try:
                fcntl.flock(fd, fcntl.LOCK_UN)
            finally:
                os.close(fd)
        self._fds = []

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.release()


def _open_lock(path: Path) -> int:
    old = os.umask(0)
    try:
        return os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    finally:
        os.umask(old)


def _try_lock(fd: int) -> bool:
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except BlockingIOError:
        return False


def acquire(n_gpus: int, inventory: list[str], lock_dir: str | os.PathLike | None = None,
            label: str = "", poll_seconds: float = 0.5, timeout: float | None = None) -> Lease:
    """Lease `n_gpus` GPUs from `inventory` and pin this process to them.

    Call before anything imports torch. Inside a SLURM allocation the GPUs are
    SLURM's (it sets CUDA_VISIBLE_DEVICES) and nothing is leased. With no GPUs
    in the inventory the job runs on CPU; a job that asks for none on a machine
    that has some gets CUDA hidden, so it cannot land on a GPU another job holds.
    """
    if in_slurm_allocation():
        devices = visible_restriction() or []
        log.info("inside SLURM job %s: using the GPUs SLURM assigned: %s",
                 os.environ["SLURM_JOB_ID"], ",".join(devices) or "none")
        return Lease(devices=devices, source="slurm")
    if n_gpus <= 0 or not inventory:
        if inventory:
            os.environ["CUDA_VISIBLE_DEVICES"] = ""
        log.info("no GPUs leased (asked %d, inventory %s): running on CPU", n_gpus, inventory)
        return Lease(devices=[], source="none")
    if n_gpus > len(inventory):
        raise RuntimeError(f"job needs {n_gpus} GPUs but the inventory has only {len(inventory)}: {inventory}")

    lock_dir = Path(lock_dir) if lock_dir else default_lock_dir()
    old = os.umask(0)
    try:
        lock_dir.mkdir(parents=True, exist_ok=True, mode=0o1777)
    finally:
        os.umask(old)
    alloc_fd = _open_lock(lock_dir / "allocate.lock")
    start = time.monotonic()
    announced = False
    try:
        while True:
            fcntl.flock(alloc_fd, fcntl.LOCK_EX)  # serialise scans; held for microseconds
            held: list[tuple[str, int]] = []
            try:
                for gpu in inventory:
                    fd = _open_lock(lock_dir / f"gpu-{gpu}.lock")
                    if _try_lock(fd):
                        held.append((gpu, fd))
                        if len(held) == n_gpus:
                            break
                    else:
                        os.close(fd)
                if len(held) < n_gpus:
                    for _, fd in held:
                        fcntl.flock(fd, fcntl.LOCK_UN)
                        os.close(fd)
                    held = []
            finally:
                fcntl.flock(alloc_fd, fcntl.LOCK_UN)
            if held:
                break
            if not announced:
                log.info("waiting for %d free GPU(s) among %s", n_gpus, inventory)
                announced = True
            if timeout is not None and time.monotonic() - start > timeout:
                raise TimeoutError(f"no {n_gpus} free GPU(s) among {inventory} after {timeout:.0f}s")
            time.sleep(poll_seconds)
    finally:
        os.close(alloc_fd)

    info = f"pid={os.getpid()} host={socket.gethostname()} since={time.time():.3f} job={label}\n"
    for _, fd in held:
        os.ftruncate(fd, 0)
        os.pwrite(fd, info.encode(), 0)
    devices = [gpu for gpu, _ in held]
    os.environ["CUDA_VISIBLE_DEVICES"] = ",".join(devices)
    waited = time.monotonic() - start
    log.info("leased GPU(s) %s after %.1fs; CUDA_VISIBLE_DEVICES=%s", devices, waited, ",".join(devices))
    return Lease(devices=devices, source="lease", waited_seconds=waited, _fds=[fd for _, fd in held])


def lease_status(inventory: list[str], lock_dir=None) -> dict[str, str | None]:
    """Who holds each GPU right now (None when free); for `genjudge gpus`."""
    lock_dir = Path(lock_dir) if lock_dir else default_lock_dir()
    status = {}
    for gpu in inventory:
        path = lock_dir / f"gpu-{gpu}.lock"
        if not path.exists():
            status[gpu] = None
            continue
        fd = os.open(path, os.O_RDONLY)
        try:
            if _try_lock(fd):
                fcntl.flock(fd, fcntl.LOCK_UN)
                status[gpu] = None
            else:
                status[gpu] = path.read_text().strip() or "held"
        finally:
            os.close(fd)
    return status
