"""A throwaway single-node SLURM cluster for the tests (Debian slurm-wlm + munge, as root).

GPUs are declared in gres.conf and backed by placeholder character devices, so
SLURM hands out real GPU indices and sets CUDA_VISIBLE_DEVICES per job, while
the models themselves run on the CPU. Three partitions share the one node: `gpu`
(the default), `small` and `large`, so jobs can be sent to a partition per role.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

MARKER = "# genjudge throwaway test cluster"
# The slurm-jobstep plugin strips SLURM_* (SLURM_CONF included) from the
# environment of its inner srun, so the config must sit at the default path.
ETC = Path("/etc/slurm")
REAPER = Path(__file__).with_name("reaper.py")

SLURM_CONF = (
    MARKER
    + """
ClusterName=genjudge-test
SlurmctldHost={host}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
MpiDefault=none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
GresTypes=gpu
ReturnToService=2
SlurmdParameters=config_overrides
SlurmctldPort={ctld_port}
SlurmdPort={d_port}
StateSaveLocation={root}/state
SlurmdSpoolDir={root}/spool
SlurmctldPidFile={root}/slurmctld.pid
SlurmdPidFile={root}/slurmd.pid
SlurmctldLogFile={root}/slurmctld.log
SlurmdLogFile={root}/slurmd.log
SchedulerParameters=defer_batch
MinJobAge=600
KillWait=2
NodeName={host} CPUs={cpus} RealMemory={mem} Gres=gpu:{gpus} State=UNKNOWN
PartitionName=gpu Nodes={host} Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO
PartitionName=small Nodes={host} MaxTime=INFINITE State=UP OverSubscribe=NO
PartitionName=large Nodes={host} MaxTime=INFINITE State=UP OverSubscribe=NO
"""
)


class ClusterError(RuntimeError):
    pass


def unavailable_reason() -> str | None:
    """Why this machine cannot run the test cluster, or None when it can."""
    if os.geteuid() != 0:
        return "the throwaway SLURM cluster needs root (slurmd runs jobs as any user)"
    missing = [c for c in ("slurmctld", "slurmd", "munged", "sbatch") if shutil.which(c) is None]
    if missing:
        return f"{', '.join(missing)} not installed (run tests/slurm/install.sh as root)"
    conf = ETC / "slurm.conf"
    if conf.exists() and MARKER not in conf.read_text():
        return f"{conf} belongs to a real SLURM installation; the test cluster will not replace it"
    return None


class Cluster:
    def __init__(self, root: Path, gpus: int = 4, cpus: int | None = None, mem_mb: int = 16000):
        self.root = Path(root)
        self.gpus = gpus
        self.cpus = cpus or 8  # config_overrides: more slots than cores, so GPU jobs are the limit
        self.mem_mb = mem_mb
        self.host = socket.gethostname().split(".")[0]
        self.conf = ETC / "slurm.conf"
        self.procs: dict[str, subprocess.Popen] = {}
        self.cpu_files: list[Path] = []  # what each daemon's reaper has reaped so far (reaper.py)
        self.munged_started = False

    @property
    def env(self) -> dict:
        return {"SLURM_CONF": str(self.conf)}

    def _free_port(self) -> int:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            return s.getsockname()[1]

    def start(self, timeout: float = 60) -> Cluster:
        for sub in ("state", "spool", "dev"):
            (self.root / sub).mkdir(parents=True, exist_ok=True)
        gres = []
        for i in range(self.gpus):
            dev = self.root / "dev" / f"nvidia{i}"
            if not dev.exists():
                os.mknod(dev, 0o666 | 0o020000, os.makedev(1, 3))  # a character device, as gres.conf requires
            gres.append(f"NodeName={self.host} Name=gpu File={dev}")
        ETC.mkdir(parents=True, exist_ok=True)
        (ETC / "gres.conf").write_text(MARKER + "\n" + "\n".join(gres) + "\n")
        self.conf.write_text(
            SLURM_CONF.format(
                host=self.host,
                root=self.root,
                cpus=self.cpus,
                mem=self.mem_mb,
                gpus=self.gpus,
                ctld_port=self._free_port(),
                d_port=self._free_port(),
            )
        )
        self._start_munge()
        env = {**os.environ, **self.env}
        for daemon in ("slurmctld", "slurmd"):
            log = open(self.root / f"{daemon}.out", "w")  # noqa: SIM115 - the daemon owns it until stop()
            cpu_file = self.root / f"{daemon}.cpu"
            self.procs[daemon] = subprocess.Popen(
                [sys.executable, str(REAPER), str(cpu_file), daemon, "-D", "-f", str(self.conf)],
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
            self.cpu_files.append(cpu_file)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for daemon, p in self.procs.items():
                if p.poll() is not None:
                    raise ClusterError(f"{daemon} exited with {p.returncode}:\n{self.logs()}")
            state = subprocess.run(["sinfo", "-h", "-N", "-o", "%T"], env=env, capture_output=True, text=True)
            states = set(state.stdout.split())  # the node once per partition
            if state.returncode == 0 and states and states <= {"idle", "mixed", "allocated"}:
                return self
            time.sleep(0.5)
        raise ClusterError(f"SLURM node never became idle:\n{self.logs()}")

    def _start_munge(self) -> None:
        if subprocess.run(["munge", "-n"], capture_output=True).returncode == 0:
            return  # a munged is already running
        Path("/run/munge").mkdir(parents=True, exist_ok=True)
        shutil.chown("/run/munge", "munge", "munge")
        proc = subprocess.run(["runuser", "-u", "munge", "--", "munged"], capture_output=True, text=True)
        if proc.returncode != 0:
            proc = subprocess.run(["munged", "--force"], capture_output=True, text=True)
        if proc.returncode != 0:
            raise ClusterError(f"munged did not start: {proc.stderr}")
        self.munged_started = True

    def logs(self) -> str:
        out = []
        for name in ("slurmctld.out", "slurmd.out", "slurmctld.log", "slurmd.log"):
            p = self.root / name
            if p.exists():
                out.append(f"--- {name}\n" + p.read_text()[-3000:])
        return "\n".join(out)

    def run(self, *cmd, check=True) -> subprocess.CompletedProcess:
        proc = subprocess.run(list(cmd), env={**os.environ, **self.env}, capture_output=True, text=True)
        if check and proc.returncode != 0:
            raise ClusterError(f"{' '.join(cmd)}: {proc.stderr}")
        return proc

    def reaped_cpu(self) -> float:
        """CPU-s of the cluster's processes that have ended so far: its jobs (which no test process waits
        for) and, once stopped, its daemons. After stop() the test process has waited for the reapers,
        so its own count of its children holds all of it, and this is 0."""
        total = 0.0
        for path in self.cpu_files:
            try:
                total += float(path.read_text())
            except (FileNotFoundError, ValueError):
                pass  # nothing reaped yet
        return total

    def stop(self) -> None:
        self.run("scancel", "--user", "root", check=False)
        for p in self.procs.values():
            p.terminate()
        for p in self.procs.values():
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        self.procs = {}
        self.cpu_files = []
        for name in ("slurm.conf", "gres.conf"):
            path = ETC / name
            if path.exists() and MARKER in path.read_text():
                path.unlink()
        if self.munged_started:
            subprocess.run(["pkill", "-x", "munged"], capture_output=True)
