"""Runs one SLURM daemon and reaps everything it leaves behind, so that the CPU log counts the cluster.

slurmd starts each job's slurmstepd detached (its parent becomes init), so no test process ever waits
for a job, and what the jobs spent (SLURM's job step, Snakemake in it, the model job) would be missing
from the suite's CPU log. As a child subreaper (prctl PR_SET_CHILD_SUBREAPER) this process inherits
those orphans instead, waits for each, and keeps the CPU-s it has reaped so far (its children's and
theirs) in CPU_FILE, which the CPU log reads while the daemon runs (tests/conftest.py).

    python reaper.py CPU_FILE DAEMON [ARG...]

SIGTERM goes on to the daemon; once the daemon has ended, to what it left running. The reaper exits
with the daemon's status when no child is left.
"""

import ctypes
import os
import signal
import subprocess
import sys

import psutil

PR_SET_CHILD_SUBREAPER = 36


def terminate(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        pass  # ended meanwhile


def terminate_children() -> None:
    """The job steps the daemon left running (this process inherited them)."""
    for child in psutil.Process().children():
        terminate(child.pid)


def main() -> int:
    cpu_file, cmd = sys.argv[1], sys.argv[2:]
    state = {"daemon": None, "ended": False, "stopping": False}

    def on_term(*_):
        state["stopping"] = True
        if state["ended"]:
            terminate_children()
        elif state["daemon"] is not None:  # started, not yet reaped: its pid is still its own
            terminate(state["daemon"])

    signal.signal(signal.SIGTERM, on_term)  # before the daemon starts: no SIGTERM leaves it behind
    if ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        # A measuring aid: the cluster runs without it, its jobs' CPU uncounted as before.
        err = ctypes.get_errno()
        print(
            f"reaper: prctl(PR_SET_CHILD_SUBREAPER) failed ({os.strerror(err)}): SLURM jobs' CPU uncounted",
            file=sys.stderr,
        )
    daemon = subprocess.Popen(cmd)
    state["daemon"] = daemon.pid
    if state["stopping"]:
        terminate(daemon.pid)
    reaped, status = 0.0, None
    while True:
        try:
            pid, wait_status, usage = os.wait4(-1, 0)
        except ChildProcessError:
            break  # the daemon and every orphan are gone
        reaped += usage.ru_utime + usage.ru_stime
        tmp = f"{cpu_file}.tmp"
        with open(tmp, "w") as f:
            f.write(f"{reaped:.3f}\n")
        os.replace(tmp, cpu_file)
        if pid == daemon.pid:
            state["ended"] = True
            daemon.returncode = status = os.waitstatus_to_exitcode(wait_status)
            if state["stopping"]:  # what the daemon did not stop in time: stopped, then waited for
                terminate_children()
    return 1 if status is None else (status if status >= 0 else 128 - status)


if __name__ == "__main__":
    sys.exit(main())
