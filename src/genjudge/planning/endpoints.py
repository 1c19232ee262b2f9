"""The time and cost of a model behind an endpoint (`engine: openai`), before anything is sent.

Nothing here asks the endpoint: the requests and their lengths come from the workload (prompt tokens
from characters, ~4 a token; answers at max_new_tokens, an upper bound, unless a run measured their
length), the time from `max_connections` requests in flight at an assumed `latency_seconds` each,
the cost from `price`. Each figure says what it assumed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass
class Estimate:
    requests: float
    prompt_tokens: float
    completion_tokens: float
    seconds: float
    cost_usd: float | None
    probe_requests: int = 1


def estimate(requests: list, max_connections: int, latency: float, price: dict, batch: bool) -> Estimate:
    """One job's requests (planning Requests: n, prompt_tokens, new_tokens) at `max_connections` in flight."""
    n = sum(r.n for r in requests)
    prompt = sum(r.n * r.prompt_tokens for r in requests)
    completion = sum(r.n * (r.answer_tokens if r.answer_tokens is not None else r.new_tokens) for r in requests)
    seconds = math.ceil(n / max(1, max_connections)) * latency if n else 0.0
    known = price["input_per_mtok"] is not None and price["output_per_mtok"] is not None
    cost = None
    if known:
        cost = (prompt * price["input_per_mtok"] + completion * price["output_per_mtok"]) / 1e6
        cost *= price["batch_discount"] if batch else 1.0
    return Estimate(n, prompt, completion, seconds, cost)


def money(usd: float | None) -> str:
    if usd is None:
        return "unknown (price not set)"
    return f"${usd:,.2f}" if usd >= 0.1 else f"${usd:.4f}"
