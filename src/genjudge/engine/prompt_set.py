"""A local model's prompt set: its tokenizer, the prompts as sent (chat template, system prompt, the
run's pinned date), their item keys, and the model, loaded on the first completion that needs it.

An item's key holds what decides its result: the job's kind, the model's fingerprint, the spec's item
fields and the prompt as sent (and, when sampling, the sample's index). Existing item stores resume on
these keys: tests/test_item_keys.py holds a fixed study's.
"""

from __future__ import annotations

import logging
import time

from genjudge.config.specs import GeneratorSpec, ModelSpec
from genjudge.engine.decoding import GenParams
from genjudge.engine.prompting import render_prompt, uses_chat_template
from genjudge.models.modelref import DigestIndex, fingerprint
from genjudge.store import chat_date as chat_dates
from genjudge.store.item_store import item_key

log = logging.getLogger("genjudge.engine.completion")


def gen_params(spec: ModelSpec) -> GenParams:
    """Decoding parameters: a generator may sample; a judge always decodes greedily."""
    if isinstance(spec, GeneratorSpec) and spec.do_sample:
        return GenParams(
            max_new_tokens=spec.max_new_tokens,
            do_sample=True,
            temperature=spec.temperature,
            top_p=spec.top_p,
            seed=spec.seed,
        )
    return GenParams(max_new_tokens=spec.max_new_tokens, do_sample=False)


class PromptSet:
    """A model's tokenizer and the keyed prompts it will complete."""

    def __init__(
        self,
        spec: ModelSpec,
        kind: str,
        suffix: str = "",
        digests: DigestIndex | None = None,
        cache_dir=None,
        chat_date: str | None = None,
    ):
        """`chat_date`: the run's pinned date (genjudge.store.chat_date), which a chat template that stamps
        today's date (`strftime_now`) gets instead; None: transformers' clock."""
        from genjudge.engine.loading import load_tokenizer
        from genjudge.errors import InputError
        from genjudge.models.modelref import missing_files
        from genjudge.store.batch_memory import BatchMemory

        t0 = time.monotonic()
        missing = missing_files(spec.model)
        if missing:  # planning needed config.json only (a login node has no weights): stop before any item
            raise InputError(
                f"{kind} model {spec.model!r} has {missing}: this job cannot load it; nothing was computed. "
                "Copy the whole checkpoint there (e.g. `hf download ORG/NAME --local-dir DIR`)"
            )
        self.spec = spec
        self.kind = kind
        self.tok = load_tokenizer(spec.model, spec.revision)
        self.chat = uses_chat_template(self.tok, spec.use_chat_template)
        self.params = gen_params(spec)
        self.fp = fingerprint(spec.model, spec.revision, digests)
        self.suffix = suffix  # appended after the chat template (logprob: the verdict marker)
        self.chat_date = chat_date
        # The date in its prompts, for the meta (None: its template stamps none); unpinned, the clock's.
        stamps = self.chat and "strftime_now" in str(getattr(self.tok, "chat_template", None) or "")
        self.stamped_date = (chat_date or chat_dates.today()) if stamps else None
        if stamps:
            log.info("the chat template stamps the date (strftime_now): its prompts say %s", self.stamped_date)
        self.setup_seconds = time.monotonic() - t0
        self.model = None  # loaded by the first completion with something to compute
        self.info: dict = {}
        self.memory = BatchMemory(cache_dir) if cache_dir else None  # batch_size auto's remembered choices

    def check_labels(self, labels: tuple[str, ...], marker: str) -> None:
        """Refuse logprob labels this tokenizer cannot tell apart, before the weights load."""
        from genjudge.engine.logprob import label_token_ids

        label_token_ids(self.tok, labels, marker)

    def render(self, texts: list[str], conversations: list | None = None) -> list[str]:
        """Prompts as sent; `conversations[i]`, when not None, is item i's list of chat messages."""
        conversations = conversations or [None] * len(texts)
        return [
            self._closed(
                render_prompt(
                    self.tok,
                    t,
                    self.spec.system_prompt,
                    self.chat,
                    conv,
                    self.spec.chat_template_kwargs,
                    self.chat_date,
                )
            )
            + self.suffix
            for t, conv in zip(texts, conversations)
        ]

    def _closed(self, prompt: str) -> str:
        """A logprob verdict after a chat template that opens a reasoning trace (Qwen3, DeepSeek-R1 append
        `<think>`) would be read inside the trace: the trace is closed empty first, as a non-thinking
        template does (`<think>\n</think>\n\n`). (judging.reasoning.prompt_opens, which this wing may not
        import, decides the same way.)"""
        settings = getattr(self.spec, "reasoning", None) or {}
        opening, closing = settings.get("open"), settings.get("close")
        if not self.suffix or not opening or not closing or settings.get("strip") is False:
            return prompt
        at_open, at_close = prompt.rfind(opening), prompt.rfind(closing)
        if at_open < 0 or at_open < at_close or prompt[at_open + len(opening) :].strip():
            return prompt
        if not getattr(self, "_said_closed", False):
            self._said_closed = True
            log.info(
                "the judge's chat template opens a reasoning trace (%s): closed empty before %r, so the logprob "
                "verdict is read after it",
                opening,
                self.suffix,
            )
        return prompt + ("" if prompt.endswith("\n") else "\n") + closing + "\n\n"

    def load(self, seq_len: int):
        """The model (for engine vllm: the started engine), loaded on first use and kept for later
        completions (the turns of a conversation): (model, info, seconds this call spent loading)."""
        if self.model is None:  # the GPUs of the lease are the ones torch sees, or the job says it runs on the CPU
            from genjudge.engine.devices import check_leased_devices

            check_leased_devices(log)
        if self.model is None and self.spec.engine == "vllm":
            from genjudge.engine import collector
            from genjudge.engine.memory_plan import model_plan
            from genjudge.engine.vllm_engine import load_engine

            collector.resume()  # before vLLM starts its engine process: a forked one inherits a paused collector
            t0 = time.monotonic()
            self.model, info = load_engine(self.spec, self.kind, model_fingerprint=self.fp)
            seconds = time.monotonic() - t0
            # The model's numbers, for the time model's check of this job and `plan --calibrate`.
            self.info = {**info, "memory_plan": model_plan(self.spec, self.kind)}
            return self.model, self.info, seconds
        if self.model is None:
            from genjudge.engine import collector
            from genjudge.engine.devices import torch_device_info
            from genjudge.engine.loading import load_causal_lm
            from genjudge.engine.memory_plan import job_plan, refuse_quantized_offload, render

            t0 = time.monotonic()
            mplan = job_plan(self.spec, self.spec.batch_size, seq_len, self.kind)
            log.info("memory plan:\n%s", render(mplan) if "error" not in mplan else mplan["error"])
            refuse_quantized_offload(mplan)
            collector.freeze_imports()  # torch and transformers are imported by now
            self.model, placement = load_causal_lm(self.spec)
            collector.resume()
            self.info = {
                "engine": "transformers",
                "placement": placement,
                "device": torch_device_info(),
                "memory_plan": mplan,
            }
            return self.model, self.info, time.monotonic() - t0
        return self.model, self.info, 0.0

    def key(self, prompt: str, sample: int | None = None) -> str:
        """Everything that decides this item's result: the spec's item fields, the model's files, the prompt,
        and when sampling the sample's index (each sample of an item is a result of its own)."""
        if sample is None:
            return item_key(kind=self.kind, model=self.fp, params=self.spec.item_params(), prompt=prompt)
        return item_key(kind=self.kind, model=self.fp, params=self.spec.item_params(), prompt=prompt, sample=sample)

    def seed(self, prompt: str, sample: int) -> int:
        """The seed of one sample's own generator: the run's seed, the item's key, the sample index."""
        from genjudge.engine.sampling import sample_seed

        return sample_seed(self.params.seed, self.key(prompt), sample)
