"""What a completion of a job's prompts returns, whichever engine made it (engine.completion for local
models, engine.endpoint.run for endpoints)."""

from __future__ import annotations

from dataclasses import dataclass, field

from genjudge.engine.decoding import Timing


@dataclass
class Completion:
    prompts: list[str]  # as sent
    keys: list[str]
    results: list[dict]  # output, n_prompt_tokens, n_generated_tokens, finish_reason
    resumed: int
    computed: int
    model_fingerprint: str
    chat_template: bool
    load_seconds: float
    compute_seconds: float
    batch_size: int | None
    info: dict = field(default_factory=dict)  # placement, device
    computed_tokens: int = 0
    computed_keys: set = field(default_factory=set)  # keys computed now (the rest came from the store)
    timing: Timing = field(default_factory=Timing)  # prefill and decode seconds (generation only)
    setup_seconds: float = 0.0  # the tokenizer and the model's fingerprint, paid even when nothing is computed
    batch_choice: dict | None = None  # how batch_size was chosen (planning.batch_choice.Choice.meta)
    batch_search_seconds: float = 0.0  # batch_size auto's probes
    compile_seconds: float = 0.0  # compiling the decode step (compile), first call of each shape
    too_long: dict = field(default_factory=dict)  # keep_going: position -> why its prompt does not fit (no result)
    # An endpoint's items left without a result (position -> why): retries given up, max_cost_usd reached.
    incomplete: dict = field(default_factory=dict)
    # Of the items not computed here: `resumed` came from an earlier run's records, `shared` from an identical
    # request of this run (the same prompt twice in this job, or a record another job of this command stored).
    shared: int = 0
    shared_keys: set = field(default_factory=set)  # keys of the records another job of this command stored


def keyed(pset, prompts: list[str], samples: list[int] | None, sampling: bool) -> tuple[list[str], list[int] | None]:
    """Each prompt's item key (with its sample's index when sampling) and the samples, whichever engine."""
    if sampling:
        samples = samples or [0] * len(prompts)
        return [pset.key(p, s) for p, s in zip(prompts, samples)], samples
    if samples and any(samples):
        raise ValueError("several samples of an item need sampling (do_sample: true)")
    return [pset.key(p) for p in prompts], samples


def to_compute(keys: list[str], done: dict) -> tuple[list[int], set]:
    """The positions to compute: each key not stored yet, once (identical prompts run once)."""
    todo, queued = [], set()
    for i, k in enumerate(keys):
        if k not in done and k not in queued:
            todo.append(i)
            queued.add(k)
    return todo, queued
