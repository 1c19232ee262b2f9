"""The GPU check and memory plan for a run's config (rule plan and `genjudge plan`): from each
model's config.json alone, no weights loaded."""

from __future__ import annotations

import json
from pathlib import Path

from genjudge import atomic
from genjudge.specs import generator_spec, judge_spec

ROLES = ("generator", "judge")


def make_plan(config: dict, gpus_spec: str | None = None, roles=ROLES, batch_size: int | None = None,
              prompt_tokens: int = 512) -> tuple[list[str], list[dict]]:
    """(lines to print, one plan per role). `gpus_spec` (e.g. 4x80GiB) replaces this machine's GPUs."""
    from genjudge.engine.devices import cuda_gpus, driver_info
    from genjudge.engine.memory_plan import parse_inventory_spec, plan, render

    lines = []
    if gpus_spec:
        gpus = parse_inventory_spec(gpus_spec)
        lines.append(f"GPUs (hypothetical): {len(gpus)} x {gpus[0].total_bytes / 2**30:.0f} GiB")
    else:
        gpus = cuda_gpus()
        lines.append(f"GPUs here: {len(gpus) or 'none'} {driver_info()}")
        lines += [f"  {g.index}: {g.name}, {g.total_bytes / 2**30:.1f} GiB total, "
                  f"{(g.free_bytes or 0) / 2**30:.1f} GiB free" for g in gpus]
    plans = []
    for role in roles:
        spec = generator_spec(config) if role == "generator" else judge_spec(config)
        n = config["gpus_per_job"] if role == "generator" else (len(gpus) if spec.gpus == "all" else spec.gpus)
        job_gpus = gpus[:n] if n else []
        batch = batch_size or (spec.batch_size if spec.batch_size != "auto" else 8)
        p = plan(spec, job_gpus, batch, prompt_tokens + spec.max_new_tokens, role)
        plans.append(p)
        lines.append(render(p))
    return lines, plans


def write_plan(path, plans: list[dict]) -> None:
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    atomic.write_text(path, json.dumps(plans, indent=2, default=str))
