"""The judge rule's job: the cells it grades (those whose answers did not fail), and how it runs on
its leased GPUs: one process (device_map, a replica), a torchrun group (`judge.parallel: tensor`
with transformers) or one vLLM engine split over the lease (tensor with `engine: vllm`)."""

from __future__ import annotations

import logging

from genjudge.config import judge_template, load_plugins
from genjudge.config.experiment import judge_inputs, resolve
from genjudge.config.specs import JudgeSpec
from genjudge.models.modelref import digest_index
from genjudge.store import failures

log = logging.getLogger("judge")


def run_judge_job(
    *,
    config: dict,
    judge: str,
    shard: int,
    n_shards: int,
    answers,
    raw_path,
    meta_path,
    n_gpus: int,
    threads: int,
    lease,
    log_stream,
) -> None:
    """Judge slice `shard` of `n_shards` of every cell `judge` grades, on the `n_gpus` GPUs of `lease`
    (the job's `gpu` resource)."""
    from genjudge.engine.judge_parallel import job_choice
    from genjudge.engine.threads import set_threads
    from genjudge.stages.judge import run_judge
    from genjudge.stages.tensor_judge import launch

    results = f"results/{config['run']}"
    set_threads(threads)
    load_plugins(config)
    exp = resolve(config)
    skipped = failures.skipped_cells(exp.cells(judge), failures.failed_pairs(judge_inputs(exp, judge, results)))
    exp = exp.without({judge: skipped})
    spec = JudgeSpec.from_config(exp.judges[judge])
    job = dict(
        cells=exp.cells(judge),
        generations={k: str(v) for k, v in judge_inputs(exp, judge, results).items()},
        out_path=str(raw_path),
        meta_path=str(meta_path),
        spec=spec,
        template_path=str(judge_template({**config, "judge": exp.judges[judge]})),
        store_dir=f"{config['cache_dir']}/judge",
        run=config["run"],
        shard=shard,
        n_shards=n_shards,
        answers=answers,
        skipped={cell.key: errors for cell, errors in skipped.items()},
        digests=digest_index(config["cache_dir"]),
        cache_dir=config["cache_dir"],
    )
    n = int(n_gpus)
    choice, why = job_choice(spec, n)
    log.info("judge.parallel: %s (%s)", choice, why)
    if skipped:
        log.warning("skipped, their answers failed: %s", ", ".join(job["skipped"]))
    if choice == "tensor" and spec.engine == "vllm":  # vLLM splits the model over the lease itself
        run_judge(**job, lease=lease, log_stream=log_stream, parallel="tensor")
    elif choice == "tensor":
        launch(n=n, plugins_config=config, threads=threads, log_stream=log_stream, lease=lease, **job)
    else:
        parallel = "replicas" if spec.parallel in ("replicas", "auto") and n_shards > spec.shards else "device_map"
        run_judge(**job, lease=lease, log_stream=log_stream, parallel=parallel)
