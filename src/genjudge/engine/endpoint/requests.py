"""A prompt as a chat completions request, and a response as the job's result.

Prompts go out as chat messages and the server applies its own chat template. Greedy decoding is
`temperature: 0`; a sampled request carries its sample's own seed.

Logprob verdicts read the distribution of the token after the verdict marker from `top_logprobs`
(at most 20 entries a position on most servers). With `endpoint.prefill` the marker is the start of
the assistant's reply, which the server continues for one token (`continue_final_message`, as vLLM
and SGLang take it): the in-process engines' computation exactly. Without it (hosted APIs) the reply
is generated and read at the token after its last marker. A label is represented by the longest
listed token its text (after the marker's space) starts with, as the in-process engines represent it
by its first token; where no label is listed the item is unparsed with that cause, never guessed.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass

TOP_LOGPROBS = 20
# The finish reason of a logprob verdict the response did not allow, read by the parse stage.
LOGPROB_UNSEEN = "logprob-unseen"
FINISH = {"stop": "eos", "length": "length"}
# Tokens between a verdict marker and its label that say nothing: spaces, markdown emphasis, quotes.
FORMATTING = re.compile(r"[\s*_`'\"]*")
STANDARD = {
    "model",
    "messages",
    "max_tokens",
    "max_completion_tokens",
    "temperature",
    "top_p",
    "seed",
    "logprobs",
    "top_logprobs",
    "n",
}


@dataclass(frozen=True)
class LogprobVerdict:
    """The grading mode's labels and marker, for logprob verdicts through an endpoint."""

    labels: tuple[str, ...]
    marker: str  # "VERDICT:"


def messages(text: str, system_prompt: str | None, conversation: list | None = None) -> list[dict]:
    """The chat messages of one prompt: the conversation (its last user turn is `text`) or `text` alone,
    the configured system prompt first unless the conversation has its own."""
    turns = [dict(m) for m in conversation] if conversation else [{"role": "user", "content": text}]
    if system_prompt and not any(m["role"] == "system" for m in turns):
        turns.insert(0, {"role": "system", "content": system_prompt})
    return turns


def with_prefill(msgs: list[dict], verdict: LogprobVerdict | None, prefill: bool) -> list[dict]:
    if verdict is None or not prefill:
        return msgs
    return [*msgs, {"role": "assistant", "content": verdict.marker}]


def body(spec, endpoint, msgs: list[dict], seed: int | None = None, verdict: LogprobVerdict | None = None) -> dict:
    """The request's fields (standard and extra), from the spec and the endpoint's settings."""
    b: dict = {"model": spec.model, "messages": msgs, "n": 1}
    sampling = getattr(spec, "do_sample", False) and verdict is None
    if sampling:
        b.update(temperature=float(spec.temperature), top_p=float(spec.top_p), seed=int(seed))
    else:
        b.update(temperature=0.0)
    b["max_tokens"] = 1 if verdict is not None and endpoint.prefill else int(spec.max_new_tokens)
    if verdict is not None:
        b.update(logprobs=True, top_logprobs=TOP_LOGPROBS)
        if endpoint.prefill:
            b.update(add_generation_prompt=False, continue_final_message=True)
    if spec.chat_template_kwargs:
        b["chat_template_kwargs"] = dict(spec.chat_template_kwargs)
    b.update(endpoint.extra_body)
    # A field extra_body sets to null is left out: reasoning models take max_completion_tokens and no
    # temperature ({max_tokens: null, max_completion_tokens: 4096, temperature: null}).
    return {k: v for k, v in b.items() if v is not None}


def split(b: dict) -> tuple[dict, dict]:
    """(the client's own arguments, extra_body): fields the openai client does not know go as extra body."""
    return {k: v for k, v in b.items() if k in STANDARD}, {k: v for k, v in b.items() if k not in STANDARD}


class Incomplete(Exception):
    """A 200 response without what the request needs (no choice, no logprobs): worth another try.
    `usage`: (prompt tokens, completion tokens) where the response says what it billed, else None."""

    def __init__(self, message: str, usage: tuple[int, int] | None = None):
        super().__init__(message)
        self.usage = usage


class FilteredAnswer(Exception):
    """A 200 whose answer the provider withheld: `finish_reason: content_filter`, or a reply of only
    tool calls (no text). Billed where its usage says; the item fails, or counts as wrong (on_filtered)."""

    def __init__(self, message: str, usage: tuple[int, int] | None, partial: dict):
        super().__init__(message)
        self.usage = usage
        self.partial = partial  # the result it would have been (its usage, served model), for count_wrong


def _count(usage: dict, name: str) -> int | None:
    value = usage.get(name)
    if value is None or isinstance(value, bool):
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return int(number) if math.isfinite(number) and number >= 0 else None


def billed(response: dict) -> tuple[int, int] | None:
    """The (prompt, completion) tokens a response says it was billed, or None where it does not say
    (no `usage`, or a count that is null, missing or not a number: some servers and gateways)."""
    usage = response.get("usage") or {}
    if not isinstance(usage, dict):
        return None
    prompt, completion = _count(usage, "prompt_tokens"), _count(usage, "completion_tokens")
    return None if prompt is None or completion is None else (prompt, completion)


def details(response: dict) -> dict:
    """What providers bill apart: prompt tokens served from their cache, and reasoning tokens (part of
    the completion tokens)."""
    usage = response.get("usage") or {}
    if not isinstance(usage, dict):
        return {"cached_tokens": 0, "reasoning_tokens": 0}
    prompt = usage.get("prompt_tokens_details") or {}
    completion = usage.get("completion_tokens_details") or {}
    return {
        "cached_tokens": (_count(prompt, "cached_tokens") or 0) if isinstance(prompt, dict) else 0,
        "reasoning_tokens": (_count(completion, "reasoning_tokens") or 0) if isinstance(completion, dict) else 0,
    }


def result(response: dict, verdict: LogprobVerdict | None, prefill: bool, reasoning: tuple | None = None) -> dict:
    """The job's result of one response (the parsed JSON body). Incomplete: one the job cannot keep,
    with what it was billed where it says (a paid answer thrown away still counts against the budget).
    FilteredAnswer: the provider withheld the answer. A result without usage is kept, marked
    `usage_missing` (its cost is counted at its worst case by the sender). `reasoning`: the (open, close)
    markers a trace the server returned apart (`reasoning_content`) is kept between, as a local engine's."""
    try:
        return _result(response, verdict, prefill, reasoning)
    except Incomplete as exc:
        raise Incomplete(str(exc), billed(response)) from None


def _text(message: dict, choice: dict, reasoning: tuple | None) -> tuple[str, object]:
    """The answer's text and finish reason; a reasoning trace the server sent apart goes before it
    between the markers, left open where the answer never came (cut off inside the trace)."""
    text = message.get("content")
    finish = choice.get("finish_reason")
    if text is None and message.get("refusal"):
        text, finish = message["refusal"], "refusal"
    trace = message.get("reasoning_content") or message.get("reasoning")
    if isinstance(trace, str) and trace:
        opener, closer = reasoning or ("<think>", "</think>")
        closed = bool(text) or finish not in ("length", None)
        text = f"{opener}{trace}{closer if closed else ''}{text or ''}"
    return text or "", finish


def _result(response: dict, verdict: LogprobVerdict | None, prefill: bool, reasoning: tuple | None) -> dict:
    choices = response.get("choices") or []
    if not choices:
        raise Incomplete("no choices in the response")
    choice = choices[0]
    message = choice.get("message") or {}
    usage = billed(response)
    finish = choice.get("finish_reason")
    counts = usage or (0, 0)
    base = {
        "n_prompt_tokens": counts[0],
        "n_generated_tokens": counts[1],
        "completion_tokens": counts[1],  # billed (a prefilled verdict's one token too)
        **details(response),
        "served_model": response.get("model"),
        "system_fingerprint": response.get("system_fingerprint"),
    }
    if usage is None:
        base["usage_missing"] = True
    if finish == "content_filter" or (message.get("tool_calls") and not message.get("content")):
        cause = "content_filter" if finish == "content_filter" else "tool_calls"
        raise FilteredAnswer(
            f"the provider withheld the answer (finish_reason {finish!r}"
            + (", a reply of only tool calls" if cause == "tool_calls" else "")
            + ")",
            usage,
            {**base, "output": "", "finish_reason": cause},
        )
    text, finish = _text(message, choice, reasoning)
    out = {"output": text, **base, "finish_reason": FINISH.get(finish, finish)}
    if verdict is not None:
        out.update(read_verdict(choice, verdict, prefill))
        out["n_generated_tokens"] = 0 if prefill else out["n_generated_tokens"]
    return out


def read_verdict(choice: dict, verdict: LogprobVerdict, prefill: bool) -> dict:
    content = (choice.get("logprobs") or {}).get("content")
    if not content:
        raise Incomplete("no logprobs in the response (the request asked for them)")
    if prefill:
        position = 0
    else:
        tokens = [t.get("token") or "" for t in content]
        position = after_marker(tokens, verdict.marker)
        if position is None:
            return unseen(f"no {verdict.marker!r} followed by a token in the reply")
        # `VERDICT: **CORRECT**`: the label is the next word after spaces and emphasis, never the `**`.
        while position < len(tokens) and FORMATTING.fullmatch(tokens[position]):
            position += 1
        if position == len(tokens):
            return unseen(f"nothing but spaces and emphasis after the last {verdict.marker!r}")
    top = content[position].get("top_logprobs") or []
    if not top:
        raise Incomplete("no top_logprobs in the response (the request asked for them)")
    listed = [(e.get("token") or "", float(e["logprob"])) for e in top]
    found, why = label_logprobs(listed, verdict.labels)
    if found is None:
        return unseen(why)
    floor = min(lp for _, lp in listed)
    lps = [found.get(label, floor) for label in verdict.labels]
    best = max(lps)
    weights = [math.exp(lp - best) for lp in lps]
    probs = [w / sum(weights) for w in weights]
    label = verdict.labels[max(range(len(verdict.labels)), key=lambda i: probs[i])]
    return {
        "output": f"{verdict.marker} {label}",
        "p_correct": probs[0],
        "finish_reason": "logprob",
        # labels not listed were given the smallest listed logprob (an upper bound on theirs)
        "logprob_bounded": sorted(set(verdict.labels) - set(found)),
    }


def unseen(why: str) -> dict:
    """No verdict: the parse stage reads the finish reason as the cause, and the text as its detail."""
    return {"output": why, "p_correct": None, "finish_reason": LOGPROB_UNSEEN}


def after_marker(tokens: list[str], marker: str) -> int | None:
    """The index of the token after the last one that ends the marker, or None."""
    text, found = "", None
    for i, t in enumerate(tokens):
        text += t
        if text.rstrip().endswith(marker) and i + 1 < len(tokens):
            found = i + 1
    return found


def label_logprobs(listed: list[tuple[str, float]], labels: tuple[str, ...]) -> tuple[dict | None, str]:
    """{label: logprob} of the labels represented among the listed tokens (each by the longest token its
    text after the marker's space, ` LABEL`, starts with; else `LABEL`; at least two characters of it),
    or (None, why)."""
    found: dict = {}
    shared = []
    for label in labels:
        best = None
        for form in (f" {label}", label):
            # A piece of the label stands for it only from two characters on (or the whole label): a
            # lone " I" after the marker is as likely "I think" as the start of " INCORRECT".
            hits = [
                (tok, lp)
                for tok, lp in listed
                if form.startswith(tok) and (len(tok.strip()) >= 2 or tok.strip() == label)
            ]
            if hits:
                best = max(hits, key=lambda h: len(h[0]))
                break
        if best is None:
            continue
        others = [o for o in labels if o != label and (f" {o}".startswith(best[0]) or o.startswith(best[0]))]
        if others:
            shared.append(f"{label!r} and {others[0]!r} both start with {best[0]!r}")
            continue
        found[label] = best[1]
    if shared:
        return None, "the verdict labels share their first token: " + "; ".join(shared)
    if not found:
        shown = ", ".join(json.dumps(t) for t, _ in listed[:5])
        return None, f"no verdict label among the {len(listed)} top_logprobs (most likely: {shown})"
    return found, ""
