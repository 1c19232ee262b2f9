"""Judge one slice of the answers (rule judge). Leases the judge's GPUs before torch is imported."""

from genjudge.gpu_lease import acquire, resolve_inventory
from genjudge.job_log import job_log

sm = snakemake  # noqa: F821 - injected by Snakemake
cfg = sm.config
with job_log(sm.log[0], "judge") as stream:
    with acquire(sm.resources.gpu, resolve_inventory(cfg["gpu_inventory"]), cfg["lock_dir"],
                 label=f"{cfg['run']}/judge/{sm.wildcards.jshard}") as lease:
        from genjudge.config import load_plugins
        from genjudge.engine.threads import set_threads
        from genjudge.specs import judge_spec
        from genjudge.stages.judge import run_judge

        set_threads(sm.threads)
        load_plugins(cfg)
        run_judge(generations_path=sm.input.generations, out_path=sm.output.raw, meta_path=sm.output.meta,
                  spec=judge_spec(cfg), template_path=sm.input.template, store_dir=f"{cfg['cache_dir']}/judge",
                  run=cfg["run"], lease=lease, log_stream=stream, shard=int(sm.wildcards.jshard),
                  n_shards=sm.params.n_shards)
