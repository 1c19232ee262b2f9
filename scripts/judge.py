"""Judge one slice of every cell a judge grades (rule judge), in one model load.
Leases the judge's GPUs before torch is imported."""

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
        from genjudge.engine.threads import set_threads
        from genjudge.experiment import judge_inputs, resolve
        from genjudge.specs import JudgeSpec
        from genjudge.stages.judge import run_judge

        set_threads(sm.threads)
        load_plugins(cfg)
        exp = resolve(cfg)
        run_judge(
            cells=exp.cells(w.judge),
            generations=judge_inputs(exp, w.judge, f"results/{cfg['run']}"),
            out_path=sm.output.raw,
            meta_path=sm.output.meta,
            spec=JudgeSpec.from_config(exp.judges[w.judge]),
            template_path=judge_template({**cfg, "judge": exp.judges[w.judge]}),
            store_dir=f"{cfg['cache_dir']}/judge",
            run=cfg["run"],
            lease=lease,
            log_stream=stream,
            shard=int(w.jshard),
            n_shards=int(w.nj),
            answers=sm.params.spec.get("answers"),
        )
