"""Generate one shard (rule generate). The GPU lease comes before torch is imported."""

from genjudge.gpu_lease import acquire, resolve_inventory
from genjudge.job_log import job_log

sm = snakemake  # noqa: F821 - injected by Snakemake
cfg = sm.config
with job_log(sm.log[0], "generate") as stream:
    # The GPU count is the job's `gpu` resource; the inventory is resolved here, not passed
    # as a param, so that a different CUDA_VISIBLE_DEVICES does not rerun finished jobs.
    with acquire(sm.resources.gpu, resolve_inventory(cfg["gpu_inventory"]), cfg["lock_dir"],
                 label=f"{cfg['run']}/generate/{sm.wildcards.shard}") as lease:
        from genjudge.engine.threads import set_threads
        from genjudge.specs import generator_spec
        from genjudge.stages.generate import run_generate
        from genjudge.stages.split import shard_path

        set_threads(sm.threads)
        run_generate(shard=int(sm.wildcards.shard), shard_path=shard_path(sm.input.shards, sm.wildcards.shard),
                     out_path=sm.output.generations, meta_path=sm.output.meta, spec=generator_spec(cfg),
                     store_dir=f"{cfg['cache_dir']}/generations", run=cfg["run"], lease=lease, log_stream=stream)
