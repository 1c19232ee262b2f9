"""The GPU check, memory plan and time plan for a run's config (rule plan and `genjudge plan`):
from each model's config.json alone, no weights loaded; what each job gets, the batch `auto` would
likely pick, how long each job takes term by term (genjudge.planning.time_model) and the whole run on the
GPUs it may use (genjudge.planning.schedule), each stated as the estimate it is; with a finished run's
metas (genjudge.planning.calibration), from what that run measured."""

from __future__ import annotations

import json
import os
from pathlib import Path

from genjudge.errors import InputError
from genjudge.store import atomic

ROLES = ("generator", "judge")
GIB = 1024**3
GB = 1000**3


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


def load_datasets(exp, config: dict | None = None) -> tuple[dict, list[str]]:
    """Each dataset's item table. One that names a file that cannot be read stops the plan (InputError
    naming its key and where a relative path was looked for: the working directory, as Snakemake's);
    none named at all (dataset.path null: a plan of the models' memory) plans no items, said so."""
    import pandas as pd

    from genjudge.data.dataset import load_items

    items, notes = {}, []
    for name, ds in exp.datasets.items():
        if ds["path"] is None:
            items[name] = pd.DataFrame(columns=["id", "prompt", "reference", "category", "turns"])
            notes.append("dataset.path is not set: the jobs are planned with no items (memory only)")
            continue
        try:
            items[name] = load_items(ds["path"], ds["fields"], ds["format"], ds["hf"])
        except Exception as exc:  # noqa: BLE001 - any reason it cannot be read stops the plan, said so
            where = f"datasets.{name}.path" if (config or {}).get("datasets") else "dataset.path"
            raise InputError(f"{where}: {exc} (relative paths are read from {os.getcwd()})") from None
    return items, notes


def model_file_notes(exp) -> list[str]:
    """What a run of these models would miss (a local directory without tokenizer or weights)."""
    from genjudge.models.modelref import missing_files

    notes = []
    for kind, entries in (("generator", exp.generators), ("judge", exp.judges)):
        for name, section in entries.items():
            missing = missing_files(section["model"]) if section["engine"] != "openai" else None
            if missing:
                notes.append(
                    f"note: {kind} {name} ({section['model']}) has {missing}: this plan reads config.json "
                    "alone, but a run would fail while loading"
                )
    return notes


def make_plan(
    config: dict,
    gpus_spec=None,
    roles=ROLES,
    batch_size: int | None = None,
    prompt_tokens_override: int | None = None,
    nodes=None,
    calibrate: str | None = None,
    workflow_dir: str | None = None,
    write: str | None = None,
    allow_result_changes: bool = False,
) -> tuple[list[str], list[dict]]:
    """(lines to print, one plan per generator and judge). `gpus_spec`: the GPUs to plan for (one
    spec or ROLE=SPEC strings) instead of this machine's; `nodes`: SLURM node counts for the
    wall-clock; `calibrate`: a finished run's directory whose metas replace the assumptions."""
    from genjudge.config import WORKFLOW_DIR
    from genjudge.config.experiment import resolve
    from genjudge.engine.devices import measure_cpu
    from genjudge.planning.calibration import from_run
    from genjudge.stages.plan_roles import plan_generator, plan_judge

    exp = resolve(config)
    workflow_dir = Path(workflow_dir) if workflow_dir else WORKFLOW_DIR
    lines: list[str] = []
    role_gpus = inventory_lines(config, gpus_spec, lines)
    items, notes = load_datasets(exp, config)
    lines += notes + model_file_notes(exp)
    from genjudge.stages.plan_dates import chat_date_notes

    lines += chat_date_notes(exp, config["run"], config["chat_date"])
    run_dir = Path(calibrate) if calibrate else Path("results") / str(config.get("run"))
    cal = from_run(run_dir, measure_cpu) if calibrate or run_dir.is_dir() else None
    if calibrate and cal is None:
        raise InputError(f"--calibrate {calibrate}: no job metas with timings there (a finished run's results/<run>)")
    if cal is not None:
        planned = [(s["model"], "generator") for s in exp.generators.values()] if "generator" in roles else []
        planned += [(s["model"], "judge") for s in exp.judges.values()] if "judge" in roles else []
        lines += cal.describe(planned)
    slurm_nodes = nodes_by_role(nodes)
    if slurm_nodes:
        role_gpus = slurm_gpus(config, role_gpus, gpus_spec, lines)
    from genjudge.config.job_settings import slurm_from_config, vllm_models
    from genjudge.engine.judge_parallel import check_vllm_layouts

    judge_gpus = [g.index for g in role_gpus["judge"]]
    check_vllm_layouts(vllm_models(config, exp), slurm_from_config(config), judge_gpus, on_slurm=bool(slurm_nodes))
    read_rate = config["plan"]["load_gb_per_s"] * GB
    entries = []
    from genjudge.config.jobs import PlanJob
    from genjudge.stages.plan_endpoint import plan_endpoint

    job = PlanJob.from_config(config, exp)

    if "generator" in roles:
        for name in exp.generators:
            if exp.generators[name].get("answers_from"):  # read from the dataset: no model, no job to plan
                field = exp.generators[name]["answers_from"]
                lines.append(f"generator {name}: answers read from the dataset's field {field!r}: no model, no job")
                continue
            if exp.generators[name]["engine"] == "openai":  # no model here: requests, tokens, cost
                entries.append(plan_endpoint(job, "generator", name, items, cal, workflow_dir))
                continue
            entries.append(
                plan_generator(
                    config, exp, name, items, role_gpus["generator"], batch_size, prompt_tokens_override, cal, read_rate
                )
            )
    if "judge" in roles:
        for name in exp.judges:
            if exp.judges[name]["engine"] == "openai":
                entries.append(plan_endpoint(job, "judge", name, items, cal, workflow_dir))
                continue
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
        lines += _run_lines(config, exp, entries, role_gpus, slurm_nodes, roles, write, allow_result_changes)
    return lines, plans


def _run_lines(config, exp, entries, role_gpus, slurm_nodes, roles, write, allow_result_changes) -> list[str]:
    """The whole run's wall-clock and the advice on it; with `write`, the overlay of that advice written."""
    from genjudge.stages.plan_advice import advice, overlay, result_change_lines

    lines = wall_clock(config, exp, entries, role_gpus, slurm_nodes, roles)
    pools, _ = role_pools(config, role_gpus, slurm_nodes)
    advised, chosen = advice(config, exp, entries, role_gpus, {r: p.nodes for r, p in pools.items()}, bool(slurm_nodes))
    lines += advised
    lines += result_change_lines(chosen, entries, allow_result_changes and bool(write))
    if write:
        layer = overlay(config, exp, chosen, entries, allow_result_changes)
        write_overlay(write, layer, config, entries)
        lines.append(f"written to {write}: pass it after your config files, e.g. --configfile CONFIG {write}")
    return lines


def write_overlay(path, layer: dict, config: dict, entries=()) -> None:
    import yaml

    from genjudge.stages.plan_roles import ASSUMED_MARGIN, RUNTIME_MARGIN, margin_text

    head = (
        f"# genjudge plan --write: the settings the time model finds fastest for run {config.get('run')!r}, and\n"
        f"# each role's runtime (minutes: the longest job's estimate x{RUNTIME_MARGIN:g}, and x{ASSUMED_MARGIN:g} more\n"
        "# for each kind of figure the estimate assumed rather than measured) and host memory (MB: + 25%).\n"
    )
    for e in entries:
        if not getattr(e, "times", None):
            continue
        step = "generate" if e.role == "generator" else "judge"
        head += f"# resources.{step}.runtime, {e.role} {e.name}: {margin_text(e.assumptions)}\n"
    if any(getattr(e, "assumptions", None) for e in entries):
        head += (
            "# An estimate that rests on assumptions is a guess: run a pilot and plan again with\n"
            "# --calibrate results/<pilot> to replace them with its measurements.\n"
        )
    head += "# Use it as a layer over your config: snakemake --configfile CONFIG THIS_FILE ...\n"
    atomic.write_text(path, head + yaml.safe_dump(layer, sort_keys=False))


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
    from genjudge.config.job_settings import slurm_from_config
    from genjudge.engine.devices import Gpu
    from genjudge.planning.time_model import gpu_type

    specs = gpus_by_role(config, gpus_spec)
    slurm = slurm_from_config(config)
    out = {}
    for role, step in (("generator", "generate"), ("judge", "judge")):
        per_node = slurm.setting("gpus_per_node", step)
        model = slurm.setting("gpu_model", step)
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


def role_pools(config, role_gpus, nodes) -> tuple[dict, str]:
    """Each role's pool of GPUs (GPUs per node; CPU job slots without GPUs), one shared by both roles
    where they run on the same GPUs, and words saying where."""
    from genjudge.planning.schedule import Pool

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
        return pools, where
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
    return pools, where


def wall_clock(config, exp, entries, role_gpus, nodes, roles) -> list[str]:
    """The whole run on the GPUs it may use: total and critical path."""
    from genjudge.planning.schedule import Job, Pool, schedule
    from genjudge.planning.time_model import duration

    pools, where = role_pools(config, role_gpus, nodes)
    jobs = []
    by_cell: dict = {}
    endpoint_jobs = sum(len(e.jobs) for e in entries if e.spec.engine == "openai")
    # Endpoint jobs hold no GPU: CPU job slots of their own (on SLURM, each its own allocation).
    slots = endpoint_jobs if nodes else max(1, (os.cpu_count() or 1) // config["resources"]["endpoint"]["cpus"])
    endpoint_pool = Pool("endpoint", [max(1, slots)], "endpoint jobs")
    if endpoint_jobs:
        where += f"; endpoint jobs without GPUs ({'each its own SLURM job' if nodes else f'{slots} at a time'})"
    for e in entries:
        pool = "shared" if pools["generator"] is pools["judge"] else e.role
        if e.spec.engine == "openai":
            pool = "endpoint"
        for job_name, seconds, gpus, inputs, cell in e.jobs:
            after = [j for key in inputs for j in by_cell.get(key, [])]
            jobs.append(Job(job_name, pool, gpus, seconds, after))
            if cell:
                by_cell.setdefault(cell, []).append(job_name)
    pool_map = {"shared": pools["judge"]} if pools["generator"] is pools["judge"] else dict(pools)
    pool_map["endpoint"] = endpoint_pool
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
