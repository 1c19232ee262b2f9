"""Runs one SLURM daemon and reaps everything it leaves behind, so that the CPU log counts the cluster.

slurmd starts each job's slurmstepd detached (its parent becomes init), so no test process ever waits
for a job, and what the jobs spent (SLURM's job step, Snakemake in it, the model job) would be missing
from the suite's CPU log. As a child subreaper (prctl PR_SET_CHILD_SUBREAPER) this process inherits
those orphans instead, waits for each, and keeps the CPU-s it has reaped so far (its children's and
theirs) in CPU_FILE, which the CPU log reads while the daemon runs (tests/conftest.py).

    python reaper.py CPU_FILE DAEMON [ARG...]

SIGTERM goes on to the daemon; the reaper exits with the daemon's status once no child is left.
"""

import ctypes
import os
import signal
import subprocess
import sys

PR_SET_CHILD_SUBREAPER = 36


def main() -> int:
    cpu_file, cmd = sys.argv[1], sys.argv[2:]
    if ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_CHILD_SUBREAPER)")
    daemon = subprocess.Popen(cmd)
    signal.signal(signal.SIGTERM, lambda *_: daemon.send_signal(signal.SIGTERM))
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
            daemon.returncode = status = os.waitstatus_to_exitcode(wait_status)
    return 1 if status is None else (status if status >= 0 else 128 - status)


if __name__ == "__main__":
    sys.exit(main())
