"""`batch_size: auto` on the job's devices: two short probes of the loaded model (a few decoding steps
each, at batches of 8 and 64), the batch chosen from them by `genjudge.planning.batch_choice.choose` (the
function `genjudge plan` calls too), a third probe at the chosen batch when it lies beyond them, and
the choice remembered in the cache directory (`genjudge.store.batch_memory`) for the job's other
shards and reruns: its probes, solved again at each later job's own lengths and never above the batch
run here (`planning.batch_choice.recalled`), and whether that batch was capped by this job's requests
(a job with more probes again). On a CPU nothing is probed: a fixed size is used.
"""

from __future__ import annotations

import logging
import time
from dataclasses import asdict, dataclass

from genjudge.engine.decoding import CPU_AUTO_BATCH
from genjudge.engine.devices import free_cuda_cache, is_oom
from genjudge.planning.batch_choice import (
    Choice,
    Probe,
    choose,
    length_bucket,
    memory_line_from_probes,
    recalled,
    settle,
    step_line_from_probes,
)

log = logging.getLogger(__name__)

from genjudge.planning.time_model import PROBE_STEPS  # noqa: E402 - the time model counts the same steps

PROBE_BATCHES = (8, 64)  # the last steps of each probe are timed (the first may compile)


@dataclass
class ProbeRun:
    """What one probe measured, before it is a `Probe` of the chooser."""

    batch: int
    peak_bytes: float | None
    capacity_bytes: float | None
    step_seconds: float | None
    context_tokens: int
    wall_seconds: float
    prefill_seconds: float = 0.0


def run_probe(gen, prompt: str, batch: int, steps: int = PROBE_STEPS) -> ProbeRun:
    """One short probe on the model's devices: peak memory of the most loaded GPU (none on a CPU) and
    the median of its last decoding steps. An out-of-memory error is a probe that did not fit."""
    import torch

    from genjudge.engine import tensor_parallel

    cuda = torch.cuda.is_available()
    devices = [torch.cuda.current_device()] if tensor_parallel.active() else range(torch.cuda.device_count())
    if cuda:
        for d in devices:
            torch.cuda.reset_peak_memory_stats(d)
    t0 = time.perf_counter()
    try:
        clock, context = tensor_parallel.agree(gen.probe)(prompt, batch, steps)
    except Exception as exc:  # noqa: BLE001 - re-raised unless it is an OOM
        if not is_oom(exc):
            raise
        free_cuda_cache()
        return ProbeRun(batch, None, None, None, 0, time.perf_counter() - t0)
    wall = time.perf_counter() - t0
    peak = capacity = None
    if cuda:
        used = [(torch.cuda.max_memory_allocated(d), torch.cuda.get_device_properties(d).total_memory) for d in devices]
        peak, capacity = max(used, key=lambda u: u[0] / u[1])
        fraction = tensor_parallel.agree_max(peak / capacity)
        peak = fraction * capacity
        free_cuda_cache()
    # A forward pass alone (logprob verdicts) is timed whole.
    timed = clock.step_seconds()[-max(1, steps // 2) :] or [clock.marks[-1] - clock.marks[0]]
    step = sorted(timed)[len(timed) // 2]
    step = tensor_parallel.agree_max(step)
    prefill = clock.marks[1] - clock.marks[0] if len(clock.marks) > 1 else 0.0
    return ProbeRun(batch, peak, capacity, step, context, wall, prefill)


def versions() -> dict:
    """torch's and transformers' versions, read from their metadata (no import of torch)."""
    import importlib.metadata as md

    out = {}
    for dist in ("torch", "transformers"):
        try:
            out[dist] = md.version(dist)
        except md.PackageNotFoundError:
            out[dist] = None
    return out


def memory_key(spec, fingerprint, compiled: bool, longest: int, devices: list, verdict: str | None = None) -> dict:
    """Everything a remembered batch depends on. `devices`: [name, MiB] of each device the job sees
    (engine.batch_size.device_names); `verdict`: "logprob" for a judge's forward pass."""
    quantization = None
    if spec.quantization == "4bit":
        quantization = [
            "4bit",
            spec.bnb_4bit_quant_type,
            bool(spec.bnb_4bit_use_double_quant),
            spec.bnb_4bit_compute_dtype,
        ]
    elif spec.quantization != "none":
        quantization = [spec.quantization]
    return {
        "model": fingerprint,
        "devices": [[str(name), int(mib)] for name, mib in devices],
        "precision": spec.precision,
        "dtype": spec.dtype,  # quantized: the dtype of the layers left unquantized
        "quantization": quantization,
        "engine": spec.engine,
        "compile": bool(compiled),
        "sampling": bool(getattr(spec, "do_sample", False)),
        "verdict": verdict,
        "memory_margin": float(spec.memory_margin),
        "device_map": spec.device_map,
        # JSON keys are strings: {0: ...} must match itself after a round trip
        "max_memory": {str(k): str(v) for k, v in spec.max_memory.items()} if spec.max_memory else None,
        "versions": versions(),
        "prompt_tokens": length_bucket(longest),
        "new_tokens": length_bucket(spec.max_new_tokens),
    }


def device_names() -> list:
    """[name, MiB] of each device the job sees (the plan compares names with hardware.same_gpu)."""
    import torch

    if not torch.cuda.is_available():
        return [["cpu", 0]]
    return [
        [torch.cuda.get_device_name(i), torch.cuda.get_device_properties(i).total_memory // 2**20]
        for i in range(torch.cuda.device_count())
    ]


def full_context(gen, prompt: str, new_tokens: int) -> int:
    """Tokens each sequence's KV cache reaches: the prompt and its answer, or a compiled generator's
    whole static cache (allocated at once)."""
    width = len(gen.tok(prompt, add_special_tokens=gen.add_special_tokens)["input_ids"])
    cache = gen.cache_length(width) if hasattr(gen, "cache_length") else None
    return max(width + new_tokens, cache or 0)


def auto_batch_size(
    gen, prompt: str, requests: int, spec, kv_bytes_per_token: float, new_tokens: int, memory=None, key=None
) -> Choice:
    """The batch for `requests` prompts whose longest is `prompt` (the KV cache each sequence reaches
    is that prompt plus `new_tokens`). `memory`: a BatchMemory, `key` its key for this job."""
    import torch

    if not torch.cuda.is_available():
        batch = max(1, min(CPU_AUTO_BATCH, requests))
        return Choice(batch, "cpu", f"batch {batch}: on a CPU nothing is probed, a fixed size ({CPU_AUTO_BATCH})")
    return probed_batch_size(gen, prompt, requests, spec, kv_bytes_per_token, new_tokens, memory, key)


def probed_batch_size(
    gen, prompt: str, requests: int, spec, kv_bytes_per_token: float, new_tokens: int, memory=None, key=None
) -> Choice:
    """`auto_batch_size` on a device: a remembered choice re-solved for this job, else the probes and
    the choice from them, remembered. (On a CPU the probes measure time only: no memory line.)"""
    t0 = time.perf_counter()
    full = full_context(gen, prompt, new_tokens)
    margin = float(spec.memory_margin)
    if memory is not None and key is not None:
        found = memory.recall(key)
        choice = recalled(found, requests, full, margin) if found else None
        if choice is not None:
            log.info("batch_size auto: %s", choice.reason)
            return choice
    compile_before = getattr(gen, "compile_seconds", 0.0)
    runs: list[ProbeRun] = []
    for b in dict.fromkeys(min(b, requests) for b in PROBE_BATCHES):
        run = run_probe(gen, prompt, b)
        runs.append(run)
        if run.step_seconds is None:
            break
    while runs[0].step_seconds is None and runs[0].batch > 1:  # even the first probe did not fit: halve
        runs.insert(0, run_probe(gen, prompt, max(1, runs[0].batch // 2)))
    if runs[0].step_seconds is None:
        raise RuntimeError("even a batch of 1 does not fit in GPU memory: use more GPUs or quantization")
    probes = [Probe(r.batch, r.peak_bytes, r.step_seconds, r.context_tokens) for r in runs]
    capacity = next((r.capacity_bytes for r in runs if r.capacity_bytes), None)
    mem = memory_line_from_probes(probes, capacity, kv_bytes_per_token, full) if capacity else None
    choice = choose(mem, step_line_from_probes(probes), requests, margin, probes=probes)
    oom = [p.batch for p in probes if p.step_seconds is None]
    if oom and choice.batch >= min(oom):
        choice.batch = max(p.batch for p in probes if p.step_seconds is not None)
        choice.decided_by = "probe"
        choice.reason += f"; a probe of {min(oom)} ran out of memory: batch {choice.batch}"
    elif choice.batch > max(p.batch for p in probes):
        r = run_probe(gen, prompt, choice.batch)
        runs.append(r)
        choice = settle(choice, Probe(r.batch, r.peak_bytes, r.step_seconds, r.context_tokens))
    compiled = getattr(gen, "compile_seconds", 0.0) - compile_before
    choice.search_seconds = round(max(0.0, time.perf_counter() - t0 - compiled), 3)
    if memory is not None and key is not None:
        memory.remember(key, entry_of(choice, spec.model, capacity, kv_bytes_per_token, full))
    log.info("batch_size auto: %s (%.1f s of probes)", choice.reason, choice.search_seconds)
    return choice


def entry_of(choice: Choice, model_path: str, capacity_bytes, kv_bytes_per_token: float, full: int) -> dict:
    """What a job remembers of its choice (store.batch_memory): its probes and the facts to solve them
    again at another job's lengths (batch_choice.recalled), and the batch it ran."""
    return {
        "cap": choice.batch,
        # capped by this job's requests: no larger batch was probed, so a job with more requests probes
        "requests_bound": choice.decided_by == "requests",
        "model_path": model_path,
        "reason": choice.reason,
        "probes": [asdict(p) for p in choice.probes],
        "capacity_bytes": capacity_bytes,
        "kv_bytes_per_token": kv_bytes_per_token,
        "full_context": full,
    }
