"""Complete a list of prompts with one model, resuming from the item store.

Shared by generation and judge jobs: keys, checkpoint lookup, model load only
when something is left to compute, batched generation, per-batch checkpoint.
"""

from __future__ import annotations

import functools
import logging
import os
import time
from dataclasses import dataclass, field

from genjudge.config.specs import ModelSpec
from genjudge.engine.decoding import Generator, Throughput, Timing, run_batches
from genjudge.engine.prompt_set import PromptSet, gen_params  # noqa: F401 - importable from here, as before
from genjudge.engine.results import Completion, keyed, to_compute
from genjudge.store.item_store import ItemStore
from genjudge.store.records import INVOCATION_ENV

log = logging.getLogger(__name__)


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


@dataclass
class _Computed:
    """What computing a completion's missing items cost and gave (nothing, where none was missing)."""

    load_seconds: float = 0.0
    compute_seconds: float = 0.0
    batch_size: int | None = None
    info: dict = field(default_factory=dict)
    new: list = field(default_factory=list)  # the results, in the order of `todo`
    timing: Timing = field(default_factory=Timing)
    choice: object = None  # batch_choice.Choice for a local model's batches
    compile_seconds: float = 0.0


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
    setup_seconds, run, over = pset.setup_seconds, _Computed(), {}
    pset.setup_seconds = 0.0
    if todo:
        todo, todo_prompts, lengths, over, new_tokens = _fitting(
            pset, prompts, keys, ids, todo, desc, scorer, keep_going
        )
    if todo:
        stamp = {"invocation": invocation, "writer": writer}
        work = _prepare(pset, scorer, todo, todo_prompts, lengths, new_tokens, keys, ids, samples if sampling else None)
        run = _run(work, pset, store, desc, log_stream, stamp)
        for j, r in enumerate(run.new):
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
        run.load_seconds,
        run.compute_seconds,
        run.batch_size,
        run.info,
        sum(r["n_generated_tokens"] for r in run.new),
        {keys[i] for i in todo},
        run.timing,
        setup_seconds,
        run.choice.meta() if run.choice is not None else None,
        run.choice.search_seconds if run.choice is not None else 0.0,
        run.compile_seconds,
        {i: over[k] for i, k in enumerate(keys) if k in over},
        shared=shared,
        shared_keys=this_run,
    )


def _fitting(pset, prompts, keys, ids, todo, desc, scorer, keep_going):
    """Before the weights load: a prompt that cannot fit the context stops the job, naming the item, or
    with `keep_going` is left out. (todo, its prompts, their tokens, {key: why left out}, new tokens)."""
    from genjudge.engine.context import check_context, too_long
    from genjudge.engine.decoding import token_lengths

    over: dict = {}
    todo_prompts = [prompts[i] for i in todo]
    lengths = token_lengths(pset.tok, todo_prompts, add_special_tokens=not pset.chat)
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
    return todo, todo_prompts, lengths, over, new_tokens


@dataclass
class _Work:
    """The items a completion computes: positions in its prompts (`todo`), their prompts as sent and
    tokens, their keys and ids, and their samples' indices where sampling (None otherwise)."""

    gen: object
    batch_key: object
    todo: list
    prompts: list
    lengths: list
    keys: list
    ids: list
    samples: list | None


def _prepare(pset, scorer, todo, todo_prompts, lengths, new_tokens, keys, ids, samples) -> tuple[_Computed, _Work]:
    """The model loaded and its runner set to the batch size (configured, or `auto`'s choice)."""
    run = _Computed()
    longest = max(len(p) for p in todo_prompts)  # characters: an upper bound on tokens
    model, run.info, run.load_seconds = pset.load(longest + pset.params.max_new_tokens)
    gen = runner(pset, model, scorer, cache_tokens=max(lengths) + pset.params.max_new_tokens, lengths=lengths)
    batch_key = None
    if pset.spec.engine == "vllm":  # chunks of requests, each checkpointed; the engine batches within
        run.batch_size = int(pset.spec.vllm["chunk_size"])
    else:
        run.choice, batch_key = resolve_batch_size(pset, gen, todo_prompts, lengths, new_tokens)
        run.batch_size = run.choice.batch
        gen.batch_size = run.batch_size
    return run, _Work(gen, batch_key, todo, todo_prompts, lengths, keys, ids, samples)


def _run(prepared: tuple[_Computed, _Work], pset, store, desc, log_stream, stamp: dict) -> _Computed:
    """The batches run, each checkpointed to the store as it finishes (`stamp`: this command's
    invocation and the store's writer, on every record)."""
    from genjudge.engine import tensor_parallel

    run, w = prepared
    bar = Throughput(len(w.todo), desc, log_stream)

    def checkpoint(idx, results):
        if not tensor_parallel.is_writer():  # in a tensor-parallel group, rank 0 writes
            return
        extra = (lambda j: {"sample": w.samples[w.todo[j]]}) if w.samples is not None else (lambda j: {})
        store.append(
            [{**r, "key": w.keys[w.todo[j]], "id": w.ids[w.todo[j]], **stamp, **extra(j)} for j, r in zip(idx, results)]
        )

    if w.samples is not None:
        seeds = [pset.seed(prompt, w.samples[i]) for i, prompt in zip(w.todo, w.prompts)]

        def compute(idx):
            return w.gen.generate([w.prompts[j] for j in idx], seeds=[seeds[j] for j in idx])
    else:

        def compute(idx):
            return w.gen.generate([w.prompts[j] for j in idx])

    t1, compiled_before = time.monotonic(), getattr(w.gen, "compile_seconds", 0.0)
    run.new, run.batch_size = run_batches_remembered(
        w.gen, w.lengths, run.batch_size, tensor_parallel.agree(compute), checkpoint, bar, pset, run.choice, w.batch_key
    )
    run.compile_seconds = getattr(w.gen, "compile_seconds", 0.0)
    # The batches' seconds without compiling (a fixed cost of its own, in compile_seconds).
    run.compute_seconds = time.monotonic() - t1 - (run.compile_seconds - compiled_before)
    run.timing = getattr(w.gen, "timing", None) or Timing()
    bar.close()
    return run


def combined(cs: list[Completion]) -> Completion:
    """Several completions of one PromptSet (a conversation's turns) as one, for the job's meta."""
    if len(cs) == 1:
        return cs[0]
    first = cs[0]
    info = next((c.info for c in cs if c.info), {})
    if info.get("engine") == "openai":
        from genjudge.engine.endpoint.stats import merged_stats

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
