"""GPU leases: which GPUs a job may use, pinned through CUDA_VISIBLE_DEVICES.

Snakemake's `gpu` resource only caps how many GPUs running jobs hold in total;
it never says which. A lease is an exclusive advisory lock (flock) on one file
per GPU in a per-machine directory. The kernel drops the lock when the holding
process exits for any reason, SIGKILL included, so no lease can go stale.
Scanning for free GPUs happens under one allocation lock, so a job either gets
all the GPUs it asks for or none, and two workflows on one machine sharing the
lock directory never hand out the same GPU twice.

Device ids are what CUDA_VISIBLE_DEVICES takes: nvidia-smi indices ("0"), GPU
UUIDs ("GPU-...", or a unique prefix) and MIG UUIDs ("MIG-..."), kept as the
user gave them. Indices name nvidia-smi's (PCI bus) order, so a lease also sets
CUDA_DEVICE_ORDER=PCI_BUS_ID: CUDA's default, fastest first, can differ on a
machine with mixed boards. A GPU UUID is locked under its nvidia-smi index, so
two workflows naming one board differently still exclude each other.

A job that gets no GPU (none asked, or none in the inventory) sees none:
CUDA_VISIBLE_DEVICES is set to "", never left unset (which means "all").

Waiting: a job that finds too few free GPUs polls, and logs who holds them
when it starts waiting and every `report_every` seconds; an optional timeout
(argument, or GENJUDGE_LEASE_TIMEOUT seconds) fails naming them. A job that
has waited `queue_after` seconds takes a place in a queue: a flock'ed file
per waiter, ordered by when it started waiting. Later jobs may not take GPUs
that a waiter ahead of them needs, so a job asking for every GPU is not starved
by one-GPU jobs that keep arriving. A killed waiter's file stays behind, but
its flock is gone and every scan skips (and removes) it.
"""

from __future__ import annotations

import fcntl
import logging
import os
import re
import socket
import time
from dataclasses import dataclass, field
from pathlib import Path

from genjudge.cluster.gpu_inventory import (  # noqa: F401 - importable from here, as before
    NVIDIA_SMI_TIMEOUT,
    _board,
    in_slurm_allocation,
    nvidia_smi_gpus,
    resolve_inventory,
    visible_restriction,
)

log = logging.getLogger(__name__)

LOCK_DIR_ENV = "GENJUDGE_LOCK_DIR"
TIMEOUT_ENV = "GENJUDGE_LEASE_TIMEOUT"

# A fixed path, not $TMPDIR: clusters often give each user (or each SLURM job) a
# TMPDIR of their own, and users with different lock directories would share a
# GPU. /tmp is on every machine, local to it, and writable by all its users.
# Not /dev/shm: systemd-logind (RemoveIPC=yes) deletes a user's files there when
# their last session ends, and a lock file deleted while held lets the next job
# in beside its holder. Not the workflow directory: it may be a network
# filesystem, where flock is unreliable, and it is not shared between workflows.
DEFAULT_LOCK_DIR = Path("/tmp/genjudge-gpu-locks")

REPORT_EVERY = 60.0  # seconds between reports of who holds the GPUs while waiting
QUEUE_AFTER = 5.0  # seconds of waiting before a job takes a place in the queue


def default_lock_dir() -> Path:
    return Path(os.environ.get(LOCK_DIR_ENV) or DEFAULT_LOCK_DIR)


# --- lock files -----------------------------------------------------------------------------


def _open_lock(path: Path) -> int:
    """A descriptor on `path` to flock, created when missing.

    An existing file is never opened with O_CREAT: under fs.protected_regular
    (systemd's default) that fails on another user's file in a sticky directory,
    even when its mode would let us write. flock works on a read-only descriptor,
    the fallback for another user's file we may not write.
    """
    for _ in range(50):
        try:
            return os.open(path, os.O_RDWR | os.O_CLOEXEC)
        except PermissionError:
            return os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        except FileNotFoundError:
            pass
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o666)
        except FileExistsError:
            continue  # another process created it in between: open theirs
        except PermissionError as exc:
            raise PermissionError(
                f"cannot create {path}: the GPU lock directory must be writable by every "
                f"user of the machine (mode 1777), or set {LOCK_DIR_ENV}"
            ) from exc
        os.fchmod(fd, 0o666)  # whatever our umask: other users' jobs open it read-write
        return fd
    raise RuntimeError(f"cannot open the lock file {path} (a dangling symlink?)")


def _try_lock(fd: int) -> bool:
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except BlockingIOError:
        return False


def _lock_path(path: Path) -> int | None:
    """A descriptor holding an exclusive flock on `path`, or None when another process holds it."""
    fd = _open_lock(path)
    if _try_lock(fd):
        try:  # the file we locked is still the one at `path` (not removed by a cleaner meanwhile)
            same = os.path.samestat(os.fstat(fd), os.stat(path))
        except FileNotFoundError:
            same = False
        if same:
            return fd
    os.close(fd)
    return None


def _held_by(path: Path) -> str | None:
    """The holder's description when `path` is locked by another process, None when free or missing."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    try:
        if _try_lock(fd):
            fcntl.flock(fd, fcntl.LOCK_UN)
            return None
        return os.pread(fd, 4096, 0).decode("utf-8", "replace").strip() or "held"
    finally:
        os.close(fd)


def _write_info(fd: int, info: str) -> None:
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, info.encode(), 0)
    except OSError:
        pass  # another user's file opened read-only: the lock holds, the description is older


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]", "_", name)


def _gpu_file(lock_dir: Path, board: str) -> Path:
    return lock_dir / f"gpu-{_safe(board)}.lock"


def _prepare(lock_dir) -> Path:
    lock_dir = Path(lock_dir) if lock_dir else default_lock_dir()
    try:
        lock_dir.mkdir(parents=True)
    except FileExistsError:
        return lock_dir
    os.chmod(lock_dir, 0o1777)  # ours: shared with every user's jobs, each deleting only its own files
    return lock_dir


# --- the queue of waiters -------------------------------------------------------------------


@dataclass
class _Waiter:
    name: str
    need: int
    boards: list[str]
    info: str


def _parse_waiter(name: str, text: str) -> _Waiter | None:
    fields = dict(part.split("=", 1) for part in text.split() if "=" in part)
    try:
        return _Waiter(name, int(fields["need"]), [b for b in fields["boards"].split(",") if b], text.strip())
    except (KeyError, ValueError):
        return None


def _queue_name(started_ns: int) -> str:
    return f"wait-{started_ns:020d}-{os.getpid()}.lock"


def _waiters_ahead(lock_dir: Path, me: str) -> list[_Waiter]:
    """Live waiters that started waiting before us (`me`: our queue name, taken or not), oldest first.

    Called under the allocation lock, which every queue change also holds.
    """
    ahead = []
    for path in sorted(lock_dir.glob("wait-*.lock")):
        if path.name >= me:
            continue
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        except FileNotFoundError:
            continue
        try:
            if _try_lock(fd):  # its waiter is gone (killed): not a place in the queue
                try:
                    path.unlink()
                except OSError:
                    pass  # another user's file in the sticky directory: skipped on every scan instead
                continue
            waiter = _parse_waiter(path.name, os.pread(fd, 4096, 0).decode("utf-8", "replace"))
        finally:
            os.close(fd)
        if waiter is not None:
            ahead.append(waiter)
    return ahead


def _reserved(lock_dir: Path, ahead: list[_Waiter]) -> set[str]:
    """Boards the waiters ahead keep from later jobs.

    In queue order: a waiter that the free boards can serve keeps just those (it
    takes them at its next poll); one that they cannot serve keeps its whole
    inventory, so that boards it needs only ever come free for it.
    """
    reserved: set[str] = set()
    for w in ahead:
        free = [b for b in w.boards if b not in reserved and _held_by(_gpu_file(lock_dir, b)) is None]
        reserved.update(free[: w.need] if len(free) >= w.need else w.boards)
    return reserved


def _enqueue(lock_dir: Path, name: str, need: int, boards: list[str], label: str) -> int:
    fd = os.open(lock_dir / name, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
    fcntl.flock(fd, fcntl.LOCK_EX)
    _write_info(fd, f"need={need} boards={','.join(boards)} {_holder_info(label)}")
    return fd


def _holder_info(label: str) -> str:
    return f"pid={os.getpid()} host={socket.gethostname()} since={time.strftime('%Y-%m-%dT%H:%M:%S')} job={label}\n"


def _describe(lock_dir: Path, devices_by_board: dict[str, str], ahead: list[_Waiter]) -> str:
    parts = []
    for board, device in devices_by_board.items():
        holder = _held_by(_gpu_file(lock_dir, board))
        if holder:
            parts.append(f"GPU {device} held by {holder}")
    for w in ahead:
        if set(w.boards) & set(devices_by_board):
            parts.append(f"queued ahead for {w.need} GPU(s): {w.info}")
    return "; ".join(parts) or "no holder found (GPUs just released)"


# --- leases ---------------------------------------------------------------------------------


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


def _timeout_from_env(timeout: float | None) -> float | None:
    if timeout is not None:
        return timeout
    value = os.environ.get(TIMEOUT_ENV, "").strip()
    if not value:
        return None
    try:
        return float(value)
    except ValueError:
        raise ValueError(f"{TIMEOUT_ENV}={value!r}: expected a number of seconds") from None


def _without_lease(n_gpus: int, inventory: list[str], slurm_executor: bool | None) -> Lease | None:
    """The lease of a job that locks no GPU: under SLURM's executor the GPUs SLURM assigned, and with
    none asked (or none to have) no GPU at all, CUDA hidden. None: the job leases its GPUs."""
    if slurm_executor is None:
        slurm_executor = in_slurm_allocation()
    if slurm_executor:
        devices = visible_restriction() or []
        log.info(
            "SLURM job %s: using the GPUs SLURM assigned: %s",
            os.environ.get("SLURM_JOB_ID", "?"),
            ",".join(devices) or "none",
        )
        return Lease(devices=devices, source="slurm")
    if n_gpus <= 0 or not inventory:
        os.environ["CUDA_VISIBLE_DEVICES"] = ""
        if n_gpus > 0:
            log.warning("the job asks for %d GPU(s) but the inventory is empty: running on CPU, CUDA hidden", n_gpus)
        else:
            log.info("no GPU asked for: running on CPU, CUDA hidden")
        return Lease(devices=[], source="none")
    return None


@dataclass
class _Wait:
    """One job's wait for its GPUs: its scans, and its place in the queue once it has waited `queue_after`."""

    lock_dir: Path
    boards: list[str]
    n_gpus: int
    label: str
    queue_after: float
    start: float  # time.monotonic() when it began
    queue_name: str
    queue_fd: int | None = None

    def scan(self, alloc_fd: int) -> tuple[list[tuple[str, int]], list[_Waiter]]:
        """One scan under the allocation lock: ([(board, fd)] of all `n_gpus` GPUs, or [] and none held;
        the waiters ahead of this job). A job that got none and has waited long enough joins the queue."""
        held: list[tuple[str, int]] = []
        fcntl.flock(alloc_fd, fcntl.LOCK_EX)  # serialise scans; held for milliseconds
        try:
            ahead = _waiters_ahead(self.lock_dir, self.queue_name)
            reserved = _reserved(self.lock_dir, ahead)
            for board in self.boards:
                if board in reserved:
                    continue
                fd = _lock_path(_gpu_file(self.lock_dir, board))
                if fd is not None:
                    held.append((board, fd))
                    if len(held) == self.n_gpus:
                        break
            if len(held) == self.n_gpus:
                info = _holder_info(self.label)
                for _, fd in held:
                    _write_info(fd, info)
                if self.queue_fd is not None:
                    os.unlink(self.lock_dir / self.queue_name)
            else:
                for _, fd in held:
                    os.close(fd)  # closing the only descriptor drops its flock
                held = []
                if self.queue_fd is None and time.monotonic() - self.start >= self.queue_after:
                    self.queue_fd = _enqueue(self.lock_dir, self.queue_name, self.n_gpus, self.boards, self.label)
        finally:
            fcntl.flock(alloc_fd, fcntl.LOCK_UN)
        return held, ahead

    def leave(self, got: bool) -> None:
        """Out of the queue: its file is gone already where the job got its GPUs."""
        if self.queue_fd is None:
            return
        if not got:
            try:
                os.unlink(self.lock_dir / self.queue_name)
            except OSError:
                pass
        os.close(self.queue_fd)


def acquire(
    n_gpus: int,
    inventory: list[str],
    lock_dir: str | os.PathLike | None = None,
    label: str = "",
    poll_seconds: float = 0.5,
    timeout: float | None = None,
    *,
    report_every: float = REPORT_EVERY,
    queue_after: float = QUEUE_AFTER,
    slurm_executor: bool | None = None,
) -> Lease:
    """Lease `n_gpus` GPUs from `inventory` and pin this process to them.

    Call before anything imports torch. Under Snakemake's SLURM executor the
    GPUs are SLURM's (it sets CUDA_VISIBLE_DEVICES) and nothing is leased; with
    the local executor inside an allocation (salloc, sbatch) the jobs share the
    allocation's GPUs and lease them like on any machine. `slurm_executor` says
    which; None falls back to "SLURM_JOB_ID is set", which cannot tell the two
    apart. A job that gets no GPU sees none (CUDA_VISIBLE_DEVICES="").

    `timeout` (default: GENJUDGE_LEASE_TIMEOUT, else none) raises TimeoutError
    naming the holders; see the module docstring for reports and the queue.
    """
    unleased = _without_lease(n_gpus, [str(x) for x in inventory], slurm_executor)
    if unleased is not None:
        return unleased
    inventory = [str(x) for x in inventory]
    table = nvidia_smi_gpus() if any(d.startswith("GPU-") for d in inventory) else None
    pairs: dict[str, str] = {}  # board -> device id as given; one entry per physical device
    for device in inventory:
        pairs.setdefault(_board(device, table), device)
    boards, devices_by_board = list(pairs), pairs
    if n_gpus > len(boards):
        raise RuntimeError(f"job needs {n_gpus} GPUs but the inventory has only {len(boards)}: {inventory}")
    timeout = _timeout_from_env(timeout)
    lock_dir = _prepare(lock_dir)
    alloc_fd = _open_lock(lock_dir / "allocate.lock")
    wait = _Wait(lock_dir, boards, n_gpus, label, queue_after, time.monotonic(), _queue_name(time.time_ns()))
    start = wait.start
    next_report = 0.0
    held: list[tuple[str, int]] = []
    try:
        while True:
            held, ahead = wait.scan(alloc_fd)
            if held:
                break
            waited = time.monotonic() - start
            if waited >= next_report:
                log.log(
                    logging.INFO if next_report == 0 else logging.WARNING,
                    "waiting %.0fs for %d free GPU(s) among %s: %s",
                    waited,
                    n_gpus,
                    inventory,
                    _describe(lock_dir, devices_by_board, ahead),
                )
                next_report += report_every
            if timeout is not None and waited >= timeout:
                raise TimeoutError(
                    f"no {n_gpus} free GPU(s) among {inventory} after {timeout:g}s: "
                    f"{_describe(lock_dir, devices_by_board, ahead)}"
                )
            time.sleep(poll_seconds)
    finally:
        os.close(alloc_fd)
        wait.leave(bool(held))

    devices = [devices_by_board[board] for board, _ in held]
    os.environ["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID"
    os.environ["CUDA_VISIBLE_DEVICES"] = ",".join(devices)
    waited = time.monotonic() - start
    log.info("leased GPU(s) %s after %.1fs; CUDA_VISIBLE_DEVICES=%s", devices, waited, ",".join(devices))
    return Lease(devices=devices, source="lease", waited_seconds=waited, _fds=[fd for _, fd in held])


def lease_status(inventory: list[str], lock_dir=None) -> dict[str, str | None]:
    """Who holds each GPU right now (None when free); for `genjudge gpus`."""
    lock_dir = Path(lock_dir) if lock_dir else default_lock_dir()
    inventory = [str(x) for x in inventory]
    table = nvidia_smi_gpus() if any(d.startswith("GPU-") for d in inventory) else None
    return {device: _held_by(_gpu_file(lock_dir, _board(device, table))) for device in inventory}
