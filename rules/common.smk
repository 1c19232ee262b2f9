# Config validation and the small named functions the rules use; the logic is in the package.
import functools
import json
import os
import re
import sys
import time

from snakemake.exceptions import WorkflowError
from snakemake.logging import logger

from genjudge import config as wfconfig
from genjudge.cluster import interrupt, job_resources, slurm_array_task, slurm_submission
from genjudge.cluster.gpu_lease import resolve_inventory
from genjudge.config import job_settings
from genjudge.config.checks import endpoint_warnings
from genjudge.config.export import FORMATS as EXPORT_FORMATS
from genjudge.config.experiment import entry_key, judge_inputs, resolve
from genjudge.config.rule_params import remember_signatures, rerun_settings
from genjudge.config.specs import GeneratorSpec, JudgeSpec
from genjudge.data.dataset import OPTIONAL_COLUMNS
from genjudge.engine import judge_parallel
from genjudge.errors import InputError
from genjudge.judging import answer_rules, modes
from genjudge.judging.template_rules import template_paths
from genjudge.models.modelref import check_model, digest_index
from genjudge.stages.plan_dates import chat_date_notes
from genjudge.store import failures
from genjudge.store.records import INVOCATION_ENV, new_invocation

# A task of a SLURM job array checks the outputs of the job it runs, not those of the array's first
# job (snakemake-executor-plugin-slurm 2.8 targets the first): restarted on its own target, at once.
ARRAY_TASK_ARGV = slurm_array_task.own_command_line(sys.argv, os.environ)
if ARRAY_TASK_ARGV:
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(sys.executable, [sys.executable, "-m", "snakemake", *ARRAY_TASK_ARGV[1:]])

# Every job of this command records it (its meta, its recorded failure): the report draws each command apart.
if workflow.is_main_process:
    os.environ[INVOCATION_ENV] = new_invocation()

# A Ctrl-C, or `kill -INT` on snakemake alone, reaches every running job (Snakemake's own waits for them).
interrupt.forward_to_jobs()

try:
    wfconfig.validate(config, workflow.basedir)
    # The dataset is read once, in the main process; jobs re-parse this file without it.
    # config.json suffices to plan (a dry run on a login node); model_input asks more of a real run.
    wfconfig.check(config, data=workflow.is_main_process, loadable=False)
except InputError as exc:
    raise WorkflowError(f"bad input: {exc}") from None

RUN = config["run"]
RESULTS = f"results/{RUN}"
LOGS = f"logs/{RUN}"
EXP = resolve(config)
GENERATORS = {name: GeneratorSpec.from_config(sec) for name, sec in EXP.generators.items()}
JUDGES = {name: JudgeSpec.from_config(sec) for name, sec in EXP.judges.items()}
GPU_INVENTORY = resolve_inventory(config["gpu_inventory"])
# The config's `resources` and `slurm`, typed once: the cluster and engine code reads these.
JOB_SETTINGS = job_settings.from_config(config)
SLURM = JOB_SETTINGS.slurm
if workflow.is_main_process:
    for warning in endpoint_warnings(config, EXP):
        logger.warning(f"warning: {warning}")
    try:
        for note in chat_date_notes(EXP, RUN, config["chat_date"]):
            logger.info(note)
    except InputError as exc:
        raise WorkflowError(f"bad input: {exc}") from None
try:  # judge.parallel: tensor on a model that cannot be split stops here, with the reason
    judge_parallel.check_parallel(JUDGES.values())
    judge_parallel.check_vllm_layouts(job_settings.vllm_models(config, EXP), SLURM, GPU_INVENTORY, on_slurm=False)
except InputError as exc:
    raise WorkflowError(f"bad input: {exc}") from None


wildcard_constraints:
    generator="|".join(map(re.escape, EXP.generators)),
    dataset="|".join(map(re.escape, EXP.datasets)),
    judge="|".join(map(re.escape, EXP.judges)),
    shard=r"\d+",
    jshard=r"\d+",
    nj=r"\d+",
    format="|".join(EXPORT_FORMATS),


def shards_of(dataset):
    return list(range(EXP.shards(dataset, config)))


def judge_jobs(judge):
    """judge.shards, times the GPUs of one for judge.parallel: replicas."""
    return once(judge_parallel.judge_jobs, judge, on_slurm())


def judge_generations(wildcards):
    """Every merged generation a judge reads: its cells' answers and, pairwise, their opponents'."""
    return generations_of(wildcards.judge)


@functools.cache  # each judge's answer once per invocation, not once per judge job
def generations_of(judge):
    return sorted(set(judge_inputs(EXP, judge, RESULTS).values()))


def judge_cells(judge):
    """Plain data for params: adding a generator reruns the judge, which computes only its answers."""
    return [[c.generator, c.dataset, c.opponent] for c in EXP.cells(judge)]


def judge_template(wildcards):
    """Every template the judge may use (judge.template and the per-category/turn ones)."""
    return templates_of(wildcards.judge)


@functools.cache
def templates_of(judge):
    section = EXP.judges[judge]
    return template_paths(wfconfig.judge_template({**config, "judge": section}), section["templates"])


def plugin_files(wildcards):
    """The plugins' files: a judge's mode may come from one, so editing it reruns its judge and parse."""
    return all_plugin_files()


@functools.cache
def all_plugin_files():
    return wfconfig.plugin_files(config)


def judge_baseline(wildcards):
    """An outside baseline file (pairwise against a parquet file rather than a generator)."""
    return baseline_of(wildcards.judge)


@functools.cache
def baseline_of(judge):
    j = JUDGES[judge]
    outside = j.baseline and j.baseline not in EXP.generators and modes.get(j.mode).needs_baseline
    return [j.baseline] if outside else []


DIGESTS = digest_index(config["cache_dir"])


def rerun_params(spec):
    """What Snakemake compares to decide a rerun: the spec's output fields and the model's
    fingerprint, so overwritten local weights rerun the jobs that used them (large files by
    their full SHA-256, hashed once per version of the file: modelref.DigestIndex)."""
    if getattr(spec, "answers_from", None):  # answers read from the dataset: no model, no generate job
        return {"answers_from": spec.answers_from}
    return {**spec.rerun_params(), "model_fingerprint": spec.fingerprint(DIGESTS)}


GENERATOR_PARAMS = {name: rerun_params(spec) for name, spec in GENERATORS.items()}
JUDGE_PARAMS = {name: rerun_params(spec) for name, spec in JUDGES.items()}


def with_chat_date(params, spec):
    """A configured chat_date is rendered into the prompts of templates that stamp the date: changing it
    reruns the jobs (absent while unset: the date pinned under results/<run>/ holds for every rerun)."""
    if config["chat_date"] is None or spec.engine == "openai":
        return params
    return {**params, "chat_date": config["chat_date"]}


# A job that recorded a failure (genjudge.store.failures) reruns on the next run: its count of recorded
# failures is a parameter (absent while there are none), read for every job of a role in one walk.
FAILED = {role: failures.recorded_attempts(RESULTS, role) for role in ("generate", "judge")}


def generate_params(wildcards):
    params = with_chat_date(GENERATOR_PARAMS[wildcards.generator], GENERATORS[wildcards.generator])
    if EXP.datasets[wildcards.dataset]["on_too_long"] != "fail":  # absent at the default: no rerun of old runs
        params = {**params, "on_too_long": EXP.datasets[wildcards.dataset]["on_too_long"]}
    return params


ANSWERS = {name: answer_rules.as_param(ds["answer"]) for name, ds in EXP.datasets.items()}


# Every setting that may decide a generation or judge job's rerun (GENERATORS' and JUDGES' rerun_params).
# Settings outside the specs' fields: vLLM's max_model_len where set and an endpoint's public URL (ModelSpec.rerun_params) and the
# datasets' on_too_long where not `fail`, and chat_date where set.
EXTRA_KEYS = ["vllm_max_model_len", "endpoint", "on_too_long", "model_fingerprint", "failed_attempts", "chat_date"]
GENERATE_KEYS = [*GeneratorSpec.fields_changing("item", "job"), *EXTRA_KEYS]
JUDGE_KEYS = [*JudgeSpec.fields_changing("item", "job"), *EXTRA_KEYS, "cells", "answers"]


def too_long_params(judge):
    """The datasets a judge grades that skip items too long for a context (none: nothing to say)."""
    graded = dict.fromkeys(c.dataset for c in EXP.cells(judge))
    skip = {d: EXP.datasets[d]["on_too_long"] for d in graded if EXP.datasets[d]["on_too_long"] != "fail"}
    return {"on_too_long": skip} if skip else {}


def judge_params(wildcards):
    spec = JUDGES[wildcards.judge]
    params = {
        **with_chat_date(JUDGE_PARAMS[wildcards.judge], spec),
        "cells": judge_cells(wildcards.judge),
        **too_long_params(wildcards.judge),
    }
    if spec.cascade:  # the datasets' answer extraction decides what the cascade sends to the judge
        params["answers"] = ANSWERS
    if not modes.get(spec.mode).needs_baseline:  # settings a single-answer judge never reads
        params.pop("baseline", None)
        params.pop("pairs", None)
    return params


# One rule param per setting, computed once per generator x dataset and per judge (genjudge.config.rule_params).
GENERATE_SETTINGS = rerun_settings(
    generate_params,
    GENERATE_KEYS,
    [{"generator": g, "dataset": d} for g in EXP.generators for d in EXP.datasets],
    name="generate",
    failed=FAILED["generate"],
    job_id=lambda w: f"{w.generator}/{w.dataset}/{w.shard}",
)
JUDGE_SETTINGS = rerun_settings(
    judge_params,
    JUDGE_KEYS,
    [{"judge": j} for j in EXP.judges],
    name="judge",
    failed=FAILED["judge"],
    job_id=lambda w: f"{w.judge}/{w.jshard}-of-{w.nj}",
)


def config_digest(wildcards):
    """The report shows the config: any change of it rewrites the (cheap) report; the rerun's reason
    shows the digest, not the whole config."""
    import hashlib

    digest = hashlib.sha256(json.dumps(config, sort_keys=True, default=str).encode()).hexdigest()
    return f"config=sha256:{digest}"


def parse_params(wildcards):
    j = JUDGES[wildcards.judge]
    return {
        "mode": j.mode,
        "pattern": j.verdict_pattern,
        "cells": judge_cells(wildcards.judge),
        "answers": ANSWERS,
        "options": {"score_range": j.score_range, "reasoning": j.reasoning},
    }


def on_slurm():
    """Whether SLURM's executor runs the jobs. Known once the jobs are built (resources are
    evaluated then, not while this file is read); the jobs learn it from their environment,
    which sbatch exports: where it is not set (the local executor, even inside an allocation
    with SLURM_JOB_ID set) they lease their GPUs. A dry run asks the command line and its
    profiles which executor they name, so `snakemake -n --profile slurm` shows SLURM's jobs."""
    plugin = workflow.executor_plugin
    name = getattr(plugin, "name", "") if plugin else ""
    if name.startswith("slurm"):
        os.environ.update(GENJUDGE_SLURM_EXECUTOR="1")
        return True
    if name == "dryrun" and workflow.is_main_process:
        if "name" not in INTENDED_EXECUTOR:
            INTENDED_EXECUTOR["name"] = job_resources.intended_executor(sys.argv[1:]) or ""
        return INTENDED_EXECUTOR["name"].startswith("slurm")
    return False


INTENDED_EXECUTOR = {}


SUBMISSION = []


def submission_settings(wildcards):
    """An input function of every generation job (it names no file): under the SLURM executor it
    fills the plugin's array and requeue settings in from `slurm:` once, while the DAG is built,
    which is before the plugin starts and reads them."""
    plugin = workflow.executor_plugin
    if not SUBMISSION and workflow.is_main_process and getattr(plugin, "name", "") == "slurm":
        n = sum(len(shards_of(d)) for _, d in EXP.generated())
        gpus = {generate_gpus(g) for g in EXP.generators}
        sub = slurm_submission.apply(workflow.executor_settings, SLURM, n, workflow.resource_settings.nodes, gpus)
        for note in sub.notes:
            logger.info(note)
        SUBMISSION.append(sub)
    return []


def generate_gpus(generator):
    return once(job_resources.generate_gpus, generator, on_slurm())


def judge_gpus(judge):
    return once(judge_parallel.judge_gpus, judge, on_slurm())


@functools.cache
def once(func, name, slurm):
    """What a job of generator or judge `name` asks for depends on the config and the executor only:
    computed once per invocation, not once per job (docs/performance.md)."""
    if func is job_resources.generate_gpus:
        return func(GENERATORS[name].engine, EXP.gpus_per_job(name, config), GPU_INVENTORY, slurm)
    return func(JUDGES[name], SLURM, GPU_INVENTORY, slurm)


def generate_gpu_resource(wildcards):
    return generate_gpus(wildcards.generator)


def judge_gpu_resource(wildcards):
    return judge_gpus(wildcards.judge)


def model_input(spec):
    """The demo model's directory when the workflow must build it (it is missing), so it is built first.
    The committed models are no input: Snakemake has no record of how they were made and would say so
    on every run; the jobs' params hold the models' fingerprints, which rerun them when the files change."""
    local = spec.model_files_here and spec.model
    return [spec.model] if local and wfconfig.builds_demo_model(spec.model) and not os.path.exists(spec.model) else []


def demo_generator(wildcards):
    return demo_input("generator", wildcards.generator)


def demo_judge(wildcards):
    return demo_input("judge", wildcards.judge)


@functools.cache
def demo_input(kind, name):
    """A model's model_input, once per invocation."""
    return model_input((GENERATORS if kind == "generator" else JUDGES)[name])


def check_models_loadable():
    """A real run (not a dry run, which plans from config.json alone) needs each local model's
    tokenizer and weights: checked before any job starts (onstart), naming the key."""
    for kind, specs in (("generator", GENERATORS), ("judge", JUDGES)):
        for name, spec in specs.items():
            if not spec.model_files_here:
                continue
            key = entry_key(config, kind, name, "model")
            try:
                check_model(spec.model, key.rsplit(".", 1)[0], buildable=wfconfig.builds_demo_model(spec.model))
            except InputError as exc:
                raise WorkflowError(f"bad input: {exc}") from None


onstart:
    check_models_loadable()
    # After Snakemake's scheduler put in its SIGTERM handler (which waits for the running jobs).
    interrupt.forward_term_to_jobs()


def demo_models(wildcards):
    return sorted({m for spec in [*GENERATORS.values(), *JUDGES.values()] for m in model_input(spec)})


def dataset_file(wildcards):
    """The dataset file or directory; none for a Hugging Face hub id (read from its cache)."""
    path = EXP.datasets[wildcards.dataset]["path"]
    return [path] if os.path.exists(path) else []


def split_params(wildcards):
    ds = EXP.datasets[wildcards.dataset]
    # The datasets library's cache_dir says where, not what: it is no reason to split again.
    hf = {k: v for k, v in ds["hf"].items() if k != "cache_dir"}
    out = {
        "path": ds["path"],
        # The rubric, tags and checklist fields only where set: a config written before they existed splits as before.
        "fields": {k: v for k, v in ds["fields"].items() if v is not None or k not in OPTIONAL_COLUMNS},
        "format": ds["format"],
        "hf": hf,
        "n_shards": len(shards_of(wildcards.dataset)),
    }
    if os.path.isdir(ds["path"]):
        # save_to_disk again in place rewrites the same file names: the directory's mtime holds, so its
        # files' digest is what tells a new dataset (large files' digests kept in cache_dir's index)
        out["content"] = dataset_digest(ds["path"])
    return out


@functools.cache
def dataset_digest(path):
    from genjudge.models.modelref import fingerprint

    return fingerprint(path, digests=DIGESTS)


def answers_from(wildcards):
    """The dataset field a generator's answers are read from (answers_from), or None: it generates them."""
    return EXP.generators[wildcards.generator].get("answers_from")


def dataset_answer_file(wildcards):
    """The dataset file such a generator's answers are read from (a change of it merges them again)."""
    path = EXP.datasets[wildcards.dataset]["path"]
    return [path] if answers_from(wildcards) and os.path.isfile(path) else []


def generation_shards(wildcards):
    if answers_from(wildcards):
        return []
    return expand(
        f"{RESULTS}/generations/{wildcards.generator}/{wildcards.dataset}/{{shard}}.parquet",
        shard=shards_of(wildcards.dataset),
    )


def generation_metas(wildcards):
    if answers_from(wildcards):
        return []
    return expand(
        f"{RESULTS}/generations/{wildcards.generator}/{wildcards.dataset}/{{shard}}.meta.json",
        shard=shards_of(wildcards.dataset),
    )


def judge_shard_outputs(wildcards, suffix):
    n = judge_jobs(wildcards.judge)
    return [f"{RESULTS}/judge/{wildcards.judge}/shards/{i}-of-{n}.{suffix}" for i in range(n)]


def judge_shard_tables(wildcards):
    return judge_shard_outputs(wildcards, "parquet")


def judge_shard_metas(wildcards):
    return judge_shard_outputs(wildcards, "meta.json")


def all_generation_metas():
    """Every generation job's meta: the (generator, dataset) pairs the judges read."""
    return [
        f"{RESULTS}/generations/{g}/{d}/{i}.meta.json"
        for g, d in EXP.generated()
        if not EXP.generators[g].get("answers_from")  # no generation job: answers read from the dataset
        for i in shards_of(d)
    ]


def all_judgments():
    return {j: f"{RESULTS}/judgments/{j}.parquet" for j in EXP.judges}


def all_judge_metas():
    return {j: f"{RESULTS}/judge/{j}/raw.meta.json" for j in EXP.judges}


# The config's answers for a job's resources, each computed once per invocation (docs/performance.md).
step_of = functools.cache(job_resources.step)
scaled = functools.cache(functools.partial(job_resources.scaled, JOB_SETTINGS))
threads_of = functools.cache(functools.partial(job_resources.threads, JOB_SETTINGS))
gpu_model_of = functools.cache(functools.partial(job_resources.gpu_model, SLURM))
slurm_setting_of = functools.cache(SLURM.job_setting)


def gen_step(wildcards):
    """The resources section of a generation job: `endpoint` for a model behind one."""
    return step_of("generate", GENERATORS[wildcards.generator].engine)


def judge_step(wildcards):
    return step_of("judge", JUDGES[wildcards.judge].engine)


def gen_mem_mb(wildcards, attempt):
    return scaled(gen_step(wildcards), "mem_mb", attempt)


def gen_runtime(wildcards, attempt):
    return scaled(gen_step(wildcards), "runtime", attempt)


def judge_mem_mb(wildcards, attempt):
    return scaled(judge_step(wildcards), "mem_mb", attempt)


def judge_runtime(wildcards, attempt):
    return scaled(judge_step(wildcards), "runtime", attempt)


def gen_cpus(wildcards):
    return threads_of(gen_step(wildcards), generate_gpus(wildcards.generator), on_slurm())


def judge_cpus(wildcards):
    return threads_of(judge_step(wildcards), judge_gpus(wildcards.judge), on_slurm())


def slurm_resources(role):
    """The role's SLURM settings; its GPU model per job, since a model behind an endpoint asks for no GPU,
    and where the role has such models their placement per job (`slurm.endpoint.*` first for them)."""
    res = job_resources.slurm_resources(SLURM, role)
    if "gpu_model" in res:
        res["gpu_model"] = generate_gpu_model if role == "generate" else judge_gpu_model
    specs = GENERATORS if role == "generate" else JUDGES
    if any(spec.engine == "openai" for spec in specs.values()):
        for key in job_resources.PLACEMENT:
            res[job_resources.SLURM_RESOURCES[key]] = placement(role, key)
    return res


def placement(role, key):
    """A job's SLURM `key` (partition, account, qos, constraint), by its model's engine."""

    def value(wildcards):
        spec = GENERATORS[wildcards.generator] if role == "generate" else JUDGES[wildcards.judge]
        return slurm_setting_of(key, role, spec.engine) or None

    value.__name__ = f"{role}_{key}"
    return value


def generate_gpu_model(wildcards):
    return gpu_model_of("generate", generate_gpus(wildcards.generator))


def judge_gpu_model(wildcards):
    return gpu_model_of("judge", judge_gpus(wildcards.judge))


def label_files():
    """The judges' human-labels files: the report reads them (a change re-reports, never re-judges)."""
    return sorted({j["labels"]["path"] for j in EXP.judges.values() if j["labels"]["path"]})


def final_outputs():
    exports = [f"{RESULTS}/export/{fmt}/manifest.json" for fmt in config["report"]["export"]]
    return [f"{RESULTS}/report/summary.json", f"{RESULTS}/report/report.md", *exports]


def all_judge_tables():
    """Each judge's stored calls (the export reads the judges' texts and tokens there)."""
    return [f"{RESULTS}/judge/{j}/raw.parquet" for j in EXP.judges]


def all_item_tables():
    return [f"{RESULTS}/items/{d}.parquet" for d in EXP.datasets]


def all_judge_templates():
    """Every judge's templates (an export holds their texts)."""
    return sorted({p for j in EXP.judges for p in templates_of(j)})


STARTED = time.time()


def report_again():
    """While the last report lists failed cells, this command's invocation: the report is written again by
    every run until no cell fails, so that the same command again, with nothing else to redo (a judge whose
    verdicts did not parse, its pattern unchanged), ends with exit status 1 again (stop_if_failed) rather
    than "Nothing to be done"; else None."""
    try:
        with open(f"{RESULTS}/report/summary.json", encoding="utf-8") as fh:
            failed = json.load(fh).get("failed_cells")
    except (OSError, ValueError):
        return None
    return os.environ.get(INVOCATION_ENV) if failed else None


def stop_if_failed():
    """After a run that wrote the report: exit status 1 when it lists failed cells (genjudge.store.failures),
    as for any failed job; the report of the other cells is written."""
    summary = f"{RESULTS}/report/summary.json"
    if not os.path.exists(summary) or os.path.getmtime(summary) < STARTED:
        return
    with open(summary, encoding="utf-8") as fh:
        failed = json.load(fh).get("failed_cells") or []
    if failed:
        cells = sorted(
            {f"{f['generator']}/{f['dataset']}" + (f" vs {f['opponent']}" if f["opponent"] else "") for f in failed}
        )
        logger.error(
            f"{len(cells)} cell(s) failed and were not judged: {', '.join(cells)}. The report of the others is "
            f"{RESULTS}/report/report.md, with each failure's error and log under 'Failed cells'; fix the cause "
            "and run the same command again: only the failed jobs and what reads them run."
        )
        raise SystemExit(1)
