"""Where SLURM runs the current job: partition, array task, restarts (requeues).

SLURM sets SLURM_JOB_PARTITION, SLURM_ARRAY_JOB_ID/_TASK_ID and SLURM_RESTART_COUNT in a batch
job's environment, but the executor's job step keeps only a few SLURM_* variables for the
process it starts (the job id and the array ids among them). What is missing is asked of the
controller once (`scontrol show job`), the way any job may look itself up."""

from __future__ import annotations

import os
import re
import shutil
import subprocess


def _scontrol(job_id: str) -> dict:
    if not shutil.which("scontrol"):
        return {}
    try:
        out = subprocess.run(
            ["scontrol", "show", "job", "-o", job_id], capture_output=True, text=True, timeout=30
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return {}
    return dict(re.findall(r"(\w+)=(\S*)", out.splitlines()[0])) if out.strip() else {}


def job_info(env=None) -> dict:
    """`slurm_partition`, `slurm_array` (<array job id>_<task id>) and `slurm_restarts` of this job;
    empty values outside SLURM."""
    env = os.environ if env is None else env
    job_id = env.get("SLURM_JOB_ID")
    partition = env.get("SLURM_JOB_PARTITION")
    restarts = env.get("SLURM_RESTART_COUNT")
    array_job, task = env.get("SLURM_ARRAY_JOB_ID"), env.get("SLURM_ARRAY_TASK_ID")
    if job_id and (partition is None or restarts is None):
        fields = _scontrol(job_id)
        partition = partition or fields.get("Partition")
        restarts = restarts if restarts is not None else fields.get("Restarts")
    return {
        "slurm_partition": partition or None,
        "slurm_array": f"{array_job}_{task}" if array_job and task else None,
        "slurm_restarts": int(restarts) if restarts and restarts.isdigit() else 0,
    }
