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


def intended_executor(argv: list[str]) -> str | None:
    """The executor a snakemake command line names, its --profile(s) and the workflow profile
    included, resolved by Snakemake's own argument parser: `snakemake -n --profile slurm` runs the
    dry-run executor, yet its jobs should show what SLURM's would get. None when `argv` is not a
    snakemake command line."""
    import contextlib
    import io

    from snakemake.cli import parse_args

    try:
        with contextlib.redirect_stderr(io.StringIO()):  # "Using profile ..." is printed once already
            _, args = parse_args(list(argv))
    except (Exception, SystemExit):  # noqa: BLE001 - not snakemake's command line (the Python API, a test)
        return None
    return getattr(args, "executor", None)


def generate_gpus(exp, config: dict, generator: str, inventory: list, on_slurm: bool) -> int:
    """GPUs of one generation job: the generator's gpus_per_job where there are GPUs to lease or SLURM;
    none for a model behind an endpoint."""
    if exp.generators[generator]["engine"] == "openai":
        return 0
    return exp.gpus_per_job(generator, config) if (inventory or on_slurm) else 0


def step(role: str, engine: str) -> str:
    """The `resources` section of a job: its role's, or `endpoint` for a model behind one (no GPU,
    little memory)."""
    return "endpoint" if engine == "openai" else role


def scaled(config: dict, step: str, key: str, attempt: int = 1) -> int:
    """Memory and runtime grow with each retry of a failed job."""
    return config["resources"][step][key] * attempt


def threads(config: dict, step: str, gpus: int, slurm: bool = False) -> int:
    """Snakemake's `threads` of a job. On SLURM a GPU job's CPUs are what sbatch books for it with
    --cpus-per-gpu (the `cpus_per_gpu` resource); Snakemake would cap its threads at the submitting
    host's cores and print them beside that resource, contradicting it: 1 there, and the job takes its
    CPUs from the resource (`job_threads`)."""
    res = config["resources"][step]
    if gpus and slurm:
        return 1
    return res["cpus_per_gpu"] * gpus if gpus else res["cpus"]


def job_threads(threads: int, resources, slurm: bool) -> int:
    """The CPU threads a running job uses: Snakemake's `threads`, or on SLURM for a GPU job the CPUs
    booked with it (`cpus_per_gpu` x `gpu`)."""
    gpus = int(getattr(resources, "gpu", 0) or 0)
    if slurm and gpus:
        return int(resources.cpus_per_gpu) * gpus
    return int(threads)


ROLES = ("generate", "judge")


def slurm_setting(config: dict, key: str, role: str | None = None):
    """A SLURM setting of one role (generate or judge), the most specific first:
    `slurm.<role>.<key>`, $GENJUDGE_SLURM_<ROLE>_<KEY>, `slurm.<key>`, $GENJUDGE_SLURM_<KEY>."""
    section = config["slurm"]
    candidates = []
    if role is not None:
        candidates += [
            (section.get(role) or {}).get(key),
            os.environ.get(f"GENJUDGE_SLURM_{role.upper()}_{key.upper()}"),
        ]
    candidates += [section.get(key), os.environ.get(f"GENJUDGE_SLURM_{key.upper()}")]
    value = next((v for v in candidates if v not in (None, "")), None)
    if key == "gpus_per_node" and isinstance(value, str):
        value = int(value)
    return value


PLACEMENT = ("partition", "account", "qos", "constraint")  # where a job goes, as opposed to its GPUs


def job_slurm_setting(config: dict, key: str, role: str, engine: str):
    """A SLURM setting of one job: for a model behind an endpoint `slurm.endpoint.<key>` first (a CPU
    partition, say, where the role's is a GPU one), then its role's as for any job."""
    if engine == "openai" and key in PLACEMENT:
        own = (config["slurm"].get("endpoint") or {}).get(key) or os.environ.get(
            f"GENJUDGE_SLURM_ENDPOINT_{key.upper()}"
        )
        if own:
            return own
    return slurm_setting(config, key, role)


def slurm_resources(config: dict, role: str | None = None) -> dict:
    """Cluster-specific resources of one role's jobs for the SLURM executor plugin, only those set."""
    values = {res: slurm_setting(config, key, role) for key, res in SLURM_RESOURCES.items()}
    return {res: value for res, value in values.items() if value}


def gpu_model(config: dict, role: str, gpus: int) -> str | None:
    """The GPU model of one job: none for a job without GPUs (a model behind an endpoint), where the
    plugin would still submit `--gpus=<model>:0`."""
    return slurm_setting(config, "gpu_model", role) if gpus else None


def job_resources(config: dict, role: str, gpus: int, engine: str, attempt: int = 1) -> dict:
    """The resources of one generate or judge job, as the rules declare them: memory and time of
    `resources.endpoint` for a model behind an endpoint."""
    section = step(role, engine)
    out = {
        "gpu": gpus,
        "cpus_per_gpu": config["resources"][role]["cpus_per_gpu"],
        "mem_mb": scaled(config, section, "mem_mb", attempt),
        "runtime": scaled(config, section, "runtime", attempt),
        **slurm_resources(config, role),
    }
    if not gpu_model(config, role, gpus):
        out.pop("gpu_model", None)
    for key in PLACEMENT:  # an endpoint job's own placement (slurm.endpoint.*) over its role's
        value = job_slurm_setting(config, key, role, engine)
        out.pop(SLURM_RESOURCES[key], None)
        if value:
            out[SLURM_RESOURCES[key]] = value
    if role == "judge":
        out["nodes"] = 1
    return out


def check_node_gpus(config: dict, exp) -> None:
    """A job cannot have more GPUs than a node of its role has (`slurm.<role>.gpus_per_node` or
    $GENJUDGE_SLURM_<ROLE>_GPUS_PER_NODE, where set): said while planning, not by a job that never starts."""
    from genjudge.errors import InputError

    def node(role):
        value = (config["slurm"].get(role) or {}).get("gpus_per_node")
        return value or int(os.environ.get(f"GENJUDGE_SLURM_{role.upper()}_GPUS_PER_NODE") or 0) or None

    gen_node, judge_node = node("generate"), node("judge")
    for name in exp.generators:
        gpus = exp.gpus_per_job(name, config)
        if gen_node and gpus > gen_node:
            where = f"generators.{name}.gpus_per_job" if config.get("generators") else "gpus_per_job"
            raise InputError(f"{where} = {gpus} is more than slurm.generate.gpus_per_node = {gen_node}")
    for name, section in exp.judges.items():
        gpus = section["gpus"]
        if judge_node and gpus != "all" and gpus > judge_node:
            where = f"judges.{name}.gpus" if config.get("judges") else "judge.gpus"
            raise InputError(f"{where} = {gpus} is more than slurm.judge.gpus_per_node = {judge_node}")
