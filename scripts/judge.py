"""Judge one slice of every cell a judge grades (rule judge), in one model load.
Leases the judge's GPUs before torch is imported; with judge.parallel tensor (or auto
choosing it) the judge runs as one torchrun group over them. Cells whose answers failed are
skipped (named in the meta); a failure of the job itself is recorded (genjudge.store.failures)."""

import logging
import os

from genjudge.cluster.gpu_lease import acquire, resolve_inventory
from genjudge.store import failures
from genjudge.store.job_log import job_log


def main():
    sm = snakemake  # noqa: F821 - injected by Snakemake
    cfg, w = sm.config, sm.wildcards
    job = f"{w.judge}/{w.jshard}-of-{w.nj}"
    with job_log(sm.log[0], "judge") as stream:
        history = failures.history_path(f"results/{cfg['run']}", "judge", job)
        with failures.recorded(history, sm.log[0], f"judge {job}", lambda error: write_failure(sm, error)):
            with acquire(
                sm.resources.gpu,
                resolve_inventory(cfg["gpu_inventory"]),
                cfg["lock_dir"],
                slurm_executor=os.environ.get("GENJUDGE_SLURM_EXECUTOR") == "1",
                label=f"{cfg['run']}/judge/{w.judge}/{w.jshard}",
            ) as lease:
                run(sm, lease, stream)


def run(sm, lease, stream):
    from genjudge.config import judge_template, load_plugins
    from genjudge.config.experiment import judge_inputs, resolve
    from genjudge.config.specs import JudgeSpec
    from genjudge.engine.judge_parallel import job_choice
    from genjudge.engine.threads import set_threads
    from genjudge.models.modelref import digest_index
    from genjudge.stages.judge import run_judge
    from genjudge.stages.tensor_judge import launch

    cfg, w = sm.config, sm.wildcards
    results = f"results/{cfg['run']}"
    set_threads(sm.threads)
    load_plugins(cfg)
    exp = resolve(cfg)
    skipped = failures.skipped_cells(exp.cells(w.judge), failures.failed_pairs(judge_inputs(exp, w.judge, results)))
    exp = exp.without({w.judge: skipped})
    spec = JudgeSpec.from_config(exp.judges[w.judge])
    job = dict(
        cells=exp.cells(w.judge),
        generations={k: str(v) for k, v in judge_inputs(exp, w.judge, results).items()},
        out_path=str(sm.output.raw),
        meta_path=str(sm.output.meta),
        spec=spec,
        template_path=str(judge_template({**cfg, "judge": exp.judges[w.judge]})),
        store_dir=f"{cfg['cache_dir']}/judge",
        run=cfg["run"],
        shard=int(w.jshard),
        n_shards=int(w.nj),
        answers=sm.params.spec.get("answers"),
        skipped={cell.key: errors for cell, errors in skipped.items()},
        digests=digest_index(cfg["cache_dir"]),
    )
    n = int(sm.resources.gpu)
    choice, why = job_choice(spec, n)
    logging.getLogger("judge").info("judge.parallel: %s (%s)", choice, why)
    if skipped:
        logging.getLogger("judge").warning("skipped, their answers failed: %s", ", ".join(job["skipped"]))
    if choice == "tensor" and spec.engine == "vllm":  # vLLM splits the model over the lease itself
        run_judge(**job, lease=lease, log_stream=stream, parallel="tensor")
    elif choice == "tensor":
        launch(n=n, plugins_config=cfg, threads=sm.threads, log_stream=stream, lease=lease, **job)
    else:
        parallel = "replicas" if spec.parallel in ("replicas", "auto") and int(w.nj) > spec.shards else "device_map"
        run_judge(**job, lease=lease, log_stream=stream, parallel=parallel)


def write_failure(sm, error):
    from genjudge.stages.judge import write_failed_judge

    w = sm.wildcards
    write_failed_judge(sm.output.raw, sm.output.meta, error, run=sm.config["run"], judge_shard=int(w.jshard))


# Engines that start worker processes by spawning (vLLM with several GPUs) import this file again in
# each worker: only the job process itself runs the job.
if __name__ == "__main__":
    main()
