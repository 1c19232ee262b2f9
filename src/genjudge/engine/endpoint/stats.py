"""The endpoint's part of a job's meta: what was asked, what came back, what it cost; a completion's
one-line summary for the job's log; and one job's stats from its completions' (a conversation's turns)."""

from __future__ import annotations

from collections import Counter

from genjudge.engine.endpoint.cost import Budget


def endpoint_stats(pset, report, budget: Budget, probe_requests: int = 0) -> dict:
    """The endpoint's part of the job's meta: what was asked, what came back, what it cost
    (`probe_requests`: the capability probe's, sent by this completion)."""
    ep = pset.endpoint
    known = ep.price.known
    out = {
        "base_url": ep.url,
        "model": pset.spec.model,
        "batch": ep.batch,
        "max_connections": ep.max_connections,
        "probe": pset.probed,
        "probe_requests": probe_requests,
        "requests": probe_requests,  # the probe's included: its tokens and cost are
        "completed": 0,
        "retries": {},
        "given_up": {},
        "too_long": 0,
        "not_sent": 0,
        "wait_seconds": 0.0,
        "seconds": 0.0,
        "requests_per_second": None,
        "prompt_tokens": budget.prompt_tokens,
        "completion_tokens": budget.completion_tokens,
        "cached_tokens": budget.cached_tokens,
        "reasoning_tokens": budget.reasoning_tokens,
        "cost_usd": round(budget.spent - budget.earlier, 6) if known else None,
        "cost_usd_earlier_attempts": round(budget.earlier, 6) if known else None,
        "prompt_tokens_earlier_attempts": budget.earlier_prompt_tokens,
        "completion_tokens_earlier_attempts": budget.earlier_completion_tokens,
        "max_cost_usd": ep.max_cost_usd,
        "budget_stopped": budget.stopped,
        "served_models": {},
        "system_fingerprints": {},
        "lowest_concurrency": None,
        "rate_limit_cuts": 0,
        "unkept": 0,  # answers billed and thrown away (no logprobs, no choice), counted in cost_usd
        # Tries with no answer (timed out, dropped, cut off, stopped in flight), which a provider may bill:
        # their worst case, counted against max_cost_usd beside cost_usd.
        "unknown_outcome": 0,
        "possibly_billed_usd": round(budget.possibly - budget.possibly_earlier, 6) if known else None,
        "possibly_billed_usd_earlier_attempts": round(budget.possibly_earlier, 6) if known else None,
        "usage_missing": budget.usage_missing,  # answers kept without usage: counted as possibly billed
        "filtered": 0,  # answers the provider withheld (content_filter, only tool calls)
        "over_reservation": budget.over_reservation,  # responses billed above what was set aside for them
        "over_bound": budget.over_bound,  # responses billed above max_tokens x n (reasoning billed apart)
        "budget_waits": 0,
        "on_filtered": ep.on_filtered,
    }
    if report is not None:
        out.update(
            requests=report.requests + probe_requests,
            completed=report.done,
            retries=dict(report.retries),
            given_up=dict(report.given_up),
            too_long=len(report.too_long),
            not_sent=len(report.unsent),
            wait_seconds=round(report.wait_seconds, 3),
            seconds=round(report.seconds, 3),
            requests_per_second=round(report.done / report.seconds, 3) if report.seconds else None,
            served_models={str(k): v for k, v in report.served_models.items()},
            system_fingerprints={str(k): v for k, v in report.fingerprints.items()},
            lowest_concurrency=report.lowest_concurrency,
            rate_limit_cuts=report.rate_limit_cuts,
            unkept=report.unkept,
            unknown_outcome=getattr(report, "unknown", 0),
            filtered=getattr(report, "filtered", 0),
            budget_waits=getattr(report, "budget_waits", 0),
        )
        if getattr(report, "batches", None) is not None:
            out["batches"] = report.batches
    return out


def summary_line(e: dict) -> str:
    """The job's last word on its requests: sent, retried, tokens, cost."""
    cost = "" if e["cost_usd"] is None else f", ${e['cost_usd']:.4f} spent"
    if e.get("possibly_billed_usd"):
        cost += f" and up to ${e['possibly_billed_usd']:.4f} possibly billed"
    return (
        f"{e['requests']} requests sent ({e['probe_requests']} of them the capability probe), {e['completed']} "
        f"results, {sum(e['retries'].values())} retries, {e['prompt_tokens']:,} prompt and "
        f"{e['completion_tokens']:,} completion tokens{cost}"
    )


SUMMED = (
    "requests",
    "completed",
    "too_long",
    "not_sent",
    "wait_seconds",
    "seconds",
    "rate_limit_cuts",
    "unkept",
    "unknown_outcome",
    "filtered",
    "budget_waits",
    "probe_requests",
)


def merged_stats(parts: list[dict]) -> dict:
    """One job's endpoint stats from its completions' (a conversation's turns): counts summed; the
    budget's figures (one budget per job) are the last completion's."""
    parts = [p for p in parts if p]
    if len(parts) <= 1:
        return parts[0] if parts else {}
    out = dict(parts[-1])
    for name in SUMMED:
        out[name] = sum(p.get(name) or 0 for p in parts)  # metas before a count was added lack it
    for name in ("retries", "given_up", "served_models", "system_fingerprints"):
        out[name] = dict(sum((Counter(p[name]) for p in parts), Counter()))
    out["budget_stopped"] = any(p["budget_stopped"] for p in parts)
    out["probe"] = next((p["probe"] for p in parts if p["probe"]), None)
    lows = [p["lowest_concurrency"] for p in parts if p["lowest_concurrency"] is not None]
    out["lowest_concurrency"] = min(lows) if lows else None
    out["requests_per_second"] = round(out["completed"] / out["seconds"], 3) if out["seconds"] else None
    return out
