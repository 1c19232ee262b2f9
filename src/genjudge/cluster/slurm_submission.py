"""How model jobs are handed to SLURM: generation shards as job arrays, the array size, requeue.

The SLURM executor plugin does the submitting (`--slurm-array-jobs`, `--slurm-array-limit`,
`--slurm-requeue`); this module fills those settings in from the workflow's `slurm:` config,
once the plugin's settings exist and before the plugin reads them. What the command line gave
explicitly wins: a `--slurm-array-jobs` list is kept as it is, and a `--slurm-array-limit` other
than the plugin's default is kept too.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

# The only rule submitted as arrays: the judge stays one job (or one per judge shard).
ARRAY_RULE = "generate"
# snakemake-executor-plugin-slurm 2.8 keeps back array jobs of a rule while more of them are
# ready than Snakemake handed over in one round, and never submits those it kept back
# (snakemake/snakemake-executor-plugin-slurm#473): the run stalls when `jobs` is below the
# number of generation jobs. Such runs submit their shards one by one instead.
STALL_ISSUE = "snakemake-executor-plugin-slurm#473"


@dataclass
class Submission:
    """What the workflow asks of the plugin, and why."""

    array_jobs: str | None  # rules submitted as arrays (the plugin's --slurm-array-jobs)
    array_limit: int  # tasks per array (--slurm-array-limit)
    requeue: bool  # --requeue on every job
    notes: list[str]


def plugin_default(settings, name: str):
    for f in dataclasses.fields(settings):
        if f.name == name:
            return f.default
    return None


def decide(
    slurm,
    n_generate_jobs: int,
    max_jobs: int | None,
    given_arrays: str | None = None,
    given_limit: int | None = None,
    gpu_counts: set | None = None,
) -> Submission:
    """The submission settings for a run with `n_generate_jobs` generation jobs, at most
    `max_jobs` jobs in flight (the profile's `jobs:`; None for no limit), and generators whose
    jobs ask for `gpu_counts` GPUs; `slurm`: the config's `slurm` section (job_resources.SlurmSettings)."""
    limit = given_limit or slurm.array_limit
    notes = []
    arrays = None
    if given_arrays:
        arrays = given_arrays
        notes.append(f"job arrays: --slurm-array-jobs={given_arrays} from the command line")
    elif not slurm.arrays:
        notes.append("job arrays: off (slurm.arrays: false); one sbatch per generation shard")
    elif limit < 2:
        notes.append("job arrays: off (slurm.array_limit: 1 makes every task its own job)")
    elif n_generate_jobs < 2:
        notes.append("job arrays: not needed for a single generation job")
    elif gpu_counts and len(gpu_counts) > 1:
        notes.append(
            f"job arrays: off: the generators ask for different GPU counts per job ({sorted(gpu_counts)}), and "
            "every task of an array gets the first task's resources; one sbatch per generation shard"
        )
    elif max_jobs is not None and max_jobs < n_generate_jobs:
        notes.append(
            f"job arrays: off for this run: {n_generate_jobs} generation jobs but jobs: {max_jobs}; the SLURM "
            f"plugin would hold back array tasks it cannot submit together and stall ({STALL_ISSUE}). "
            f"Run with --jobs {n_generate_jobs} (or more) for arrays; the shards go out one sbatch each"
        )
    else:
        arrays = ARRAY_RULE
        n_arrays = -(-n_generate_jobs // limit)
        notes.append(
            f"job arrays: {n_generate_jobs} generation jobs in arrays of up to {limit} tasks "
            f"(at least {n_arrays} sbatch call(s)); judge jobs are never arrays: one sbatch each"
        )
    if slurm.requeue:
        notes.append("requeue: on (sbatch --requeue); a requeued job resumes from its checkpoints")
    return Submission(array_jobs=arrays, array_limit=limit, requeue=bool(slurm.requeue), notes=notes)


def apply(settings, slurm, n_generate_jobs: int, max_jobs: int | None, gpu_counts=None) -> Submission:
    """Fill the plugin's settings (`workflow.executor_settings`) in from `slurm:`, in place."""
    limit = settings.array_limit
    given_limit = limit if limit is not None and limit != plugin_default(settings, "array_limit") else None
    sub = decide(slurm, n_generate_jobs, max_jobs, settings.array_jobs, given_limit, gpu_counts)
    settings.array_jobs = sub.array_jobs
    if sub.array_jobs:  # the plugin refuses a limit below 2 even with arrays off
        settings.array_limit = sub.array_limit
    if sub.requeue:
        settings.requeue = True
    return sub
