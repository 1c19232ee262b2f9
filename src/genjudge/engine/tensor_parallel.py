"""Tensor parallelism with transformers' native plans: one torchrun group over a job's GPUs.

Every rank of the group runs the same judge code on the same items in lock step:
each holds its slice of every sharded weight (`DistributedConfig(tp_size=N)`, the
model's own `base_model_tp_plan`), and the collectives inside each forward pass give
every rank the same logits, so every rank decodes the same tokens. Only rank 0
writes (item checkpoints, outputs, meta). On CUDA the group talks over NCCL, on
CPU over gloo (what the tests use).

Where the ranks must decide alike they agree explicitly: an out-of-memory error on
any rank is an out-of-memory error on all of them (the batch is halved everywhere),
and `batch_size: auto` takes the largest peak memory of all ranks. An error that
is not shared (one rank running out of memory in the middle of a collective while
the others wait) cannot be agreed on: the others wait until the group's timeout
(`GENJUDGE_TP_TIMEOUT`, seconds) and the job fails; its checkpoint makes the rerun
resume.
"""

from __future__ import annotations

import datetime
import os

ENV = "GENJUDGE_TENSOR_PARALLEL"  # set by the launcher for the ranks of a judge group
DEFAULT_TIMEOUT = 1800.0


def active() -> bool:
    """Whether this process is one rank of a tensor-parallel group of two or more."""
    return os.environ.get(ENV) == "1" and world_size() > 1


def world_size() -> int:
    return int(os.environ.get("WORLD_SIZE", "1"))


def rank() -> int:
    return int(os.environ.get("RANK", "0")) if active() else 0


def is_writer() -> bool:
    """Only rank 0 writes outputs, meta and checkpoints; a lone process always does."""
    return rank() == 0


def init() -> str:
    """Start the process group (NCCL on GPUs, gloo on CPU); returns the backend."""
    import torch
    import torch.distributed as dist

    if dist.is_initialized():
        return dist.get_backend()
    timeout = datetime.timedelta(seconds=float(os.environ.get("GENJUDGE_TP_TIMEOUT", DEFAULT_TIMEOUT)))
    if torch.cuda.is_available():
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
        backend = "nccl"
    else:
        backend = "gloo"
    dist.init_process_group(backend=backend, timeout=timeout)
    return backend


def finish() -> None:
    import torch.distributed as dist

    if dist.is_initialized():
        dist.barrier()
        dist.destroy_process_group()


def load_kwargs(kwargs: dict) -> dict:
    """from_pretrained arguments for this rank: the model's tensor-parallel plan over the group
    instead of a device map (the two are exclusive)."""
    from transformers.distributed import DistributedConfig

    out = {k: v for k, v in kwargs.items() if k not in ("device_map", "max_memory", "offload_folder")}
    out["distributed_config"] = DistributedConfig(tp_size=world_size())
    return out


def _flag_tensor(value: float):
    import torch

    device = f"cuda:{torch.cuda.current_device()}" if torch.cuda.is_available() else "cpu"
    return torch.tensor([float(value)], dtype=torch.float64, device=device)


def agree_max(value: float) -> float:
    """The largest `value` over the ranks (identity outside a group)."""
    if not active():
        return value
    import torch.distributed as dist

    t = _flag_tensor(value)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return float(t.item())


def agree(fn):
    """`fn` run on every rank; an out-of-memory error on any rank is raised on all of them."""
    if not active():
        return fn

    def wrapped(*args, **kwargs):
        import torch

        from genjudge.engine.devices import is_oom

        out, err = None, None
        try:
            out = fn(*args, **kwargs)
        except Exception as exc:  # noqa: BLE001 - re-raised below unless it is an OOM
            if not is_oom(exc):
                raise
            err = exc
        if agree_max(1.0 if err is not None else 0.0):
            if torch.cuda.is_available():
                torch.cuda.empty_cache()
            raise err if err is not None else torch.cuda.OutOfMemoryError("out of memory on another rank")
        return out

    return wrapped
