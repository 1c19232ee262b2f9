"""How a judge uses its GPUs (`judge.parallel`): the rules, on plain facts, decided while planning.

- `device_map`: one process per judge job, the model's layers spread over the job's GPUs
  (accelerate); only one GPU works at a time.
- `tensor`: one torchrun group per judge job over its GPUs, every weight split across them
  (transformers' tensor-parallel plan); all GPUs work on every token.
- `replicas`: one judge job per GPU, each with the whole model and its share of the items,
  merged as `judge.shards` are (it is that mechanism, with one GPU per shard).
- `auto`: replicas when the weights fit one GPU, tensor when they need several and the
  model has a tensor-parallel plan, else device_map.

The facts about the model (`ModelFacts`: its weights, whether the installed transformers has a
tensor-parallel plan for it, its heads) are read from its config.json by the engine
(engine/judge_parallel.py, no weights loaded), which hands them here as plain data, or as a
function that reads them only when a choice needs them. This module imports no model code: the
rules run and are tested without torch, and the engine splits a model by the same rule.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from genjudge.errors import InputError

CHOICES = ("device_map", "tensor", "replicas")
# Room kept free on each GPU for activations and the CUDA context when judging fit.
ACTIVATION_RESERVE = 0.05
GB = 1000**3


@dataclass(frozen=True)
class Layout:
    parallel: str  # device_map, tensor or replicas: what the jobs do
    jobs: int  # judge jobs (the shard files' count)
    gpus_per_job: int
    reason: str


@dataclass(frozen=True)
class ModelFacts:
    """What the rules need to know about a judge model."""

    model_class: str  # e.g. LlamaForCausalLM
    has_tp_plan: bool  # the installed transformers can split it (a base_model_tp_plan)
    attention_heads: int | None
    kv_heads: int | None
    weight_bytes: int  # at the judge's precision


# The facts, or a function that reads them (raising InputError where the model's config cannot be read).
Facts = ModelFacts | Callable[[], ModelFacts]


def size_text(n: float) -> str:
    for div, unit in ((GB, "GB"), (1000**2, "MB"), (1000, "kB")):
        if abs(n) >= div:
            return f"{n / div:.1f} {unit}"
    return f"{int(n)} B"


def tensor_obstacle(facts: ModelFacts, n: int, quantization: str, engine: str = "transformers") -> str | None:
    """Why this model cannot be split over `n` ranks by the installed transformers (or by vLLM's own
    tensor parallelism, `engine: vllm`: no transformers plan needed, bitsandbytes included), or None."""
    if engine == "vllm":
        from genjudge.models.vllm_support import heads_obstacle

        return heads_obstacle(facts.attention_heads, facts.kv_heads, n)
    if not facts.has_tp_plan:
        return (
            f"{facts.model_class} has no tensor-parallel plan in the installed transformers "
            "(no base_model_tp_plan in its config)"
        )
    if quantization != "none":
        return (
            f"quantization {quantization}: bitsandbytes stores packed weights that the installed "
            "transformers does not shard for tensor parallelism"
        )
    for what, count in (("attention heads", facts.attention_heads), ("key/value heads", facts.kv_heads)):
        if count and count % n:
            return f"its {count} {what} do not split evenly over {n} GPUs"
    return None


def _read(facts: Facts) -> ModelFacts:
    return facts() if callable(facts) else facts


def per_shard_gpus(spec, slurm, n_inventory: int, on_slurm: bool) -> int:
    """GPUs of one judge job under device_map: `judge.gpus`, or the machine's (one node's on
    SLURM: `slurm`, job_resources.SlurmSettings) shared out among `judge.shards`."""
    if spec.gpus != "all":
        return int(spec.gpus)
    node = slurm.setting("gpus_per_node", "judge") if on_slurm else n_inventory
    return max(1, node // spec.shards) if node else 0


def explicit_tensor_obstacle(spec, n: int, facts: Facts) -> str | None:
    """For `parallel: tensor`: the obstacle, or None when the model's config cannot be read here (not
    in the local cache: transformers checks the plan itself when the job loads the model)."""
    try:
        return tensor_obstacle(_read(facts), max(n, 1), spec.quantization, spec.engine)
    except InputError:
        return None


def decide(spec, n: int, facts: Facts, gpu_bytes: int | None = None) -> tuple[str, str]:
    """(device_map|tensor|replicas, why) for a judge job that would get `n` GPUs under device_map.

    `gpu_bytes`: the size of one of them (None: unknown). An explicit `tensor` that cannot work is
    an InputError with the reason."""
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
        why = explicit_tensor_obstacle(spec, n, facts)
        if why:
            raise InputError(f"judge {spec.model}: judge.parallel: tensor is impossible: {why}")
        return "tensor", f"judge.parallel: tensor: one torchrun group of {n}"
    if n == 0:
        return "device_map", "auto: no GPUs, one process on the CPU"
    if n == 1:
        return "device_map", "auto: one GPU per judge job, nothing to parallelise"
    try:
        model = _read(facts)
    except InputError as exc:
        return "device_map", f"auto: the model's config.json cannot be read here ({exc})"
    why = tensor_obstacle(model, n, spec.quantization, spec.engine)
    if gpu_bytes is None:
        if why:
            return "device_map", f"auto: GPU memory unknown (set judge.gpu_memory) and no tensor parallelism: {why}"
        return "tensor", (
            f"auto: GPU memory unknown (set judge.gpu_memory to let auto choose replicas for a judge that "
            f"fits one GPU); the model has a tensor-parallel plan: one torchrun group of {n}"
        )
    w = model.weight_bytes
    one = gpu_bytes * (1 - ACTIVATION_RESERVE)
    size = f"{gpu_bytes / 1024**3:.0f} GiB"
    if w <= one:
        return "replicas", (
            f"auto: the weights ({size_text(w)} at {spec.precision}) fit one GPU of {size}: {n} replicas, "
            f"one per GPU, each judging its share of the items"
        )
    need = math.ceil(w / one)
    if why:
        return "device_map", (
            f"auto: the weights ({size_text(w)} at {spec.precision}) need {need} GPUs of {size} and tensor "
            f"parallelism is not possible ({why}): layers spread with device_map"
        )
    return "tensor", (
        f"auto: the weights ({size_text(w)} at {spec.precision}) need {need} GPUs of {size} and the model has a "
        f"tensor-parallel plan: one torchrun group over {n} GPUs"
    )


ENDPOINT = Layout("endpoint", 0, 0, "engine: openai: the model runs behind its endpoint; the jobs ask for no GPU")


def layout(spec, n: int, facts: Facts, gpu_bytes: int | None = None) -> Layout:
    """The judge jobs and their GPUs, for `n` GPUs per judge shard under device_map."""
    if spec.engine == "openai":
        return Layout(ENDPOINT.parallel, spec.shards, 0, ENDPOINT.reason)
    choice, reason = decide(spec, n, facts, gpu_bytes)
    if choice == "replicas":
        return Layout(choice, spec.shards * n, 1, reason)
    return Layout(choice, spec.shards, n, reason)


def job_choice(spec, n: int, facts: Facts) -> tuple[str, str]:
    """In a judge job with `n` leased GPUs: run as a tensor-parallel group or as one process.
    The plan chose replicas by giving each job one GPU; between tensor and device_map the
    choice depends only on the model, so the job makes the plan's choice again."""
    if spec.engine == "openai":
        return ENDPOINT.parallel, ENDPOINT.reason
    if spec.parallel in ("device_map", "replicas") or n <= 1:
        return "device_map", f"{n} GPU(s), judge.parallel: {spec.parallel}: one process"
    if spec.parallel == "tensor":
        why = explicit_tensor_obstacle(spec, n, facts)
        if why:
            raise InputError(f"judge {spec.model}: judge.parallel: tensor is impossible: {why}")
        return "tensor", f"judge.parallel: tensor over {n} GPUs"
    try:
        why = tensor_obstacle(_read(facts), n, spec.quantization, spec.engine)
    except InputError as exc:
        return "device_map", f"auto: the model's config.json cannot be read here ({exc})"
    if why:
        return "device_map", f"auto: {why}"
    return "tensor", f"auto: the model needs the {n} GPUs of this job and has a tensor-parallel plan"


def check_tensor_possible(spec, facts: Facts) -> None:
    """For `judge.parallel: tensor`: stop while planning when no number of GPUs could split this
    model (no tensor-parallel plan, a quantization that cannot be sharded)."""
    if spec.parallel != "tensor" or spec.engine == "openai":
        return
    why = explicit_tensor_obstacle(spec, 1, facts)  # None too where config.json is not here yet: the job checks
    if why:
        raise InputError(f"judge {spec.model}: judge.parallel: tensor is impossible: {why}")
