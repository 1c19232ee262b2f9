"""How long a model job takes: a roofline from config.json-derived numbers (no torch here).

For one job, with its model's numbers (parameters P, weight bytes W at the loaded precision,
KV-cache bytes per token kv, layers L), its device (memory bandwidth BW, bf16 FLOP/s F, each
times the efficiency stated below) and its requests (groups of n requests with p prompt tokens
and up to s new tokens each, in batches of b):

    start-up  the engine's fixed seconds (importing torch and transformers, ...)
    load      the engine's fixed load seconds + W / read rate (plan.load_gb_per_s)
    prefill   max(2 P x prompt tokens / F, batches x W / BW)  (compute bound but for tiny batches)
            + batches x the engine's per-step overhead
    decode    steps x (W + dequantization traffic) / BW      (every step reads every weight)
            + passes x sequences x kv x (s p + s(s+1)/2) / BW (and the KV cache of its context)
              (or 2 P x sequences x s / F where that is larger: large batches turn compute bound)
            + steps x the engine's per-step overhead          (host-side work per step)
    with steps = batches x s: a batch runs until its last sequence is done, counted as s
    (max_new_tokens) unless a run measured fewer.

The parallel layout scales it: `device_map` over k GPUs runs their layers one after the other
(one GPU's BW and F; the k GPUs only add memory); `tensor` splits every weight and the KV cache
over k GPUs that work at once (k x BW and k x F, times TENSOR_EFFICIENCY); `replicas` are jobs of
one GPU, each with its share of the requests (the caller divides them).

An inference engine contributes its own terms through an `Engine` (start-up seconds, per-step
overhead, the weight and KV traffic of one step); ENGINES holds them by name, `register_engine`
adds one. A run's measured seconds calibrate the model (`Calibration`): the load seconds it
measured, and factors on prefill and decode, for the model they were measured on.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

from genjudge.planning.engines import (  # noqa: F401 - the engines' names, importable from here
    ENGINES,
    PROBE_STEPS,
    VLLM_MAX_NUM_SEQS,
    Engine,
    VllmEngine,
    engine_of,
    register_engine,
)
from genjudge.planning.hardware import (  # noqa: F401 - the devices' and models' names, importable from here
    AMBIGUOUS,
    BANDWIDTH_EFFICIENCY,
    DEFAULT_READ_RATE,
    FLOPS_EFFICIENCY,
    GB,
    GIB,
    GPU_KEYS,
    GPU_TABLE,
    TB,
    TENSOR_EFFICIENCY,
    Calibration,
    Device,
    ModelNumbers,
    Requests,
    gpu_device,
    gpu_of_size,
    gpu_type,
    same_gpu,
)


def choose_compile(model: ModelNumbers, device: Device, requests: list[Requests], batch: int) -> tuple[bool, str]:
    """`compile: auto`: compile where the time model says it pays, its compile seconds included (a
    few hundred decoding steps do not pay back tens of seconds of compiling)."""
    eager = job_time(model, device, Layout("one", 1), requests, batch, Engine(compiled=False))
    compiled = job_time(model, device, Layout("one", 1), requests, batch, Engine(compiled=True))
    saved = eager.seconds - compiled.seconds
    cost = compiled.term("compile")
    if saved > 0:
        return True, f"compiling ({duration(cost)}) saves about {duration(saved)} of decoding in all"
    return False, f"compiling ({duration(cost)}) would not pay back: decoding eagerly is {duration(-saved)} shorter"


@dataclass(frozen=True)
class Layout:
    """How one job uses its devices."""

    kind: str  # cpu, one, device_map, tensor
    gpus: int  # GPUs of one job (0 on the CPU)

    @property
    def speedup(self) -> float:
        """Parallel devices working on every step (tensor), times their efficiency."""
        return self.gpus * TENSOR_EFFICIENCY if self.kind == "tensor" and self.gpus > 1 else 1.0


@dataclass
class Term:
    name: str
    seconds: float
    formula: str


@dataclass
class JobTime:
    """One job's predicted seconds, term by term, each with its formula as printed."""

    terms: list[Term] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    sources: list[str] = field(default_factory=list)  # where the engine's constants come from

    @property
    def seconds(self) -> float:
        return sum(t.seconds for t in self.terms)

    def term(self, name: str) -> float:
        return sum(t.seconds for t in self.terms if t.name == name)

    def lines(self, indent: str = "    ") -> list[str]:
        out = [f"{indent}{t.name}: {t.formula} = {duration(t.seconds)}" for t in self.terms]
        return out + [f"{indent}({n})" for n in self.notes]


def duration(seconds: float) -> str:
    """`120 ms`, `42 s`, `12.5 min`, `3 h 05 min`."""
    if seconds == 0:
        return "0 s"
    if seconds < 1:
        return f"{seconds * 1000:.0f} ms" if seconds >= 0.001 else f"{seconds * 1e6:.0f} us"
    if seconds < 60:
        return f"{seconds:.1f} s" if seconds < 10 else f"{seconds:.0f} s"
    if seconds < 3600:
        return f"{seconds / 60:.1f} min"
    return f"{int(seconds // 3600)} h {int(seconds % 3600 // 60):02d} min"


def _n(x: float) -> str:
    for div, unit in ((1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "k")):
        if abs(x) >= div:
            return f"{x / div:.2f} {unit}"
    return f"{x:.0f}" if abs(x) >= 10 or x == int(x) else f"{x:.2g}"


def _bytes(x: float) -> str:
    for div, unit in ((TB, "TB"), (GB, "GB"), (1000**2, "MB"), (1000, "kB")):
        if abs(x) >= div:
            return f"{x / div:,.1f} {unit}"
    return f"{x:.0f} B"


@dataclass(frozen=True)
class _Rates:
    """A job's achievable bandwidth and FLOP/s over its layout, and how the formulas print them."""

    bw: float
    flops: float
    bw_txt: str
    fl_txt: str

    @classmethod
    def of(cls, device: Device, layout: Layout) -> _Rates:
        k = layout.speedup
        times = f" x {k:g}" if k != 1 else ""
        return cls(
            device.achievable_bandwidth * k,
            device.achievable_flops * k,
            f"{device.bandwidth / GB:,.0f} GB/s x {device.bandwidth_efficiency:g}" + times,
            f"{device.flops / 1e12:,.1f} TFLOP/s x {device.flops_efficiency:g}" + times,
        )


def job_time(
    model: ModelNumbers,
    device: Device,
    layout: Layout,
    requests: list[Requests],
    batch: int,
    engine: Engine | None = None,
    read_rate: float = DEFAULT_READ_RATE,
    calibration: Calibration | None = None,
    probes: tuple = (),
) -> JobTime:
    """The roofline for one job serving `requests` in batches of `batch` (for a continuously batching
    engine, `batch` sequences at once). How many batches and steps: `engine.schedule`. `probes`: the
    batches `batch_size: auto` probes first (a prefill and PROBE_STEPS steps each)."""
    engine = engine or ENGINES["transformers"]
    cal = calibration or Calibration("")
    out = JobTime()
    rates = _Rates.of(device, layout)
    out.sources = engine.sources(model, device)
    out.terms += _fixed_terms(model, device, engine, cal, read_rate)
    batch = max(1, int(batch))
    n_total = sum(r.n for r in requests)
    prompt_tokens = sum(r.n * r.prompt_tokens for r in requests)
    groups = [(r, *engine.schedule(r, batch, cal)) for r in requests]  # r, batches, rows, steps, steps/sequence
    if probes and n_total:
        out.terms.append(_search_term(model, device, layout, engine, cal, probes, prompt_tokens / n_total, rates))
    compile_s = engine.compile_seconds(device, max((b for _, nb, b, _, _ in groups if nb), default=batch))
    if compile_s and cal.compile_seconds:
        out.terms.append(Term("compile", cal.compile_seconds, f"measured per job ({cal.source})"))
    elif compile_s:
        out.terms.append(Term("compile", compile_s, f"{engine.label}: the first call of its shapes, fixed"))

    # Quantized (bitsandbytes) on GPUs: the bf16 step times the measured factor, as its own term.
    rows = sum(r.n for r in requests) / max(sum(nb for _, nb, _, _, _ in groups), 1)
    factor = engine.quantization_factor(model, device, rows)
    plain = replace(model, weight_bytes=model.bf16_weight_bytes or model.weight_bytes, precision="bfloat16")
    timed = plain if factor != 1.0 else model
    over = engine.step_overhead_seconds(model, device)
    prefill, n_batches = _prefill(out, model, timed, engine, groups, prompt_tokens, n_total, rates, cal, over)
    step_count = sum(nb * s for _, nb, _, s, _ in groups)
    decode_total = _decode(out, model, timed, device, engine, groups, n_total, rates, cal, over) if step_count else 0.0
    if factor != 1.0 and n_total:
        step_part = decode_total + prefill * cal.prefill_factor
        out.terms.append(
            Term(
                "quantization",
                step_part * (factor - 1),
                f"{model.precision} (bitsandbytes): the bf16 prefill and decode above x {factor:.2f} - 1, measured",
            )
        )
    out.notes.append(_schedule_note(engine, requests, n_total, n_batches, batch, step_count, cal))
    return out


def _fixed_terms(model: ModelNumbers, device: Device, engine: Engine, cal: Calibration, read_rate: float) -> list:
    """The job's start-up and the model's load: measured where calibrated, else the engine's and the read rate's."""
    out = []
    if cal.startup_seconds is not None:
        out.append(Term("start-up", cal.startup_seconds, f"measured per job ({cal.source})"))
    else:
        out.append(Term("start-up", engine.startup_seconds(device), f"{engine.label}, fixed"))
    if cal.load_seconds is not None:
        out.append(Term("load", cal.load_seconds, f"measured per job ({cal.source})"))
    else:
        fixed = engine.load_overhead_seconds(device)
        out.append(
            Term(
                "load",
                fixed + model.weight_bytes / read_rate,
                f"{fixed:g} s ({engine.name}, fixed) + {_bytes(model.weight_bytes)} / {read_rate / GB:.2f} GB/s (assumed)",
            )
        )
    return out


def _search_term(model, device, layout, engine, cal: Calibration, probes: tuple, mean_prompt: float, rates) -> Term:
    """`batch_size: auto`'s probes: measured where calibrated, else a prefill and PROBE_STEPS steps each."""
    if cal.search_seconds:
        return Term("batch search", cal.search_seconds, f"measured per job ({cal.source})")
    line = step_line(model, device, layout, engine, mean_prompt + PROBE_STEPS)
    search = sum(2 * model.parameters * b * mean_prompt / rates.flops + PROBE_STEPS * line.seconds(b) for b in probes)
    return Term(
        "batch search",
        search,
        f"batch_size auto: probes of {', '.join(map(str, probes))} sequences, a prefill and {PROBE_STEPS} steps each",
    )


def _prefill(out: JobTime, model, timed, engine, groups, prompt_tokens, n_total, rates, cal, over) -> tuple[float, int]:
    """Prefill: compute bound, unless a batch's FLOPs take less than reading the weights once. Adds its
    term; returns (its uncalibrated seconds, the batches)."""
    p_flops = 2 * model.parameters * prompt_tokens
    p_bytes = sum(nb * engine.weight_traffic(timed, b)[0] for _, nb, b, _, _ in groups)
    n_batches = sum(nb for _, nb, _, _, _ in groups)
    n_prefills = sum(math.ceil(r.n / max(b, 1)) if r.n else 0 for r, _, b, _, _ in groups)
    prefill = max(p_flops / rates.flops, p_bytes / rates.bw) + n_prefills * over if n_total else 0.0
    bound = (
        "compute bound"
        if p_flops / rates.flops >= p_bytes / rates.bw
        else "memory bound: reading the weights per batch"
    )
    out.terms.append(
        Term(
            "prefill",
            prefill * cal.prefill_factor,
            f"2 x {_n(model.parameters)} params x {_n(prompt_tokens)} prompt tokens / ({rates.fl_txt})"
            + f" [{bound}] + {n_prefills} batches x {over * 1e3:.2f} ms"
            + (f" x {cal.prefill_factor:.2f} (calibrated)" if cal.prefill_factor != 1 else ""),
        )
    )
    return prefill, n_batches


def _decode(out: JobTime, model, timed, device, engine, groups, n_total, rates, cal, over) -> float:
    """Decode: every step reads the weights and the KV cache of its batch's context (or, where larger,
    computes its FLOPs). Adds its terms; returns their seconds."""
    step_count = sum(nb * s for _, nb, _, s, _ in groups)
    w_bytes = 0.0
    w_note = ""
    for _, nb, b, s, _ in groups:
        traffic, note = engine.weight_traffic(timed, b)
        w_bytes += nb * s * traffic
        w_note = w_note or note
    passes = engine.kv_passes(device, model)
    kv_bytes = passes * sum(
        r.n * model.kv_bytes_per_token * (a * engine.kv_context(r.prompt_tokens, r.new_tokens) + a * (a + 1) / 2)
        for r, _, _, _, a in groups
    )
    d_flops = sum(2 * model.parameters * r.n * a for r, _, _, _, a in groups)
    memory_s, compute_s = (w_bytes + kv_bytes) / rates.bw, d_flops / rates.flops
    f = cal.decode_factor
    cal_txt = f" x {f:.2f} (calibrated)" if f != 1 else ""
    per_step = w_bytes / step_count
    if memory_s >= compute_s:
        out.terms.append(
            Term(
                "decode weights",
                w_bytes / rates.bw * f,
                f"{_n(step_count)} steps x {_bytes(per_step)}"
                + (f" ({_bytes(timed.weight_bytes)} {w_note})" if w_note else "")
                + f" / ({rates.bw_txt}){cal_txt}",
            )
        )
        ctx = sum(r.n * engine.kv_context(r.prompt_tokens, r.new_tokens) for r, *_ in groups) / max(n_total, 1)
        out.terms.append(
            Term(
                "decode KV cache",
                kv_bytes / rates.bw * f,
                f"{passes:g} passes x {_n(n_total)} sequences x {_bytes(model.kv_bytes_per_token)}/token x "
                f"(steps x ~{ctx:,.0f} context tokens + steps^2/2) = {_bytes(kv_bytes)} / ({rates.bw_txt}){cal_txt}",
            )
        )
    else:
        out.terms.append(
            Term(
                "decode (compute bound)",
                compute_s * f,
                f"2 x {_n(model.parameters)} params x {_n(n_total)} sequences x steps / ({rates.fl_txt})"
                f" [weights + KV would take {duration(memory_s)}]{cal_txt}",
            )
        )
    out.terms.append(
        Term(
            "decode step overhead",
            step_count * over * f,
            f"{_n(step_count)} steps x {over * 1e3:.2f} ms ({engine.label}, {model.layers} layers){cal_txt}",
        )
    )
    return sum(t.seconds for t in out.terms if t.name.startswith("decode"))


def _schedule_note(engine, requests, n_total, n_batches, batch, step_count, cal) -> str:
    """How the requests are batched, and what the decoding steps are counted at."""
    continuous = engine.continuous_batching
    how = (
        f"{_n(n_total)} requests, up to {batch} at once (continuous batching): decoding lasts their answer tokens "
        "over that concurrency"
        if continuous
        else f"{_n(n_total)} requests in {n_batches} batch(es) of up to {batch}"
    )
    measured_steps = cal.steps_fraction is not None or any(r.steps is not None for r in requests)
    if step_count and not measured_steps:
        if continuous and all(r.answer_tokens is not None for r in requests):
            how += (
                f"; answers of {_n(sum(r.n * r.answer_tokens for r in requests) / max(n_total, 1))} tokens (measured)"
            )
        elif continuous:
            how += (
                "; every answer counted at max_new_tokens (an upper bound: --calibrate uses a run's measured lengths)"
            )
        else:
            how += "; every batch decodes to max_new_tokens, its longest answer (an upper bound)"
    return how


def step_line(model: ModelNumbers, device: Device, layout: Layout, engine: Engine, context_tokens: float):
    """One decoding step against the batch, as the time model sees it (batch_choice.StepLine): the
    host overhead and the weights' read are paid once a step, each sequence adds its KV cache's reads
    (or, where larger, its FLOPs)."""
    from genjudge.planning.batch_choice import StepLine

    k = layout.speedup
    bw, flops = device.achievable_bandwidth * k, device.achievable_flops * k
    fixed = engine.step_overhead_seconds(model, device) + engine.weight_traffic(model, 2)[0] / bw
    per_sequence = max(
        engine.kv_passes(device, model) * model.kv_bytes_per_token * context_tokens / bw, 2 * model.parameters / flops
    )
    return StepLine(fixed, per_sequence, f"the time model ({engine.label} on {device.name})")
