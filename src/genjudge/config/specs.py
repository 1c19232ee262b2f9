"""Typed specs of the generator, the judge, the dataset and job resources.

Built once, at a job's boundary, from the validated config (whose schema is the
only home of defaults): no field here has a default. Each field declares whether
what it changes: `item` fields change each item's result (they go into the
item-cache key, `item_params`, and into the rule `params:` that tell Snakemake
when to rerun, `rerun_params`); `job` fields change a job's output but not what
the model says about one item (rerun only); `run` fields change neither (how
fast, on which devices). Precision (dtype, quantization and the
bitsandbytes settings) is part of it: a 4-bit judge never reuses bf16 answers.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any


def _item():
    return field(metadata={"changes": "item"})


def _job():
    return field(metadata={"changes": "job"})


def _run():
    return field(metadata={"changes": None})


class Spec:
    @classmethod
    def from_config(cls, section: dict):
        """Build from a validated config section; every field must be there (schema defaults)."""
        names = {f.name for f in fields(cls)}
        missing = sorted(names - set(section))
        if missing:
            raise KeyError(f"{cls.__name__}: config lacks {missing}; was it validated against the schema?")
        return cls(**{k: section[k] for k in names})

    @classmethod
    def fields_changing(cls, *what: str) -> list[str]:
        return [f.name for f in fields(cls) if f.metadata.get("changes") in what]

    def rerun_params(self) -> dict:
        """The fields that change outputs, as plain data for a rule's `params:`."""
        return {k: getattr(self, k) for k in self.fields_changing("item", "job")}

    def as_dict(self) -> dict:
        return {f.name: getattr(self, f.name) for f in fields(self)}


AS_BEFORE = {"engine": "transformers", "chat_template_kwargs": {}, "answers_from": None}
# What a local model's loading and decoding read and an endpoint's never does.
ENDPOINT_IDLE = (
    "revision",
    "dtype",
    "quantization",
    "bnb_4bit_quant_type",
    "bnb_4bit_use_double_quant",
    "bnb_4bit_compute_dtype",
    "use_chat_template",
    "vllm",
    "device_map",
    "max_memory",
    "batch_size",
    "memory_margin",
    "compile",
)


@dataclass(frozen=True)
class ModelSpec(Spec):
    """What both roles share: which model, how it is loaded, how it decodes."""

    model: str = _item()
    revision: str | None = _item()
    dtype: str = _item()
    quantization: str = _item()
    bnb_4bit_quant_type: str = _item()
    bnb_4bit_use_double_quant: bool = _item()
    bnb_4bit_compute_dtype: str = _item()
    max_new_tokens: int = _item()
    system_prompt: str | None = _item()
    use_chat_template: Any = _item()
    chat_template_kwargs: dict = _item()  # variables of the chat template (enable_thinking, ...)
    # transformers or vllm: the engines' numerics differ, so the engine is part of each item's key.
    engine: str = _item()
    vllm: dict = _run()  # engine: vllm only (memory share, context length, chunk size, eager mode)
    device_map: str = _run()
    max_memory: dict | None = _run()
    batch_size: Any = _run()
    memory_margin: float = _run()
    # auto, true or false: a static KV cache and a compiled forward (engine.compiling); same greedy text.
    compile: Any = _run()
    # engine: openai only. What of the endpoint decides a result (its public URL, extra request fields,
    # prefill) is in `context_params`; connections, retries, price and budget change no result.
    endpoint: dict = _run()
    price: dict = _run()
    max_cost_usd: float | None = _run()

    def item_params(self) -> dict:
        """What decides one item's result besides the model's files and the prompt as sent:
        the `item` fields in force, less the model's name and revision (its fingerprint stands for them)."""
        return {
            **{
                k: getattr(self, k)
                for k in self.fields_changing("item")
                if k not in ("model", "revision") and k not in self.idle_fields() and not self._as_before(k)
            },
            **self.context_params(),
        }

    def rerun_params(self) -> dict:
        return {
            **{
                k: v
                for k, v in super().rerun_params().items()
                if k not in self.idle_fields() and not self._as_before(k)
            },
            **self.context_params(),
        }

    def context_params(self) -> dict:
        """vLLM's `max_model_len` where set: the engine stops a sequence at that length, so a result made
        under it is no result of the model's full context (unset: as every result before it was). An
        endpoint's public base URL and what else of it shapes the request."""
        if self.engine == "openai":
            return {"endpoint": self.endpoint_params()}
        limit = (self.vllm or {}).get("max_model_len") if self.engine == "vllm" else None
        return {"vllm_max_model_len": int(limit)} if limit else {}

    def endpoint_params(self) -> dict:
        from genjudge.models.endpoints import public_url

        out = {"base_url": public_url(self.endpoint["base_url"] or ""), "extra_body": dict(self.endpoint["extra_body"])}
        if getattr(self, "verdict", None) == "logprob":  # how the verdict's position is reached
            out["prefill"] = bool(self.endpoint["prefill"])
        return out

    def _as_before(self, name: str) -> bool:
        """A setting added later, at the value every result made before it existed had: left out of
        item keys and rerun params, so those results stay valid (all were made by transformers, with no
        chat template variables)."""
        return name in AS_BEFORE and getattr(self, name) == AS_BEFORE[name]

    def fingerprint(self, digests=None) -> str:
        """What stands for the model in item keys and rerun params: its files' fingerprint, or for a
        model behind an endpoint its public base URL and name."""
        if self.engine == "openai":
            from genjudge.models.endpoints import identity

            return identity(self.endpoint["base_url"] or "", self.model)
        from genjudge.models.modelref import fingerprint

        return fingerprint(self.model, self.revision, digests)

    def idle_fields(self) -> set:
        """Settings that have no effect as configured (changing them changes nothing)."""
        if self.engine == "openai":  # the server holds the weights, the template and the tokenizer
            return set(ENDPOINT_IDLE)
        return (
            set()
            if self.quantization == "4bit"
            else {"bnb_4bit_quant_type", "bnb_4bit_use_double_quant", "bnb_4bit_compute_dtype"}
        )

    @property
    def precision(self) -> str:
        """`8bit`/`4bit`, or the dtype (`auto` planned as bfloat16)."""
        if self.quantization != "none":
            return self.quantization
        return "bfloat16" if self.dtype == "auto" else self.dtype

    @property
    def model_files_here(self) -> bool:
        """Whether the model runs from files on this machine: not one behind an endpoint."""
        return self.engine != "openai"


@dataclass(frozen=True)
class GeneratorSpec(ModelSpec):
    do_sample: bool = _item()
    temperature: float = _item()
    top_p: float = _item()
    seed: int = _item()
    # Each sample has a key of its own (its index is in it): more samples add rows, change none.
    n_samples: int = _job()
    # Where the answer starts after a reasoning trace: the stored output is split, not recomputed.
    reasoning: dict = _job()
    offload_folder: str | None = _run()
    gpus_per_job: int | None = _run()  # null: the top-level gpus_per_job
    # Answers read from this field of the dataset (physicians' completions), not generated: no model, no job.
    answers_from: str | None = _job()

    @property
    def model_files_here(self) -> bool:
        return super().model_files_here and not self.answers_from  # answers read from the dataset: no model

    def idle_fields(self) -> set:
        # Greedy decoding reads no sampling parameter.
        return super().idle_fields() | (set() if self.do_sample else {"temperature", "top_p", "seed"})


@dataclass(frozen=True)
class JudgeSpec(ModelSpec):
    verdict: str = _item()
    # The mode, template and baseline shape the prompt, which is in the item key already;
    # cascade decides which items reach the judge, not what the judge says about one.
    mode: str = _job()
    template: str | None = _job()
    templates: list = _job()  # templates by category and turn (judging.template_rules)
    cascade: bool = _job()
    baseline: str | None = _job()
    pairs: str = _job()
    # Parsing only: changing the pattern re-parses stored outputs without the judge.
    verdict_pattern: str | None = _run()
    score_range: list = _run()  # parsing only, as the pattern
    score_rescaled: dict | None = _run()  # reporting only: the mean score on another scale (WB-Score)
    rubric: dict = _job()  # mode rubric: a criterion's tries, and how an unparsed one counts
    reasoning: dict = _run()  # parsing only: the judge's own trace is stripped before its verdict is read
    shards: int = _run()  # the judge-shard files carry their count in their names
    gpus: Any = _run()
    offload_folder: str | None = _run()
    parallel: str = _run()  # device_map, tensor, replicas or auto: how the judge uses its GPUs
    gpu_memory: str | None = _run()  # one GPU's memory for parallel: auto where nvidia-smi cannot tell

    def idle_fields(self) -> set:
        """A mode's own settings (`rubric`) are idle under the other modes (the mode says which it reads)."""
        from genjudge.errors import InputError
        from genjudge.judging import modes

        try:
            reads = modes.get(self.mode).settings
        except InputError:  # a plugin's mode not loaded here
            reads = frozenset()
        return super().idle_fields() | ({"rubric"} - set(reads))


@dataclass(frozen=True)
class DatasetSpec(Spec):
    path: str = _job()
    format: str = _job()
    fields: dict = _job()
    hf: dict = _job()  # Hugging Face datasets: config, split, revision, cache_dir
    answer: dict = _job()  # extraction methods before exact match: {reference, candidate}
    shards: int | None = _run()  # the shard count is in the rule's own params
    on_too_long: str = _job()  # fail or skip an item that does not fit a model's context (in the jobs' params)


def generator_spec(config: dict) -> GeneratorSpec:
    return GeneratorSpec.from_config(config["generator"])


def judge_spec(config: dict) -> JudgeSpec:
    return JudgeSpec.from_config(config["judge"])


def spec_for(role: str, **values):
    """A generator or judge spec from the schema's defaults and `values` (tests, benches, scripts)."""
    from genjudge.config.validation import defaults

    cls = {"generator": GeneratorSpec, "judge": JudgeSpec}[role]
    return cls.from_config(defaults(**{role: values})[role])
