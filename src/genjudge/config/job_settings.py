"""What the scheduler settings of a run read of its configuration, as typed values: `resources` and
`slurm` (genjudge.cluster.job_resources.JobSettings), and the GPUs each generator's and judge's jobs
ask for, named by their config keys.

Built where the raw config is at hand (rules/common.smk, the planning stages); the cluster and engine
code below reads these and never the config itself.
"""

from __future__ import annotations

from dataclasses import dataclass

from genjudge.cluster.job_resources import ROLES as _ROLES
from genjudge.cluster.job_resources import GpuRequest, JobSettings, SlurmSettings, StepResources
from genjudge.config.experiment import entry_key
from genjudge.config.specs import JudgeSpec

_SLURM_ROLES = (*_ROLES, "endpoint")


def slurm_from_config(config: dict) -> SlurmSettings:
    section = config["slurm"]
    return SlurmSettings(
        shared={k: v for k, v in section.items() if k not in _SLURM_ROLES},
        roles={r: dict(section.get(r) or {}) for r in _SLURM_ROLES},
        arrays=bool(section["arrays"]),
        array_limit=int(section["array_limit"]),
        requeue=bool(section["requeue"]),
    )


def from_config(config: dict) -> JobSettings:
    """The validated config's `resources` and `slurm` (the schema fills their defaults)."""
    resources = {
        step: StepResources(
            mem_mb=res["mem_mb"], runtime=res["runtime"], cpus=res["cpus"], cpus_per_gpu=res.get("cpus_per_gpu")
        )
        for step, res in config["resources"].items()
    }
    return JobSettings(resources=resources, slurm=slurm_from_config(config))


def gpu_requests(config: dict, exp) -> list[GpuRequest]:
    """The GPUs one job of each generator (`gpus_per_job`) and judge (`gpus`) asks for, in config order."""
    out = []
    for name in exp.generators:
        where = f"generators.{name}.gpus_per_job" if config.get("generators") else "gpus_per_job"
        out.append(GpuRequest("generate", where, exp.gpus_per_job(name, config)))
    for name, section in exp.judges.items():
        where = f"judges.{name}.gpus" if config.get("judges") else "judge.gpus"
        out.append(GpuRequest("judge", where, section["gpus"]))
    return out


@dataclass(frozen=True)
class VllmModel:
    """A generator or judge whose model runs on vLLM, as the planning check of its jobs' GPUs reads it
    (genjudge.engine.judge_parallel.check_vllm_layouts)."""

    kind: str  # generator or judge
    model: str
    revision: str | None
    gpus_key: str  # the config key of its GPUs per job: generators.x.gpus_per_job, judge.gpus, ...
    gpus_per_job: int | None = None  # a generator's; a judge's come from its layout
    judge: JudgeSpec | None = None
    parallel_key: str = ""  # a judge's `parallel`


def vllm_models(config: dict, exp) -> list[VllmModel]:
    """The generators' and judges' models on `engine: vllm`, generators first, in config order."""
    out = []
    for name, section in exp.generators.items():
        if section["engine"] == "vllm":
            where = entry_key(config, "generator", name, "gpus_per_job")
            out.append(
                VllmModel("generator", section["model"], section["revision"], where, exp.gpus_per_job(name, config))
            )
    for name, section in exp.judges.items():
        if section["engine"] == "vllm":
            out.append(
                VllmModel(
                    "judge",
                    section["model"],
                    section["revision"],
                    entry_key(config, "judge", name, "gpus"),
                    judge=JudgeSpec.from_config(section),
                    parallel_key=entry_key(config, "judge", name, "parallel"),
                )
            )
    return out


@dataclass(frozen=True)
class GenerateJobs:
    """One generator's jobs as the scheduler sees them (`genjudge plan --slurm`)."""

    name: str
    engine: str
    gpus_per_job: int
    jobs: int  # the shards of every dataset it answers


@dataclass(frozen=True)
class ModelJobs:
    """A run's model jobs as the SLURM preview reads them (genjudge.stages.plan_slurm): the scheduler
    settings, the GPUs each job asks for, each generator's jobs and each judge's spec, in config order."""

    settings: JobSettings
    gpu_requests: tuple[GpuRequest, ...]
    generators: tuple[GenerateJobs, ...]
    judges: dict  # name -> JudgeSpec

    @classmethod
    def from_config(cls, config: dict) -> ModelJobs:
        from genjudge.config.experiment import resolve

        exp = resolve(config)
        settings = from_config(config)
        return cls(
            settings=settings,
            gpu_requests=tuple(gpu_requests(config, exp)),
            generators=tuple(
                GenerateJobs(
                    name,
                    exp.generators[name]["engine"],
                    exp.gpus_per_job(name, config),
                    sum(exp.shards(d, config) for d in exp.datasets_of(name)),
                )
                for name in exp.generators
            ),
            judges={name: JudgeSpec.from_config(section) for name, section in exp.judges.items()},
        )
