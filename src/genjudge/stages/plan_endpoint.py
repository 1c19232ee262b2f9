"""`genjudge plan` for a generator or judge behind an endpoint (`engine: openai`): no config.json, no
weights, no GPU; its requests, tokens, cost and time, each said as the estimate it is."""

from __future__ import annotations

from genjudge.config.jobs import PlanJob
from genjudge.config.specs import GeneratorSpec, JudgeSpec
from genjudge.stages.plan_roles import Entry, runtime_line

STEP = "endpoint"  # the resources section of endpoint jobs


def plan_endpoint(planned: PlanJob, role: str, name: str, items, cal, workflow_dir=None) -> Entry:
    from dataclasses import replace

    from genjudge.models.endpoints import moving_alias, public_url
    from genjudge.planning.endpoints import money

    exp = planned.exp
    section = (exp.generators if role == "generator" else exp.judges)[name]
    spec = (GeneratorSpec if role == "generator" else JudgeSpec).from_config(section)
    e_cfg, price = section["endpoint"], section["price"]
    url = public_url(e_cfg["base_url"] or "")
    batch = bool(e_cfg["batch"])
    wl, inputs = _workload(planned, role, name, spec, items, cal, workflow_dir)
    # Each answer at the bound its request carries, the one the budget reserves: extra_body's
    # max_completion_tokens where it leaves max_tokens out, one token for a prefilled logprob verdict.
    prefilled = role == "judge" and spec.verdict == "logprob" and e_cfg["prefill"]
    bound, sized = output_words(1 if prefilled else spec.max_new_tokens, e_cfg["extra_body"], prefilled)
    wl.requests = {d: [replace(r, new_tokens=bound) for r in reqs] for d, reqs in wl.requests.items()}
    if role == "generator":
        groups = {d: (reqs, planned.shards[d]) for d, reqs in wl.requests.items()}
    else:
        groups = {"all": (wl.all(), spec.shards)}
    entry = Entry(role, name, spec, {}, 0, None, requests=wl.requests)
    lines = [
        f"{role} {name}: {spec.model} behind {url} (engine: openai): no GPU, no model files read; the server "
        f"applies its own chat template and tokenizer"
    ]
    if moving_alias(spec.model):
        lines.append(
            f"  warning: {spec.model!r} has no date or version in its name: its provider may move it to another model"
        )
    key = e_cfg["api_key_env"]
    lines.append(
        f"  key: ${key} in the jobs' environment (not needed to plan)" if key else "  key: none (a local server)"
    )
    speed = cal.for_endpoint(spec.model, role) if cal else None
    latency = speed.latency() if speed else float(e_cfg["latency_seconds"])
    if not speed:  # the chat template's tokens around each message (role, separators), as the budget counts them
        from genjudge.engine.endpoint.cost import OVERHEAD_TOKENS

        extra = OVERHEAD_TOKENS * (1 + bool(spec.system_prompt))
        wl.requests = {
            d: [replace(r, prompt_tokens=r.prompt_tokens + extra) for r in reqs] for d, reqs in wl.requests.items()
        }
    if speed:  # a finished run's endpoint jobs measured the rate and the tokens a request was billed
        lines.append(f"  measured by {cal.source}: {speed.note}")
        wl.requests = {
            d: [replace(r, prompt_tokens=speed.prompt_tokens, answer_tokens=speed.completion_tokens) for r in reqs]
            for d, reqs in wl.requests.items()
        }
        sized = "as the measured run's answers were billed on average"
    plan_time, job_lines, total_cost, total_requests, longest = _per_job(
        role, name, groups, wl, e_cfg, price, latency, speed, sized, entry, inputs
    )
    lines += job_lines
    known = price["input_per_mtok"] is not None and price["output_per_mtok"] is not None
    budget = section["max_cost_usd"]
    if known:
        lines.append(
            f"  cost of {role} {name}: about {money(total_cost)} for {total_requests:,.0f} requests (answers: {sized})"
        )
    else:
        lines.append(f"  cost: unknown: set {role}.price.input_per_mtok and .output_per_mtok to see it here")
    if budget is not None:
        per_job = max((t["cost_usd_per_job"] or 0.0) for t in plan_time.values()) if plan_time else 0.0
        verdict = "enough" if per_job <= budget else "LESS than the costliest job's estimate: it would stop part-way"
        lines.append(f"  max_cost_usd: {budget:g} per job: {verdict}")
    if not batch:
        # The time rests on a latency the plan assumes unless a run measured it: a widened margin.
        entry.assumptions = (
            []
            if speed
            else [
                f"latency: {e_cfg['latency_seconds']:g} s a request assumed (endpoint.latency_seconds), never measured"
            ]
        )
        lines.append(runtime_line(planned.settings, STEP, longest, entry.assumptions))
    entry.lines = lines
    entry.plan = {
        "name": name,
        "role": role,
        "engine": "openai",
        "model": spec.model,
        "endpoint": {"base_url": url, "max_connections": e_cfg["max_connections"], "batch": batch},
        "time": plan_time,
        "cost_usd": round(total_cost, 6) if known else None,
        "requests": round(total_requests, 1),
        "gpus_per_job": 0,
    }
    return entry


def _workload(planned: PlanJob, role: str, name: str, spec, items, cal, workflow_dir):
    """(the requests of an endpoint generator's or judge's jobs, the answers a judge reads: (generator, dataset))."""
    from genjudge.judging import modes
    from genjudge.planning.workload import generator_workload, judge_workload

    exp = planned.exp
    section = (exp.generators if role == "generator" else exp.judges)[name]
    if role == "generator":
        answers = cal.answer_tokens.get(spec.model) if cal else None
        wl = generator_workload({d: items[d] for d in exp.datasets_of(name)}, section, answers)
        inputs: list = []
    else:
        answers = {
            g: cal.answer_tokens[s["model"]]
            for g, s in exp.generators.items()
            if cal and s["model"] in cal.answer_tokens
        }
        mode = modes.get(spec.mode)
        wl = judge_workload(
            items,
            section,
            exp.cells(name),
            exp.generators,
            planned.templates[name],
            mode,
            answers,
            workflow_dir,
        )
        inputs = sorted({(g, c.dataset) for c in exp.cells(name) for g in (c.generator, c.opponent) if g})
    return wl, inputs


def _per_job(
    role: str, name: str, groups: dict, wl, e_cfg: dict, price: dict, latency: float, speed, sized: str, entry, inputs
):
    """Each group's jobs (a generator's: one group per dataset; a judge's: one) as the plan says them:
    (their figures by group, the lines, total cost, total requests, the longest job's seconds); adds
    the jobs to `entry`."""
    from genjudge.planning.endpoints import estimate, money
    from genjudge.planning.time_model import duration
    from genjudge.planning.workload import CHARS_PER_TOKEN

    batch = bool(e_cfg["batch"])
    total_cost, total_requests, longest = 0.0, 0.0, 0.0
    plan_time: dict = {}
    lines: list[str] = []
    for label, (reqs, jobs) in groups.items():
        reqs = wl.requests.get(label, reqs) if role == "generator" else wl.all()
        per_job = [r.share(1 / jobs) for r in reqs]
        est = estimate(per_job, int(e_cfg["max_connections"]), latency, price, batch)
        longest = max(longest, est.seconds)
        total_requests += est.requests * jobs
        if est.cost_usd is not None:
            total_cost += est.cost_usd * jobs
        where = f" on {label}" if role == "generator" else ""
        lines.append(
            f"  jobs{where}: {jobs}; each about {est.requests:,.0f} requests, {est.prompt_tokens:,.0f} prompt tokens "
            f"(~{CHARS_PER_TOKEN} chars/token, and the chat template's tokens a message) and at most {est.completion_tokens:,.0f} completion tokens "
            f"({sized}); cost about {money(est.cost_usd)} a job" + (" at the batch price" if batch else "")
        )
        if batch:
            lines.append("  time: batch files come back within the provider's 24 h window (usually sooner)")
        else:
            how = (
                f"a measured {latency:.2f} s each"
                if speed
                else f"an assumed {e_cfg['latency_seconds']:g} s each (endpoint.latency_seconds; rate limits and "
                f"the provider's load make it longer)"
            )
            lines.append(
                f"  time: about {duration(est.seconds)} a job: {est.requests:,.0f} requests, "
                f"{e_cfg['max_connections']} at a time, at {how}"
            )
        prefix = "generate" if role == "generator" else "judge"
        for j in range(jobs):
            job = f"{prefix} {name}/{label}/{j}" if role == "generator" else f"judge {name}/{j}"
            entry.jobs.append((job, est.seconds, 0, inputs, (name, label) if role == "generator" else None))
        plan_time[label] = {
            "requests_per_job": round(est.requests, 1),
            "prompt_tokens_per_job": round(est.prompt_tokens),
            "completion_tokens_per_job_at_most": round(est.completion_tokens),
            "seconds_per_job": round(est.seconds, 1),
            "cost_usd_per_job": None if est.cost_usd is None else round(est.cost_usd, 6),
            "jobs": jobs,
        }
    return plan_time, lines, total_cost, total_requests, longest


def output_words(max_tokens: int, extra_body: dict, prefilled: bool = False) -> tuple[int, str]:
    """Each request's most completion tokens as the requests carry them (models.endpoints.output_bound),
    and what the plan says of it."""
    from genjudge.models.endpoints import OUTPUT_FIELDS, output_bound

    bound = output_bound(max_tokens, extra_body)
    default = "one token (a prefilled verdict)" if prefilled else "max_new_tokens"
    if bound is None:
        return max_tokens, (
            f"counted at {default} each, though nothing bounds them: endpoint.extra_body sets max_tokens: null "
            f"and no max_completion_tokens"
        )
    merged = {"max_tokens": max_tokens, **extra_body}
    named = [
        default if k == "max_tokens" and k not in extra_body else f"endpoint.extra_body.{k}"
        for k in OUTPUT_FIELDS
        if merged.get(k) is not None
    ]
    return bound, f"{' or '.join(named)} each, an upper bound"
