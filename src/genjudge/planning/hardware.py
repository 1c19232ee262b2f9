"""What the time model knows of devices, models and requests, torch-free: a device's datasheet (or
measured) figures and the table of GPUs by name, a model's numbers at its precision, the requests a job
serves, and what a finished run measured of them (a `Calibration`)."""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

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


def datasheet_scale(measured_on: str, gpu: str) -> float:
    """How much longer a decoding step takes on `gpu` than on the GPU a figure was measured on, by their
    datasheets: the measured GPU's memory bandwidth over this one's (the time model's decode is bound by
    it; FLOP/s bound prefill, which it computes from the datasheet directly), never below 1 (a faster GPU
    keeps the figure: the host's part does not shrink with it); 1 where either GPU is unknown."""
    a, b = gpu_type(measured_on), gpu_type(gpu)
    if a is None or b is None:
        return 1.0
    return max(1.0, a.bandwidth / b.bandwidth)


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


def gpu_device(g) -> Device:
    """The Device of a GPU (a `Gpu` with name and memory, or its dict); a CPU is measured
    (engine.devices.measure_cpu)."""
    name, total = (g.name, g.total_bytes) if hasattr(g, "name") else (g["name"], g["total_bytes"])
    return gpu_of_size(total, "" if name.startswith("hypothetical") else name)


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
    devices: tuple[str, ...] = ()  # the devices its jobs ran on (a Device's name)

    def measured_on(self, device) -> bool:
        """Whether its jobs ran on this kind of device (any thread count of this CPU; a GPU by its name).
        Unknown devices (an older calibration) count as the same."""
        if not self.devices:
            return True
        kind = device_kind(getattr(device, "name", str(device)))
        return any(device_kind(d) == kind for d in self.devices)


def device_kind(name: str) -> str:
    """A device's name without what does not change its figures' ratios: this CPU's thread count."""
    return "this CPU" if name.startswith("this CPU") else name
