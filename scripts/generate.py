"""Generate one shard of one generator on one dataset (rule generate).
The GPU lease comes before torch is imported. A failure is recorded (genjudge.store.failures): the
job's outputs say so and the other cells of the study go on."""

import os

from genjudge.cluster import job_resources
from genjudge.cluster.gpu_lease import acquire, resolve_inventory
from genjudge.engine import collector
from genjudge.store import chat_date, failures
from genjudge.store.job_log import end, job_log


def main():
    collector.pause()  # until the model is loaded (genjudge.engine.collector)
    sm = snakemake  # noqa: F821 - injected by Snakemake
    cfg, w = sm.config, sm.wildcards
    job = f"{w.generator}/{w.dataset}/{w.shard}"
    with job_log(sm.log[0], "generate") as stream:
        history = failures.history_path(f"results/{cfg['run']}", "generate", job)
        with failures.recorded(
            history, sm.log[0], f"generate {job}", lambda error: write_failure(sm, error)
        ) as attempt:
            # The GPU count is the job's `gpu` resource; the inventory is resolved here, not passed
            # as a param, so that a different CUDA_VISIBLE_DEVICES does not rerun finished jobs.
            with acquire(
                sm.resources.gpu,
                resolve_inventory(cfg["gpu_inventory"]),
                cfg["lock_dir"],
                slurm_executor=os.environ.get("GENJUDGE_SLURM_EXECUTOR") == "1",
                label=f"{cfg['run']}/generate/{job}",
            ) as lease:
                attempt["gpus"] = list(lease.devices)
                from dataclasses import replace

                from genjudge.config.jobs import generate_job
                from genjudge.stages.generate import run_generate
                from genjudge.stages.split import shard_path

                threads = job_resources.job_threads(
                    sm.threads, sm.resources, os.environ.get("GENJUDGE_SLURM_EXECUTOR") == "1"
                )
                job = generate_job(
                    cfg,
                    w.generator,
                    w.dataset,
                    int(w.shard),
                    shard_path(sm.input.shards, w.shard),
                    sm.output.generations,
                    sm.output.meta,
                    threads=threads,
                )
                stamp = chat_date.stamped(f"results/{cfg['run']}", cfg["chat_date"], job.spec.engine)
                run_generate(replace(job, chat_date=stamp), lease, stream)


def write_failure(sm, error):
    from genjudge.stages.generate import write_failed_shard

    w = sm.wildcards
    write_failed_shard(
        sm.output.generations,
        sm.output.meta,
        error,
        run=sm.config["run"],
        generator=w.generator,
        dataset=w.dataset,
        shard=int(w.shard),
    )


# Engines that start worker processes by spawning (vLLM with several GPUs) import this file again in
# each worker: only the job process itself runs the job.
if __name__ == "__main__":
    main()
    end()  # without the interpreter's shutdown (genjudge.store.job_log.end)
