"""The devices this process sees through torch, and the driver."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Gpu:
    index: str
    name: str
    total_bytes: int
    free_bytes: int | None = None


def cuda_gpus() -> list[Gpu]:
    """The GPUs torch sees in this process (after CUDA_VISIBLE_DEVICES), with free memory."""
    import torch

    gpus = []
    if torch.cuda.is_available():
        for i in range(torch.cuda.device_count()):
            free, total = torch.cuda.mem_get_info(i)
            gpus.append(Gpu(str(i), torch.cuda.get_device_name(i), total, free))
    return gpus


def driver_info() -> dict:
    import torch

    info = {"torch_cuda": torch.version.cuda}
    try:
        import subprocess

        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=20,
        )
        if out.returncode == 0:
            info["driver"] = out.stdout.splitlines()[0].strip()
    except (OSError, subprocess.SubprocessError):
        pass
    return info


def torch_device_info() -> dict:
    import torch

    info = {
        "torch": torch.__version__,
        "cuda_available": torch.cuda.is_available(),
        "threads": torch.get_num_threads(),
        "devices": [],
    }
    if torch.cuda.is_available():
        for i in range(torch.cuda.device_count()):
            props = torch.cuda.get_device_properties(i)
            info["devices"].append({"index": i, "name": props.name, "total_memory": props.total_memory})
    return info


def cpu_matmul_flops(threads: int, size: int = 1024, repeats: int = 5) -> float:
    """FLOP/s of a square fp32 matmul in torch on `threads` threads (the median of `repeats`), as a
    CPU job with that many threads runs the model's matmuls."""
    import statistics
    import time

    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(max(1, threads))
    try:
        x, y = torch.ones(size, size), torch.ones(size, size)
        x @ y
        times = []
        for _ in range(repeats):
            t = time.perf_counter()
            x @ y
            times.append(time.perf_counter() - t)
    finally:
        torch.set_num_threads(before)
    return 2 * size**3 / statistics.median(times)
