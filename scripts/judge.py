"""Judge one slice of every cell a judge grades (rule judge), in one model load.
Leases the judge's GPUs before torch is imported; with judge.parallel tensor (or auto
choosing it) the judge runs as one torchrun group over them. Cells whose answers failed are
skipped (named in the meta); a failure of the job itself is recorded (genjudge.store.failures)."""

import os

from genjudge.cluster import job_resources
from genjudge.cluster.gpu_lease import acquire, resolve_inventory
from genjudge.engine import collector
from genjudge.store import failures
from genjudge.store.job_log import end, job_log


def main():
    collector.pause()  # until the model is loaded (genjudge.engine.collector)
    sm = snakemake  # noqa: F821 - injected by Snakemake
    cfg, w = sm.config, sm.wildcards
    job = f"{w.judge}/{w.jshard}-of-{w.nj}"
    with job_log(sm.log[0], "judge") as stream:
        history = failures.history_path(f"results/{cfg['run']}", "judge", job)
        with failures.recorded(history, sm.log[0], f"judge {job}", lambda error: write_failure(sm, error)) as attempt:
            with acquire(
                sm.resources.gpu,
                resolve_inventory(cfg["gpu_inventory"]),
                cfg["lock_dir"],
                slurm_executor=os.environ.get("GENJUDGE_SLURM_EXECUTOR") == "1",
                label=f"{cfg['run']}/judge/{w.judge}/{w.jshard}",
            ) as lease:
                attempt["gpus"] = list(lease.devices)
                run(sm, lease, stream)


def run(sm, lease, stream):
    from dataclasses import replace

    from genjudge.config.jobs import judge_job
    from genjudge.stages.judge_job import run_judge_job
    from genjudge.store import chat_date

    w, cfg = sm.wildcards, sm.config
    threads = job_resources.job_threads(sm.threads, sm.resources, os.environ.get("GENJUDGE_SLURM_EXECUTOR") == "1")
    job = judge_job(
        cfg,
        w.judge,
        int(w.jshard),
        int(w.nj),
        sm.output.raw,
        sm.output.meta,
        n_gpus=int(sm.resources.gpu),
        threads=threads,
        log_path=sm.log[0],
    )
    run_judge_job(
        replace(job, chat_date=chat_date.stamped(job.results, cfg["chat_date"], job.spec.engine)), lease, stream
    )


def write_failure(sm, error):
    from genjudge.stages.judge import write_failed_judge

    w = sm.wildcards
    write_failed_judge(
        sm.output.raw, sm.output.meta, error, run=sm.config["run"], judge_shard=int(w.jshard), **skipped_cells(sm)
    )


def skipped_cells(sm) -> dict:
    """The cells whose answers failed, for the failed job's meta as for a finished one's: the report
    blames those cells on their generation, not on this job."""
    try:
        from genjudge.config.experiment import judge_inputs, resolve

        exp = resolve(sm.config)
        failed = failures.failed_pairs(judge_inputs(exp, sm.wildcards.judge, f"results/{sm.config['run']}"))
        return {
            "skipped_cells": {
                c.key: e for c, e in failures.skipped_cells(exp.cells(sm.wildcards.judge), failed).items()
            }
        }
    except Exception:  # noqa: BLE001 - the job's own error is what is recorded; this is context
        return {}


# Engines that start worker processes by spawning (vLLM with several GPUs) import this file again in
# each worker: only the job process itself runs the job.
if __name__ == "__main__":
    main()
    end()  # without the interpreter's shutdown (genjudge.store.job_log.end)
