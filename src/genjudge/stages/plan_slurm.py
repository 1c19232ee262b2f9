"""What the SLURM executor plugin would submit for each model job (`genjudge plan --slurm`), built by the
plugin's own code from the resources the rules declare."""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess

from genjudge.config.job_settings import ModelJobs

# Options of the sbatch line that name the submission rather than what it asks for.
_BOOKKEEPING = re.compile(r"\s--(parsable|export=ALL)\b|\s--(job-name|output|comment)\s+\S+")


class _Resources(dict):
    """A job's resources as the SLURM plugin reads them (attribute access and .get)."""

    def __getattr__(self, key):
        try:
            return self[key]
        except KeyError:
            raise AttributeError(key) from None


@functools.cache
def default_partition() -> str | None:
    """The cluster's default partition as the SLURM plugin finds it (the one `sinfo -o %P` marks with
    `*`), or None. sinfo retries for a minute where the cluster's configuration cannot be read: none
    is asked where SLURM_CONF names a missing file, and the answer is awaited 10 s at most."""
    conf = os.environ.get("SLURM_CONF")
    if not shutil.which("sinfo") or (conf and not os.path.exists(conf)):
        return None
    try:
        out = subprocess.run(["sinfo", "-h", "-o", "%P"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    return next((p.rstrip("*") for p in out.split() if p.endswith("*")), None)


def sbatch_preview(run: ModelJobs) -> list[str]:
    """The sbatch options each model job gets under the SLURM executor, built by the plugin's own
    code from the resources the rules declare (first attempt), each role with its own `slurm.<role>`
    settings; then how the generation jobs are submitted (arrays, requeue). The light rules run locally."""
    import shlex
    from types import SimpleNamespace

    from snakemake_executor_plugin_slurm.submit_string import get_submit_command
    from snakemake_executor_plugin_slurm.utils import set_gres_string

    from genjudge.cluster import job_resources as jr
    from genjudge.cluster.slurm_submission import decide
    from genjudge.engine import judge_parallel

    settings = run.settings
    jr.check_node_gpus(settings.slurm, list(run.gpu_requests))
    jobs = []
    n_generate = 0
    gpu_counts = set()
    for g in run.generators:
        gpus = jr.generate_gpus(g.engine, g.gpus_per_job, [], on_slurm=True)
        gpu_counts.add(gpus)
        n_generate += g.jobs
        res = jr.job_resources(settings, "generate", gpus, g.engine)
        jobs.append(("generate", g.name, g.jobs, res, jr.threads(settings, jr.step("generate", g.engine), gpus)))
    for name, spec in run.judges.items():
        gpus = judge_parallel.judge_gpus(spec, settings.slurm, [], on_slurm=True)
        n_jobs = judge_parallel.judge_jobs(spec, settings.slurm, [], on_slurm=True)
        res = jr.job_resources(settings, "judge", gpus, spec.engine)
        jobs.append(("judge", name, n_jobs, res, jr.threads(settings, jr.step("judge", spec.engine), gpus)))
    submission = decide(settings.slurm, n_generate, None, gpu_counts=gpu_counts)
    settings = SimpleNamespace(requeue=submission.requeue, no_requeue=False, qos=None, reservation=None)
    lines = []
    for rule, name, count, resources, threads in jobs:
        job = SimpleNamespace(resources=_Resources(resources), threads=threads, name=rule)
        account, partition = resources.get("slurm_account"), resources.get("slurm_partition")
        partition = partition or default_partition()
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
