# Config validation and the small named functions the rules use.
import os
import sys

from snakemake.exceptions import WorkflowError
from snakemake.utils import validate

from genjudge.dataset import load_items
from genjudge.errors import InputError
from genjudge.sharding import shard_bounds
from genjudge.gpu_lease import resolve_inventory
from genjudge.modelref import check_model
from genjudge.judging.templates import load_template
from genjudge.judging.verdicts import compile_pattern

validate(config, workflow.source_path("../config/schemas/config.schema.yaml"), set_default=True)

RUN = config["run"]
RESULTS = f"results/{RUN}"
LOGS = f"logs/{RUN}"
SHARDS = list(range(config["shards"]))
JUDGE_SHARDS = list(range(config["judge"]["shards"]))


def is_demo_model(name):
    """models/demo-* are built by rule demo_model when missing."""
    parts = os.path.normpath(name).split(os.sep)
    return len(parts) == 2 and parts[0] == "models" and parts[1].startswith("demo-")


def judge_template():
    """The configured template, or the mode's default under config/templates/."""
    return config["judge"]["template"] or f"config/templates/{config['judge']['mode']}.txt"


def judge_baseline(wildcards):
    return [config["judge"]["baseline"]] if config["judge"]["mode"] == "pairwise" else []


def check_inputs():
    """Fail while planning, before any job runs (so no earlier output is touched)
    and before any model is loaded, with a message naming the culprit."""
    ds = config["dataset"]
    n_items = len(load_items(ds["path"], ds["fields"], ds["format"]))
    shard_bounds(n_items, config["shards"])
    for role in ("generator", "judge"):
        name = config[role]["model"]
        check_model(name, role, buildable=is_demo_model(name))
    judge = config["judge"]
    load_template(judge_template(), judge["mode"])
    if judge["verdict_pattern"]:
        try:
            compile_pattern(judge["verdict_pattern"])
        except Exception as exc:
            raise InputError(f"judge.verdict_pattern: {exc}") from None
    if judge["verdict"] == "logprob" and judge["mode"] != "reference":
        raise InputError("judge.verdict: logprob works with mode reference only")
    if judge["mode"] == "pairwise" and not judge["baseline"]:
        raise InputError("judge.baseline: pairwise mode needs a baseline run's generations.parquet")
    if judge["mode"] == "pairwise" and not os.path.exists(judge["baseline"]):
        raise InputError(f"judge.baseline: {judge['baseline']!r} not found; run the baseline first")


try:
    check_inputs()
except InputError as exc:
    raise WorkflowError(f"bad input: {exc}") from None


GPU_INVENTORY = resolve_inventory(config["gpu_inventory"])


def on_slurm():
    plugin = workflow.executor_plugin
    return bool(plugin and getattr(plugin, "name", "").startswith("slurm"))


def generate_gpus():
    return config["gpus_per_job"] if (GPU_INVENTORY or on_slurm()) else 0


def judge_gpus():
    """GPUs of one judge job. `all` is every GPU of the machine here (or of one node on
    SLURM), shared out among data-parallel judge shards."""
    if config["judge"]["gpus"] != "all":
        return config["judge"]["gpus"]
    node = config["slurm"]["gpus_per_node"] if on_slurm() else len(GPU_INVENTORY)
    return max(1, node // config["judge"]["shards"]) if node else 0


def generate_gpu_resource(wildcards):
    return generate_gpus()


def judge_gpu_resource(wildcards):
    return judge_gpus()


def model_input(role):
    """The demo model's directory when the workflow builds it, so it is built first."""
    name = config[role]["model"]
    return [name] if is_demo_model(name) else []


def demo_generator(wildcards):
    return model_input("generator")


def demo_judge(wildcards):
    return model_input("judge")


def _res(step, key, attempt):
    """Memory and runtime grow with each retry of a failed job."""
    return config["resources"][step][key] * attempt


def gen_mem_mb(wildcards, attempt):
    return _res("generate", "mem_mb", attempt)


def gen_runtime(wildcards, attempt):
    return _res("generate", "runtime", attempt)


def judge_mem_mb(wildcards, attempt):
    return _res("judge", "mem_mb", attempt)


def judge_runtime(wildcards, attempt):
    return _res("judge", "runtime", attempt)


def gen_cpus(wildcards):
    n = generate_gpus()
    return config["resources"]["generate"]["cpus_per_gpu"] * n if n else config["resources"]["generate"]["cpus"]


def judge_cpus(wildcards):
    n = judge_gpus()
    return config["resources"]["judge"]["cpus_per_gpu"] * n if n else config["resources"]["judge"]["cpus"]


def _setting(key):
    """A SLURM setting from config, else from $GENJUDGE_SLURM_<KEY>."""
    return config["slurm"][key] or os.environ.get(f"GENJUDGE_SLURM_{key.upper()}") or None


def slurm_resources():
    """Cluster-specific resources for the SLURM executor plugin, only those that are set."""
    names = {"partition": "slurm_partition", "account": "slurm_account", "qos": "qos",
             "constraint": "constraint", "gpu_model": "gpu_model"}
    return {res: _setting(key) for key, res in names.items() if _setting(key)}


def lease_params():
    return {"inventory": GPU_INVENTORY, "lock_dir": config["lock_dir"]}


def final_outputs():
    return [f"{RESULTS}/report/summary.json", f"{RESULTS}/report/report.md"]
