"""Each generator and judge as `genjudge plan` plans it: its memory plan, the batch its jobs will run
(planning.batch_choice.choose: the function the jobs call on their probes), the terms of its engine
(compiled or eager, vLLM's continuous batching) and each job's time."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from genjudge.cluster.job_resources import JobSettings
from genjudge.config import job_settings
from genjudge.config.specs import GeneratorSpec, JudgeSpec
from genjudge.stages.plan_batch import (  # noqa: F401 - importable from here, as before
    planned_batch,
    planned_engine,
    remembered_batch,
    search_probes,
    vllm_batch,
    with_batch,
)

GIB = 1024**3
GB = 1000**3
RUNTIME_MARGIN = 1.5  # the runtime to ask a scheduler for: the estimate + 50%, where its figures were measured
# ... and x1.5 more for each kind of figure it assumed instead (`assumptions`): no run of this model measured
# its compute, nor its load, engine constants not measured on this device, the GPU's own figures unknown.
ASSUMED_MARGIN = 1.5
MEMORY_MARGIN = 1.25  # host memory to ask for: the estimate + 25%


@dataclass
class Entry:
    """One generator or judge as planned."""

    role: str
    name: str
    spec: object
    plan: dict
    batch: int
    device: object
    jobs: list = field(default_factory=list)  # (job name, seconds, gpus, inputs, cell)
    times: dict = field(default_factory=dict)  # label -> JobTime of one job
    lines: list = field(default_factory=list)
    # What the advice (stages.plan_advice) varies: the requests per dataset (before sharding), the
    # job's GPUs, layout and engine, the calibration and the read rate.
    requests: dict = field(default_factory=dict)
    job_gpus: list = field(default_factory=list)
    layout: object = None
    engine: object = None
    calibration: object = None
    read_rate: float = GB
    prompt_tokens: int = 0
    assumptions: list = field(default_factory=list)  # kinds of figure the estimate assumed (`assumptions`)
    host_mem_mb: int = 0
    judge_layout: object = None


def host_memory_mb(p: dict) -> int:
    """Host memory a job needs (MB): safetensors load straight to the GPUs, staging little in host
    RAM; on a CPU the weights live there."""
    w = p["weights_bytes"].get(p["precision"], p["weights_bytes"]["bfloat16"])
    on_gpu = bool(p.get("gpus")) and p.get("fits")
    host = (8 * GIB + 0.1 * w) if on_gpu else (4 * GIB + 1.2 * w)
    return math.ceil(host / 2**20 / 1000) * 1000


def host_memory_line(p: dict, step: str) -> str:
    on_gpu = bool(p.get("gpus")) and p.get("fits")
    return (
        f"  resources.{step}.mem_mb: about {host_memory_mb(p)} (host memory: "
        + ("weights load straight to the GPUs" if on_gpu else "weights held in RAM")
        + "; an estimate)"
    )


def margin(assumed: int = 0) -> float:
    """The runtime booked over the estimate: RUNTIME_MARGIN, times ASSUMED_MARGIN per kind of assumed figure."""
    return RUNTIME_MARGIN * ASSUMED_MARGIN**assumed


def runtime_minutes(seconds: float, assumed: int = 0) -> int:
    return max(1, math.ceil(seconds * margin(assumed) / 60))


def margin_text(assumed: list[str]) -> str:
    """How the margin was made, for the plan and the written overlay."""
    rule = f"x{RUNTIME_MARGIN:g}" + (f" x {ASSUMED_MARGIN:g} per assumed kind of figure" if assumed else "")
    if not assumed:
        return f"{rule}: every figure it rests on was measured"
    return f"{rule} = x{margin(len(assumed)):.2f}; it rests on {len(assumed)} assumed: " + "; ".join(assumed)


def assumptions(e) -> list[str]:
    """The kinds of figure an entry's estimate assumes instead of measuring (each widens the runtime margin)."""
    from genjudge.planning.time_model import GB

    cal = e.calibration
    out = []
    if cal is None:
        out.append(
            "compute: the device's peaks x efficiency, never measured for this model (--calibrate with a finished "
            "run of it replaces them)"
        )
    if cal is None or cal.load_seconds is None:
        out.append(f"load: {e.read_rate / GB:g} GB/s read rate assumed (plan.load_gb_per_s)")
    unmeasured = sorted({s.split(":")[0] for t in e.times.values() for s in t.sources if "never measured" in s})
    if unmeasured and cal is None:
        out.append(f"engine constants never measured on this device ({', '.join(unmeasured)}: see constants)")
    if cal is not None and not cal.measured_on(e.device):
        out.append(
            f"calibrated on another device: measured on {', '.join(cal.devices)}, applied to {e.device.name} (its "
            "ratios and load seconds carry over only as far as the two are alike; a finished run on this device "
            "measures them)"
        )
    if str(getattr(e.device, "source", "")).startswith("assumed"):
        out.append(f"the GPU: {e.device.source}")
    return out


def runtime_line(settings: JobSettings, step: str, seconds: float, assumed: list[str] = ()) -> str:
    want = runtime_minutes(seconds, len(assumed))
    have = settings.resources[step].runtime
    verdict = "" if have >= want else f"; the configured {have} min is LESS: raise resources.{step}.runtime"
    return (
        f"  resources.{step}.runtime: about {want} min (the longest job's {seconds / 60:.1f} min "
        f"{margin_text(list(assumed))}: an estimate, not a measurement){verdict}"
    )


def job_device(job_gpus, config: dict, step: str):
    """The device a job runs on; on the CPU with the threads Snakemake gives it (resources.<step>.cpus)."""
    from genjudge.engine.devices import measure_cpu
    from genjudge.planning.time_model import gpu_device

    return gpu_device(job_gpus[0]) if job_gpus else measure_cpu(config["resources"][step]["cpus"])


def _calibration_for(cal, model: str, role: str):
    return None if cal is None else cal.for_model(model, role)


def _with_answers(reqs: list, answers: float | None) -> list:
    """Requests with the measured mean answer length (continuous batching decodes that, not max_new_tokens)."""
    from dataclasses import replace

    return reqs if answers is None else [replace(r, answer_tokens=answers) for r in reqs]


def check_max_model_len(config: dict, role: str, name: str, spec, tokens: int, new: int) -> None:
    """vLLM's `max_model_len` below the longest prompt plus its answer: every such request would fail."""
    from genjudge.config.experiment import entry_key
    from genjudge.errors import InputError

    cap = spec.vllm.get("max_model_len") if spec.engine == "vllm" else None
    if cap and tokens + new > cap:
        raise InputError(
            f"{entry_key(config, role, name, 'vllm')}.max_model_len: {cap} tokens, less than the longest prompt "
            f"(about {tokens} tokens) plus max_new_tokens ({new}); raise it to {tokens + new} or more, or lower "
            "max_new_tokens"
        )


def context_check(spec, tokens: int, new: int) -> tuple[str, dict]:
    """The model's context window against the longest prompt plus its answer, or that it is not known:
    the plan's line and its JSON."""
    from genjudge.engine.context import CONTEXT_FIELDS, model_context, source_text

    window, source = model_context(spec)
    need = tokens + new
    fact = {"window": window, "source": source, "longest_prompt_and_answer": need, "fits": None}
    if window is None:
        line = (
            f"  context: not known ({spec.model}'s config.json names none of {', '.join(CONTEXT_FIELDS)}): "
            "prompt lengths cannot be checked against it"
        )
        return line, fact
    fact["fits"] = need <= window
    if need > window:
        line = (
            f"  context: the longest prompt (about {tokens} tokens) plus max_new_tokens ({new}) is about {need} "
            f"tokens, MORE than {spec.model}'s context of {window} ({source_text(source)}): items that long stop "
            "their job before its weights load, or are left out where the dataset's on_too_long is skip"
        )
        return line, fact
    return (
        f"  context: {window} tokens ({source_text(source)}); the longest prompt plus max_new_tokens: about {need}",
        fact,
    )


def plan_generator(config, exp, name, items, gpus, batch_size, prompt_override, cal, read_rate) -> Entry:
    from genjudge.engine.memory_plan import plan, render
    from genjudge.planning.time_model import Layout, ModelNumbers, job_time
    from genjudge.planning.workload import generator_workload

    section = exp.generators[name]
    spec = GeneratorSpec.from_config(section)
    answers = cal.answer_tokens.get(spec.model) if cal else None
    wl = generator_workload({d: items[d] for d in exp.datasets_of(name)}, section, answers)
    tokens, how = (prompt_override, "given with --prompt-tokens") if prompt_override else (wl.longest, wl.how)
    check_max_model_len(config, "generator", name, spec, tokens, spec.max_new_tokens)
    n = exp.gpus_per_job(name, config) if gpus else 0
    job_gpus = gpus[:n] if n else []
    p = plan(spec, job_gpus, batch_size or 8, tokens + spec.max_new_tokens, "generator")
    device = job_device(job_gpus, config, "generate")
    model = ModelNumbers.from_plan(p)
    layout = Layout("device_map" if n > 1 else ("one" if n else "cpu"), n)
    requests = {d: _with_answers(reqs, answers) for d, reqs in wl.requests.items()}
    per_job = {d: sum(r.n for r in reqs) / exp.shards(d, config) for d, reqs in requests.items()}
    longest_job = max(per_job, key=per_job.get) if per_job else None
    job_reqs = [r.share(1 / exp.shards(longest_job, config)) for r in requests[longest_job]] if longest_job else []
    engine, compile_why = planned_engine(spec, model, device, layout, job_reqs)
    e = Entry("generator", name, spec, p, 0, device, requests=requests, job_gpus=job_gpus, layout=layout)
    e.engine, e.calibration, e.read_rate, e.prompt_tokens = (
        engine,
        _calibration_for(cal, spec.model, "generator"),
        read_rate,
        tokens,
    )
    batch, batch_how = planned_batch(e, batch_size, max(per_job.values(), default=1), config.get("cache_dir"))
    e.batch = batch
    with_batch(p, batch)
    n_jobs = 0
    for d, reqs in requests.items():
        shards = exp.shards(d, config)
        n_jobs += shards
        # A job probes up to its own requests (engine.batch_size), as it runs.
        probes = search_probes(spec, device, max(1, min(batch, math.ceil(per_job[d]))), batch_how, batch_size)
        t = job_time(
            model, device, layout, [r.share(1 / shards) for r in reqs], batch, engine, read_rate, e.calibration, probes
        )
        e.times[d] = t
        e.jobs += [(f"generate {name}/{d}/{s}", t.seconds, n, [], (name, d)) for s in range(shards)]
    p.update(name=name, prompt_tokens=tokens, prompt_tokens_source=how, gpus_per_job=n, batch_source=batch_how)
    p.update(engine=spec.engine, compile=engine.compiled if spec.engine == "transformers" else None)
    p["time"] = {d: _time_dict(t) for d, t in e.times.items()}
    e.host_mem_mb = host_memory_mb(p)
    e.lines.append(render(p))
    per_job_txt = ", ".join(f"{d}: {v:,.0f}" for d, v in per_job.items())
    e.lines.append(
        f"  jobs: {n_jobs} x {n} GPU(s) each (generator {name}); requests per job (item, turn, sample): "
        f"{per_job_txt}; prompt: {tokens} tokens ({how})"
    )
    line, p["context"] = context_check(spec, tokens, spec.max_new_tokens)
    e.lines.append(line)
    e.lines += _batch_lines(batch, batch_how, engine, compile_why)
    e.lines.append(host_memory_line(p, "generate"))
    e.lines += _time_lines(e, device, layout, e.calibration)
    e.assumptions = assumptions(e)
    if e.times:
        e.lines.append(
            runtime_line(
                job_settings.from_config(config), "generate", max(t.seconds for t in e.times.values()), e.assumptions
            )
        )
    return e


def plan_judge(config, exp, name, items, gpus, batch_size, prompt_override, cal, read_rate, workflow_dir, nodes):
    from genjudge.config import judge_template
    from genjudge.config.job_settings import slurm_from_config
    from genjudge.engine.judge_parallel import layout as judge_layout
    from genjudge.engine.memory_plan import plan, render
    from genjudge.judging import modes
    from genjudge.planning.time_model import Layout, ModelNumbers, job_time
    from genjudge.planning.workload import judge_workload

    section = exp.judges[name]
    spec = JudgeSpec.from_config(section)
    view = {**config, "judge": section}
    slurm = slurm_from_config(config)
    if nodes:
        # As the SLURM run decides: `judge.gpus: all` is one judge node's GPUs, whose size the run
        # knows from judge.gpu_memory alone (no nvidia-smi where the workflow plans).
        lay = judge_layout(spec, slurm, [], on_slurm=True)
        known = judge_layout(spec, slurm, [], on_slurm=True, gpus=gpus)
    else:
        lay = known = judge_layout(spec, slurm, list(range(len(gpus))), on_slurm=False, gpus=gpus)
    n = lay.gpus_per_job if gpus else 0
    job_gpus = gpus[:n] if n else []
    answers = {
        g: cal.answer_tokens[s["model"]] for g, s in exp.generators.items() if cal and s["model"] in cal.answer_tokens
    }
    cells = exp.cells(name)
    mode = modes.get(spec.mode)
    wl = judge_workload(items, section, cells, exp.generators, judge_template(view), mode, answers, workflow_dir)
    tokens, how = (prompt_override, "given with --prompt-tokens") if prompt_override else (wl.longest, wl.how)
    new = 1 if spec.verdict == "logprob" else spec.max_new_tokens
    check_max_model_len(config, "judge", name, spec, tokens, new)
    p = plan(spec, job_gpus, batch_size or 8, tokens + new, "judge")
    device = job_device(job_gpus, config, "judge")
    kind = {"tensor": "tensor", "device_map": "device_map"}.get(lay.parallel, "one") if n else "cpu"
    layout = Layout(kind if n > 1 or kind == "cpu" else "one", n)
    model = ModelNumbers.from_plan(p)
    reqs = [r.share(1 / lay.jobs) for r in wl.all()]
    if spec.verdict == "logprob":
        from dataclasses import replace

        reqs = [replace(r, new_tokens=1) for r in reqs]
    engine, compile_why = planned_engine(spec, model, device, layout, reqs)
    e = Entry("judge", name, spec, p, 0, device, requests={"all": wl.all()}, job_gpus=job_gpus, layout=layout)
    e.engine, e.calibration, e.read_rate, e.prompt_tokens = (
        engine,
        _calibration_for(cal, spec.model, "judge"),
        read_rate,
        tokens,
    )
    e.judge_layout = lay
    batch, batch_how = planned_batch(e, batch_size, wl.n / lay.jobs, config.get("cache_dir"))
    e.batch = batch
    with_batch(p, batch)
    probes = search_probes(spec, device, batch, batch_how, batch_size)
    t = job_time(model, device, layout, reqs, batch, engine, read_rate, e.calibration, probes)
    e.times["each job"] = t
    inputs = sorted({(g, cell.dataset) for cell in cells for g in (cell.generator, cell.opponent) if g})
    e.jobs = [(f"judge {name}/{j}", t.seconds, n, inputs, None) for j in range(lay.jobs)]
    p.update(name=name, prompt_tokens=tokens, prompt_tokens_source=how, gpus_per_job=n, batch_source=batch_how)
    p.update(engine=spec.engine, compile=engine.compiled if spec.engine == "transformers" else None)
    p["parallel"] = {"choice": lay.parallel, "reason": lay.reason}
    p["time"] = {"each job": _time_dict(t)}
    e.host_mem_mb = host_memory_mb(p)
    e.lines.append(render(p))
    e.lines.append(
        f"  jobs: {lay.jobs} x {n} GPU(s) each (judge {name}); requests (item, turn, sample"
        + mode.requests_note()
        + f"): {wl.n:,.0f}, {wl.n / lay.jobs:,.0f} per job"
        + (" (cascade: fewer reach the judge; counted as all)" if spec.cascade else "")
        + f"; prompt: {tokens} tokens ({how})"
    )
    line, p["context"] = context_check(spec, tokens, new)
    e.lines.append(line)
    e.lines.append(f"  judge.parallel: {lay.parallel} ({parallel_reason(spec, lay, p)})")
    unknown_size = (known.parallel, known.jobs) != (lay.parallel, lay.jobs) and gpus
    if unknown_size:
        e.lines.append(
            f"  recommendation: set judge.gpu_memory: {gpus[0].total_bytes / GIB:.0f}GiB and judge.parallel: auto "
            f"chooses {known.parallel} ({known.jobs} job(s) of {known.gpus_per_job} GPU(s)): {known.reason}"
        )
    e.lines += _batch_lines(batch, batch_how, engine, compile_why)
    w = p["weights_bytes"].get(p["precision"], p["weights_bytes"]["bfloat16"])
    k = len(job_gpus)
    if k > 1 and lay.parallel != "replicas" and w <= job_gpus[0].total_bytes * 0.95 and not unknown_size:
        e.lines.append(
            f"  recommendation: the judge fits one GPU at {p['precision']} ({w / GB:.1f} GB): set judge.parallel: "
            f"replicas (or judge.shards: {k * max(1, spec.shards)}) for one replica per GPU, about {k}x the "
            f"throughput of one model spread over {k} GPUs"
        )
    e.lines.append(host_memory_line(p, "judge"))
    e.lines += _time_lines(e, device, layout, e.calibration)
    e.assumptions = assumptions(e)
    e.lines.append(runtime_line(job_settings.from_config(config), "judge", t.seconds, e.assumptions))
    return e


def parallel_reason(spec, lay, p: dict) -> str:
    """The layout's reason in the engine's own terms: vLLM splits the model itself (no torchrun group,
    no accelerate device map)."""
    if spec.engine != "vllm" or lay.gpus_per_job <= 1:
        return lay.reason
    from genjudge.engine.vllm_engine import parallel_sizes
    from genjudge.models.vllm_support import local_config

    config = local_config(spec.model, spec.revision) or {}
    tp, pp = parallel_sizes(lay.gpus_per_job, config)
    return (
        f"one vLLM engine over {lay.gpus_per_job} GPUs per job: tensor_parallel_size {tp}, pipeline_parallel_size {pp}"
    )


def _batch_lines(batch: int, how: str, engine, compile_why: str) -> list[str]:
    out = [f"  batch: {batch} ({how})"]
    if compile_why:
        out.append(f"  decoding: {'compiled' if engine.compiled else 'eager'} ({compile_why})")
    return out


def _time_dict(t) -> dict:
    return {"seconds": round(t.seconds, 3), "terms": {x.name: round(x.seconds, 6) for x in t.terms}}


def _time_lines(e: Entry, device, layout, cal) -> list[str]:
    from genjudge.planning.time_model import duration

    vllm = getattr(e.spec, "engine", "") == "vllm"
    where = {
        "cpu": "on the CPU",
        "one": "on one GPU",
        "device_map": f"vLLM over {layout.gpus} GPUs"
        if vllm
        else f"device_map over {layout.gpus} GPUs: one at a time, so one GPU's figures",
        "tensor": f"tensor over {layout.gpus} GPUs",
    }[layout.kind]
    out = [f"  time per job ({where}; {device.describe()}):"]
    if cal is not None:
        out.append(f"    calibrated: {cal.source}")
    sources = []
    for label, t in e.times.items():
        out.append(f"    {e.role} job, {label}: about {duration(t.seconds)}")
        out += t.lines("      ")
        sources += [s for s in t.sources if s not in sources]
    out += [f"    constants: {s}" for s in sources]
    return out
