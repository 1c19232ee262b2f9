# Config validation and the small named functions the rules use; the logic is in the package.
import os

from snakemake.exceptions import WorkflowError

from genjudge import config as wfconfig
from genjudge.errors import InputError
from genjudge.gpu_lease import resolve_inventory
from genjudge.judging import modes
from genjudge.modelref import fingerprint
from genjudge.specs import generator_spec, judge_spec

try:
    wfconfig.validate(config, workflow.basedir)
    # The dataset is read once, in the main process; jobs re-parse this file without it.
    wfconfig.check(config, data=workflow.is_main_process)
except InputError as exc:
    raise WorkflowError(f"bad input: {exc}") from None

RUN = config["run"]
RESULTS = f"results/{RUN}"
LOGS = f"logs/{RUN}"
SHARDS = list(range(config["shards"]))
JUDGE_SHARDS = list(range(config["judge"]["shards"]))
GENERATOR = generator_spec(config)
JUDGE = judge_spec(config)
JUDGE_MODE = modes.get(JUDGE.mode)
GPU_INVENTORY = resolve_inventory(config["gpu_inventory"])


def judge_template():
    return wfconfig.judge_template(config)


def judge_baseline(wildcards):
    return JUDGE_MODE.baseline_inputs(JUDGE)


def rerun_params(spec):
    """What Snakemake compares to decide a rerun: the spec's output fields and the model's
    fingerprint, so overwritten local weights rerun the jobs that used them."""
    return {**spec.rerun_params(), "model_fingerprint": fingerprint(spec.model, spec.revision)}


def on_slurm():
    plugin = workflow.executor_plugin
    return bool(plugin and getattr(plugin, "name", "").startswith("slurm"))


def generate_gpus():
    return config["gpus_per_job"] if (GPU_INVENTORY or on_slurm()) else 0


def judge_gpus():
    """GPUs of one judge job. `all` is every GPU of the machine here (or of one node on
    SLURM), shared out among data-parallel judge shards."""
    if JUDGE.gpus != "all":
        return JUDGE.gpus
    node = config["slurm"]["gpus_per_node"] if on_slurm() else len(GPU_INVENTORY)
    return max(1, node // len(JUDGE_SHARDS)) if node else 0


def generate_gpu_resource(wildcards):
    return generate_gpus()


def judge_gpu_resource(wildcards):
    return judge_gpus()


def model_input(spec):
    """The demo model's directory when the workflow builds it, so it is built first."""
    return [spec.model] if wfconfig.is_demo_model(spec.model) else []


def demo_generator(wildcards):
    return model_input(GENERATOR)


def demo_judge(wildcards):
    return model_input(JUDGE)


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


def final_outputs():
    return [f"{RESULTS}/report/summary.json", f"{RESULTS}/report/report.md"]
