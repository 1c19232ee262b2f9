"""Advice you can apply: for each role the settings the time model finds fastest among those that fit,
and the config layer that applies them (`genjudge plan --write overlay.yaml`).

- Generators: engine x shard count, all generators and datasets together on the generators' GPUs (the
  role's makespan: start-up paid per job, continuous batching filling vLLM's batch). Their precision is
  kept: a quantized generator is another model under test.
- Each judge: engine x precision x judge.parallel that fit its GPUs. The recommendation keeps the
  configured precision (another precision is another judge); the fastest of all is said beside it.

Options are compared without a calibration's factors (they were measured on the configured settings
only), with a run's measured answer lengths where `--calibrate` gave them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

GIB = 1024**3


@dataclass
class Option:
    role: str
    name: str  # the judge, or "generators"
    settings: dict  # what the overlay writes: engine, shards / quantization, parallel
    seconds: float  # the role's jobs on its GPUs, start to end
    longest_job: float
    jobs: int
    gpus_per_job: int
    batch: int
    host_mem_mb: int
    configured: bool = False
    on_gpus: bool = True  # False: the jobs run on CPUs (no GPU in the plan)

    def describe(self) -> str:
        from genjudge.planning.time_model import duration

        what = ", ".join(f"{k} {v}" for k, v in self.settings.items())
        where = f"of {self.gpus_per_job} GPU(s)" if self.on_gpus else "on the CPU"
        return (
            f"{what}: about {duration(self.seconds)} ({self.jobs} job(s) {where}, batch "
            f"{self.batch}, longest job {duration(self.longest_job)})" + (" [configured]" if self.configured else "")
        )


def _makespan(jobs: list[tuple[float, int]], pool: list[int]) -> float:
    from genjudge.planning.schedule import Job, Pool, schedule

    if not jobs:
        return 0.0
    placed = [Job(f"j{i}", "p", min(g, max(pool)), s, []) for i, (s, g) in enumerate(jobs)]
    return schedule(placed, {"p": Pool("p", pool, "")}).total


def vllm_obstacle(spec, n_gpus: int) -> str | None:
    """Why vLLM could not run this spec on `n_gpus` GPUs, from the model's config.json (the GPU machine's
    vLLM, not this one's build: a login node may have none, or the CPU build)."""
    from genjudge.models.vllm_support import local_config, pipeline_obstacle

    if spec.quantization == "8bit":
        return "vLLM does not quantize to 8-bit"
    if spec.quantization == "4bit" and spec.bnb_4bit_quant_type != "nf4":
        return "vLLM quantizes to nf4 only"
    return pipeline_obstacle(local_config(spec.model, spec.revision) or {}, n_gpus)


def _entry_time(e, spec, engine, plan: dict, batch: int, shares: dict, how: str = ""):
    """Seconds of each job of one entry under other settings: {label: seconds}; `how`: how the batch was
    planned (batch_size auto's probes count where the job would probe)."""
    from genjudge.planning.time_model import ModelNumbers, job_time
    from genjudge.stages.plan_roles import search_probes

    model = ModelNumbers.from_plan(plan)
    out = {}
    for label, reqs in shares.items():
        own = max(1, min(batch, math.ceil(sum(r.n for r in reqs))))  # a job probes up to its own requests
        probes = search_probes(spec, e.device, own, how, None)
        out[label] = job_time(model, e.device, e.layout, reqs, batch, engine, e.read_rate, probes=probes).seconds
    return out


def _batch(e, spec, engine, plan: dict, requests: float) -> tuple[int, str]:
    """(batch, how it was planned) under other settings."""
    from genjudge.stages.plan_roles import Entry, planned_batch

    probe = Entry(e.role, e.name, spec, plan, 0, e.device, layout=e.layout, prompt_tokens=e.prompt_tokens)
    probe.engine = engine
    return planned_batch(probe, None, requests)


def generator_options(config: dict, exp, entries: list, pool: list[int]) -> list[Option]:
    """Engine x shard count for all generators together, on `pool` (GPUs per node, or CPU slots)."""
    from genjudge.planning.time_model import engine_of
    from genjudge.stages.plan_roles import planned_engine

    if not entries:
        return []
    configured = {e.name: e.spec.engine for e in entries}
    top = config["shards"]
    own = {d: exp.datasets[d].get("shards") for d in exp.datasets}  # a dataset's own count is kept
    smallest = min((sum(r.n for r in e.requests[d]) for e in entries for d in e.requests), default=1)
    gpus = sum(pool)
    cells = sum(len(e.requests) for e in entries)
    candidates = {top, 1, 2, 4, 8, max(1, gpus // max(cells, 1)), gpus}
    shard_counts = sorted(s for s in candidates if 1 <= s <= max(1, smallest))
    engines = ["transformers", "vllm"] if any(e.device.kind == "gpu" for e in entries) else ["transformers"]
    out = []
    for engine_name in engines:
        specs = {}
        for e in entries:
            spec = replace(e.spec, engine=engine_name)
            if engine_name == "vllm":  # vLLM schedules its own batch (batch_size: auto, written so)
                spec = replace(spec, batch_size="auto")
            if engine_name == "vllm" and vllm_obstacle(spec, len(e.job_gpus)):
                break
            specs[e.name] = spec
        else:
            for shards in shard_counts:
                jobs, longest, batch, mem = [], 0.0, 0, 0
                for e in entries:
                    spec = specs[e.name]
                    counts = {d: own[d] or shards for d in e.requests}
                    shares = {d: [r.share(1 / counts[d]) for r in reqs] for d, reqs in e.requests.items()}
                    per_job = max(sum(r.n for r in reqs) for reqs in shares.values())
                    if engine_name == "vllm":
                        engine = engine_of(spec)
                    else:
                        engine, _ = planned_engine(
                            spec, _numbers(e.plan), e.device, e.layout, max(shares.values(), key=len)
                        )
                    b, how = _batch(e, spec, engine, e.plan, per_job)
                    times = _entry_time(e, spec, engine, e.plan, b, shares, how)
                    jobs += [(times[d], len(e.job_gpus) or 1) for d in shares for _ in range(counts[d])]
                    longest, batch, mem = max(longest, *times.values()), max(batch, b), max(mem, e.host_mem_mb)
                settings = {"engine": engine_name, "shards": shards}
                same = shards == top and all(configured[e.name] == engine_name for e in entries)
                out.append(
                    Option(
                        "generator",
                        "generators",
                        settings,
                        _makespan(jobs, pool),
                        longest,
                        len(jobs),
                        max(len(e.job_gpus) for e in entries) or 1,
                        batch,
                        mem,
                        same,
                        on_gpus=any(e.device.kind == "gpu" for e in entries),
                    )
                )
    return sorted(out, key=lambda o: o.seconds)


def _numbers(plan: dict):
    from genjudge.planning.time_model import ModelNumbers

    return ModelNumbers.from_plan(plan)


def judge_options(config: dict, exp, e, gpus: list, pool: list[int], on_slurm: bool) -> list[Option]:
    """Engine x precision x judge.parallel for one judge entry, on the judge's `pool`."""
    from genjudge.config.job_settings import slurm_from_config
    from genjudge.engine.judge_parallel import layout as judge_layout
    from genjudge.engine.memory_plan import ACTIVATION_RESERVE
    from genjudge.errors import InputError
    from genjudge.planning.time_model import Layout, engine_of
    from genjudge.stages.plan_roles import host_memory_mb, planned_engine

    if not gpus:
        return []
    out = []
    slurm = slurm_from_config({**config, "judge": exp.judges[e.name]})
    wants = list(e.requests["all"])
    if e.spec.verdict == "logprob":
        wants = [replace(r, new_tokens=1) for r in wants]
    for engine_name in ("transformers", "vllm"):
        for quant in ("none", "8bit", "4bit"):
            for parallel in ("device_map", "tensor", "replicas"):
                if engine_name == "vllm" and parallel == "device_map":
                    continue  # vLLM splits a model by tensor or pipeline parallelism, never a device map
                spec = replace(e.spec, engine=engine_name, quantization=quant, parallel=parallel)
                if engine_name == "vllm":
                    spec = replace(spec, batch_size="auto")
                try:
                    lay = judge_layout(spec, slurm, list(range(len(gpus))), on_slurm=False, gpus=gpus)
                except InputError:
                    continue
                n = lay.gpus_per_job
                precision = (
                    quant if quant != "none" else e.plan["precision"] if e.spec.quantization == "none" else "bfloat16"
                )
                weights = e.plan["weights_bytes"].get(precision, e.plan["weights_bytes"]["bfloat16"])
                room = sum(g.total_bytes for g in gpus[:n]) * (1 - ACTIVATION_RESERVE)
                if weights > room:
                    continue
                if engine_name == "vllm" and vllm_obstacle(spec, n):
                    continue
                if parallel == "tensor" and n > 1 and engine_name == "transformers" and quant != "none":
                    continue  # bitsandbytes weights are not split by transformers' tensor parallelism
                plan = {**e.plan, "precision": precision, "gpus": [g.__dict__ for g in gpus[:n]]}
                kind = "tensor" if parallel == "tensor" and n > 1 else ("device_map" if n > 1 else "one")
                if engine_name == "vllm" and n > 1:
                    kind = "tensor"
                layout = Layout(kind, n)
                shares = {"each job": [r.share(1 / lay.jobs) for r in wants]}
                fake = replace_entry(e, layout=layout)
                if engine_name == "vllm":
                    engine = engine_of(spec)
                else:
                    engine, _ = planned_engine(spec, _numbers(plan), e.device, layout, shares["each job"])
                b, how = _batch(fake, spec, engine, plan, sum(r.n for r in shares["each job"]))
                t = _entry_time(fake, spec, engine, plan, b, shares, how)["each job"]
                settings = {"engine": engine_name, "quantization": quant, "parallel": parallel}
                same = (engine_name, quant, parallel) == (e.spec.engine, e.spec.quantization, e.judge_layout.parallel)
                out.append(
                    Option(
                        "judge",
                        e.name,
                        settings,
                        _makespan([(t, n)] * lay.jobs, pool),
                        t,
                        lay.jobs,
                        n,
                        b,
                        host_memory_mb({**plan, "fits": True}),
                        same,
                        on_gpus=e.device.kind == "gpu",
                    )
                )
    return sorted(out, key=lambda o: o.seconds)


def replace_entry(e, **changes):
    from copy import copy

    out = copy(e)
    for k, v in changes.items():
        setattr(out, k, v)
    return out


def best(options: list[Option], keep: dict | None = None) -> Option | None:
    """The fastest option, among those whose settings agree with `keep`."""
    fitting = [o for o in options if all(o.settings.get(k) == v for k, v in (keep or {}).items())]
    return min(fitting, key=lambda o: o.seconds) if fitting else None


def advice(config: dict, exp, entries: list, role_gpus: dict, pools: dict, on_slurm: bool) -> tuple[list[str], dict]:
    """(lines to print, the recommended options by role and name)."""
    from genjudge.planning.time_model import duration

    lines, chosen = (
        ["advice (the time model's fastest settings that fit; `genjudge plan --write FILE` writes them):"],
        {},
    )
    entries = local(entries)  # behind an endpoint: nothing to choose here
    gens = [e for e in entries if e.role == "generator"]
    if gens:
        options = generator_options(config, exp, gens, pools["generator"])
        rec = best(options)
        current = next((o for o in options if o.configured), None)
        if rec is not None:
            chosen["generators"] = rec
            gain = (
                f", {current.seconds / max(rec.seconds, 1e-9):.1f}x the configured"
                if current and current is not rec
                else ""
            )
            jobs_per_gpu = rec.jobs * rec.gpus_per_job / max(sum(pools["generator"]), 1)
            lines.append(
                f"  generators: {rec.describe()}{gain}"
                + (
                    f"; about one job per GPU ({rec.jobs} jobs on {sum(pools['generator'])})"
                    if rec.on_gpus and 0.5 <= jobs_per_gpu <= 1.5
                    else ""
                )
            )
            lines += [f"    {o.describe()}" for o in options[:6] if o is not rec]
            lines.append("    (generators keep their precision: a quantized generator is another model under test)")
    for e in entries:
        if e.role != "judge":
            continue
        options = judge_options(config, exp, e, role_gpus["judge"], pools["judge"], on_slurm)
        rec = best(options, {"quantization": e.spec.quantization})
        if rec is None:
            continue
        chosen[e.name] = rec
        current = next((o for o in options if o.configured), None)
        gain = (
            f", {current.seconds / max(rec.seconds, 1e-9):.1f}x the configured"
            if current and current is not rec
            else ""
        )
        lines.append(f"  judge {e.name}: {rec.describe()}{gain}")
        fastest = best(options)
        if fastest is not None and fastest is not rec:
            lines.append(
                f"    fastest at any precision: {fastest.describe()}: another precision is another judge (its "
                f"verdicts change), so it is not written"
            )
        slow = [o for o in options if o.settings["quantization"] == "8bit"]
        if slow and fastest is not None:
            lines.append(
                f"    8-bit (LLM.int8) is the slowest precision here: at best {duration(min(o.seconds for o in slow))}"
            )
        lines += [f"    {o.describe()}" for o in options[:6] if o not in (rec, fastest)]
    return lines, chosen


def local(entries: list) -> list:
    """The entries of models run here (not behind an endpoint, whose engine is the endpoint's)."""
    return [e for e in entries if e.spec.engine != "openai"]


def _engine_settings(engine: str) -> dict:
    """vLLM schedules its own batch: a configured number would cap it (max_num_seqs)."""
    return {"engine": engine, "batch_size": "auto"} if engine == "vllm" else {"engine": engine}


RESULT_CHANGES = "--allow-result-changes"


def engine_changes(chosen: dict, entries: list) -> list[str]:
    """Lines for each advised engine that differs from the configured one: the engine is in every item
    key (another engine's outputs differ), so switching it regenerates or re-judges everything. A model
    behind an endpoint gets no engine advice: it is not run here."""
    entries = local(entries)
    configured = {e.name: e.spec.engine for e in entries}
    out = []
    gen = chosen.get("generators")
    if gen is not None:
        names = sorted(
            {e.name for e in entries if e.role == "generator" and configured[e.name] != gen.settings["engine"]}
        )
        if names:
            out.append(f"generators {', '.join(names)}: engine {gen.settings['engine']}")
    for name, o in chosen.items():
        if name != "generators" and configured.get(name) != o.settings["engine"]:
            out.append(f"judge {name}: engine {o.settings['engine']}")
    return out


def result_change_lines(chosen: dict, entries: list, allowed: bool) -> list[str]:
    """What the overlay leaves out (or, with --allow-result-changes, writes) because it changes results."""
    changes = engine_changes(chosen, entries)
    if not changes:
        return []
    if allowed:
        return [
            f"  written with {RESULT_CHANGES}: {'; '.join(changes)}: the engine is in every item key, so "
            "every answer is generated and every verdict judged again, and they may differ"
        ]
    return [
        f"  changes results: {'; '.join(changes)}: the engine is in every item key, so applying it generates "
        "every answer and judges every verdict again, and they may differ (as another precision does); "
        f"--write leaves it out unless given {RESULT_CHANGES}"
    ]


def overlay(config: dict, exp, chosen: dict, entries: list, allow_result_changes: bool = False) -> dict:
    """A config layer with the recommended settings that leave results unchanged (shards, judge.parallel)
    and each role's runtime and host memory (the longest job's estimate x1.5, x1.5 more per kind of assumed
    figure (plan_roles.assumptions); the host memory estimate + 25%), for `--configfile`; an engine other than the configured one only with `allow_result_changes`
    (it is in every item key)."""
    from genjudge.stages.plan_roles import MEMORY_MARGIN, runtime_minutes

    entries = local(entries)  # a model behind an endpoint keeps its engine, and its jobs their resources

    def assumed(role: str, names) -> int:
        return max((len(e.assumptions) for e in entries if e.role == role and e.name in names), default=0)

    configured = {e.name: e.spec.engine for e in entries}

    def engine(name: str, advised: str) -> dict:
        return _engine_settings(advised) if allow_result_changes or configured.get(name) == advised else {}

    out: dict = {}
    gen = chosen.get("generators")
    if gen is not None:
        out["shards"] = gen.settings["shards"]
        names = [e.name for e in entries if e.role == "generator"]
        if config.get("generators"):
            settings = {n: engine(n, gen.settings["engine"]) for n in names}
            if any(settings.values()):
                out["generators"] = {n: v for n, v in settings.items() if v}
        elif settings := engine(names[0], gen.settings["engine"]) if names else {}:
            out["generator"] = settings
        out.setdefault("resources", {})["generate"] = {
            "runtime": runtime_minutes(gen.longest_job, assumed("generator", names)),
            "mem_mb": int(math.ceil(gen.host_mem_mb * MEMORY_MARGIN / 1000) * 1000),
        }
    judges = [o for k, o in chosen.items() if k != "generators"]
    if judges:
        settings = {
            o.name: {**engine(o.name, o.settings["engine"]), "parallel": o.settings["parallel"]} for o in judges
        }
        if config.get("judges"):
            out["judges"] = settings
        else:
            out["judge"] = next(iter(settings.values()))
        out.setdefault("resources", {})["judge"] = {
            "runtime": runtime_minutes(max(o.longest_job for o in judges), assumed("judge", {o.name for o in judges})),
            "mem_mb": int(math.ceil(max(o.host_mem_mb for o in judges) * MEMORY_MARGIN / 1000) * 1000),
        }
    return out
