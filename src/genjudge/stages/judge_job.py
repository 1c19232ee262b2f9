"""The judge rule's job: the cells it grades (those whose answers did not fail), and how it runs on
its leased GPUs: one process (device_map, a replica), a torchrun group (`judge.parallel: tensor`
with transformers) or one vLLM engine split over the lease (tensor with `engine: vllm`)."""

from __future__ import annotations

import logging

from genjudge.config import import_plugins
from genjudge.config.jobs import JudgeJob
from genjudge.store import failures

log = logging.getLogger("judge")


def run_judge_job(job: JudgeJob, lease, log_stream) -> None:
    """Judge the job's slice of every cell its judge grades, on the GPUs of `lease` (the job's `gpu`
    resource, `job.n_gpus`). Cells whose answers failed are left out and named in the meta; a cell that
    failed alone (an item too long for the judge) is recorded as the job's failures are
    (genjudge.store.failures), so that the next run judges it again."""
    from genjudge.engine.judge_parallel import job_choice
    from genjudge.engine.threads import set_threads
    from genjudge.stages.judge import run_judge
    from genjudge.stages.tensor_judge import launch

    import_plugins(job.plugins)
    skipped = failures.skipped_cells(list(job.cells), failures.failed_pairs(job.generations))
    job = job.without(skipped)
    spec = job.spec
    if spec.engine != "openai":  # an endpoint job imports no torch
        set_threads(job.threads)
    n = int(job.n_gpus)
    choice, why = job_choice(spec, n)
    log.info("judge.parallel: %s (%s)", choice, why)
    if skipped:
        log.warning("skipped, their answers failed: %s", ", ".join(c.key for c in skipped))
    if choice == "endpoint":
        run_judge(job, lease, log_stream, parallel="endpoint")
    elif choice == "tensor" and spec.engine == "vllm":  # vLLM splits the model over the lease itself
        run_judge(job, lease, log_stream, parallel="tensor")
    elif choice == "tensor":
        launch(job, lease, log_stream, n)
    else:
        parallel = "replicas" if spec.parallel in ("replicas", "auto") and job.n_shards > spec.shards else "device_map"
        run_judge(job, lease, log_stream, parallel=parallel)
    record_cell_errors(job.results, f"{job.judge}/{job.shard}-of-{job.n_shards}", job.meta_path)


def record_cell_errors(results: str, job: str, meta_path) -> None:
    """Append the errors of the cells that failed alone to the job's failure history, and say so."""
    import json
    import sys
    from pathlib import Path

    from genjudge.store.records import JudgeMeta

    errors = JudgeMeta.read(meta_path).cell_errors
    if not errors:
        return
    history = failures.history_path(results, "judge", job)
    Path(history).parent.mkdir(parents=True, exist_ok=True)
    with open(history, "a", encoding="utf-8") as fh:
        for cell, errs in errors.items():
            for e in errs:
                fh.write(json.dumps({"cell": cell, **e}) + "\n")
                log.error("cell %s failed, the others are judged: %s", cell, e["message"])
                first = e["message"].splitlines()[0]
                print(
                    f"error: judge {job}, cell {cell} failed (recorded; the other cells go on): {first}",
                    file=sys.__stderr__,
                )
