"""The time model against a finished run, and a run's measurements as the next plan's figures.

Every generating job's meta records its batches, prompt tokens, prefill and decode seconds and
decoding steps (engine/decoding.py's Timing), its load seconds, its devices and its memory plan
(the model's numbers). For each job the time model is run on exactly those counts, with the
stated assumptions (datasheet figures x efficiency, the configured read rate): set against the
measured seconds it says how good the model is (the report's "time model" table). The measurements,
per model, calibrate the next plan (`genjudge plan --calibrate results/<run>`): the measured load
seconds per job replace the load term, measured/predicted prefill and decode seconds scale those
terms, the measured decoding steps per batch (as a share of max_new_tokens) replace "every batch
runs to max_new_tokens", and the measured mean answer length sizes the judge's prompts.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from genjudge.planning.time_model import (
    DEFAULT_READ_RATE,
    Calibration,
    Device,
    Layout,
    ModelNumbers,
    Requests,
    engine_of,
    gpu_of_size,
    job_time,
)

# This CPU as a device for a job with so many threads (engine.devices.measure_cpu: the callers pass it,
# this module stays free of torch).
CpuDevice = Callable[[int], Device]


def job_device(meta, cpu: CpuDevice) -> tuple[Device, int]:
    """The device a job ran on (its first GPU, by name, from torch's view in the meta; else this CPU)
    and its GPU count."""
    devices = (meta.device or {}).get("devices") or []
    if not devices:
        return cpu(int((meta.device or {}).get("threads") or 1)), 0
    first = devices[0]
    return gpu_of_size(first.get("total_memory") or 0, first.get("name") or ""), len(devices)


def job_layout(meta, n_gpus: int) -> Layout:
    if not n_gpus:
        return Layout("cpu", 0)
    if getattr(meta, "parallel", None) == "tensor" and meta.tensor_parallel_size:
        return Layout("tensor", meta.tensor_parallel_size)
    return Layout("device_map" if n_gpus > 1 else "one", n_gpus)


@dataclass
class JobCheck:
    """One job: the time model on its own counts, and what it measured (seconds)."""

    job: str
    role: str
    model: str
    device: str
    requests: int
    batch: int | None
    predicted: dict
    measured: dict
    weight_bytes: float
    steps_fraction: float | None
    fixed: dict = field(default_factory=dict)  # the predicted seconds no size scales: {load, compute}
    # Measured, for the next plan: batch_size auto's probes, compiling, and the job's whole wall time
    # (Snakemake's benchmark file) whose rest is its start-up.
    overheads: dict = field(default_factory=dict)

    def row(self) -> dict:
        return {
            "job": self.job,
            "role": self.role,
            "model": self.model,
            "device": self.device,
            "requests": self.requests,
            "batch_size": self.batch,
            "predicted": {k: round(v, 3) for k, v in self.predicted.items()},
            "measured": {k: round(v, 3) for k, v in self.measured.items()},
            "fixed": {k: round(v, 3) for k, v in self.fixed.items()},
        }


def check_job(meta, name: str, role: str, read_rate: float, cpu: CpuDevice) -> JobCheck | None:
    """The time model on one finished job's counts, or None for a job with nothing to compare
    (nothing computed, or a meta without timings or the model's numbers)."""
    plan = meta.memory_plan or {}
    if not meta.batches or not meta.computed_items or "kv_bytes_per_token" not in plan:
        return None
    model = ModelNumbers.from_plan(plan)
    device, n_gpus = job_device(meta, cpu)
    layout = job_layout(meta, n_gpus)
    n = meta.computed_items
    steps = meta.decode_steps / meta.batches
    req = Requests(n, meta.n_prompt_tokens / n, meta.max_new_tokens or 0, batches=meta.batches, steps=steps)
    # engine_of reads a meta's `engine` where it records one, as it reads a spec's.
    engine = engine_of(meta)
    t = job_time(model, device, layout, [req], meta.batch_size or 1, engine, read_rate)
    decode = sum(x.seconds for x in t.terms if x.name.startswith("decode"))
    compute = getattr(meta, "generate_seconds", None) or getattr(meta, "judge_seconds", 0.0)
    span = max(1, (meta.max_new_tokens or 1) - 1)
    return JobCheck(
        job=name,
        role=role,
        model=meta.model,
        device=device.name,
        requests=n,
        batch=meta.batch_size,
        predicted={
            "load": t.term("load"),
            "prefill": t.term("prefill"),
            "decode": decode,
            "compute": t.term("prefill") + decode,
        },
        measured={
            "load": meta.load_seconds,
            "prefill": meta.prefill_seconds,
            "decode": meta.decode_seconds,
            "compute": compute,
        },
        weight_bytes=model.weight_bytes,
        steps_fraction=steps / span if meta.max_new_tokens and meta.max_new_tokens > 1 else None,
        overheads={
            "batch search": getattr(meta, "batch_search_seconds", 0.0) or 0.0,
            "compile": getattr(meta, "compile_seconds", 0.0) or 0.0,
        },
        fixed={
            "load": engine.load_overhead_seconds(device),
            # host-side work per batch (prefill) and per decoding step
            "compute": engine.step_overhead_seconds(model, device) * (meta.batches + meta.decode_steps),
        },
    )


def run_metas(run_dir) -> tuple[list, list]:
    """(generation metas, judge job metas) of a run directory, each with a name."""
    from genjudge.store.records import GenerateMeta, JudgeMeta, RecordError

    run_dir = Path(run_dir)
    gens, judges = [], []
    for path in sorted((run_dir / "generations").glob("*/*/*.meta.json")):
        try:
            m = GenerateMeta.read(path)
        except (RecordError, json.JSONDecodeError, TypeError):
            continue
        if not m.error:  # a failed job (genjudge.store.failures) measured nothing
            gens.append((f"generate {m.generator}/{m.dataset}/{m.shard}", m))
    for path in sorted((run_dir / "judge").glob("*/shards/*.meta.json")):
        try:
            m = JudgeMeta.read(path)
        except (RecordError, json.JSONDecodeError, TypeError):
            continue
        if not m.error:
            judges.append((f"judge {path.parent.parent.name}/{path.name.split('.')[0]}", m))
    return gens, judges


def checks(gens: list, judges: list, cpu: CpuDevice, read_rate: float = DEFAULT_READ_RATE) -> list[JobCheck]:
    out = []
    for role, metas in (("generator", gens), ("judge", judges)):
        for name, meta in metas:
            c = check_job(meta, name, role, read_rate, cpu)
            if c is not None:
                out.append(c)
    return out


def _ratio(a: float, b: float) -> float | None:
    return a / b if b > 0 and a > 0 else None


CHECK_NOTE = (
    "The time model of `genjudge plan` (genjudge.planning.time_model) on each job's own counts (requests, prompt "
    "tokens, batches, decoding steps) with its stated assumptions, against the seconds the job measured "
    "(load: reading the model; prefill: to each batch's first new token; decode: the steps after it). "
    "`genjudge plan --calibrate results/<run>` plans the next run from these measurements."
)


def check_rows(check: dict) -> tuple[list[str], list[list[str]]]:
    """(head, rows) of summary.json's `time_model`: each job's predicted and measured seconds."""
    rows = []
    for j in check["jobs"]:
        p, m = j["predicted"], j["measured"]
        cols = [f"{p[k]:.3g} / {'-' if m[k] is None else f'{m[k]:.3g}'}" for k in ("load", "prefill", "decode")]
        rows.append([j["job"], j["device"], str(j["requests"]), str(j["batch_size"]), *cols])
    return ["job", "device", "requests", "batch", "load s (pred / meas)", "prefill s", "decode s"], rows


FIXED_DOMINATES = 0.8  # the share of the predicted seconds that no size scales, above which ratios say little


def fixed_costs_text(check: dict) -> str | None:
    """A warning when fixed costs are most of what the model predicts (tiny jobs, the demo's): the
    ratios then measure the fixed estimates on this machine, not the model's bandwidth and FLOP/s terms."""
    share = check.get("fixed_share") or {}
    parts = [f"{k} {v:.0%}" for k in ("load", "compute") if (v := share.get(k)) is not None and v >= FIXED_DOMINATES]
    if not parts:
        return None
    return (
        "Fixed costs dominate these jobs: they are " + " and ".join(parts) + " of the predicted load and compute "
        "seconds (the engine's start of a load, its host-side work per batch and decoding step, which no model "
        "size, bandwidth or FLOP/s scales). Measured over predicted then says how far those fixed estimates are off "
        "on this machine, and little about the time of a real run: judge the model on jobs that take minutes."
    )


def ratio_text(check: dict) -> str:
    ratio = check["measured_over_predicted"]
    return (
        "Measured over predicted, all jobs: "
        + ", ".join(f"{k} {'-' if v is None else f'{v:.2f}x'}" for k, v in ratio.items() if k != "compute")
        + "."
    )


def summary(job_checks: list[JobCheck]) -> dict:
    """For summary.json: each job's predicted and measured seconds, and the totals' ratios."""
    if not job_checks:
        return {}
    total = {
        side: {k: sum(getattr(c, side)[k] or 0 for c in job_checks) for k in ("load", "prefill", "decode", "compute")}
        for side in ("predicted", "measured")
    }
    return {
        "what": "the time model (genjudge.planning.time_model) on each job's own counts (requests, prompt tokens, "
        "batches, decoding steps) with the stated assumptions, against the seconds the job measured",
        "jobs": [c.row() for c in job_checks],
        "total": {side: {k: round(v, 3) for k, v in values.items()} for side, values in total.items()},
        "measured_over_predicted": {
            k: None if r is None else round(r, 3)
            for k in ("load", "prefill", "decode", "compute")
            for r in [_ratio(total["measured"][k], total["predicted"][k])]
        },
        # the part of the predicted seconds that is fixed (per load, batch and step), not scaled by size
        "fixed_share": {
            k: None if r is None else round(min(r, 1.0), 3)
            for k in ("load", "compute")
            for r in [_ratio(sum(c.fixed.get(k, 0.0) for c in job_checks), total["predicted"][k])]
        },
    }


@dataclass
class RunCalibration:
    """A finished run's figures for the next plan, per model and role."""

    source: str
    by_model: dict = field(default_factory=dict)  # (model, role) -> Calibration
    answer_tokens: dict = field(default_factory=dict)  # generator model -> mean tokens per answer
    jobs: int = 0
    endpoints: dict = field(default_factory=dict)  # (model, role) -> EndpointSpeed of its endpoint jobs

    def for_model(self, model: str, role: str) -> Calibration | None:
        return self.by_model.get((model, role))

    def for_endpoint(self, model: str, role: str) -> EndpointSpeed | None:
        return self.endpoints.get((model, role))

    def describe(self, planned: list[tuple[str, str]] | None = None) -> list[str]:
        """What this calibration replaces in a plan of `planned` ((model, role) pairs; None: all it has), and
        what it does not, and why: it knows only the models and roles its run ran."""
        known = {**self.by_model, **self.endpoints}
        planned = list(known) if planned is None else list(dict.fromkeys(planned))
        used = [k for k in planned if k in known]
        missing = [k for k in planned if k not in known]
        if not used:
            out = [
                f"calibrated from {self.source} ({self.jobs} finished jobs): nothing replaced: it ran none of the "
                "planned models in its role, so every assumption stands"
            ]
        else:
            out = [
                f"calibrated from {self.source} ({self.jobs} finished jobs): its measured seconds replace the "
                f"assumptions of {len(used)} of the {len(planned)} planned model(s)"
            ]
        for model, role in used:
            out.append(f"  replaced, {role} {model}: {known[(model, role)].note}")
        ran = ", ".join(f"{r} {m}" for m, r in known) or "none with timings"
        for model, role in missing:
            out.append(f"  not replaced, {role} {model}: {self.source} ran no {role} job of this model (it ran: {ran})")
        for model, tokens in self.answer_tokens.items():
            if any(m == model for m, r in planned if r == "generator") or planned == list(known):
                out.append(f"  answers of {model}: {tokens:,.0f} tokens on average (judge prompts sized with that)")
        return out


@dataclass
class EndpointSpeed:
    """What a finished run's endpoint jobs of one model measured: requests a second at their concurrency,
    and the tokens a request was billed."""

    requests_per_second: float
    max_connections: int
    prompt_tokens: float  # per request, as billed
    completion_tokens: float  # per request, as billed
    jobs: int
    note: str

    def latency(self) -> float:
        """The seconds one request took, as the plan's latency_seconds means it (requests in flight / rate)."""
        return self.max_connections / self.requests_per_second


def endpoint_speeds(metas: list) -> dict:
    """(model, role) -> EndpointSpeed, from the endpoint jobs that completed requests."""
    groups: dict = {}
    for role, meta in metas:
        e = meta.endpoint or {}
        if e.get("completed") and e.get("seconds"):
            groups.setdefault((e["model"], role), []).append(e)
    out = {}
    for key, es in groups.items():
        done = sum(e["completed"] for e in es)
        requests = sum(e["requests"] for e in es) or done
        rps = done / sum(e["seconds"] for e in es)
        conns = max(1, round(sum(e["max_connections"] for e in es) / len(es)))
        prompt = sum(e["prompt_tokens"] for e in es) / requests
        completion = sum(e["completion_tokens"] for e in es) / requests
        out[key] = EndpointSpeed(
            rps,
            conns,
            prompt,
            completion,
            len(es),
            f"{rps:.2f} requests/s at {conns} connections (a request {conns / rps:.2f} s), {prompt:,.0f} prompt and "
            f"{completion:,.0f} completion tokens a request as billed ({len(es)} endpoint job(s))",
        )
    return out


def calibrate(job_checks: list[JobCheck], gens: list, source: str, endpoints: dict | None = None):
    if not job_checks and not endpoints:
        return None
    cal = RunCalibration(source, jobs=len(job_checks) + sum(s.jobs for s in (endpoints or {}).values()))
    cal.endpoints = dict(endpoints or {})
    groups: dict = {}
    for c in job_checks:
        groups.setdefault((c.model, c.role), []).append(c)
    for key, cs in groups.items():
        loaded = [c.measured["load"] for c in cs if c.measured["load"] > 0]
        load = sum(loaded) / len(loaded) if loaded else None
        prefill = _ratio(sum(c.measured["prefill"] or 0 for c in cs), sum(c.predicted["prefill"] for c in cs))
        decode = _ratio(sum(c.measured["decode"] or 0 for c in cs), sum(c.predicted["decode"] for c in cs))
        fractions = [c.steps_fraction for c in cs if c.steps_fraction is not None]
        steps = sum(fractions) / len(fractions) if fractions else None
        starts = [c.overheads["start-up"] for c in cs if c.overheads.get("start-up") is not None]
        startup = sum(starts) / len(starts) if starts else None
        search = sum(c.overheads.get("batch search", 0.0) for c in cs) / len(cs)
        compiled = sum(c.overheads.get("compile", 0.0) for c in cs) / len(cs)
        parts = []
        if startup is not None:
            parts.append(f"start-up {startup:.1f} s per job")
        if load is not None:
            parts.append(f"load {load:.1f} s per job")
        if prefill:
            parts.append(f"prefill x{prefill:.2f} of the model")
        if decode:
            parts.append(f"decode x{decode:.2f}")
        if steps is not None:
            parts.append(f"batches decoded {steps:.0%} of max_new_tokens")
        if search:
            parts.append(f"batch search {search:.1f} s")
        if compiled:
            parts.append(f"compile {compiled:.1f} s")
        devices = sorted({c.device for c in cs})
        cal.by_model[key] = Calibration(
            source=f"{source}, {len(cs)} job(s) on {', '.join(devices)}",
            load_seconds=load,
            prefill_factor=prefill or 1.0,
            decode_factor=decode or 1.0,
            steps_fraction=steps,
            startup_seconds=startup,
            search_seconds=search,
            compile_seconds=compiled,
            note=", ".join(parts) + f" ({len(cs)} job(s) on {', '.join(devices)})",
            devices=tuple(devices),
        )
    answered: dict = {}
    for _, m in gens:
        if m.n_items and m.n_generated_tokens:  # every row's answer, resumed ones too
            tokens, n = answered.get(m.model, (0, 0))
            answered[m.model] = (tokens + m.n_generated_tokens, n + m.n_items)
    cal.answer_tokens = {model: t / n for model, (t, n) in answered.items() if n}
    return cal


def benchmark_seconds(run_dir, job: str) -> float | None:
    """A job's wall seconds from Snakemake's benchmark file (logs/<run>/benchmarks/<rule>/...tsv)."""
    run_dir = Path(run_dir)
    rule, _, rest = job.partition(" ")
    path = run_dir.parent.parent / "logs" / run_dir.name / "benchmarks" / rule / f"{rest}.tsv"
    try:
        head, row = path.read_text().splitlines()[:2]
        return float(dict(zip(head.split("\t"), row.split("\t")))["s"])
    except (OSError, ValueError, KeyError):
        return None


def from_run(run_dir, cpu: CpuDevice, read_rate: float = DEFAULT_READ_RATE) -> RunCalibration | None:
    """The calibration a run directory's metas give, or None where none has timings. A job's start-up
    is its wall time (Snakemake's benchmark file) less what its meta measured after it."""
    gens, judges = run_metas(run_dir)
    found = checks(gens, judges, cpu, read_rate)
    speeds = endpoint_speeds([("generator", m) for _, m in gens] + [("judge", m) for _, m in judges])
    for c in found:
        wall = benchmark_seconds(run_dir, c.job)
        if wall is not None:
            spent = c.measured["load"] + c.overheads["batch search"] + c.overheads["compile"]
            c.overheads["start-up"] = max(0.0, wall - spent - (c.measured["compute"] or 0.0))
    return calibrate(found, gens, str(run_dir), speeds)
