"""Judge one slice of every cell a judge grades (rule judge), in one model load.
Leases the judge's GPUs before torch is imported; with judge.parallel tensor (or auto
choosing it) the judge runs as one torchrun group over them."""

import logging
import os

from genjudge.gpu_lease import acquire, resolve_inventory
from genjudge.job_log import job_log

sm = snakemake  # noqa: F821 - injected by Snakemake
cfg, w = sm.config, sm.wildcards
with job_log(sm.log[0], "judge") as stream:
    with acquire(
        sm.resources.gpu,
        resolve_inventory(cfg["gpu_inventory"]),
        cfg["lock_dir"],
        slurm_executor=os.environ.get("GENJUDGE_SLURM_EXECUTOR") == "1",
        label=f"{cfg['run']}/judge/{w.judge}/{w.jshard}",
    ) as lease:
        from genjudge.config import judge_template, load_plugins
        from genjudge.engine.judge_parallel import job_choice
        from genjudge.engine.threads import set_threads
        from genjudge.experiment import judge_inputs, resolve
        from genjudge.modelref import digest_index
        from genjudge.specs import JudgeSpec
        from genjudge.stages.judge import run_judge
        from genjudge.stages.tensor_judge import launch

        set_threads(sm.threads)
        load_plugins(cfg)
        exp = resolve(cfg)
        spec = JudgeSpec.from_config(exp.judges[w.judge])
        job = dict(
            cells=exp.cells(w.judge),
            generations={k: str(v) for k, v in judge_inputs(exp, w.judge, f"results/{cfg['run']}").items()},
            out_path=str(sm.output.raw),
            meta_path=str(sm.output.meta),
            spec=spec,
            template_path=str(judge_template({**cfg, "judge": exp.judges[w.judge]})),
            store_dir=f"{cfg['cache_dir']}/judge",
            run=cfg["run"],
            shard=int(w.jshard),
            n_shards=int(w.nj),
            answers=sm.params.spec.get("answers"),
            digests=digest_index(cfg["cache_dir"]),
        )
        n = int(sm.resources.gpu)
        choice, why = job_choice(spec, n)
        logging.getLogger("judge").info("judge.parallel: %s (%s)", choice, why)
        if choice == "tensor":
            launch(n=n, plugins_config=cfg, threads=sm.threads, log_stream=stream, lease=lease, **job)
        else:
            parallel = "replicas" if spec.parallel in ("replicas", "auto") and int(w.nj) > spec.shards else "device_map"
            run_judge(**job, lease=lease, log_stream=stream, parallel=parallel)
