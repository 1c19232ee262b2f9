"""Complete a list of prompts with one model, resuming from the item store.

Shared by generation and judge jobs: keys, checkpoint lookup, model load only
when something is left to compute, batched generation, per-batch checkpoint.
"""

from __future__ import annotations

import functools
import logging
import os
import time

from genjudge.config.specs import GeneratorSpec, ModelSpec
from genjudge.engine.decoding import Generator, GenParams, Throughput, Timing, run_batches
from genjudge.engine.prompting import render_prompt, uses_chat_template
from genjudge.engine.results import Completion, keyed, to_compute
from genjudge.models.modelref import DigestIndex, fingerprint
from genjudge.store import chat_date as chat_dates
from genjudge.store.item_store import ItemStore, item_key
from genjudge.store.records import INVOCATION_ENV

log = logging.getLogger(__name__)


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


def kv_bytes_per_token(pset, model) -> float:
    """Bytes of KV cache a token adds on the most loaded GPU: the memory plan's figure, or in a
    torchrun group (which has no device-map plan) the model's own, split over the group's ranks."""
    from genjudge.engine import tensor_parallel

    kv = (pset.info.get("memory_plan") or {}).get("kv_bytes_per_token")
    if kv is None:
        from genjudge.engine.memory_plan import kv_cache_bytes

        config = getattr(model, "config", None)
        dtype = getattr(model, "dtype", None)
        kv = kv_cache_bytes(config, 1, 1, dtype.itemsize if dtype is not None else 2) if config is not None else 0
    return kv / tensor_parallel.world_size() if tensor_parallel.active() else kv


def resolve_batch_size(pset, gen, prompts: list[str], lengths: list[int], new_tokens: int):
    """The configured batch size, or for `auto` the batch chosen from short probes (engine.batch_size):
    (batch_choice.Choice, the remembered choice's key or None)."""
    from genjudge.planning.batch_choice import Choice

    spec = pset.spec
    if spec.batch_size != "auto":
        return Choice(int(spec.batch_size), "configured", f"batch_size: {spec.batch_size}"), None
    from genjudge.engine.batch_size import auto_batch_size, device_names, memory_key

    longest = max(range(len(prompts)), key=lambda i: lengths[i])
    kv = kv_bytes_per_token(pset, gen.model)
    verdict = "logprob" if getattr(gen, "labels", None) is not None else None  # a forward pass, no decoding
    key = memory_key(spec, pset.fp, getattr(gen, "compile", False), lengths[longest], device_names(), verdict)
    choice = auto_batch_size(gen, prompts[longest], len(prompts), spec, kv, new_tokens, pset.memory, key)
    return choice, key


def compile_plan(pset) -> dict:
    """The model's numbers for `compile: auto`: the job's memory plan, or where it has none (it
    failed) the model's numbers alone."""
    plan = pset.info.get("memory_plan") or {}
    if plan.get("weights_bytes"):
        return plan
    from genjudge.engine.memory_plan import model_plan

    return model_plan(pset.spec, pset.kind)


def runner(pset, model, scorer=None, cache_tokens: int | None = None, lengths: list[int] | None = None):
    """What completes a batch of prompts-as-sent with the loaded model: a generator, or `scorer`'s.
    `cache_tokens`: the job's longest prompt plus max_new_tokens (a compiled generator's cache);
    `lengths`: the prompts' tokens (`compile: auto` weighs the job's requests, as the plan does)."""
    special = not pset.chat
    if scorer is not None:
        return scorer(model, pset.tok, add_special_tokens=special)
    if pset.spec.engine == "vllm":
        from genjudge.engine.vllm_engine import VllmGenerator, generation_config

        return VllmGenerator(model, pset.tok, pset.params, special, generation_config(pset.spec))
    from genjudge.engine.compiling import use_compile
    from genjudge.planning.time_model import Requests

    lengths = lengths or []
    requests = [Requests(len(lengths), sum(lengths) / len(lengths), pset.params.max_new_tokens)] if lengths else []
    compiled, why = use_compile(pset.spec, model, lambda: compile_plan(pset), requests)
    if pset.info.get("compile") is None:
        pset.info.update(compile=compiled)
        log.info("decoding: %s (%s)", "static cache, compiled" if compiled else "eager", why)
    return Generator(model, pset.tok, pset.params, special, compile=compiled, cache_tokens=cache_tokens)


def logprob_scorer(engine: str, labels: tuple[str, ...], marker: str):
    """The logprob verdict scorer of an engine, as `complete`'s `scorer` argument (an endpoint's: the
    labels and marker its requests ask about, given to its prompt set)."""
    from functools import partial

    if engine == "openai":
        from genjudge.engine.endpoint.requests import LogprobVerdict

        return LogprobVerdict(tuple(labels), marker)
    if engine == "vllm":
        from genjudge.engine.vllm_engine import VllmLogprobScorer as cls
    else:
        from genjudge.engine.logprob import LogprobScorer as cls
    return partial(cls, labels=labels, marker=marker)


def prompt_set(
    spec: ModelSpec, kind: str, suffix: str = "", digests=None, cache_dir=None, scorer=None, where="", chat_date=None
):
    """The prompt set of a job's model: a local one (`PromptSet`), or one behind an endpoint (`engine:
    openai`, which loads no tokenizer; `scorer`: its logprob verdict, `where`: its config key for errors;
    its server renders the chat template, with the server's date)."""
    if spec.engine == "openai":
        from genjudge.engine.endpoint.run import EndpointPromptSet

        return EndpointPromptSet(spec, kind, suffix, scorer, where)
    return PromptSet(spec, kind, suffix, digests, cache_dir, chat_date)


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


def run_batches_remembered(gen, lengths, batch_size, compute, checkpoint, progress, pset, choice, key):
    """decoding.run_batches with what an out-of-memory halving changes: the generator pads short
    batches to the new size (not the old one's buckets), and a remembered auto choice is lowered to
    it, so the job's other shards and reruns do not run out of memory again."""

    def resized(b):
        if hasattr(gen, "batch_size"):
            gen.batch_size = b

    results, final = run_batches(
        lengths, batch_size, compute, on_batch=checkpoint, progress=progress, on_resize=resized
    )
    # key: batch_size auto (None when configured); a CPU's fixed size is never remembered
    if final < batch_size and key is not None and pset.memory is not None and choice.decided_by != "cpu":
        reason = f"batch {batch_size} ran out of memory in a job; halved to {final}"
        pset.memory.lower(key, final, reason, pset.spec.model)
    return results, final


def complete(
    pset: PromptSet,
    texts: list[str],
    ids: list[str],
    store: ItemStore,
    desc: str,
    log_stream,
    scorer=None,
    conversations: list | None = None,
    samples: list[int] | None = None,
    keep_going: bool = False,
) -> Completion:
    """Complete `texts` (or the chat `conversations` where given); `scorer(model, tok,
    add_special_tokens)` replaces generation (logprob judging). With sampling, `samples[i]` is
    row i's sample index (default 0): its key and its generator's seed. A prompt that does not fit
    the model's context stops the job (InputError), or with `keep_going` is left out: its result is
    None and `too_long` says why, for the caller to skip or fail what it belongs to. An endpoint's prompt
    set (`prompt_set`) sends the requests instead (engine.endpoint.run)."""
    if getattr(pset, "engine", None) == "openai":
        from genjudge.engine.endpoint.run import complete_endpoint

        return complete_endpoint(pset, texts, ids, store, desc, log_stream, conversations, samples, keep_going)
    prompts = pset.render(texts, conversations)
    sampling = pset.params.do_sample and scorer is None
    keys, samples = keyed(pset, prompts, samples, sampling)
    done = store.load(set(keys))
    todo, queued = to_compute(keys, done)  # identical prompts (e.g. two generators' equal answers) run once
    # Records another job of this snakemake command stored: shared in this run, not resumed from an earlier
    # one. This job's own (an attempt SLURM requeued, a retry) are its checkpoint: resumed.
    invocation, writer = os.environ.get(INVOCATION_ENV), store.writer
    this_run = {
        k
        for k, r in done.items()
        if invocation and r.get("invocation") == invocation and r.get("writer", writer) != writer
    }
    log.info(
        "%s: %d items, %d already done (checkpoint/cache), %d to compute",
        desc,
        len(keys),
        sum(k in done for k in keys),
        len(todo),
    )
    # The tokenizer's time is paid once per PromptSet, however many completions it makes; the model's
    # load only by a completion with something to compute (none when every item came from the store).
    setup_seconds, load_seconds, compute_seconds, batch_size, info, new = pset.setup_seconds, 0.0, 0.0, None, {}, []
    timing, choice, compile_seconds = Timing(), None, 0.0
    pset.setup_seconds = 0.0
    over: dict = {}
    if todo:
        from genjudge.engine.context import check_context, too_long
        from genjudge.engine.decoding import token_lengths

        todo_prompts = [prompts[i] for i in todo]
        lengths = token_lengths(pset.tok, todo_prompts, add_special_tokens=not pset.chat)
        # Before the weights load: a prompt that cannot fit stops the job, naming the item, or is left out.
        new_tokens = 1 if scorer is not None else pset.params.max_new_tokens  # logprob: one forward pass
        if not keep_going:
            check_context(pset.spec, lengths, [ids[i] for i in todo], desc, new_tokens)
        elif over_todo := too_long(pset.spec, lengths, new_tokens):
            over = {keys[todo[j]]: why for j, why in over_todo.items()}
            log.warning("%s: %d prompt(s) too long for the context, left out", desc, len(over))
            kept = [j for j in range(len(todo)) if j not in over_todo]
            todo, todo_prompts, lengths = (
                [todo[j] for j in kept],
                [todo_prompts[j] for j in kept],
                [lengths[j] for j in kept],
            )
    if todo:
        longest = max(len(p) for p in todo_prompts)  # characters: an upper bound on tokens
        model, info, seconds = pset.load(longest + pset.params.max_new_tokens)
        load_seconds += seconds
        gen = runner(pset, model, scorer, cache_tokens=max(lengths) + pset.params.max_new_tokens, lengths=lengths)
        choice, batch_key = None, None
        if pset.spec.engine == "vllm":  # chunks of requests, each checkpointed; the engine batches within
            batch_size = int(pset.spec.vllm["chunk_size"])
        else:
            choice, batch_key = resolve_batch_size(pset, gen, todo_prompts, lengths, new_tokens)
            batch_size = choice.batch
            gen.batch_size = batch_size
        bar = Throughput(len(todo), desc, log_stream)

        from genjudge.engine import tensor_parallel

        def checkpoint(idx, results):
            if not tensor_parallel.is_writer():  # in a tensor-parallel group, rank 0 writes
                return
            extra = (lambda j: {"sample": samples[todo[j]]}) if sampling else (lambda j: {})
            store.append(
                [
                    {
                        **r,
                        "key": keys[todo[j]],
                        "id": ids[todo[j]],
                        "invocation": invocation,
                        "writer": writer,
                        **extra(j),
                    }
                    for j, r in zip(idx, results)
                ]
            )

        if sampling:
            seeds = [pset.seed(prompts[i], samples[i]) for i in todo]

            def compute(idx):
                return gen.generate([todo_prompts[j] for j in idx], seeds=[seeds[j] for j in idx])
        else:

            def compute(idx):
                return gen.generate([todo_prompts[j] for j in idx])

        t1, compiled_before = time.monotonic(), getattr(gen, "compile_seconds", 0.0)
        new, batch_size = run_batches_remembered(
            gen, lengths, batch_size, tensor_parallel.agree(compute), checkpoint, bar, pset, choice, batch_key
        )
        compile_seconds = getattr(gen, "compile_seconds", 0.0)
        # The batches' seconds without compiling (a fixed cost of its own, in compile_seconds).
        compute_seconds = time.monotonic() - t1 - (compile_seconds - compiled_before)
        timing = getattr(gen, "timing", None) or Timing()
        bar.close()
        for j, r in enumerate(new):
            done[keys[todo[j]]] = r
    results = [done.get(k) for k in keys]
    from_store = len(keys) - sum(k in queued for k in keys)
    shared = sum(k in this_run for k in keys) + sum(k in queued for k in keys) - len(queued)
    return Completion(
        prompts,
        keys,
        results,
        from_store - sum(k in this_run for k in keys),
        len(todo),
        pset.fp,
        pset.chat,
        load_seconds,
        compute_seconds,
        batch_size,
        info,
        sum(r["n_generated_tokens"] for r in new),
        {keys[i] for i in todo},
        timing,
        setup_seconds,
        choice.meta() if choice is not None else None,
        choice.search_seconds if choice is not None else 0.0,
        compile_seconds,
        {i: over[k] for i, k in enumerate(keys) if k in over},
        shared=shared,
        shared_keys=this_run,
    )


def combined(cs: list[Completion]) -> Completion:
    """Several completions of one PromptSet (a conversation's turns) as one, for the job's meta."""
    if len(cs) == 1:
        return cs[0]
    first = cs[0]
    info = next((c.info for c in cs if c.info), {})
    if info.get("engine") == "openai":
        from genjudge.engine.endpoint.run import merged_stats

        info = {**info, "endpoint": merged_stats([c.info.get("endpoint") for c in cs])}
    return Completion(
        [p for c in cs for p in c.prompts],
        [k for c in cs for k in c.keys],
        [r for c in cs for r in c.results],
        sum(c.resumed for c in cs),
        sum(c.computed for c in cs),
        first.model_fingerprint,
        first.chat_template,
        sum(c.load_seconds for c in cs),
        sum(c.compute_seconds for c in cs),
        max((c.batch_size for c in cs if c.batch_size), default=None),
        info,
        sum(c.computed_tokens for c in cs),
        set().union(*(c.computed_keys for c in cs)),
        functools.reduce(Timing.merged, (c.timing for c in cs), Timing()),
        sum(c.setup_seconds for c in cs),
        next((c.batch_choice for c in cs if c.batch_choice), None),
        sum(c.batch_search_seconds for c in cs),
        sum(c.compile_seconds for c in cs),
        shared=sum(c.shared for c in cs),
        shared_keys=set().union(*(c.shared_keys for c in cs)),
    )


def completion_meta(c: Completion, seconds_name: str) -> dict:
    """The meta fields every model job reports about its completion."""
    return {
        "model_fingerprint": c.model_fingerprint,
        "chat_template": c.chat_template,
        "batch_size": c.batch_size,
        "setup_seconds": round(c.setup_seconds, 3),
        "batch_choice": c.batch_choice,
        "batch_search_seconds": round(c.batch_search_seconds, 3),
        "compile_seconds": round(c.compile_seconds, 3),
        "load_seconds": round(c.load_seconds, 3),
        seconds_name: round(c.compute_seconds, 3),
        "resumed_items": c.resumed,  # from an earlier run's records
        "shared_items": c.shared,  # an identical request of this run answered them
        "computed_items": c.computed,
        "tokens_per_second": round(c.computed_tokens / c.compute_seconds, 1) if c.compute_seconds else None,
        **c.timing.meta(),
        **c.info,
    }
