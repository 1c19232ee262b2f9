"""The GPU check and memory plan for a run's config (rule plan and `genjudge plan`): from each
model's config.json alone, no weights loaded; what each job gets, the batch `auto` would likely
pick, and the host memory and time to ask a scheduler for, each stated as the estimate it is."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

from genjudge import atomic
from genjudge.specs import JudgeSpec

ROLES = ("generator", "judge")
GIB = 1024**3
CHARS_PER_TOKEN = 4  # a rough average for English text under BPE tokenizers
# Decoding reads every weight once per step: step time ~ weight bytes / memory bandwidth.
ASSUMED_GPU_BANDWIDTH = 2.0e12  # bytes/s, H100-class HBM at realistic efficiency
ASSUMED_DISK_READ = 1.0e9  # bytes/s while loading weights
AUTO_HEADROOM = 0.95  # batch_size auto keeps 5% below what fits


def prompt_tokens(config: dict, role: str) -> tuple[int, str]:
    """Longest prompt of `role` in tokens (estimated from characters) and how it was found."""
    from genjudge.config import WORKFLOW_DIR, judge_template
    from genjudge.dataset import load_items

    ds = config["dataset"]
    items = load_items(ds["path"], ds["fields"], ds["format"], ds["hf"])
    questions = items["prompt"].str.len()
    if role == "generator":
        chars = int(questions.max())
        how = f"longest prompt of {ds['path']}, ~{CHARS_PER_TOKEN} chars/token"
        last = conversation_tokens(items, config["generator"]["max_new_tokens"])
        if last and last[0] > math.ceil(chars / CHARS_PER_TOKEN):
            return last[0], f"{how}: the last turn of a {last[1]}-turn conversation, earlier answers at max_new_tokens"
        return math.ceil(chars / CHARS_PER_TOKEN), how
    path = Path(judge_template(config))
    template = (path if path.exists() else WORKFLOW_DIR / path).read_text(encoding="utf-8")
    refs = items["reference"].fillna("").str.len()
    chars = len(template) + int((questions + refs).max())
    answer = config["generator"]["max_new_tokens"]
    return (
        math.ceil(chars / CHARS_PER_TOKEN) + answer,
        f"template + longest question and reference (~{CHARS_PER_TOKEN} chars/token) + an answer of "
        f"generator.max_new_tokens={answer}",
    )


def conversation_tokens(items, max_new_tokens: int) -> tuple[int, int] | None:
    """The longest last-turn prompt of the multi-turn items (every question and earlier answers
    at full length), in estimated tokens, with its turn count; None without conversations."""
    import json

    longest = None
    for turns in items["turns"].dropna():
        questions = [t["question"] for t in json.loads(turns)]
        tokens = math.ceil(sum(map(len, questions)) / CHARS_PER_TOKEN) + (len(questions) - 1) * max_new_tokens
        if longest is None or tokens > longest[0]:
            longest = (tokens, len(questions))
    return longest


def judge_layout(config: dict, gpus: list):
    """The judge's jobs and what each leases (judge.parallel, judge.gpus, judge.shards) on `gpus`."""
    from genjudge.engine.judge_parallel import layout

    spec = JudgeSpec.from_config(config["judge"])
    return layout(spec, config, list(range(len(gpus))), on_slurm=False, gpus=gpus)


def advice(p: dict, spec, config: dict, role: str, per_job: float, gpus_here: int) -> list[str]:
    """Estimates beside the plan: auto batch, replicas, host memory, runtime."""
    lines = []
    w = p["weights_bytes"].get(p["precision"], p["weights_bytes"]["bfloat16"])
    if p.get("fits") and p.get("max_batch_for_kv") is not None:
        est = max(1, int(p["max_batch_for_kv"] * spec.memory_margin * AUTO_HEADROOM))
        lines.append(
            f"  batch_size auto would pick about {est} (memory left after the weights / KV cache per "
            f"sequence of {p['seq_len']} tokens, margin {spec.memory_margin}; an estimate)"
        )
        batch = est if spec.batch_size == "auto" else int(spec.batch_size)
    else:
        batch = p["batch_size"]
    if role == "judge" and p.get("gpus") and len(p["gpus"]) > 1:
        one = p["gpus"][0]["total_bytes"] * 0.95
        if w <= one:
            n = len(p["gpus"])
            lines.append(
                f"  recommendation: the judge fits one GPU at {p['precision']} "
                f"({w / GIB:.1f} GiB): set judge.shards: {n * max(1, spec.shards)} (or judge.parallel: replicas) for one "
                f"replica per GPU, about {n}x the throughput of one model spread over {n} GPUs"
            )
    on_gpu = bool(p.get("gpus"))
    # safetensors load straight to the GPUs, staging little in host RAM; on CPU the weights live there.
    host = (8 * GIB + 0.1 * w) if on_gpu and p.get("fits") else (4 * GIB + 1.2 * w)
    lines.append(
        f"  resources.{'generate' if role == 'generator' else 'judge'}.mem_mb: about "
        f"{math.ceil(host / 2**20 / 1000) * 1000} (host memory: "
        + ("weights load straight to the GPUs" if on_gpu and p.get("fits") else "weights held in RAM")
        + "; an estimate)"
    )
    if on_gpu:
        step = w / ASSUMED_GPU_BANDWIDTH
        new = spec.max_new_tokens
        batch = max(1, min(batch, math.ceil(per_job)))
        seconds = w / ASSUMED_DISK_READ + math.ceil(per_job / batch) * new * step
        lines.append(
            f"  resources.{'generate' if role == 'generator' else 'judge'}.runtime: about "
            f"{max(10, math.ceil(seconds * 1.5 / 60))} min ({int(per_job)} items per job, up to {new} "
            f"new tokens, batch {batch}; assumes {ASSUMED_GPU_BANDWIDTH / 1e12:.0f} TB/s GPU memory "
            f"bandwidth and {ASSUMED_DISK_READ / 1e9:.0f} GB/s disk, +50%: an estimate, not a measurement)"
        )
    return lines


def make_plan(
    config: dict,
    gpus_spec: str | None = None,
    roles=ROLES,
    batch_size: int | None = None,
    prompt_tokens_override: int | None = None,
) -> tuple[list[str], list[dict]]:
    """(lines to print, one plan per role). `gpus_spec` (e.g. 4x80GiB) replaces this machine's GPUs."""
    from genjudge.engine.devices import cuda_gpus, driver_info
    from genjudge.engine.memory_plan import parse_inventory_spec, plan, render
    from genjudge.gpu_lease import resolve_inventory

    lines = []
    if gpus_spec:
        gpus = parse_inventory_spec(gpus_spec)
        lines.append(f"GPUs (hypothetical): {len(gpus)} x {gpus[0].total_bytes / GIB:.0f} GiB")
    else:
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
                f"{len(inventory)}x80GiB` plans for {len(inventory)} GPUs of 80 GiB)"
            )
    from genjudge.dataset import load_items
    from genjudge.experiment import resolve
    from genjudge.judging import modes
    from genjudge.specs import GeneratorSpec, JudgeSpec

    exp = resolve(config)
    n_items = {}
    for name, ds in exp.datasets.items():
        try:
            n_items[name] = len(load_items(ds["path"], ds["fields"], ds["format"], ds["hf"]))
        except Exception:  # noqa: BLE001 - the plan still helps without the dataset
            n_items[name] = 0

    def prompts(view, role):
        if prompt_tokens_override:
            return prompt_tokens_override, "given with --prompt-tokens"
        try:
            return prompt_tokens(view, role)
        except Exception as exc:  # noqa: BLE001
            return 512, f"assumed: the dataset could not be read ({exc})"

    # One plan per named generator and judge; a view of the config as if it were the only one,
    # on the dataset with its longest prompts.
    entries = []
    if "generator" in roles:
        for name, section in exp.generators.items():
            views = [
                {
                    **config,
                    "generator": section,
                    "gpus_per_job": exp.gpus_per_job(name, config),
                    "dataset": exp.datasets[d],
                    "shards": exp.shards(d, config),
                }
                for d in exp.datasets
            ]
            entries.append(("generator", name, GeneratorSpec.from_config(section), views))
    if "judge" in roles:
        for name, section in exp.judges.items():
            views = [{**config, "judge": section, "dataset": exp.datasets[d]} for d in exp.datasets]
            entries.append(("judge", name, JudgeSpec.from_config(section), views))
    plans = []
    for role, name, spec, views in entries:
        measured = [(prompts(v, role), v) for v in views]
        (tokens, how), view = max(measured, key=lambda m: m[0][0])
        if role == "generator":
            n = view["gpus_per_job"] if gpus else 0
            # Each sample is a sequence of its own (batch_size counts sequences, not items).
            per_job = max(n_items[d] * spec.n_samples / exp.shards(d, config) for d in exp.datasets)
            jobs = sum(exp.shards(d, config) for d in exp.datasets)
        else:
            lay = judge_layout(view, gpus)
            n = lay.gpus_per_job
            answers = sum(n_items[c.dataset] * exp.generators[c.generator]["n_samples"] for c in exp.cells(name))
            calls = answers * modes.get(spec.mode).requests_per_item
            per_job, jobs = calls / lay.jobs, lay.jobs
        job_gpus = gpus[:n] if n else []
        batch = batch_size or (spec.batch_size if spec.batch_size != "auto" else 8)
        p = plan(spec, job_gpus, batch, tokens + spec.max_new_tokens, role)
        p.update(name=name, prompt_tokens=tokens, prompt_tokens_source=how, gpus_per_job=n)
        extra = advice(p, spec, view, role, per_job, len(gpus))
        p["advice"] = extra
        plans.append(p)
        lines.append(render(p))
        lines.append(f"  jobs: {jobs} x {n or 0} GPU(s) each ({role} {name}); prompt: {tokens} tokens ({how})")
        if role == "judge":
            p["parallel"] = {"choice": lay.parallel, "reason": lay.reason}
            lines.append(f"  judge.parallel: {lay.parallel} ({lay.reason})")
        lines += extra
    return lines, plans


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


def sbatch_preview(config: dict) -> list[str]:
    """The sbatch options each model job gets under the SLURM executor, built by the plugin's own
    code from the resources the rules declare (first attempt), each role with its own `slurm.<role>`
    settings; then how the generation jobs are submitted (arrays, requeue). The light rules run locally."""
    import shlex
    import shutil
    from types import SimpleNamespace

    from snakemake_executor_plugin_slurm.submit_string import get_submit_command
    from snakemake_executor_plugin_slurm.utils import set_gres_string

    from genjudge import job_resources as jr
    from genjudge.experiment import resolve
    from genjudge.slurm_submission import decide

    exp = resolve(config)
    jr.check_node_gpus(config, exp)
    jobs = []
    n_generate = 0
    gpu_counts = set()
    for name in exp.generators:
        gpus = jr.generate_gpus(exp, config, name, [], on_slurm=True)
        gpu_counts.add(gpus)
        n = sum(exp.shards(d, config) for d in exp.datasets)
        n_generate += n
        jobs.append(
            ("generate", name, n, jr.job_resources(config, "generate", gpus), jr.threads(config, "generate", gpus))
        )
    for name, section in exp.judges.items():
        spec = JudgeSpec.from_config(section)
        gpus = jr.judge_gpus(spec, config, [], on_slurm=True)
        n_jobs = jr.judge_jobs(spec, config, [], on_slurm=True)
        jobs.append(("judge", name, n_jobs, jr.job_resources(config, "judge", gpus), jr.threads(config, "judge", gpus)))
    submission = decide(config, n_generate, None, gpu_counts=gpu_counts)
    settings = SimpleNamespace(requeue=submission.requeue, no_requeue=False, qos=None, reservation=None)
    lines = []
    for rule, name, count, resources, threads in jobs:
        job = SimpleNamespace(resources=_Resources(resources), threads=threads, name=rule)
        account, partition = resources.get("slurm_account"), resources.get("slurm_partition")
        if not partition and shutil.which("sinfo"):  # the cluster's default, found as the plugin finds it
            import logging

            from snakemake_executor_plugin_slurm.partitions import get_default_partition

            try:
                partition = get_default_partition(job, logging.getLogger(__name__)) or None
            except Exception:  # noqa: BLE001 - sinfo without a reachable cluster: the preview names none
                partition = None
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
