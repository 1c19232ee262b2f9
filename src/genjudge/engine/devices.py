"""The devices this process sees through torch, the driver, and their out-of-memory errors; this
CPU measured as the time model sees a device (`measure_cpu`)."""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from genjudge.planning.time_model import FLOPS_EFFICIENCY, Device


@dataclass
class Gpu:
    index: str
    name: str
    total_bytes: int
    free_bytes: int | None = None


def is_oom(exc: BaseException) -> bool:
    """An out-of-memory error of a device (CUDA's, or the allocator's RuntimeError on others)."""
    import torch

    return isinstance(exc, torch.cuda.OutOfMemoryError) or (
        isinstance(exc, RuntimeError) and "out of memory" in str(exc).lower()
    )


def free_cuda_cache() -> None:
    import torch

    if torch.cuda.is_available():
        torch.cuda.empty_cache()


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


def lease_check(
    leased: list[str], cuda_available: bool, visible: int, visible_uuids: list[str] | None = None
) -> str | None:
    """Whether torch sees the GPUs this job leased (`leased`: CUDA_VISIBLE_DEVICES's entries). Where torch
    sees CUDA but fewer devices than leased, or not a leased UUID, the job stops (InputError naming
    gpu_inventory: CUDA stops at an id the machine lacks, so gpu_inventory [0, 7] on one GPU shows one).
    Where torch sees no CUDA at all (a CPU machine, or every leased id missing), the job runs on the CPU:
    the returned line says so for its log (the report notes it from the meta's `device`)."""
    from genjudge.errors import InputError

    if not leased:
        return None
    ids = ",".join(leased)
    if not cuda_available:
        return (
            f"runs on the CPU despite its lease of GPU(s) {ids} (CUDA_VISIBLE_DEVICES): torch sees no CUDA device "
            "(no GPU here, or none of these ids exists on this machine: check gpu_inventory)"
        )
    if visible < len(leased):
        raise InputError(
            f"this job leased GPU(s) {ids} (CUDA_VISIBLE_DEVICES, from gpu_inventory) but torch sees {visible} of "
            f"them: list in gpu_inventory only GPUs this machine has (nvidia-smi -L); nothing was computed"
        )
    wanted = [d for d in leased if d.startswith(("GPU-", "MIG-"))]
    if wanted and visible_uuids is not None:
        missing = [d for d in wanted if d not in visible_uuids]
        if missing:
            raise InputError(
                f"this job leased GPU(s) {', '.join(missing)} (gpu_inventory) but torch sees no device with that "
                f"UUID (it sees {', '.join(visible_uuids) or 'none'}); nothing was computed"
            )
    return None


def check_leased_devices(log) -> None:
    """`lease_check` of this process: CUDA_VISIBLE_DEVICES against torch's devices (at the first model load)."""
    import torch

    leased = [d.strip() for d in (os.environ.get("CUDA_VISIBLE_DEVICES") or "").split(",") if d.strip()]
    available = torch.cuda.is_available()
    visible = torch.cuda.device_count() if available else 0
    uuids = None
    if available:
        try:
            uuids = [f"GPU-{torch.cuda.get_device_properties(i).uuid}" for i in range(visible)]
        except (AttributeError, RuntimeError):  # a torch without the UUID: the count only
            uuids = None
    line = lease_check(leased, available, visible, uuids)
    if line:
        log.warning("%s", line)


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


def machine_cache_dir() -> Path:
    """Where figures that belong to this machine, not to a run, are kept: $GENJUDGE_MACHINE_CACHE, else
    $XDG_CACHE_HOME/genjudge, else ~/.cache/genjudge."""
    explicit = os.environ.get("GENJUDGE_MACHINE_CACHE")
    if explicit:
        return Path(explicit)
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "genjudge"


def installed(name: str) -> str | None:
    """A distribution's installed version, read from its metadata (nothing is imported); None if absent."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(name)
    except PackageNotFoundError:
        return None


def cpu_identity(threads: int, size_mb: int, repeats: int) -> dict:
    """What a CPU measurement depends on: the host, its processor and cores, the thread count and the
    library versions that run the step (read from the installed metadata; nothing is imported)."""
    import platform
    import socket

    model = platform.processor()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {
        "host": socket.gethostname(),
        "cpu": model,
        "cores": os.cpu_count(),
        "threads": threads,
        "size_mb": size_mb,
        "repeats": repeats,
        "torch": installed("torch"),
        "transformers": installed("transformers"),
        "version": 1,
    }


@lru_cache(maxsize=8)
def measure_cpu(threads: int = 1, size_mb: int = 256, repeats: int = 5, remember: bool = True) -> Device:
    """This machine's CPU as a job with `threads` torch threads sees it: memory bandwidth as the bytes a
    large array copy reads per second (numpy, one thread; decoding reads its weights, it writes little),
    the FLOP/s of an fp32 matmul in torch with `threads` threads (what runs the model) and the host
    time of an eager decoding step; medians of `repeats`.

    Measured once per machine (about 10 CPU-seconds, most of it importing torch and transformers) and
    remembered under machine_cache_dir()/cpu/, keyed by cpu_identity(): every later plan and report on
    this machine reads the same figures. `remember=False` measures afresh and stores nothing."""
    import json

    from genjudge.store import atomic
    from genjudge.store.item_store import item_key

    key = cpu_identity(threads, size_mb, repeats)
    path = machine_cache_dir() / "cpu" / f"{item_key(**key)[:32]}.json"
    if remember:
        try:
            stored = json.loads(path.read_text())
            if stored.get("key") == key:
                fields = stored["device"]
                fields["step_overhead"] = tuple(fields["step_overhead"])
                return Device(**fields)
        except (OSError, ValueError, KeyError, TypeError):
            pass
    device = _measure_cpu(threads, size_mb, repeats)
    if remember:
        try:
            atomic.write_json(path, {"key": key, "device": dataclasses.asdict(device)})
        except OSError:  # a read-only home: measured again next time
            pass
    return device


def _measure_cpu(threads: int, size_mb: int, repeats: int) -> Device:
    import datetime
    import statistics
    import time

    import numpy as np

    n = size_mb * 2**20 // 8
    a, b = np.ones(n), np.empty(n)
    copies = []
    for _ in range(repeats):
        t = time.perf_counter()
        np.copyto(b, a)
        copies.append(time.perf_counter() - t)
    bandwidth = a.nbytes / statistics.median(copies)
    m = 1024
    flops = cpu_matmul_flops(threads, m, repeats)
    try:
        memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):  # pragma: no cover - non-POSIX
        memory = 0
    fixed, per_layer = cpu_step_overhead(threads, repeats)
    return Device(
        f"this CPU ({threads} of {os.cpu_count()} cores)",
        memory,
        bandwidth,
        flops,
        "cpu",
        f"measured {datetime.date.today().isoformat()}: bytes a {size_mb} MB array copy reads per second, "
        f"a {m}x{m} fp32 matmul on {threads} thread(s), an eager decoding step of 1- and 3-layer Llamas "
        f"(host time: {fixed * 1e3:.2f} ms + {per_layer * 1e3:.2f} ms a layer); medians of {repeats}",
        1.0,
        FLOPS_EFFICIENCY,
        step_overhead=(fixed, per_layer),
    )


def cpu_step_overhead(threads: int = 1, repeats: int = 5, steps: int = 16) -> tuple[float, float]:
    """The host's seconds of one eager transformers decoding step on this CPU, as (fixed, per layer):
    tiny Llamas of 1 and 3 layers, whose arithmetic takes microseconds, decode `steps` tokens; the
    step's time against the layers. Python's per-step cost differs by a factor of three between
    machines of this project's own kind, so it is measured rather than assumed."""
    import statistics

    import torch
    from transformers import LlamaConfig, LlamaForCausalLM, StoppingCriteriaList

    from genjudge.engine.clock import StepClock

    before = torch.get_num_threads()
    torch.set_num_threads(max(1, threads))
    per = {}
    try:
        for layers in (1, 3):
            cfg = LlamaConfig(
                vocab_size=64,
                hidden_size=64,
                intermediate_size=128,
                num_hidden_layers=layers,
                num_attention_heads=2,
                num_key_value_heads=2,
                max_position_embeddings=64,
            )
            torch.manual_seed(0)
            model = LlamaForCausalLM(cfg).eval()
            ids = torch.ones((1, 8), dtype=torch.long)
            times = []
            for i in range(repeats + 1):
                clock = StepClock()
                clock.start()
                with torch.inference_mode():
                    model.generate(
                        ids,
                        attention_mask=torch.ones_like(ids),
                        max_new_tokens=steps,
                        min_new_tokens=steps,
                        do_sample=False,
                        pad_token_id=0,
                        stopping_criteria=StoppingCriteriaList([clock]),
                    )
                clock.end()
                if i:  # the first is a warm-up
                    times.append(statistics.median(clock.step_seconds()))
            per[layers] = statistics.median(times)
    finally:
        torch.set_num_threads(before)
    per_layer = max(0.0, (per[3] - per[1]) / 2)
    return max(0.0, per[1] - per_layer), per_layer
