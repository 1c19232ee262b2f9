"""What each model job asks the scheduler for: GPUs, threads, memory, time and the SLURM
settings. The rules and `genjudge plan --slurm` read it from here, so the preview is what
the jobs get."""

from __future__ import annotations

import os

SLURM_RESOURCES = {
    "partition": "slurm_partition",
    "account": "slurm_account",
    "qos": "qos",
    "constraint": "constraint",
    "gpu_model": "gpu_model",
}


def generate_gpus(exp, config: dict, generator: str, inventory: list, on_slurm: bool) -> int:
    """GPUs of one generation job: the generator's gpus_per_job where there are GPUs to lease or SLURM."""
    return exp.gpus_per_job(generator, config) if (inventory or on_slurm) else 0


def judge_layout(spec, config: dict, inventory: list, on_slurm: bool):
    """The judge's jobs and GPUs under `judge.parallel` (engine/judge_parallel.py)."""
    from genjudge.engine.judge_parallel import cached_layout

    return cached_layout(spec, config, inventory, on_slurm)


def judge_gpus(spec, config: dict, inventory: list, on_slurm: bool) -> int:
    """GPUs of one judge job. `all` is every GPU of the machine here (or of one node on SLURM),
    shared out among data-parallel judge shards; one each for `judge.parallel: replicas`."""
    return judge_layout(spec, config, inventory, on_slurm).gpus_per_job


def check_parallel(specs) -> None:
    """Stop while planning when `judge.parallel: tensor` names a model that cannot be split."""
    from genjudge.engine.judge_parallel import check_tensor_possible

    for spec in specs:
        check_tensor_possible(spec)


def judge_jobs(spec, config: dict, inventory: list, on_slurm: bool) -> int:
    """Judge jobs: `judge.shards`, times the GPUs of one for replicas."""
    return judge_layout(spec, config, inventory, on_slurm).jobs


def scaled(config: dict, step: str, key: str, attempt: int = 1) -> int:
    """Memory and runtime grow with each retry of a failed job."""
    return config["resources"][step][key] * attempt


def threads(config: dict, step: str, gpus: int) -> int:
    res = config["resources"][step]
    return res["cpus_per_gpu"] * gpus if gpus else res["cpus"]


def slurm_setting(config: dict, key: str):
    """A SLURM setting from config, else from $GENJUDGE_SLURM_<KEY>."""
    return config["slurm"][key] or os.environ.get(f"GENJUDGE_SLURM_{key.upper()}") or None


def slurm_resources(config: dict) -> dict:
    """Cluster-specific resources for the SLURM executor plugin, only those that are set."""
    return {res: slurm_setting(config, key) for key, res in SLURM_RESOURCES.items() if slurm_setting(config, key)}


def job_resources(config: dict, step: str, gpus: int, attempt: int = 1) -> dict:
    """The resources of one generate or judge job, as the rules declare them."""
    out = {
        "gpu": gpus,
        "cpus_per_gpu": config["resources"][step]["cpus_per_gpu"],
        "mem_mb": scaled(config, step, "mem_mb", attempt),
        "runtime": scaled(config, step, "runtime", attempt),
        **slurm_resources(config),
    }
    if step == "judge":
        out["nodes"] = 1
    return out
