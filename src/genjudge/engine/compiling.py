"""`generator.compile` / `judge.compile`: decode on transformers' static KV cache with a compiled forward.

`auto` compiles where it pays and transformers can: the model on CUDA GPUs only (no CPU or disk
offload), not quantized by bitsandbytes (transformers does not compile its layers), not a rank of a
torchrun group. `true` asks for it anywhere transformers can (on a CPU too: the tests compare it with
eager decoding there); `false` never.
"""

from __future__ import annotations

from genjudge.errors import InputError


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


def use_compile(spec, model) -> tuple[bool, str]:
    """(compile?, why) for this spec and the loaded model."""
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
    if tensor_parallel.active():
        return False, "compile: auto leaves a torchrun group eager"
    if spec.quantization != "none":
        return False, f"compile: auto: transformers does not compile {spec.quantization} bitsandbytes layers"
    if model.device.type != "cuda" or offloaded:
        return False, "compile: auto compiles on CUDA GPUs only"
    return True, "compile: auto on CUDA"
