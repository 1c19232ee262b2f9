"""The report's account of the jobs of models behind an endpoint (`engine: openai`): what each sent and
got back, its retries by cause, tokens, cost and budget, and how fast it went (summary.json's
`endpoints`, report.md's "Endpoints", the page's section of the same name)."""

from __future__ import annotations

from genjudge.judging.tables import md_text


def endpoint_rows(gen_metas, judge_metas: dict) -> list[dict]:
    """One row per endpoint job of the run (an attempt that ran: a judge job whose cells a budget
    stopped is here, with what it spent)."""
    jobs = [(f"generate {m.generator}/{m.dataset}/{m.shard}", m) for m in gen_metas]
    jobs += [(f"judge {j}/{i}", job) for j, meta in judge_metas.items() for i, job in enumerate(meta.jobs())]
    rows = []
    for name, m in jobs:
        e = m.endpoint
        if not e:
            continue
        rows.append(
            {
                "job": name,
                "model": e["model"],
                "base_url": e["base_url"],
                "batch": e["batch"],
                "requests": e["requests"],
                "completed": e["completed"],
                "resumed": m.resumed_items,
                "retries": e["retries"],
                "given_up": e["given_up"],
                "not_sent": e["not_sent"],
                "too_long": e["too_long"],
                "prompt_tokens": e["prompt_tokens"],
                "completion_tokens": e["completion_tokens"],
                "cost_usd": e["cost_usd"],
                "cost_usd_earlier_attempts": e["cost_usd_earlier_attempts"],
                "unkept": e.get("unkept", 0),  # metas written before it was counted lack it
                "unknown_outcome": e.get("unknown_outcome", 0),
                "possibly_billed_usd": e.get("possibly_billed_usd"),
                "possibly_billed_usd_earlier_attempts": e.get("possibly_billed_usd_earlier_attempts"),
                "max_cost_usd": e["max_cost_usd"],
                # metas written before these were counted lack them
                "probe_requests": e.get("probe_requests", 0),
                "filtered": e.get("filtered", 0),
                "usage_missing": e.get("usage_missing", 0),
                "over_reservation": e.get("over_reservation", 0),
                "over_bound": e.get("over_bound", 0),
                "cached_tokens": e.get("cached_tokens", 0),
                "reasoning_tokens": e.get("reasoning_tokens", 0),
                "prompt_tokens_earlier_attempts": e.get("prompt_tokens_earlier_attempts", 0),
                "completion_tokens_earlier_attempts": e.get("completion_tokens_earlier_attempts", 0),
                "budget_stopped": e["budget_stopped"],
                "seconds": e["seconds"],
                "requests_per_second": e["requests_per_second"],
                "lowest_concurrency": e["lowest_concurrency"],
                "max_connections": e["max_connections"],
                "served_models": e["served_models"],
                "system_fingerprints": e["system_fingerprints"],
            }
        )
    return rows


def _counts(d: dict) -> str:
    return ", ".join(f"{k} x{v}" for k, v in sorted(d.items())) or "none"


def _usd(v) -> str:
    return "-" if v is None else f"${v:.4f}"


def cost_text(r: dict) -> str:
    """This attempt's cost, with what earlier attempts paid and the budget where there are any."""
    text = _usd(r["cost_usd"])
    if r["cost_usd_earlier_attempts"]:
        text += f" (+{_usd(r['cost_usd_earlier_attempts'])} earlier)"
    if r.get("unkept"):
        text += f", {r['unkept']} answer{'s' * (r['unkept'] > 1)} paid and not kept"
    n, possibly = r.get("unknown_outcome", 0), r.get("possibly_billed_usd")
    if n:  # timed out, dropped or cut off: a provider may bill them, and the budget counts them so
        text += f", {n} tr{'ies' if n > 1 else 'y'} with no answer"
        text += f" (possibly billed: up to {_usd(possibly)})" if possibly else ""
    if r.get("possibly_billed_usd_earlier_attempts"):
        text += f" (+up to {_usd(r['possibly_billed_usd_earlier_attempts'])} possibly billed earlier)"
    if r.get("usage_missing"):
        text += f", {r['usage_missing']} answer(s) without usage (counted as possibly billed at their worst case)"
    if r.get("over_reservation") or r.get("over_bound"):
        text += (
            f", {r.get('over_reservation', 0)} billed above what was set aside"
            f" ({r.get('over_bound', 0)} above max_tokens)"
        )
    if r["max_cost_usd"] is not None:
        text += f" of {_usd(r['max_cost_usd'])}" + (": **budget reached**" if r["budget_stopped"] else "")
    return text


def table_rows(rows: list[dict]) -> tuple[list[str], list[list[str]]]:
    head = [
        "job",
        "model",
        "requests sent",
        "results (items)",
        "retries by cause",
        "left for a rerun",
        "tokens in / out",
        "cost",
        "requests/s",
        "concurrency",
    ]
    body = []
    for r in rows:
        left = r["not_sent"] + sum(r["given_up"].values())
        body.append(
            [
                r["job"],
                f"{r['model']} at {r['base_url']}" + (" (batch)" if r["batch"] else ""),
                str(r["requests"]) + (f" ({r['probe_requests']} probe)" if r.get("probe_requests") else ""),
                f"{r['completed']} new, {r['resumed']} stored before"
                + (f", {r['filtered']} withheld by the provider" if r.get("filtered") else ""),
                _counts(r["retries"]),
                f"{left}" + (f" ({_counts(r['given_up'])} given up)" if r["given_up"] else ""),
                f"{r['prompt_tokens']:,} / {r['completion_tokens']:,}"
                + (f" ({r['cached_tokens']:,} cached in)" if r.get("cached_tokens") else "")
                + (f" ({r['reasoning_tokens']:,} reasoning out)" if r.get("reasoning_tokens") else ""),
                cost_text(r),
                "-" if r["requests_per_second"] is None else f"{r['requests_per_second']:.1f}",
                "-"
                if r["lowest_concurrency"] is None
                else f"{r['max_connections']} (lowest {r['lowest_concurrency']:.0f})",
            ]
        )
    return head, body


def totals_line(rows: list[dict]) -> str:
    """What the run's endpoint jobs spent over all their attempts, and their tokens."""
    spent = sum((r["cost_usd"] or 0.0) + (r["cost_usd_earlier_attempts"] or 0.0) for r in rows)
    possibly = sum(
        (r.get("possibly_billed_usd") or 0.0) + (r.get("possibly_billed_usd_earlier_attempts") or 0.0) for r in rows
    )
    tokens_in = sum(r["prompt_tokens"] + r.get("prompt_tokens_earlier_attempts", 0) for r in rows)
    tokens_out = sum(r["completion_tokens"] + r.get("completion_tokens_earlier_attempts", 0) for r in rows)
    priced = any(r["cost_usd"] is not None for r in rows)
    money = f"{_usd(spent)} spent" + (f", up to {_usd(possibly)} more possibly billed" if possibly else "")
    return (
        f"Over all attempts: {money if priced else 'no price known'}; {tokens_in:,} prompt and {tokens_out:,} "
        f"completion tokens (the results stored by earlier attempts included)."
    )


def endpoint_markdown(rows: list[dict]) -> list[str]:
    if not rows:
        return []
    head, body = table_rows(rows)
    out = [
        "## Endpoints",
        "",
        "Each job of a model behind an endpoint: its requests (retries included) and results, the retries by "
        "cause, the items left without a result (a rerun sends only them), the tokens and cost of this attempt "
        "(the capability probe's included) and its requests per second.",
        "",
        "| " + " | ".join(head) + " |",
        "|" + "---|" * len(head),
    ]
    out += ["| " + " | ".join(md_text(c) if i < 2 else c for i, c in enumerate(row)) + " |" for row in body]
    out += ["", totals_line(rows)]
    models = {}
    for r in rows:
        for served, n in r["served_models"].items():
            models.setdefault(r["model"], {}).setdefault(served, 0)
            models[r["model"]][served] += n
    out += [""]
    for model, served in models.items():
        fps = sorted({fp for r in rows if r["model"] == model for fp in r["system_fingerprints"]})
        out.append(
            f"- {md_text(model)}: served as {md_text(_counts(served))}; system_fingerprint "
            f"{md_text(', '.join(fps) or 'none')}"
        )
    return [*out, ""]
