"""One typed plan per job, built once from the resolved config where the job starts (its script, or
`genjudge plan`), and handed down: the stages, the engines and the stores below read these, never the
raw config dict.

`JudgeJob` is the judge rule's job: the judge's spec, the cells it grades and their answers' files,
the template, its paths and its rule's settings (GPUs, threads, shard); `GenerateJob` the generate
rule's: the generator's spec, its shard's file and its paths. Build them with `judge_job` and
`generate_job`; a test or a bench may construct one directly (every field but the spec and the paths has
a default).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from genjudge.cluster.job_resources import JobSettings
from genjudge.config.experiment import Cell, Experiment, entry_where, judge_inputs, resolve
from genjudge.config.specs import GeneratorSpec, JudgeSpec


@dataclass(frozen=True)
class JudgeJob:
    spec: JudgeSpec
    cells: tuple[Cell, ...]
    generations: dict  # (generator, dataset) -> the merged generations' path
    template_path: str  # the template of every item no rule of spec.templates chooses one for
    out_path: str
    meta_path: str
    store_dir: str
    run: str = "run"
    judge: str = ""  # the judge's name: its item store writer's, so that each judge's attempts are its own
    shard: int = 0
    n_shards: int = 1
    answers: dict | None = None  # dataset -> its answer extraction (a cascade's rule)
    digests: object = None  # models.modelref.DigestIndex of the cache
    cache_dir: str | None = None
    on_too_long: dict = field(default_factory=dict)  # dataset -> fail or skip (fail where it names none)
    where: str = "judge"  # the judge's config key, for errors
    log_path: str | None = None
    chat_date: str | None = None  # the run's pinned date (store.chat_date); None for an endpoint
    skipped: dict = field(default_factory=dict)  # cell key -> errors: cells left out, their answers failed
    n_gpus: int = 0  # the job's `gpu` resource
    threads: int = 1
    plugins: tuple = ()  # the config's plugins, imported by each process that runs the job
    results: str = ""  # results/<run>

    @property
    def writer(self) -> str:
        """The item store writer of this job (a budget counts what this judge's earlier attempts stored)."""
        return f"{self.run}-{self.judge}-judge{self.shard}" if self.judge else f"{self.run}-judge{self.shard}"

    def without(self, skipped: dict) -> JudgeJob:
        """The job less the cells whose answers failed (`skipped`: Cell -> errors), which it records."""
        keep = tuple(c for c in self.cells if c not in skipped)
        return replace(self, cells=keep, skipped={**self.skipped, **{c.key: e for c, e in skipped.items()}})


def judge_job(
    config: dict,
    judge: str,
    shard: int,
    n_shards: int,
    raw_path,
    meta_path,
    n_gpus: int = 0,
    threads: int = 1,
    log_path: str | None = None,
) -> JudgeJob:
    """The judge rule's job for one slice (`shard` of `n_shards`) of every cell `judge` grades."""
    from genjudge.config.checks import judge_template
    from genjudge.models.modelref import digest_index

    exp = resolve(config)
    section = exp.judges[judge]
    spec = JudgeSpec.from_config(section)
    results = f"results/{config['run']}"
    return JudgeJob(
        spec=spec,
        cells=tuple(exp.cells(judge)),
        generations={k: str(v) for k, v in judge_inputs(exp, judge, results).items()},
        template_path=str(judge_template({**config, "judge": section})),
        out_path=str(raw_path),
        meta_path=str(meta_path),
        store_dir=f"{config['cache_dir']}/judge",
        run=config["run"],
        judge=judge,
        shard=int(shard),
        n_shards=int(n_shards),
        # A cascade reads each dataset's answer extraction (a rerun param of the job, `answers`).
        answers={name: ds["answer"] for name, ds in exp.datasets.items()} if spec.cascade else None,
        digests=digest_index(config["cache_dir"]),
        cache_dir=config["cache_dir"],
        on_too_long={d: exp.datasets[d]["on_too_long"] for d in exp.datasets},
        where=entry_where(config, "judge", judge),
        log_path=log_path,
        n_gpus=int(n_gpus),
        threads=int(threads),
        plugins=tuple(config.get("plugins") or ()),
        results=results,
    )


@dataclass(frozen=True)
class GenerateJob:
    spec: GeneratorSpec
    shard_path: str  # the shard's items (data.shard_files)
    out_path: str
    meta_path: str
    store_dir: str
    run: str = "run"
    generator: str | None = None
    dataset: str | None = None
    shard: int = 0
    digests: object = None  # models.modelref.DigestIndex of the cache
    cache_dir: str | None = None  # where batch_size: auto remembers its choices (None: it probes every time)
    on_too_long: str = "fail"  # the dataset's
    where: str = "generator"  # the generator's config key, for errors
    chat_date: str | None = None  # the run's pinned date (store.chat_date); None for an endpoint
    threads: int | None = None  # torch's threads for the job, set before the model loads

    @property
    def writer(self) -> str:
        return f"{self.run}-{self.generator}-{self.dataset}-shard{self.shard}"


def generate_job(
    config: dict, generator: str, dataset: str, shard: int, shard_path, out_path, meta_path, threads=None
) -> GenerateJob:
    """The generate rule's job for one shard of one generator on one dataset."""
    from genjudge.models.modelref import digest_index

    exp = resolve(config)
    return GenerateJob(
        spec=GeneratorSpec.from_config(exp.generators[generator]),
        shard_path=str(shard_path),
        out_path=str(out_path),
        meta_path=str(meta_path),
        store_dir=f"{config['cache_dir']}/generations",
        run=config["run"],
        generator=generator,
        dataset=dataset,
        shard=int(shard),
        digests=digest_index(config["cache_dir"]),
        cache_dir=config["cache_dir"],
        on_too_long=exp.datasets[dataset]["on_too_long"],
        where=entry_where(config, "generator", generator),
        threads=threads,
    )


@dataclass(frozen=True)
class ReportJob:
    """The report rule's job: the run's resolved config (the report's stages still read it: the allow-list
    of tests/test_architecture.py says so), the files it reads and those it writes."""

    config: dict
    judgments: dict  # judge -> its judgments' path
    gen_metas: tuple  # every generation job's meta path
    judge_metas: dict  # judge -> its merged meta's path
    summary_path: str
    md_path: str
    provenance_path: str
    categories_path: str
    workflow_dir: str
    html_path: str | None = None
    plots_dir: str | None = None
    attempts: tuple = ()  # the run's recorded failed attempts (store.failures.attempts_of)


@dataclass(frozen=True)
class PlanJob:
    """What `genjudge plan` reads of a run's config beside the items and the GPUs: the resolved
    experiment, the scheduler settings, each dataset's shards and each judge's template. Built by
    `from_config` where the plan starts (genjudge.stages.plan.make_plan)."""

    exp: Experiment
    settings: JobSettings
    shards: dict  # dataset -> the jobs of each generator on it
    templates: dict  # judge -> the template of every item no rule of its templates chooses one for

    @classmethod
    def from_config(cls, config: dict, exp: Experiment | None = None) -> PlanJob:
        from genjudge.config import job_settings
        from genjudge.config.checks import judge_template

        exp = resolve(config) if exp is None else exp
        return cls(
            exp=exp,
            settings=job_settings.from_config(config),
            shards={d: exp.shards(d, config) for d in exp.datasets},
            templates={j: judge_template({**config, "judge": s}) for j, s in exp.judges.items()},
        )
