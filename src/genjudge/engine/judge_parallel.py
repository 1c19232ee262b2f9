"""How a judge uses its GPUs (`judge.parallel`), decided while planning, before any job runs.

- `device_map`: one process per judge job, the model's layers spread over the job's GPUs
  (accelerate); only one GPU works at a time.
- `tensor`: one torchrun group per judge job over its GPUs, every weight split across them
  (transformers' tensor-parallel plan); all GPUs work on every token.
- `replicas`: one judge job per GPU, each with the whole model and its share of the items,
  merged as `judge.shards` are (it is that mechanism, with one GPU per shard).
- `auto`: replicas when the weights fit one GPU, tensor when they need several and the
  model has a tensor-parallel plan, else device_map.

The weights come from memory_plan (config.json alone, no weights loaded); the GPUs'
sizes from nvidia-smi for the local inventory, or `judge.gpu_memory` (SLURM, planning
for other machines).
"""

from __future__ import annotations

import json
import math
import shutil
import subprocess
from dataclasses import dataclass
from functools import lru_cache

from genjudge.errors import InputError

CHOICES = ("device_map", "tensor", "replicas")


@dataclass(frozen=True)
class Layout:
    parallel: str  # device_map, tensor or replicas: what the jobs do
    jobs: int  # judge jobs (the shard files' count)
    gpus_per_job: int
    reason: str


def per_shard_gpus(spec, config: dict, n_inventory: int, on_slurm: bool) -> int:
    """GPUs of one judge job under device_map: `judge.gpus`, or the machine's (one node's on
    SLURM) shared out among `judge.shards`."""
    if spec.gpus != "all":
        return int(spec.gpus)
    from genjudge.job_resources import slurm_setting

    node = slurm_setting(config, "gpus_per_node", "judge") if on_slurm else n_inventory
    return max(1, node // spec.shards) if node else 0


def gpu_bytes_from_nvidia_smi(inventory: list) -> list[int] | None:
    """memory.total of each inventory GPU (by index), or None when nvidia-smi cannot tell."""
    exe = shutil.which("nvidia-smi")
    if not exe or not inventory:
        return None
    try:
        out = subprocess.run(
            [exe, "--query-gpu=index,memory.total", "--format=csv,noheader,nounits"],
            capture_output=True,
            text=True,
            timeout=20,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    if out.returncode != 0:
        return None
    sizes = {}
    for line in out.stdout.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) == 2 and parts[1].replace(".", "", 1).isdigit():
            sizes[parts[0]] = int(float(parts[1]) * 1024**2)  # MiB
    found = [sizes.get(str(g)) for g in inventory]
    return None if any(s is None for s in found) else found


def job_gpus_for(spec, config: dict, inventory: list, on_slurm: bool, n: int):
    """Hypothetical Gpu objects of one judge job (sizes known), or None."""
    from genjudge.engine.devices import Gpu
    from genjudge.engine.memory_plan import parse_inventory_spec

    if spec.gpu_memory:
        return parse_inventory_spec(f"{n}x{spec.gpu_memory}")
    if on_slurm:
        return None
    sizes = gpu_bytes_from_nvidia_smi(inventory[:n])
    return [Gpu(str(i), "nvidia-smi", s, s) for i, s in enumerate(sizes)] if sizes else None


def _model(spec):
    from genjudge.engine.memory_plan import empty_model, load_config

    config = load_config(spec.model, spec.revision)
    return config, empty_model(config)


def tensor_obstacle(spec, n: int, model=None) -> str | None:
    if spec.engine == "vllm":  # vLLM's own tensor parallelism: no transformers plan needed
        from genjudge.vllm_support import local_config
        from genjudge.vllm_support import tensor_obstacle as vllm_obstacle

        config = local_config(spec.model, spec.revision)
        return vllm_obstacle(config, max(n, 1)) if config is not None else None
    from genjudge.engine.tensor_parallel import obstacle

    config, model = (model.config, model) if model is not None else _model(spec)
    return obstacle(config, model, max(n, 1), spec.quantization)


def _explicit_tensor_obstacle(spec, n: int, model=None) -> str | None:
    """For `parallel: tensor`: the obstacle, or None when the config cannot be read here (not in
    the local cache: transformers checks the plan itself when the job loads the model)."""
    try:
        return tensor_obstacle(spec, n, model)
    except InputError:
        return None


def decide(spec, n: int, gpus=None, model=None) -> tuple[str, str]:
    """(device_map|tensor|replicas, why) for a judge job that would get `n` GPUs under device_map.

    `gpus`: the Gpu objects with their sizes (None: unknown). An explicit `tensor` that
    cannot work is an InputError with the reason."""
    from genjudge.engine.memory_plan import ACTIVATION_RESERVE, _bytes, weight_bytes

    wanted = spec.parallel
    if wanted == "device_map":
        return "device_map", "judge.parallel: device_map"
    if wanted == "replicas":
        if n <= 1:
            return "device_map", f"judge.parallel: replicas, with {n} GPU(s) per judge: one process already"
        return "replicas", f"judge.parallel: replicas: {n} jobs of one GPU each"
    if wanted == "tensor":
        if n <= 1:
            return "device_map", f"judge.parallel: tensor, but {n} GPU(s) per judge job: nothing to split"
        why = _explicit_tensor_obstacle(spec, n, model)
        if why:
            raise InputError(f"judge {spec.model}: judge.parallel: tensor is impossible: {why}")
        return "tensor", f"judge.parallel: tensor: one torchrun group of {n}"
    if n == 0:
        return "device_map", "auto: no GPUs, one process on the CPU"
    if n == 1:
        return "device_map", "auto: one GPU per judge job, nothing to parallelise"
    if model is None:
        try:
            _, model = _model(spec)
        except InputError as exc:
            return "device_map", f"auto: the model's config.json cannot be read here ({exc})"
    if gpus is None:
        why = tensor_obstacle(spec, n, model)
        if why:
            return "device_map", f"auto: GPU memory unknown (set judge.gpu_memory) and no tensor parallelism: {why}"
        return "tensor", (
            f"auto: GPU memory unknown (set judge.gpu_memory to let auto choose replicas for a judge that "
            f"fits one GPU); the model has a tensor-parallel plan: one torchrun group of {n}"
        )
    w = weight_bytes(model, spec.precision, spec.bnb_4bit_use_double_quant)
    one = gpus[0].total_bytes * (1 - ACTIVATION_RESERVE)
    size = f"{gpus[0].total_bytes / 1024**3:.0f} GiB"
    if w <= one:
        return "replicas", (
            f"auto: the weights ({_bytes(w)} at {spec.precision}) fit one GPU of {size}: {n} replicas, "
            f"one per GPU, each judging its share of the items"
        )
    need = math.ceil(w / one)
    why = tensor_obstacle(spec, n, model)
    if why:
        return "device_map", (
            f"auto: the weights ({_bytes(w)} at {spec.precision}) need {need} GPUs of {size} and tensor "
            f"parallelism is not possible ({why}): layers spread with device_map"
        )
    return "tensor", (
        f"auto: the weights ({_bytes(w)} at {spec.precision}) need {need} GPUs of {size} and the model has a "
        f"tensor-parallel plan: one torchrun group over {n} GPUs"
    )


def layout(spec, config: dict, inventory: list, on_slurm: bool, gpus=None, model=None) -> Layout:
    """The judge jobs and their GPUs. `gpus`: the GPUs of one job with their sizes, when the
    caller knows them (the plan's hypothetical inventory); else nvidia-smi or judge.gpu_memory."""
    n = per_shard_gpus(spec, config, len(inventory), on_slurm)
    if gpus is not None:
        gpus = list(gpus)[:n] or None
    elif spec.parallel == "auto" and n > 1:
        gpus = job_gpus_for(spec, config, inventory, on_slurm, n)
    choice, reason = decide(spec, n, gpus, model)
    if choice == "replicas":
        return Layout(choice, spec.shards * n, 1, reason)
    return Layout(choice, spec.shards, n, reason)


@lru_cache(maxsize=64)
def _cached(spec_json: str, config_json: str, inventory: tuple, on_slurm: bool) -> Layout:
    from genjudge.specs import JudgeSpec

    return layout(JudgeSpec.from_config(json.loads(spec_json)), json.loads(config_json), list(inventory), on_slurm)


def cached_layout(spec, config: dict, inventory: list, on_slurm: bool) -> Layout:
    """layout(), computed once per judge and setting (the rules ask for it many times)."""
    if spec.parallel in ("device_map", "replicas"):  # cheap: no model to look at
        return layout(spec, config, inventory, on_slurm)
    return _cached(
        json.dumps(spec.as_dict(), sort_keys=True, default=str),
        json.dumps({"slurm": config["slurm"]}, sort_keys=True),
        tuple(map(str, inventory)),
        on_slurm,
    )


def job_choice(spec, n: int) -> tuple[str, str]:
    """In a judge job with `n` leased GPUs: run as a tensor-parallel group or as one process.
    The plan chose replicas by giving each job one GPU; between tensor and device_map the
    choice depends only on the model, so the job makes the plan's choice again."""
    if spec.parallel in ("device_map", "replicas") or n <= 1:
        return "device_map", f"{n} GPU(s), judge.parallel: {spec.parallel}: one process"
    if spec.parallel == "tensor":
        why = _explicit_tensor_obstacle(spec, n)
        if why:
            raise InputError(f"judge {spec.model}: judge.parallel: tensor is impossible: {why}")
        return "tensor", f"judge.parallel: tensor over {n} GPUs"
    try:
        why = tensor_obstacle(spec, n)
    except InputError as exc:
        return "device_map", f"auto: the model's config.json cannot be read here ({exc})"
    if why:
        return "device_map", f"auto: {why}"
    return "tensor", f"auto: the model needs the {n} GPUs of this job and has a tensor-parallel plan"


def check_tensor_possible(spec) -> None:
    """For `judge.parallel: tensor`: stop while planning when no number of GPUs could split this
    model (no tensor-parallel plan, a quantization that cannot be sharded)."""
    if spec.parallel != "tensor":
        return
    why = _explicit_tensor_obstacle(spec, 1)  # None too where config.json is not here yet: the job checks
    if why:
        raise InputError(f"judge {spec.model}: judge.parallel: tensor is impossible: {why}")
