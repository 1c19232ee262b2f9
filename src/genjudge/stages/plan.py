"""The GPU check, memory plan and time plan for a run's config (rule plan and `genjudge plan`):
from each model's config.json alone, no weights loaded; what each job gets, the batch `auto` would
likely pick, how long each job takes term by term (genjudge.planning.time_model) and the whole run on the
GPUs it may use (genjudge.planning.schedule), each stated as the estimate it is; with a finished run's
metas (genjudge.planning.calibration), from what that run measured."""

from __future__ import annotations

import functools
import json
import math
import os
import re
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from genjudge.config.specs import JudgeSpec
from genjudge.errors import InputError
from genjudge.store import atomic

ROLES = ("generator", "judge")
GIB = 1024**3
GB = 1000**3
AUTO_HEADROOM = 0.95  # batch_size auto keeps 5% below what fits
RUNTIME_MARGIN = 1.5  # the runtime to ask a scheduler for: the estimate + 50%


def gpus_by_role(config: dict, given) -> dict:
    """Each role's hypothetical GPUs as a spec string (`4xA100-80GB`, `4x80GiB`) or None (this
    machine's): `--gpus ROLE=SPEC` over `--gpus SPEC` over `plan.gpus.<role>`."""
    given = [given] if isinstance(given, str) else list(given or [])
    out = {role: config["plan"]["gpus"][role] for role in ROLES}
    shared = [g for g in given if "=" not in g]
    if len(shared) > 1:
        raise InputError(f"--gpus: one inventory for both roles, or ROLE=SPEC for each; got {shared}")
    for role in ROLES:
        if shared:
            out[role] = shared[0]
    for g in given:
        if "=" in g:
            role, spec = (x.strip() for x in g.split("=", 1))
            if role not in ROLES:
                raise InputError(f"--gpus {g}: the role is generator or judge, not {role!r}")
            out[role] = spec
    return out


def nodes_by_role(nodes) -> dict | None:
    """`--nodes 2` (both roles share 2 nodes) or `--nodes generator=4 judge=1`; None: run locally."""
    if not nodes:
        return None
    nodes = [nodes] if isinstance(nodes, (str, int)) else list(nodes)
    out: dict = {}
    for n in nodes:
        role, _, count = str(n).rpartition("=")
        if role and role not in ROLES:
            raise InputError(f"--nodes {n}: the role is generator or judge, not {role!r}")
        if not count.isdigit() or int(count) < 1:
            raise InputError(f"--nodes {n}: expected a node count (2) or ROLE=COUNT (judge=1)")
        for r in [role] if role else ROLES:
            out[r] = int(count)
    if set(out) != set(ROLES):
        raise InputError(f"--nodes: give a count for both roles (have {sorted(out)})")
    return out


def load_datasets(exp) -> tuple[dict, list[str]]:
    """Each dataset's item table (an empty one where it cannot be read, with a note)."""
    import pandas as pd

    from genjudge.data.dataset import load_items

    items, notes = {}, []
    for name, ds in exp.datasets.items():
        try:
            items[name] = load_items(ds["path"], ds["fields"], ds["format"], ds["hf"])
        except Exception as exc:  # noqa: BLE001 - the plan still helps without the dataset
            items[name] = pd.DataFrame(columns=["id", "prompt", "reference", "category", "turns"])
            notes.append(f"dataset {name}: not read ({exc}); its jobs are planned with no items")
    return items, notes


def model_file_notes(exp) -> list[str]:
    """What a run of these models would miss (a local directory without tokenizer or weights)."""
    from genjudge.models.modelref import missing_files

    notes = []
    for kind, entries in (("generator", exp.generators), ("judge", exp.judges)):
        for name, section in entries.items():
            missing = missing_files(section["model"])
            if missing:
                notes.append(
                    f"note: {kind} {name} ({section['model']}) has {missing}: this plan reads config.json "
                    "alone, but a run would fail while loading"
                )
    return notes


@dataclass
class Entry:
    """One generator or judge as planned."""

    role: str
    name: str
    spec: object
    plan: dict
    batch: int
    device: object
    jobs: list = field(default_factory=list)  # (job name, seconds, gpus, inputs)
    times: dict = field(default_factory=dict)  # label -> JobTime of one job
    lines: list = field(default_factory=list)


def planned_batch(p: dict, spec, given: int | None, engine: str | None = None) -> tuple[int, str]:
    """The batch the jobs will run: --batch-size, the configured size, or what `auto` would pick
    (memory left after the weights / KV cache per sequence; a fixed size on the CPU). `engine`:
    another engine than the spec's (the plan's comparison)."""
    from genjudge.engine.decoding import CPU_AUTO_BATCH

    if given:
        return given, "--batch-size"
    if (engine or spec.engine) == "vllm":
        return vllm_batch(p, spec)
    if spec.batch_size != "auto":
        return int(spec.batch_size), "batch_size"
    if not p.get("gpus"):
        return CPU_AUTO_BATCH, "batch_size auto on the CPU: a fixed size"
    if p.get("fits") and p.get("max_batch_for_kv"):
        est = max(1, int(p["max_batch_for_kv"] * spec.memory_margin * AUTO_HEADROOM))
        return est, (
            f"batch_size auto would pick about {est} (memory left after the weights / KV cache per sequence of "
            f"{p['seq_len']} tokens, margin {spec.memory_margin}; an estimate)"
        )
    return 1, "batch_size auto: nothing fits beside the weights"


def vllm_batch(p: dict, spec) -> tuple[int, str]:
    """vLLM's running batch: as many sequences of the longest request as its KV cache holds, up to
    max_num_seqs (`batch_size` when a number, else vLLM's 256)."""
    from genjudge.models.vllm_support import parse_bytes
    from genjudge.planning.time_model import VLLM_MAX_NUM_SEQS

    cap = int(spec.batch_size) if spec.batch_size != "auto" else VLLM_MAX_NUM_SEQS
    seq = p["kv_bytes_per_token"] * p["seq_len"]
    v = spec.vllm
    if v["kv_cache_memory"]:
        kv, where = parse_bytes(v["kv_cache_memory"]), f"vllm.kv_cache_memory {v['kv_cache_memory']}"
    elif not p.get("gpus"):
        kv, where = max(GIB, 4 * seq), "the CPU's KV cache (room for 4 sequences of the context, at least 1 GiB)"
    else:
        gpu = min(g["total_bytes"] for g in p["gpus"]) * len(p["gpus"])
        weights = p["weights_bytes"].get(p["precision"], p["weights_bytes"]["bfloat16"])
        kv = max(0, gpu * v["gpu_memory_utilization"] - weights * 1.05)  # ~5% for activations
        where = f"gpu_memory_utilization {v['gpu_memory_utilization']} of the GPUs, less the weights"
    fits = int(kv // seq) if seq else cap
    batch = max(1, min(cap, fits))
    return batch, (
        f"vLLM runs up to {cap} sequences at once; its KV cache ({where}: {kv / GIB:.1f} GiB) holds {fits} of "
        f"{p['seq_len']} tokens; continuous batching keeps the batch full"
    )


def engine_comparison(e, model, device, layout, requests, batch_size, read_rate) -> str:
    """Which engine is faster for this job by the time model, and why (its terms side by side)."""
    from genjudge.planning.time_model import duration, engine_of, job_time

    spec, current = e.spec, e.times
    other = "transformers" if spec.engine == "vllm" else "vllm"
    alt_spec = type("Alt", (), {"engine": other, "vllm": spec.vllm})()
    alt_batch, _ = planned_batch(e.plan, spec, batch_size, engine=other)
    ours = next(iter(current.values()))
    alt = job_time(model, device, layout, requests, alt_batch, engine_of(alt_spec), read_rate)
    faster, slower = (ours, alt) if ours.seconds <= alt.seconds else (alt, ours)
    winner = spec.engine if faster is ours else other
    ratio = slower.seconds / max(faster.seconds, 1e-9)
    terms = ", ".join(
        f"{name} {duration(ours.term(name))} vs {duration(alt.term(name))}"
        for name in ("start-up", "prefill", "decode")
        if abs(ours.term(name) - alt.term(name)) > 1e-3
    )
    why = (
        "continuous batching fills its batch and each step reads the KV cache once, in place"
        if winner == "vllm"
        else "the job is too small to pay back vLLM's start-up"
    )
    installed = ""
    if other == "vllm":
        from genjudge.models.vllm_support import installed as vllm_installed

        installed = "" if vllm_installed() else "; make setup ENGINE=vllm installs it"
    return (
        f"  engine: {winner} is faster for this job by the time model, {ratio:.1f}x: {spec.engine} about "
        f"{duration(ours.seconds)} (batch {e.batch}) vs {other} about {duration(alt.seconds)} (batch {alt_batch}); "
        f"{terms} ({why}){installed}"
    )


def with_batch(p: dict, batch: int) -> None:
    """The memory plan's KV line (and its advice) at the batch the jobs run."""
    p["batch_size"] = batch
    p["kv_cache_bytes"] = p["kv_bytes_per_token"] * batch * p["seq_len"]
    if p.get("headroom_bytes") is None:
        return
    from genjudge.engine.memory_plan import ACTIVATION_RESERVE

    p["kv_cache_fits"] = p["kv_cache_bytes"] <= p["headroom_bytes"] * (1 - ACTIVATION_RESERVE)
    if p["fits"] and not p["kv_cache_fits"]:
        p["recommendation"] = (
            f"the KV cache of batch {batch} at the longest prompt does not fit beside the weights: use "
            f"batch_size <= {p['max_batch_for_kv']} (or batch_size: auto); shorter prompts may still fit"
        )
    elif p["fits"]:
        p.pop("recommendation", None)


def host_memory_line(p: dict, step: str) -> str:
    w = p["weights_bytes"].get(p["precision"], p["weights_bytes"]["bfloat16"])
    on_gpu = bool(p.get("gpus")) and p.get("fits")
    # safetensors load straight to the GPUs, staging little in host RAM; on CPU the weights live there.
    host = (8 * GIB + 0.1 * w) if on_gpu else (4 * GIB + 1.2 * w)
    return (
        f"  resources.{step}.mem_mb: about {math.ceil(host / 2**20 / 1000) * 1000} (host memory: "
        + ("weights load straight to the GPUs" if on_gpu else "weights held in RAM")
        + "; an estimate)"
    )


def runtime_line(config: dict, step: str, seconds: float) -> str:
    want = math.ceil(seconds * RUNTIME_MARGIN / 60)
    have = config["resources"][step]["runtime"]
    verdict = "" if have >= want else f"; the configured {have} min is LESS: raise resources.{step}.runtime"
    return (
        f"  resources.{step}.runtime: about {want} min (the longest job's {seconds / 60:.1f} min "
        f"+ {RUNTIME_MARGIN - 1:.0%}: an estimate, not a measurement){verdict}"
    )


def make_plan(
    config: dict,
    gpus_spec=None,
    roles=ROLES,
    batch_size: int | None = None,
    prompt_tokens_override: int | None = None,
    nodes=None,
    calibrate: str | None = None,
    workflow_dir: str | None = None,
) -> tuple[list[str], list[dict]]:
    """(lines to print, one plan per generator and judge). `gpus_spec`: the GPUs to plan for (one
    spec or ROLE=SPEC strings) instead of this machine's; `nodes`: SLURM node counts for the
    wall-clock; `calibrate`: a finished run's directory whose metas replace the assumptions."""
    from genjudge.config import WORKFLOW_DIR
    from genjudge.config.experiment import resolve
    from genjudge.engine.devices import measure_cpu
    from genjudge.planning.calibration import from_run

    exp = resolve(config)
    workflow_dir = Path(workflow_dir) if workflow_dir else WORKFLOW_DIR
    lines: list[str] = []
    role_gpus = inventory_lines(config, gpus_spec, lines)
    items, notes = load_datasets(exp)
    lines += notes + model_file_notes(exp)
    run_dir = Path(calibrate) if calibrate else Path("results") / str(config.get("run"))
    cal = from_run(run_dir, measure_cpu) if calibrate or run_dir.is_dir() else None
    if calibrate and cal is None:
        raise InputError(f"--calibrate {calibrate}: no job metas with timings there (a finished run's results/<run>)")
    if cal is not None:
        lines += cal.describe()
    slurm_nodes = nodes_by_role(nodes)
    if slurm_nodes:
        role_gpus = slurm_gpus(config, role_gpus, gpus_spec, lines)
    read_rate = config["plan"]["load_gb_per_s"] * GB
    entries = []
    if "generator" in roles:
        for name in exp.generators:
            entries.append(
                plan_generator(
                    config, exp, name, items, role_gpus["generator"], batch_size, prompt_tokens_override, cal, read_rate
                )
            )
    if "judge" in roles:
        for name in exp.judges:
            entries.append(
                plan_judge(
                    config,
                    exp,
                    name,
                    items,
                    role_gpus["judge"],
                    batch_size,
                    prompt_tokens_override,
                    cal,
                    read_rate,
                    workflow_dir,
                    slurm_nodes,
                )
            )
    plans = []
    for e in entries:
        lines += e.lines
        plans.append(e.plan)
    if entries:
        lines += wall_clock(config, exp, entries, role_gpus, slurm_nodes, roles)
    return lines, plans


def inventory_lines(config: dict, gpus_spec, lines: list) -> dict:
    """Each role's GPUs (Gpu objects; one list shared when both roles use the same), and lines saying so."""
    from genjudge.engine.memory_plan import parse_inventory_spec

    specs = gpus_by_role(config, gpus_spec)
    out = {}
    if any(specs.values()):
        parsed: dict = {}
        for role in ROLES:
            spec = specs[role]
            if spec is None:
                out[role] = _machine_gpus(config, lines if not parsed else [])
                continue
            if spec not in parsed:
                parsed[spec] = parse_inventory_spec(spec)
            out[role] = parsed[spec]
        for spec, gpus in parsed.items():
            who = " and ".join(f"{r}s" for r in ROLES if specs[r] == spec)
            size = f"{gpus[0].total_bytes / GIB:.0f} GiB"
            kind = (
                f"{gpus[0].name}, {size}" if not gpus[0].name.startswith("hypothetical") else f"{size}, type not named"
            )
            lines.append(f"GPUs of the {who} (hypothetical): {len(gpus)} x {kind}")
        return out
    gpus = _machine_gpus(config, lines)
    return {role: gpus for role in ROLES}


def slurm_gpus(config: dict, role_gpus: dict, gpus_spec, lines: list) -> dict:
    """On SLURM each role's job sees the GPUs of one of its nodes: slurm.<role>.gpus_per_node of the
    type --gpus / plan.gpus names, else slurm.<role>.gpu_model where the table knows it."""
    from genjudge.cluster.job_resources import slurm_setting
    from genjudge.engine.devices import Gpu
    from genjudge.planning.time_model import gpu_type

    specs = gpus_by_role(config, gpus_spec)
    out = {}
    for role, step in (("generator", "generate"), ("judge", "judge")):
        per_node = slurm_setting(config, "gpus_per_node", step)
        model = slurm_setting(config, "gpu_model", step)
        if specs[role] and role_gpus[role]:
            g = role_gpus[role][0]
            how = f"--gpus/plan.gpus: {g.name}"
        elif model and gpu_type(str(model)):
            d = gpu_type(str(model))
            g = Gpu("0", d.name, int(d.memory_bytes), int(d.memory_bytes))
            how = f"slurm gpu_model {model!r}: {d.name}"
        else:
            raise InputError(
                f"--nodes: the {role}s' GPU type is unknown: name it with --gpus {role}=4xA100-80GB (or set "
                f"plan.gpus.{role}, or slurm.{step}.gpu_model to a type the plan knows)"
            )
        out[role] = [Gpu(str(i), g.name, g.total_bytes, g.total_bytes) for i in range(per_node)]
        lines.append(f"SLURM {role} nodes: {per_node} GPUs each (slurm gpus_per_node), {how}")
    if out["generator"][0].name == out["judge"][0].name and len(out["generator"]) == len(out["judge"]):
        out["judge"] = out["generator"]
    return out


def _machine_gpus(config: dict, lines: list) -> list:
    from genjudge.cluster.gpu_lease import resolve_inventory
    from genjudge.engine.devices import cuda_gpus, driver_info

    gpus = cuda_gpus()
    inventory = resolve_inventory(config["gpu_inventory"])
    lines.append(
        f"GPUs here: {len(gpus) or 'none'} {driver_info()}; the workflow's inventory: "
        f"{', '.join(inventory) or 'none (CPU only)'}"
    )
    lines += [
        f"  {g.index}: {g.name}, {g.total_bytes / GIB:.1f} GiB total, {(g.free_bytes or 0) / GIB:.1f} GiB free"
        for g in gpus
    ]
    if inventory and not gpus:
        lines.append(
            f"  (torch sees no GPU here, so their sizes are unknown: `genjudge plan --gpus "
            f"{len(inventory)}xA100-80GB` plans for {len(inventory)} GPUs of that type)"
        )
    return gpus


def _device(job_gpus, config: dict, step: str):
    """The device a job runs on; on the CPU with the threads Snakemake gives it (resources.<step>.cpus)."""
    from genjudge.engine.devices import measure_cpu
    from genjudge.planning.time_model import gpu_device

    return gpu_device(job_gpus[0]) if job_gpus else measure_cpu(config["resources"][step]["cpus"])


def _calibration_for(cal, model: str, role: str):
    if cal is None:
        return None
    return cal.for_model(model, role)


def plan_generator(config, exp, name, items, gpus, batch_size, prompt_override, cal, read_rate) -> Entry:
    from genjudge.config.specs import GeneratorSpec
    from genjudge.engine.memory_plan import plan, render
    from genjudge.planning.time_model import Layout, ModelNumbers, engine_of, job_time
    from genjudge.planning.workload import generator_workload

    section = exp.generators[name]
    spec = GeneratorSpec.from_config(section)
    answers = cal.answer_tokens.get(spec.model) if cal else None
    wl = generator_workload({d: items[d] for d in exp.datasets_of(name)}, section, answers)
    tokens, how = (prompt_override, "given with --prompt-tokens") if prompt_override else (wl.longest, wl.how)
    n = exp.gpus_per_job(name, config) if gpus else 0
    job_gpus = gpus[:n] if n else []
    p = plan(spec, job_gpus, batch_size or 8, tokens + spec.max_new_tokens, "generator")
    batch, batch_how = planned_batch(p, spec, batch_size)
    with_batch(p, batch)
    device = _device(job_gpus, config, "generate")
    e = Entry("generator", name, spec, p, batch, device)
    layout = Layout("device_map" if n > 1 else ("one" if n else "cpu"), n)
    c = _calibration_for(cal, spec.model, "generator")
    model = ModelNumbers.from_plan(p)
    n_jobs = 0
    for d, reqs in wl.requests.items():
        shards = exp.shards(d, config)
        n_jobs += shards
        t = job_time(model, device, layout, [r.share(1 / shards) for r in reqs], batch, engine_of(spec), read_rate, c)
        e.times[d] = t
        e.jobs += [(f"generate {name}/{d}/{s}", t.seconds, n, [], (name, d)) for s in range(shards)]
    p.update(name=name, prompt_tokens=tokens, prompt_tokens_source=how, gpus_per_job=n, batch_source=batch_how)
    p["time"] = {d: _time_dict(t) for d, t in e.times.items()}
    e.lines.append(render(p))
    per_job = ", ".join(f"{d}: {sum(r.n for r in wl.requests[d]) / exp.shards(d, config):,.0f}" for d in wl.requests)
    e.lines.append(
        f"  jobs: {n_jobs} x {n} GPU(s) each (generator {name}); requests per job (item, turn, sample): {per_job}; "
        f"prompt: {tokens} tokens ({how})"
    )
    e.lines.append(f"  batch: {batch} ({batch_how})")
    e.lines.append(host_memory_line(p, "generate"))
    e.lines += _time_lines(e, device, layout, c)
    if e.times:
        d = max(e.times, key=lambda k: e.times[k].seconds)  # the dataset of the longest job
        shards = exp.shards(d, config)
        reqs = [r.share(1 / shards) for r in wl.requests[d]]
        e.lines.append(engine_comparison(_only(e, d), model, device, layout, reqs, batch_size, read_rate))
        e.lines.append(runtime_line(config, "generate", max(t.seconds for t in e.times.values())))
    return e


def _only(e: Entry, label: str) -> Entry:
    """`e` with one of its job times (the comparison's)."""
    return Entry(e.role, e.name, e.spec, e.plan, e.batch, e.device, times={label: e.times[label]})


def plan_judge(config, exp, name, items, gpus, batch_size, prompt_override, cal, read_rate, workflow_dir, nodes):
    from genjudge.config import judge_template
    from genjudge.engine.judge_parallel import layout as judge_layout
    from genjudge.engine.memory_plan import plan, render
    from genjudge.judging import modes
    from genjudge.planning.time_model import Layout, ModelNumbers, engine_of, job_time
    from genjudge.planning.workload import judge_workload

    section = exp.judges[name]
    spec = JudgeSpec.from_config(section)
    view = {**config, "judge": section}
    if nodes:
        # As the SLURM run decides: `judge.gpus: all` is one judge node's GPUs, whose size the run
        # knows from judge.gpu_memory alone (no nvidia-smi where the workflow plans).
        lay = judge_layout(spec, view, [], on_slurm=True)
        known = judge_layout(spec, view, [], on_slurm=True, gpus=gpus)
    else:
        lay = known = judge_layout(spec, view, list(range(len(gpus))), on_slurm=False, gpus=gpus)
    n = lay.gpus_per_job if gpus else 0
    job_gpus = gpus[:n] if n else []
    answers = {
        g: cal.answer_tokens[s["model"]] for g, s in exp.generators.items() if cal and s["model"] in cal.answer_tokens
    }
    cells = exp.cells(name)
    mode = modes.get(spec.mode)
    wl = judge_workload(
        items, section, cells, exp.generators, judge_template(view), mode.requests_per_item, answers, workflow_dir
    )
    tokens, how = (prompt_override, "given with --prompt-tokens") if prompt_override else (wl.longest, wl.how)
    new = 1 if spec.verdict == "logprob" else spec.max_new_tokens
    p = plan(spec, job_gpus, batch_size or 8, tokens + new, "judge")
    batch, batch_how = planned_batch(p, spec, batch_size)
    with_batch(p, batch)
    device = _device(job_gpus, config, "judge")
    e = Entry("judge", name, spec, p, batch, device)
    kind = {"tensor": "tensor", "device_map": "device_map"}.get(lay.parallel, "one") if n else "cpu"
    layout = Layout(kind if n > 1 or kind == "cpu" else "one", n)
    c = _calibration_for(cal, spec.model, "judge")
    t = job_time(
        ModelNumbers.from_plan(p),
        device,
        layout,
        [r.share(1 / lay.jobs) for r in wl.all()],
        batch,
        engine_of(spec),
        read_rate,
        c,
    )
    e.times["each job"] = t
    inputs = sorted({(g, cell.dataset) for cell in cells for g in (cell.generator, cell.opponent) if g})
    e.jobs = [(f"judge {name}/{j}", t.seconds, n, inputs, None) for j in range(lay.jobs)]
    p.update(name=name, prompt_tokens=tokens, prompt_tokens_source=how, gpus_per_job=n, batch_source=batch_how)
    p["parallel"] = {"choice": lay.parallel, "reason": lay.reason}
    p["time"] = {"each job": _time_dict(t)}
    e.lines.append(render(p))
    e.lines.append(
        f"  jobs: {lay.jobs} x {n} GPU(s) each (judge {name}); requests (item, turn, sample"
        + (f", x{mode.requests_per_item} orders" if mode.requests_per_item > 1 else "")
        + f"): {wl.n:,.0f}, {wl.n / lay.jobs:,.0f} per job"
        + (" (cascade: fewer reach the judge; counted as all)" if spec.cascade else "")
        + f"; prompt: {tokens} tokens ({how})"
    )
    e.lines.append(f"  judge.parallel: {lay.parallel} ({lay.reason})")
    unknown_size = (known.parallel, known.jobs) != (lay.parallel, lay.jobs) and gpus
    if unknown_size:
        e.lines.append(
            f"  recommendation: set judge.gpu_memory: {gpus[0].total_bytes / GIB:.0f}GiB and judge.parallel: auto "
            f"chooses {known.parallel} ({known.jobs} job(s) of {known.gpus_per_job} GPU(s)): {known.reason}"
        )
    e.lines.append(f"  batch: {batch} ({batch_how})")
    w = p["weights_bytes"].get(p["precision"], p["weights_bytes"]["bfloat16"])
    k = len(job_gpus)
    if k > 1 and lay.parallel != "replicas" and w <= job_gpus[0].total_bytes * 0.95 and not unknown_size:
        e.lines.append(
            f"  recommendation: the judge fits one GPU at {p['precision']} ({w / GB:.1f} GB): set judge.parallel: "
            f"replicas (or judge.shards: {k * max(1, spec.shards)}) for one replica per GPU, about {k}x the "
            f"throughput of one model spread over {k} GPUs"
        )
    e.lines.append(host_memory_line(p, "judge"))
    e.lines += _time_lines(e, device, layout, c)
    e.lines.append(
        engine_comparison(
            e,
            ModelNumbers.from_plan(p),
            device,
            layout,
            [r.share(1 / lay.jobs) for r in wl.all()],
            batch_size,
            read_rate,
        )
    )
    e.lines.append(runtime_line(config, "judge", t.seconds))
    return e


def _time_dict(t) -> dict:
    return {"seconds": round(t.seconds, 3), "terms": {x.name: round(x.seconds, 6) for x in t.terms}}


def _time_lines(e: Entry, device, layout, cal) -> list[str]:
    from genjudge.planning.time_model import duration

    where = {
        "cpu": "on the CPU",
        "one": "on one GPU",
        "device_map": f"device_map over {layout.gpus} GPUs: one at a time, so one GPU's figures",
        "tensor": f"tensor over {layout.gpus} GPUs",
    }[layout.kind]
    out = [f"  time per job ({where}; {device.describe()}):"]
    if cal is not None:
        out.append(f"    calibrated: {cal.source}")
    for label, t in e.times.items():
        out.append(f"    {e.role} job, {label}: about {duration(t.seconds)}")
        out += t.lines("      ")
    return out


def wall_clock(config, exp, entries, role_gpus, nodes, roles) -> list[str]:
    """The whole run on the GPUs it may use: total and critical path."""
    from genjudge.planning.schedule import Job, Pool, schedule
    from genjudge.planning.time_model import duration

    shared = role_gpus["generator"] is role_gpus["judge"]
    if nodes:
        per_node = {
            r: (config["slurm"].get(s) or {}).get("gpus_per_node") or config["slurm"]["gpus_per_node"]
            for r, s in (("generator", "generate"), ("judge", "judge"))
        }
        same = nodes["generator"] == nodes["judge"] and per_node["generator"] == per_node["judge"]
        pools = {r: Pool(r, [per_node[r]] * nodes[r], f"{nodes[r]} node(s) x {per_node[r]} GPUs") for r in ROLES}
        if same and shared:
            pools = {r: pools["judge"] for r in ROLES}
        where = "SLURM: " + (
            "; ".join(f"{r}s on {pools[r].label}" for r in ROLES) if not (same and shared) else pools["judge"].label
        )
    else:
        pools = {}
        for r, step in (("generator", "generate"), ("judge", "judge")):
            gpus = role_gpus[r]
            if gpus:
                pools[r] = Pool(r, [len(gpus)], f"{len(gpus)} x {gpus[0].name}")
            else:  # `--cores all`: as many jobs at once as their threads fit the cores
                slots = max(1, (os.cpu_count() or 1) // config["resources"][step]["cpus"])
                pools[r] = Pool(r, [slots], f"the CPU, {slots} job(s) at a time (--cores {os.cpu_count()})")
        if shared:
            pools = {r: pools["judge"] for r in ROLES}
        where = (
            "; ".join(f"{r}s on {pools[r].label}" for r in ROLES)
            if not shared
            else pools["judge"].label + (f", --resources gpu={len(role_gpus['judge'])}" if role_gpus["judge"] else "")
        )
    jobs = []
    by_cell: dict = {}
    for e in entries:
        pool = "shared" if pools["generator"] is pools["judge"] else e.role
        for job_name, seconds, gpus, inputs, cell in e.jobs:
            after = [j for key in inputs for j in by_cell.get(key, [])]
            jobs.append(Job(job_name, pool, gpus, seconds, after))
            if cell:
                by_cell.setdefault(cell, []).append(job_name)
    pool_map = {"shared": pools["judge"]} if pools["generator"] is pools["judge"] else pools
    sched = schedule(jobs, pool_map)
    label = "the planned roles" if set(roles) != set(ROLES) else "the whole run"
    out = [
        f"wall-clock of {label} ({where}): about {duration(sched.total)} for its model jobs (an estimate from the "
        "time model above; split, merge, parse and report come on top)"
    ]
    out += [f"  {n}" for n in sched.notes]
    path = sched.critical_path()
    if path:
        out.append(
            "  critical path: " + " -> ".join(f"{p.job.name} [{duration(p.start)} - {duration(p.end)}]" for p in path)
        )
    return out


def write_plan(path, plans: list[dict]) -> None:
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    atomic.write_text(path, json.dumps(plans, indent=2, default=str))


# Options of the sbatch line that name the submission rather than what it asks for.
_BOOKKEEPING = re.compile(r"\s--(parsable|export=ALL)\b|\s--(job-name|output|comment)\s+\S+")


class _Resources(dict):
    """A job's resources as the SLURM plugin reads them (attribute access and .get)."""

    def __getattr__(self, key):
        try:
            return self[key]
        except KeyError:
            raise AttributeError(key) from None


@functools.cache
def default_partition() -> str | None:
    """The cluster's default partition as the SLURM plugin finds it (the one `sinfo -o %P` marks with
    `*`), or None. sinfo retries for a minute where the cluster's configuration cannot be read: none
    is asked where SLURM_CONF names a missing file, and the answer is awaited 10 s at most."""
    conf = os.environ.get("SLURM_CONF")
    if not shutil.which("sinfo") or (conf and not os.path.exists(conf)):
        return None
    try:
        out = subprocess.run(["sinfo", "-h", "-o", "%P"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    return next((p.rstrip("*") for p in out.split() if p.endswith("*")), None)


def sbatch_preview(config: dict) -> list[str]:
    """The sbatch options each model job gets under the SLURM executor, built by the plugin's own
    code from the resources the rules declare (first attempt), each role with its own `slurm.<role>`
    settings; then how the generation jobs are submitted (arrays, requeue). The light rules run locally."""
    import shlex
    from types import SimpleNamespace

    from snakemake_executor_plugin_slurm.submit_string import get_submit_command
    from snakemake_executor_plugin_slurm.utils import set_gres_string

    from genjudge.cluster import job_resources as jr
    from genjudge.cluster.slurm_submission import decide
    from genjudge.config.experiment import resolve
    from genjudge.engine import judge_parallel

    exp = resolve(config)
    jr.check_node_gpus(config, exp)
    jobs = []
    n_generate = 0
    gpu_counts = set()
    for name in exp.generators:
        gpus = jr.generate_gpus(exp, config, name, [], on_slurm=True)
        gpu_counts.add(gpus)
        n = sum(exp.shards(d, config) for d in exp.datasets_of(name))
        n_generate += n
        jobs.append(
            ("generate", name, n, jr.job_resources(config, "generate", gpus), jr.threads(config, "generate", gpus))
        )
    for name, section in exp.judges.items():
        spec = JudgeSpec.from_config(section)
        gpus = judge_parallel.judge_gpus(spec, config, [], on_slurm=True)
        n_jobs = judge_parallel.judge_jobs(spec, config, [], on_slurm=True)
        jobs.append(("judge", name, n_jobs, jr.job_resources(config, "judge", gpus), jr.threads(config, "judge", gpus)))
    submission = decide(config, n_generate, None, gpu_counts=gpu_counts)
    settings = SimpleNamespace(requeue=submission.requeue, no_requeue=False, qos=None, reservation=None)
    lines = []
    for rule, name, count, resources, threads in jobs:
        job = SimpleNamespace(resources=_Resources(resources), threads=threads, name=rule)
        account, partition = resources.get("slurm_account"), resources.get("slurm_partition")
        partition = partition or default_partition()
        params = {
            "run_uuid": "RUN",
            "slurm_logfile": "LOG",
            "comment_str": f"rule_{rule}",
            "workdir": None,
            "account": f" -A {shlex.quote(str(account))}" if account else "",
            "partition": f" -p {shlex.quote(str(partition))}" if partition else "",
        }
        call = get_submit_command(job, params, settings=settings) + set_gres_string(job)
        lines.append(f"{rule} ({name}, {count} job(s)): {' '.join(_BOOKKEEPING.sub('', call).split())}")
    # How the jobs go out: what the plugin adds on top (--array=..., a little more --mem for an array's payload).
    extra = [*submission.notes]
    if submission.array_jobs:
        extra.append(
            f"arrays need jobs: >= {n_generate} in the profile or on the command line (each array task counts "
            "as one of Snakemake's jobs); the plugin adds --array=<first>-<last> and 1 MB or more to --mem"
        )
    return lines + [f"  {note}" for note in extra]
