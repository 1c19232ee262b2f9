"""The judge rule's job: the cells it grades (those whose answers did not fail), and how it runs on
its leased GPUs: one process (device_map, a replica), a torchrun group (`judge.parallel: tensor`
with transformers) or one vLLM engine split over the lease (tensor with `engine: vllm`)."""

from __future__ import annotations

import logging

from genjudge.config import judge_template, load_plugins
from genjudge.config.experiment import entry_where, judge_inputs, resolve
from genjudge.config.specs import JudgeSpec
from genjudge.models.modelref import digest_index
from genjudge.store import chat_date, failures

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
    log_path: str | None = None,
) -> None:
    """Judge slice `shard` of `n_shards` of every cell `judge` grades, on the `n_gpus` GPUs of `lease`
    (the job's `gpu` resource). A cell that failed alone (an item too long for the judge) is recorded
    as the job's failures are (genjudge.store.failures), so that the next run judges it again."""
    from genjudge.engine.judge_parallel import job_choice
    from genjudge.engine.threads import set_threads
    from genjudge.stages.judge import run_judge
    from genjudge.stages.tensor_judge import launch

    results = f"results/{config['run']}"
    load_plugins(config)
    exp = resolve(config)
    skipped = failures.skipped_cells(exp.cells(judge), failures.failed_pairs(judge_inputs(exp, judge, results)))
    exp = exp.without({judge: skipped})
    spec = JudgeSpec.from_config(exp.judges[judge])
    if spec.engine != "openai":  # an endpoint job imports no torch
        set_threads(threads)
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
        on_too_long={d: exp.datasets[d]["on_too_long"] for d in exp.datasets},
        log_path=log_path,
        where=entry_where(config, "judge", judge),
        judge_name=judge,
        # the date chat templates stamp: pinned once per run (an endpoint's server renders its own)
        chat_date=None if spec.engine == "openai" else chat_date.pin(results, config["chat_date"]).date,
    )
    n = int(n_gpus)
    choice, why = job_choice(spec, n)
    log.info("judge.parallel: %s (%s)", choice, why)
    if skipped:
        log.warning("skipped, their answers failed: %s", ", ".join(job["skipped"]))
    if choice == "endpoint":
        run_judge(**job, lease=lease, log_stream=log_stream, parallel="endpoint")
    elif choice == "tensor" and spec.engine == "vllm":  # vLLM splits the model over the lease itself
        run_judge(**job, lease=lease, log_stream=log_stream, parallel="tensor")
    elif choice == "tensor":
        launch(n=n, plugins_config=config, threads=threads, log_stream=log_stream, lease=lease, **job)
    else:
        parallel = "replicas" if spec.parallel in ("replicas", "auto") and n_shards > spec.shards else "device_map"
        run_judge(**job, lease=lease, log_stream=log_stream, parallel=parallel)
    record_cell_errors(results, f"{judge}/{shard}-of-{n_shards}", meta_path)


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
