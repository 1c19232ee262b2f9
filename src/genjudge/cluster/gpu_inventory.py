"""The GPUs a machine offers the workflow: nvidia-smi's (indices and UUIDs, without initialising CUDA),
a configured list or count, each limited by a CUDA_VISIBLE_DEVICES set before the workflow started;
and one name per physical board, under which genjudge.cluster.gpu_lease locks it."""

from __future__ import annotations

import logging
import os
import shutil
import subprocess

log = logging.getLogger("genjudge.cluster.gpu_lease")  # its messages are the lease's

NVIDIA_SMI_TIMEOUT = 30.0


def nvidia_smi_gpus(timeout: float = NVIDIA_SMI_TIMEOUT) -> list[tuple[str, str]] | None:
    """(index, uuid) of every GPU nvidia-smi sees, without initialising CUDA.

    None when there is no nvidia-smi (a container without GPUs). An nvidia-smi
    that fails or hangs is logged as a warning and yields [] (no usable GPU).
    """
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return None
    cmd = [exe, "--query-gpu=index,uuid", "--format=csv,noheader"]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        log.warning("nvidia-smi did not answer within %.0fs: no GPU will be used", timeout)
        return []
    except OSError as exc:
        log.warning("nvidia-smi could not be run (%s): no GPU will be used", exc)
        return []
    if proc.returncode != 0:
        detail = (proc.stderr.strip() or proc.stdout.strip())[-500:]
        log.warning("nvidia-smi failed (exit %d): %s; no GPU will be used", proc.returncode, detail)
        return []
    gpus = []
    for line in proc.stdout.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) == 2 and parts[0].isdigit() and parts[1]:
            gpus.append((parts[0], parts[1]))
        elif line.strip():
            log.warning("nvidia-smi printed an unexpected line, ignored: %r", line)
    return gpus


def visible_restriction() -> list[str] | None:
    """The devices allowed by a CUDA_VISIBLE_DEVICES set before the workflow started."""
    value = os.environ.get("CUDA_VISIBLE_DEVICES")
    if value is None:
        return None
    return [x.strip() for x in value.split(",") if x.strip() and x.strip() != "-1"]


def _uuid_index(given: str, table: list[tuple[str, str]]) -> str | None:
    """The index of the GPU whose UUID is `given` or starts with it (CUDA accepts unique prefixes)."""
    hits = [index for index, uuid in table if uuid == given] or [
        index for index, uuid in table if uuid.startswith(given)
    ]
    return hits[0] if len(hits) == 1 else None


def _board(device: str, table: list[tuple[str, str]] | None) -> str:
    """One name per physical device: the nvidia-smi index for a known GPU UUID, else the id itself."""
    if device.startswith("GPU-") and table:
        return _uuid_index(device, table) or device
    return device


def _known(device: str, table: list[tuple[str, str]]) -> bool:
    if device.isdigit():
        return any(index == device for index, _ in table)
    if device.startswith("GPU-"):
        return _uuid_index(device, table) is not None
    # MIG instances are not listed by --query-gpu; CUDA itself rejects unknown ones.
    return device.startswith("MIG-")


def resolve_inventory(configured="auto") -> list[str]:
    """GPU ids this machine offers to the workflow.

    `configured` is "auto" (nvidia-smi), a list of ids, or an int n (ids 0..n-1).
    A CUDA_VISIBLE_DEVICES already set limits the inventory to those devices,
    which may be indices, GPU UUIDs or MIG UUIDs; their ids are kept as given.
    """
    allowed = visible_restriction()
    if configured == "auto" or configured is None:
        table = nvidia_smi_gpus()
        if allowed is None:
            return [index for index, _ in table or []]
        if not table:
            return allowed  # no nvidia-smi to check against (containers): trust the caller's list
        kept = [d for d in allowed if _known(d, table)]
        if len(kept) != len(allowed):
            log.warning(
                "CUDA_VISIBLE_DEVICES names devices nvidia-smi does not show, left out: %s",
                [d for d in allowed if d not in kept],
            )
        return kept
    if isinstance(configured, int):
        ids = [str(i) for i in range(configured)]
    else:
        ids = [str(x) for x in configured]
    if allowed is None:
        return ids
    table = nvidia_smi_gpus() if any(d.startswith("GPU-") for d in allowed + ids) else None
    boards = {_board(d, table) for d in allowed}
    return [i for i in ids if _board(i, table) in boards]


def in_slurm_allocation() -> bool:
    return bool(os.environ.get("SLURM_JOB_ID"))
