"""`generator.compile` / `judge.compile`: decode on transformers' static KV cache with a compiled forward.

`auto` compiles where it pays and transformers can: the model on CUDA GPUs only (no CPU or disk
offload), not quantized by bitsandbytes (transformers does not compile its layers), not a rank of a
torchrun group, and where the time model says the decoding it saves pays for compiling
(`auto_decision`: `genjudge plan` and the job call it alike, each with its own device). `true` asks for
it anywhere transformers can (on a CPU too: the tests compare it with eager decoding there); `false`
never.
"""

from __future__ import annotations

import math

from genjudge.errors import InputError

COMPILE_DECISION_BATCH = 64  # compile: auto is decided at this batch (capped at the job's requests) by plan and job


def setting(spec) -> str:
    """auto, true or false (the config may hold a boolean or the string)."""
    value = getattr(spec, "compile", "auto")
    return {True: "true", False: "false"}.get(value, str(value)) if isinstance(value, bool) else str(value)


def refusal(spec) -> str | None:
    """Why `compile: true` cannot be honoured for these settings, whatever the devices (or None)."""
    if setting(spec) != "true":
        return None
    if spec.quantization != "none":
        return (
            f"compile: true with quantization {spec.quantization}: transformers does not compile bitsandbytes "
            "layers; use compile: auto (eager) or a 16-bit model"
        )
    return None


def auto_decision(spec, device, numbers, requests: list, tensor: bool = False) -> tuple[bool, str]:
    """`compile: auto` on `device` (a planning Device: the plan's, or the job's own GPU): eager off
    CUDA GPUs, for bitsandbytes layers and in a torchrun group; elsewhere as
    time_model.choose_compile says for these model numbers and requests at the decision batch."""
    from genjudge.planning.time_model import choose_compile

    if device.kind != "gpu":
        return False, "compile: auto compiles on CUDA GPUs only"
    if spec.quantization != "none":
        return False, f"compile: auto: transformers does not compile {spec.quantization} layers"
    if tensor:
        return False, "compile: auto leaves a torchrun group eager"
    n = sum(r.n for r in requests)
    yes, why = choose_compile(numbers, device, requests, max(1, min(COMPILE_DECISION_BATCH, math.ceil(n))))
    return yes, f"compile: auto: {why}"


def model_device(model):
    """The planning Device a loaded model decodes on: its first GPU as the plan names GPUs (name and
    memory), or a CPU."""
    from genjudge.planning.time_model import Device, gpu_device

    if model.device.type != "cuda":
        return Device("cpu", 0, 0, 0, kind="cpu")
    import torch

    props = torch.cuda.get_device_properties(model.device)
    return gpu_device({"name": props.name, "total_bytes": props.total_memory})


def use_compile(spec, model, plan_of=None, requests: list | None = None, device=None) -> tuple[bool, str]:
    """(compile?, why) for this spec and the loaded model. For `auto`: `plan_of()` gives the job's
    memory plan (its model numbers; called only where they decide), `requests` the job's
    (time_model.Requests), `device` the Device it runs on (default: the model's own)."""
    from genjudge.engine import tensor_parallel

    chosen = setting(spec)
    if getattr(spec, "engine", "transformers") != "transformers":
        return False, "the engine compiles its own way"
    if chosen == "false":
        return False, "compile: false"
    why_not = refusal(spec)
    if why_not:
        raise InputError(why_not)
    devices = {str(d) for d in (getattr(model, "hf_device_map", None) or {"": model.device.type}).values()}
    offloaded = bool(devices & {"cpu", "disk"}) and any(d not in ("cpu", "disk") for d in devices)
    if chosen == "true":
        if offloaded:
            raise InputError("compile: true, but part of the model is offloaded to the CPU or disk")
        return True, "compile: true"
    if offloaded:
        return False, "compile: auto compiles on CUDA GPUs only"
    device = device if device is not None else model_device(model)
    needs_numbers = device.kind == "gpu" and spec.quantization == "none" and not tensor_parallel.active()
    numbers = None
    if needs_numbers:
        plan = plan_of() if plan_of is not None else None
        if not (plan or {}).get("weights_bytes"):
            return False, "compile: auto: no memory plan of the model to decide with (eager)"
        from genjudge.planning.time_model import ModelNumbers

        numbers = ModelNumbers.from_plan(plan)
    return auto_decision(spec, device, numbers, requests or [], tensor=tensor_parallel.active())
