"""The model's context window: a prompt plus max_new_tokens that does not fit is never silent.

There is no truncation policy: a prompt cut to fit would be a different question, and new
tokens past the window are ones the model was never trained to place. The job stops before
its weights load, naming the item, the lengths and the window; lower max_new_tokens, shorten
the prompt (or the conversation), or pick a model with a longer context.
"""

from __future__ import annotations

import logging

from genjudge.errors import InputError

log = logging.getLogger(__name__)

# The config.json fields that give a model's context window, by architecture family.
CONTEXT_FIELDS = ("max_position_embeddings", "n_positions", "max_sequence_length", "seq_length", "n_ctx")


def context_length(model_config) -> tuple[int | None, str | None]:
    """(window in tokens, the config field it comes from), or (None, None) when the config has none."""
    for cfg in (model_config, getattr(model_config, "text_config", None)):
        if cfg is None:
            continue
        for name in CONTEXT_FIELDS:
            value = getattr(cfg, name, None)
            if isinstance(value, int) and value > 0:
                return value, name
    return None, None


def model_context(spec) -> tuple[int | None, str | None]:
    """(window, where it comes from): the model's config, or vLLM's `max_model_len` where smaller
    (the engine stops a sequence there: an answer cut short, finish reason `length`)."""
    from genjudge.engine.memory_plan import load_config

    try:
        window, source = context_length(load_config(spec.model, spec.revision))
    except Exception as exc:  # noqa: BLE001 - a config we cannot read: nothing to check against
        log.warning("no context window known for %s (%s); prompt lengths are not checked", spec.model, exc)
        window, source = None, None
    limit = (getattr(spec, "vllm", None) or {}).get("max_model_len") if getattr(spec, "engine", "") == "vllm" else None
    if limit and (window is None or int(limit) < window):
        return int(limit), "vllm.max_model_len"
    return window, source


def source_text(source: str) -> str:
    return "the engine setting vllm.max_model_len" if source == "vllm.max_model_len" else f"{source} in its config.json"


def too_long(spec, lengths: list[int], new_tokens: int | None = None) -> dict[int, str]:
    """{position: why} of the prompts whose tokens plus `new_tokens` (default: the spec's
    max_new_tokens) exceed the model's window; {} where none does or the window is unknown."""
    window, source = model_context(spec)
    if window is None:
        return {}
    new = spec.max_new_tokens if new_tokens is None else new_tokens
    return {
        i: f"the prompt as sent is {n} tokens and max_new_tokens is {new}: {n + new} tokens, more than "
        f"{spec.model}'s context of {window} ({source_text(source)})"
        for i, n in enumerate(lengths)
        if n + new > window
    }


ADVICE = (
    "Lower max_new_tokens, shorten the prompt, or use a model with a longer context (or set the dataset's "
    "on_too_long: skip to leave such items out, counted and listed in the report); nothing is truncated silently"
)


def check_context(spec, lengths: list[int], ids: list, desc: str, new_tokens: int | None = None) -> None:
    """Raise InputError for the first (longest) prompt whose tokens plus `new_tokens` (default:
    the spec's max_new_tokens) exceed the model's window; say how many more do."""
    over = too_long(spec, lengths, new_tokens)
    if not over:
        return
    worst = max(over, key=lambda i: lengths[i])
    others = f"; {len(over) - 1} more item(s) too long as well" if len(over) > 1 else ""
    raise InputError(f"{desc}: item {ids[worst]!r}: {over[worst]}{others}. {ADVICE}")
