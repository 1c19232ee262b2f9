"""Batched generation: length-sorted batches, left padding, OOM backoff.

Items are processed longest prompt first (an out-of-memory error shows up in
the first batch, and padding within a batch is small); results are handed back
per batch with their original indices so callers keep the input order.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

from genjudge.engine.clock import StepClock  # noqa: F401 - the jobs' step clock, importable from here
from genjudge.engine.devices import free_cuda_cache, is_oom

log = logging.getLogger(__name__)

CPU_AUTO_BATCH = 16  # `batch_size: auto` on CPU: no memory probe, a fixed size that is fast on small models


@dataclass
class GenParams:
    max_new_tokens: int = 64
    do_sample: bool = False
    temperature: float = 1.0
    top_p: float = 1.0
    seed: int = 0

    def as_dict(self) -> dict:
        return {
            "max_new_tokens": self.max_new_tokens,
            "do_sample": self.do_sample,
            "temperature": self.temperature if self.do_sample else None,
            "top_p": self.top_p if self.do_sample else None,
            "seed": self.seed,
        }


def length_sorted(lengths: list[int]) -> list[int]:
    """Indices, longest first; ties keep input order (stable, deterministic)."""
    return sorted(range(len(lengths)), key=lambda i: -lengths[i])


def run_batches(items_len: list[int], batch_size: int, fn, on_batch=None, progress=None, on_resize=None):
    """Call fn(indices) over length-sorted batches with OOM backoff.

    fn returns one result per index. On an out-of-memory error the batch is
    halved and the same items are retried, so no item is dropped or repeated.
    on_batch(indices, results) is called after each successful batch;
    on_resize(batch_size) after each halving, before the retry.
    """
    order = length_sorted(items_len)
    results: list = [None] * len(items_len)
    pos = 0
    while pos < len(order):
        idx = order[pos : pos + batch_size]
        try:
            out = fn(idx)
        except Exception as exc:  # noqa: BLE001 - re-raised unless it is an OOM
            if not is_oom(exc) or batch_size == 1:
                raise
            free_cuda_cache()
            batch_size = max(1, batch_size // 2)
            log.warning(
                "out of memory on a batch of %d: retrying the same items with batch size %d", len(idx), batch_size
            )
            if on_resize is not None:
                on_resize(batch_size)
            continue
        for i, r in zip(idx, out):
            results[i] = r
        if on_batch is not None:
            on_batch(idx, out)
        if progress is not None:
            progress(len(idx), out)
        pos += len(idx)
    return results, batch_size


LENGTH_CHUNK = 1024


def token_lengths(tokenizer, prompts: list[str], add_special_tokens: bool, chunk: int = LENGTH_CHUNK) -> list[int]:
    """Prompt lengths in tokens, tokenizing a chunk at a time and keeping only the lengths:
    a million judge prompts' token ids would not fit in memory; their lengths do."""
    lengths: list[int] = []
    for i in range(0, len(prompts), chunk):
        enc = tokenizer(prompts[i : i + chunk], add_special_tokens=add_special_tokens)
        lengths += [len(ids) for ids in enc["input_ids"]]
    return lengths


@dataclass
class Timing:
    """Where a job's compute time went, summed over its batches (the time model's measured terms)."""

    batches: int = 0
    prompt_tokens: int = 0  # without padding
    prefill_seconds: float = 0.0  # prompt in, first new token out
    decode_seconds: float = 0.0  # the steps after it
    decode_steps: int = 0  # steps after the first new token, per batch, summed
    max_new_tokens: int = 0

    def add(self, clock: StepClock, prompt_tokens: int, compile_seconds: float = 0.0) -> None:
        """One batch's clock; `compile_seconds`: what its first decoding steps spent compiling."""
        m = clock.marks
        self.batches += 1
        self.prompt_tokens += prompt_tokens
        if len(m) >= 2:
            self.prefill_seconds += m[1] - m[0]
            self.decode_seconds += max(0.0, m[-1] - m[1] - compile_seconds)
            self.decode_steps += max(0, len(m) - 3)  # prompt, first token, ..., end

    def add_span(self, prompt_tokens: int, prefill_seconds: float, decode_seconds: float, steps: int) -> None:
        """One batch timed by an engine that reports its own timestamps (vLLM)."""
        self.batches += 1
        self.prompt_tokens += prompt_tokens
        self.prefill_seconds += max(0.0, prefill_seconds)
        self.decode_seconds += max(0.0, decode_seconds)
        self.decode_steps += max(0, steps)

    def merged(self, other: Timing) -> Timing:
        return Timing(
            self.batches + other.batches,
            self.prompt_tokens + other.prompt_tokens,
            self.prefill_seconds + other.prefill_seconds,
            self.decode_seconds + other.decode_seconds,
            self.decode_steps + other.decode_steps,
            max(self.max_new_tokens, other.max_new_tokens),
        )

    def meta(self) -> dict:
        """The job meta's fields (none for a job that generated nothing)."""
        if not self.batches:
            return {}
        return {
            "batches": self.batches,
            "n_prompt_tokens": self.prompt_tokens,
            "prefill_seconds": round(self.prefill_seconds, 4),
            "decode_seconds": round(self.decode_seconds, 4),
            "decode_steps": self.decode_steps,
            "max_new_tokens": self.max_new_tokens,
        }


def width_bucket(width: int) -> int:
    """A padded prompt width from a short list (compiled decoding compiles once per shape): a multiple
    of 64 tokens up to 512, then of an eighth of the power of two below, at most ~12% of padding."""
    step = max(64, (1 << max(0, width.bit_length() - 1)) // 8)
    return -(-width // step) * step


def batch_bucket(rows: int, batch_size: int) -> int:
    """The rows a compiled batch is padded to: the job's batch, or a power of two for a short last batch."""
    if rows >= batch_size:
        return rows
    return min(batch_size, 1 << max(0, (rows - 1).bit_length()))


class Generator:
    """Generate completions for prompts-as-sent with one loaded model.

    With `compile`, decoding runs on transformers' static KV cache with its forward compiled by
    torch.compile (CUDA graphs on GPUs): each step then costs the device's time instead of Python's
    launch of every kernel. The cache is sized once for the job (`cache_tokens`: its longest prompt
    plus max_new_tokens, bucketed) and a short batch is padded to a bucket of rows, so a job compiles
    for few shapes; the first call of each shape pays the compilation (`compile_seconds`)."""

    def __init__(
        self, model, tokenizer, params: GenParams, add_special_tokens: bool, compile: bool = False, cache_tokens=None
    ):
        self.model = model
        self.tok = tokenizer
        self.params = params
        self.add_special_tokens = add_special_tokens
        self.timing = Timing(max_new_tokens=params.max_new_tokens)
        self.compile = compile
        self.cache_tokens = cache_tokens
        self.compile_seconds = 0.0
        self._shapes: set = set()  # (rows, cache length) already compiled
        self.batch_size = None  # the job's batch: short batches pad to its buckets

    def token_lengths(self, prompts: list[str]) -> list[int]:
        return token_lengths(self.tok, prompts, self.add_special_tokens)

    def _encode(self, prompts: list[str]) -> tuple[dict, int]:
        """The batch on the model's input device; with compile, padded to its row bucket (copies of
        the first prompt, whose outputs are dropped). Returns (tensors, rows that are real)."""
        from genjudge.engine.loading import input_device

        rows = len(prompts)
        if self.compile:
            prompts = prompts + [prompts[0]] * (batch_bucket(rows, self.batch_size or rows) - rows)
        enc = self.tok(prompts, return_tensors="pt", padding=True, add_special_tokens=self.add_special_tokens)
        return {k: v.to(input_device(self.model)) for k, v in enc.items()}, rows

    def cache_length(self, width: int) -> int | None:
        """Tokens a sequence's static KV cache holds for a batch of this prompt width (compile only;
        allocated whole before the first step), else None."""
        if not self.compile:
            return None
        return width_bucket(max(self.cache_tokens or 0, width + self.params.max_new_tokens))

    def _decode_kwargs(self, width: int) -> dict:
        if not self.compile:
            return {}
        from transformers import CompileConfig

        on_gpu = self.model.device.type == "cuda"
        # reduce-overhead: CUDA graphs; on a CPU transformers compiles only when told to (tests).
        config = CompileConfig(mode="reduce-overhead" if on_gpu else "default")
        config._compile_all_devices = not on_gpu
        return {"cache_implementation": "static", "compile_config": config, "max_cache_len": self.cache_length(width)}

    def _run(self, enc: dict, kwargs: dict, clock: StepClock) -> tuple:
        """(generate's output, seconds this call spent compiling)."""
        import torch
        from transformers import StoppingCriteriaList

        width = enc["input_ids"].shape[1]
        kwargs = {**kwargs, **self._decode_kwargs(width)}
        shape = (enc["input_ids"].shape[0], kwargs.get("max_cache_len"))
        new_shape = self.compile and shape not in self._shapes
        clock.start()
        with torch.inference_mode():
            out = self.model.generate(**enc, **kwargs, stopping_criteria=StoppingCriteriaList([clock]))
        clock.end()
        compiled = 0.0
        if new_shape:  # this call compiled: its decoding beyond what its steps cost once compiled
            self._shapes.add(shape)
            steps = clock.step_seconds()
            typical = sorted(steps)[len(steps) // 2] if steps else 0.0
            compiled = (
                max(0.0, clock.marks[-1] - clock.marks[1] - typical * len(steps)) if len(clock.marks) > 2 else 0.0
            )
            self.compile_seconds += compiled
        return out, compiled

    def generate(self, prompts: list[str], seeds: list[int] | None = None) -> list[dict]:
        """Complete one batch. With sampling, row i draws from its own generator seeded with `seeds[i]`
        (engine/sampling.py), so its text does not depend on the rest of the batch."""
        enc, rows = self._encode(prompts)
        p = self.params
        kwargs = {"max_new_tokens": p.max_new_tokens, "do_sample": p.do_sample, "pad_token_id": self.tok.pad_token_id}
        if p.do_sample:
            from genjudge.engine.sampling import seeded_sampling_kwargs

            if seeds is None or len(seeds) != len(prompts):
                raise ValueError("sampling needs one seed per prompt")
            seeds = seeds + [seeds[0]] * (enc["input_ids"].shape[0] - rows)
            kwargs.update(seeded_sampling_kwargs(self.model, p.temperature, p.top_p, seeds))
        else:
            kwargs.update(temperature=None, top_p=None, top_k=None)
        clock = StepClock()
        out, compiled = self._run(enc, kwargs, clock)
        width = enc["input_ids"].shape[1]
        prompt_tokens = enc["attention_mask"][:rows].sum(dim=1).tolist()
        self.timing.add(clock, int(sum(prompt_tokens)), compiled)
        eos_ids = self._eos_ids()
        results = []
        for row, n_prompt in zip(out[:rows, width:].tolist(), prompt_tokens):
            n_gen, reason = len(row), "length"
            for j, tid in enumerate(row):
                if tid in eos_ids:
                    n_gen, reason = j + 1, "eos"
                    break
            text = self.tok.decode(row[:n_gen], skip_special_tokens=True)
            results.append(
                {
                    "output": text,
                    "n_prompt_tokens": int(n_prompt),
                    "n_generated_tokens": int(n_gen),
                    "finish_reason": reason,
                }
            )
        return results

    def probe(self, prompt: str, batch_size: int, steps: int = 6) -> tuple[StepClock, int]:
        """A short worst-case batch: the longest prompt `batch_size` times, decoding `steps` tokens with
        the job's settings (its cache length, compilation and sampler), none of them allowed to stop
        early. Returns the clock and the tokens each sequence holds in its KV cache at its peak: the
        whole static cache when compiling (the probe's peak memory already holds all of it)."""
        enc, _ = self._encode([prompt] * batch_size)
        kwargs = {
            "max_new_tokens": self.params.max_new_tokens,
            "min_new_tokens": min(steps, self.params.max_new_tokens),
            "pad_token_id": self.tok.pad_token_id,
            "do_sample": False,
        }
        if self.params.do_sample:  # the sampler's buffers count too (one vocabulary-sized row per sequence)
            from genjudge.engine.sampling import seeded_sampling_kwargs

            kwargs.update(
                seeded_sampling_kwargs(self.model, self.params.temperature, self.params.top_p, [0] * batch_size)
            )
        else:
            kwargs.update(temperature=None, top_p=None, top_k=None)
        clock = StepClock(stop_after=steps)
        self._run(enc, kwargs, clock)
        width = enc["input_ids"].shape[1]
        return clock, self.cache_length(width) or width + steps

    def _eos_ids(self) -> set[int]:
        eos = self.model.generation_config.eos_token_id
        if eos is None:
            eos = self.tok.eos_token_id
        ids = set(eos if isinstance(eos, list) else [eos])
        ids.discard(None)
        return ids


class Throughput:
    """tqdm progress with tokens/s, written to the job's log."""

    def __init__(self, total: int, desc: str, stream):
        from tqdm import tqdm

        self.bar = tqdm(
            total=total, desc=desc, file=stream, unit="item", mininterval=1.0, dynamic_ncols=False, ncols=100
        )
        self.tokens = 0
        self.t0 = time.monotonic()

    def __call__(self, n_items: int, results: list[dict]):
        self.tokens += sum(r.get("n_generated_tokens", 0) for r in results)
        rate = self.tokens / max(time.monotonic() - self.t0, 1e-9)
        self.bar.set_postfix_str(f"{rate:.0f} tok/s", refresh=False)
        self.bar.update(n_items)

    def close(self):
        self.bar.close()
