"""What each model job asks the scheduler for: GPUs, threads, memory, time and the SLURM
settings. The rules and `genjudge plan --slurm` read it from here, so the preview is what
the jobs get. The config's `resources` and `slurm` sections come in typed (`JobSettings`, built by
genjudge.config.job_settings.from_config where the config is resolved)."""

from __future__ import annotations

import dataclasses
import json
import os
from dataclasses import dataclass, field

SLURM_RESOURCES = {
    "partition": "slurm_partition",
    "account": "slurm_account",
    "qos": "qos",
    "constraint": "constraint",
    "gpu_model": "gpu_model",
}
ROLES = ("generate", "judge")
PLACEMENT = ("partition", "account", "qos", "constraint")  # where a job goes, as opposed to its GPUs


@dataclass(frozen=True)
class StepResources:
    """One entry of `resources` (generate, judge, endpoint): what a job of it asks for at its first attempt."""

    mem_mb: int
    runtime: int  # minutes
    cpus: int  # threads of a job without GPUs
    cpus_per_gpu: int | None = None  # none for `endpoint`: its jobs have no GPU


@dataclass(frozen=True)
class SlurmSettings:
    """The `slurm` section: each setting for every job (`shared`: slurm.<key>) and per role (`roles`:
    slurm.generate, slurm.judge, slurm.endpoint), with the job arrays and requeue of the submission."""

    shared: dict = field(default_factory=dict)
    roles: dict = field(default_factory=dict)
    arrays: bool = True
    array_limit: int = 1000
    requeue: bool = False

    def __hash__(self):  # a key of judge_parallel's cached layouts
        return hash(json.dumps(dataclasses.asdict(self), sort_keys=True, default=str))

    def setting(self, key: str, role: str | None = None):
        """A SLURM setting of one role (generate or judge), the most specific first:
        `slurm.<role>.<key>`, $GENJUDGE_SLURM_<ROLE>_<KEY>, `slurm.<key>`, $GENJUDGE_SLURM_<KEY>."""
        candidates = []
        if role is not None:
            candidates += [
                (self.roles.get(role) or {}).get(key),
                os.environ.get(f"GENJUDGE_SLURM_{role.upper()}_{key.upper()}"),
            ]
        candidates += [self.shared.get(key), os.environ.get(f"GENJUDGE_SLURM_{key.upper()}")]
        value = next((v for v in candidates if v not in (None, "")), None)
        if key == "gpus_per_node" and isinstance(value, str):
            value = int(value)
        return value

    def job_setting(self, key: str, role: str, engine: str):
        """A SLURM setting of one job: for a model behind an endpoint `slurm.endpoint.<key>` first (a CPU
        partition, say, where the role's is a GPU one), then its role's as for any job."""
        if engine == "openai" and key in PLACEMENT:
            own = (self.roles.get("endpoint") or {}).get(key) or os.environ.get(
                f"GENJUDGE_SLURM_ENDPOINT_{key.upper()}"
            )
            if own:
                return own
        return self.setting(key, role)

    def node_gpus(self, role: str) -> int | None:
        """The GPUs of a node of `role`'s jobs where set: `slurm.<role>.gpus_per_node` or
        $GENJUDGE_SLURM_<ROLE>_GPUS_PER_NODE."""
        value = (self.roles.get(role) or {}).get("gpus_per_node")
        return value or int(os.environ.get(f"GENJUDGE_SLURM_{role.upper()}_GPUS_PER_NODE") or 0) or None


@dataclass(frozen=True)
class JobSettings:
    """What every model job asks the scheduler for: `resources` by step, and the `slurm` section."""

    resources: dict  # step (generate, judge, endpoint) -> StepResources
    slurm: SlurmSettings


@dataclass(frozen=True)
class GpuRequest:
    """The GPUs one job of a generator or judge asks for, and the config key that says so."""

    role: str  # generate or judge
    where: str  # e.g. generators.big.gpus_per_job, judge.gpus
    gpus: int | str  # a count; a judge's may be `all`


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


def generate_gpus(engine: str, gpus_per_job: int, inventory: list, on_slurm: bool) -> int:
    """GPUs of one generation job: the generator's gpus_per_job where there are GPUs to lease or SLURM;
    none for a model behind an endpoint."""
    if engine == "openai":
        return 0
    return gpus_per_job if (inventory or on_slurm) else 0


def step(role: str, engine: str) -> str:
    """The `resources` section of a job: its role's, or `endpoint` for a model behind one (no GPU,
    little memory)."""
    return "endpoint" if engine == "openai" else role


def scaled(settings: JobSettings, step: str, key: str, attempt: int = 1) -> int:
    """Memory and runtime grow with each retry of a failed job."""
    return getattr(settings.resources[step], key) * attempt


def threads(settings: JobSettings, step: str, gpus: int, slurm: bool = False) -> int:
    """Snakemake's `threads` of a job. On SLURM a GPU job's CPUs are what sbatch books for it with
    --cpus-per-gpu (the `cpus_per_gpu` resource); Snakemake would cap its threads at the submitting
    host's cores and print them beside that resource, contradicting it: 1 there, and the job takes its
    CPUs from the resource (`job_threads`)."""
    res = settings.resources[step]
    if gpus and slurm:
        return 1
    return res.cpus_per_gpu * gpus if gpus else res.cpus


def job_threads(threads: int, resources, slurm: bool) -> int:
    """The CPU threads a running job uses: Snakemake's `threads`, or on SLURM for a GPU job the CPUs
    booked with it (`cpus_per_gpu` x `gpu`)."""
    gpus = int(getattr(resources, "gpu", 0) or 0)
    if slurm and gpus:
        return int(resources.cpus_per_gpu) * gpus
    return int(threads)


def slurm_resources(slurm: SlurmSettings, role: str | None = None) -> dict:
    """Cluster-specific resources of one role's jobs for the SLURM executor plugin, only those set."""
    values = {res: slurm.setting(key, role) for key, res in SLURM_RESOURCES.items()}
    return {res: value for res, value in values.items() if value}


def gpu_model(slurm: SlurmSettings, role: str, gpus: int) -> str | None:
    """The GPU model of one job: none for a job without GPUs (a model behind an endpoint), where the
    plugin would still submit `--gpus=<model>:0`."""
    return slurm.setting("gpu_model", role) if gpus else None


def job_resources(settings: JobSettings, role: str, gpus: int, engine: str, attempt: int = 1) -> dict:
    """The resources of one generate or judge job, as the rules declare them: memory and time of
    `resources.endpoint` for a model behind an endpoint."""
    section = step(role, engine)
    out = {
        "gpu": gpus,
        "cpus_per_gpu": settings.resources[role].cpus_per_gpu,
        "mem_mb": scaled(settings, section, "mem_mb", attempt),
        "runtime": scaled(settings, section, "runtime", attempt),
        **slurm_resources(settings.slurm, role),
    }
    if not gpu_model(settings.slurm, role, gpus):
        out.pop("gpu_model", None)
    for key in PLACEMENT:  # an endpoint job's own placement (slurm.endpoint.*) over its role's
        value = settings.slurm.job_setting(key, role, engine)
        out.pop(SLURM_RESOURCES[key], None)
        if value:
            out[SLURM_RESOURCES[key]] = value
    if role == "judge":
        out["nodes"] = 1
    return out


def check_node_gpus(slurm: SlurmSettings, requests: list[GpuRequest]) -> None:
    """A job cannot have more GPUs than a node of its role has (`slurm.<role>.gpus_per_node` or
    $GENJUDGE_SLURM_<ROLE>_GPUS_PER_NODE, where set): said while planning, not by a job that never starts."""
    from genjudge.errors import InputError

    for r in requests:
        node = slurm.node_gpus(r.role)
        if node and r.gpus != "all" and r.gpus > node:
            raise InputError(f"{r.where} = {r.gpus} is more than slurm.{r.role}.gpus_per_node = {node}")
