"""Before a job's requests: one small request that checks what the configuration relies on.

- the key and the model name are taken (401/403/404 stop the job, naming the key);
- logprob verdicts: the response holds `top_logprobs` (some providers and proxies drop them silently);
- seeded sampling: two identical seeded requests give the same text (some servers ignore `seed`).

A missing capability stops the job before any of its requests, naming the setting that needs it.
`endpoint.check_capabilities: false` skips the probe (a server known to lack none of it).
"""

from __future__ import annotations

import asyncio

from genjudge.engine.endpoint import policy
from genjudge.engine.endpoint.client import make_client, send_once
from genjudge.engine.endpoint.requests import FilteredAnswer, LogprobVerdict, body, messages, with_prefill
from genjudge.engine.endpoint.settings import Endpoint, redact
from genjudge.errors import InputError
from genjudge.models.endpoints import OUTPUT_FIELDS

PROBE_TEXT = "Reply with one short sentence about the weather."
TRIES = 4


def probe(spec, endpoint: Endpoint, key: str, role: str, verdict: LogprobVerdict | None) -> dict:
    """What the probe saw: {served_model, system_fingerprint, body, usage}; InputError where a capability
    is missing. `usage`: the (prompt, completion) tokens of every try billed (None for one billed without
    saying), and the InputError's `usage` where the probe failed: the job's budget counts them either way."""
    paid: list = []
    try:
        return asyncio.run(_probe(spec, endpoint, key, role, verdict, paid))
    except InputError as exc:
        exc.usage = paid
        raise


async def _once(client, b, verdict, endpoint, key, role, spec, paid: list) -> dict:
    """One probe request, retried as the job's would be, a few times; refusals become InputError."""
    import random

    rng = random.Random(0)
    for attempt in range(TRIES):
        try:
            res = await send_once(client, b, verdict, endpoint.prefill)
            # None: an answer without usage, counted at its worst case
            paid.append(None if res.get("usage_missing") else (res["n_prompt_tokens"], res["completion_tokens"]))
            return res
        except FilteredAnswer as exc:  # its one harmless sentence withheld: every item's answer would be
            paid.append(exc.usage)
            raise InputError(
                f"{role}.endpoint: {endpoint.url} withheld the answer to the capability probe ({exc}); every "
                f"item's would most likely be withheld too"
            ) from None
        except policy.Retry as exc:
            if exc.usage is not None or exc.cause == "incomplete":  # a 200 it could not use: billed all the same
                paid.append(exc.usage)
            if exc.cause == "incomplete" and verdict is not None:
                raise InputError(
                    f"{role}.verdict: logprob needs top_logprobs, and {endpoint.url} returned none for model "
                    f"{spec.model!r} ({exc}); use verdict: generate, or an endpoint that returns them"
                ) from None
            if attempt == TRIES - 1:
                raise InputError(
                    f"{role}.endpoint: {endpoint.url} did not answer the capability probe: {exc}"
                ) from None
            await asyncio.sleep(policy.wait_for(exc, attempt, rng))
        except policy.Refused as exc:
            raise InputError(_refusal(exc, spec, endpoint, role, redact(str(exc), [key]))) from None
        except policy.TooLong as exc:
            raise InputError(f"{role}.endpoint: the capability probe was refused as too long: {exc}") from None
        except policy.Filtered as exc:  # its one harmless sentence: the filter would refuse every item
            raise InputError(
                f"{role}.endpoint: the content filter of {endpoint.url} refused the capability probe: "
                f"{redact(str(exc), [key])}"
            ) from None
    raise AssertionError("unreachable")


def _refusal(exc: policy.Refused, spec, endpoint: Endpoint, role: str, message: str) -> str:
    if exc.status in (401, 403):
        where = f"the key in ${endpoint.api_key_env}" if endpoint.api_key_env else "no key (endpoint.api_key_env: null)"
        return f"{role}.endpoint.api_key_env: {endpoint.url} refused {where}: {message}"
    if exc.status == 404:
        return f"{role}.model: {endpoint.url} does not serve {spec.model!r}: {message}"
    needs = []
    if getattr(spec, "verdict", None) == "logprob":
        needs.append(f"{role}.verdict: logprob (logprobs, top_logprobs)")
        if endpoint.prefill:
            needs.append(f"{role}.endpoint.prefill (continue_final_message)")
    if getattr(spec, "do_sample", False):
        needs.append(f"{role}.seed (seed)")
    if endpoint.extra_body:
        needs.append(f"{role}.endpoint.extra_body {sorted(endpoint.extra_body)}")
    asked = f"; the request carried what {', '.join(needs)} need" if needs else ""
    return f"{role}: {endpoint.url} refused the capability probe for model {spec.model!r}: {message}{asked}"


def probe_body(spec, endpoint: Endpoint, verdict: LogprobVerdict | None) -> dict:
    """The probe's request: like the job's (the same settings), with a short text and a short answer."""
    msgs = with_prefill(messages(PROBE_TEXT, spec.system_prompt), verdict, endpoint.prefill)
    b = body(spec, endpoint, msgs, seed=12345, verdict=verdict)
    if verdict is None:  # whichever bound the request carries: extra_body may leave max_tokens out
        for k in OUTPUT_FIELDS:
            if k in b:
                b[k] = min(int(b[k]), 16)
    return b


def tries(spec, verdict: LogprobVerdict | None) -> int:
    """Requests the probe sends: two where it checks that `seed` is honoured."""
    return 2 if getattr(spec, "do_sample", False) and verdict is None else 1


async def _probe(spec, endpoint: Endpoint, key: str, role: str, verdict: LogprobVerdict | None, paid: list) -> dict:
    client = make_client(endpoint, key)
    async with client:
        b = probe_body(spec, endpoint, verdict)
        first, second = await _once(client, b, verdict, endpoint, key, role, spec, paid), None
        if tries(spec, verdict) == 2:
            second = await _once(client, b, verdict, endpoint, key, role, spec, paid)
            if second["output"] != first["output"]:
                raise InputError(
                    f"{role}.seed: {endpoint.url} does not honour `seed` for model {spec.model!r} (one seeded request "
                    f"gave two texts): sampled answers would not be reproducible; use do_sample: false, or "
                    f"{role}.endpoint.check_capabilities: false to accept that"
                )
    return {
        "served_model": first.get("served_model"),
        "system_fingerprint": first.get("system_fingerprint"),
        "body": b,  # what was sent, and what it cost, for the job's budget
        "usage": paid,
    }
