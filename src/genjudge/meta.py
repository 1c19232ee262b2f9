"""Per-job meta files: where and how a job ran, beside its output."""

from __future__ import annotations

import os
import platform
import socket
import time

from genjudge import atomic


def base_meta(lease) -> dict:
    return {
        "hostname": socket.gethostname(),
        "pid": os.getpid(),
        "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
        "gpu_source": lease.source,
        "gpus": lease.devices,
        "waited_for_gpus_seconds": round(lease.waited_seconds, 3),
        "slurm_job_id": os.environ.get("SLURM_JOB_ID"),
        "python": platform.python_version(),
        "started_at": time.time(),
    }


def finish(meta: dict, path) -> dict:
    meta["finished_at"] = time.time()
    atomic.write_json(path, meta)
    return meta

