"""The batch a generator's or judge's jobs will run, as `genjudge plan` plans it: the engine's terms
(compiled or eager), the batch `batch_size: auto` chooses (planning.batch_choice.choose on the time
model's step line, or the one a job remembered), its probes, vLLM's concurrency; and the plan's
memory and time redone at that batch."""

from __future__ import annotations

import math

GIB = 1024**3


def planned_engine(spec, model, device, layout, requests: list) -> tuple[object, str]:
    """The engine's terms for this job, and for `compile: auto` whether it compiles (decided by
    time_model.choose_compile, as the job decides)."""
    from genjudge.engine.compiling import auto_decision, refusal, setting
    from genjudge.errors import InputError
    from genjudge.planning.time_model import Engine, engine_of

    if spec.engine != "transformers":
        return engine_of(spec), ""
    chosen = setting(spec)
    if chosen == "false":
        return Engine(compiled=False), "compile: false"
    if refusal(spec):
        raise InputError(refusal(spec))
    if chosen == "true":
        return Engine(compiled=True), "compile: true"
    yes, why = auto_decision(spec, device, model, requests, tensor=layout.kind == "tensor")
    return Engine(compiled=yes), why


def remembered_batch(cache_dir, spec, gpus: list, compiled: bool, longest: int) -> dict | None:
    """An entry an earlier job of this model remembered for these settings on GPUs of this kind and
    count (store.batch_memory: the job's key but for the weights' fingerprint, which a plan does not
    have; GPUs compared by hardware.same_gpu, nvidia-smi's name against the table's), or None."""
    from genjudge.engine.batch_size import memory_key
    from genjudge.planning.hardware import same_gpu
    from genjudge.store.batch_memory import BatchMemory

    verdict = "logprob" if getattr(spec, "verdict", None) == "logprob" else None
    want = memory_key(spec, None, compiled, longest, [], verdict)
    names = [g.name if hasattr(g, "name") else g["name"] for g in gpus]
    for found in BatchMemory(cache_dir).entries():
        key = found.get("key") or {}
        devices = key.get("devices") or []
        same_devices = len(devices) == len(names) and all(
            isinstance(d, list) and same_gpu(str(d[0]), n) for d, n in zip(devices, names)
        )
        same_key = set(key) == set(want) and all(key[k] == v for k, v in want.items() if k not in ("model", "devices"))
        if found.get("model_path") == spec.model and same_devices and same_key:
            return found
    return None


def planned_batch(e, given: int | None, requests: float, cache_dir=None) -> tuple[int, str]:
    """The batch the jobs of `e` (a plan_roles.Entry) will run: --batch-size, the configured size, vLLM's
    concurrency, or what `auto` picks: a remembered choice, else planning.batch_choice.choose on the
    memory plan's and the time model's lines (on the jobs' probes, the job calls the same function)."""
    from genjudge.engine.decoding import CPU_AUTO_BATCH, width_bucket
    from genjudge.planning.batch_choice import choose, memory_line_from_plan, recalled
    from genjudge.planning.time_model import ModelNumbers, step_line

    spec, p = e.spec, e.plan
    requests = max(1, math.ceil(requests))
    if given:
        return given, "--batch-size"
    if spec.engine == "vllm":
        return vllm_batch(p, spec)
    if spec.batch_size != "auto":
        return int(spec.batch_size), "batch_size"
    if not p.get("gpus"):
        batch = min(CPU_AUTO_BATCH, requests)
        return batch, f"batch_size auto on a CPU: a fixed {CPU_AUTO_BATCH}, at most the job's {requests} requests"
    if cache_dir is not None:
        found = remembered_batch(cache_dir, spec, e.job_gpus, e.engine.compiled, e.prompt_tokens)
        # Its probes solved again at this plan's lengths, as the job solves them at its own.
        full = width_bucket(p["seq_len"]) if e.engine.compiled else p["seq_len"]
        c = recalled(found, requests, full, float(spec.memory_margin)) if found else None
        if c is not None:
            return c.batch, f"batch_size auto: {c.reason}"
    model = ModelNumbers.from_plan(p)
    speed = step_line(model, e.device, e.layout, e.engine, p["seq_len"])
    c = choose(memory_line_from_plan(p, e.prompt_tokens), speed, requests, float(spec.memory_margin))
    return c.batch, f"batch_size auto: {c.reason}; the job decides on its own probes with the same function"


def search_probes(spec, device, batch: int, how: str, given) -> tuple:
    """The batches batch_size auto probes in a job (engine.batch_size): none where the batch is given,
    configured, remembered, vLLM's or on a CPU."""
    if (
        given
        or spec.engine != "transformers"
        or spec.batch_size != "auto"
        or device.kind != "gpu"
        or "remembered" in how
    ):
        return ()
    from genjudge.engine.batch_size import PROBE_BATCHES

    first = tuple(dict.fromkeys(min(b, batch) for b in PROBE_BATCHES))
    return first + ((batch,) if batch > max(first) else ())


def vllm_batch(p: dict, spec) -> tuple[int, str]:
    """vLLM's running batch: as many sequences of the longest request as its KV cache holds, up to
    max_num_seqs (`batch_size` when a number, else vLLM's 256)."""
    from genjudge.models.vllm_support import parse_bytes
    from genjudge.planning.time_model import VLLM_MAX_NUM_SEQS

    cap = int(spec.batch_size) if spec.batch_size != "auto" else VLLM_MAX_NUM_SEQS
    seq = p["kv_bytes_per_token"] * p["seq_len"]
    v = spec.vllm
    if v["kv_cache_memory"]:
        kv, where = parse_bytes(v["kv_cache_memory"]), f"vllm.kv_cache_memory {v['kv_cache_memory']}"
    elif not p.get("gpus"):
        kv, where = max(GIB, 4 * seq), "the CPU's KV cache (room for 4 sequences of the context, at least 1 GiB)"
    else:
        gpu = min(g["total_bytes"] for g in p["gpus"]) * len(p["gpus"])
        weights = p["weights_bytes"].get(p["precision"], p["weights_bytes"]["bfloat16"])
        kv = max(0, gpu * v["gpu_memory_utilization"] - weights * 1.05)  # ~5% for activations
        where = f"gpu_memory_utilization {v['gpu_memory_utilization']} of the GPUs, less the weights"
    fits = int(kv // seq) if seq else cap
    batch = max(1, min(cap, fits))
    return batch, (
        f"vLLM runs up to {cap} sequences at once; its KV cache ({where}: {kv / GIB:.1f} GiB) holds {fits} of "
        f"{p['seq_len']} tokens; continuous batching keeps the batch full"
    )


def with_batch(p: dict, batch: int) -> None:
    """The memory plan's KV line (and its advice) at the batch the jobs run."""
    p["batch_size"] = batch
    p["kv_cache_bytes"] = p["kv_bytes_per_token"] * batch * p["seq_len"]
    if p.get("headroom_bytes") is None:
        return
    from genjudge.engine.memory_plan import ACTIVATION_RESERVE

    p["kv_cache_fits"] = p["kv_cache_bytes"] <= p["headroom_bytes"] * (1 - ACTIVATION_RESERVE)
    if p["fits"] and not p["kv_cache_fits"]:
        p["recommendation"] = (
            f"the KV cache of batch {batch} at the longest prompt does not fit beside the weights: use "
            f"batch_size <= {p['max_batch_for_kv']} (or batch_size: auto); shorter prompts may still fit"
        )
    elif p["fits"]:
        p.pop("recommendation", None)
