"""Generate one shard (rule generate). The GPU lease comes before torch is imported."""

from genjudge.gpu_lease import acquire
from genjudge.job_log import job_log

sm = snakemake  # noqa: F821 - injected by Snakemake
with job_log(sm.log[0], "generate") as stream:
    with acquire(sm.params.gpus, sm.params.lease["inventory"], sm.params.lease["lock_dir"],
                 label=f"{sm.params.run}/generate/{sm.wildcards.shard}") as lease:
        from genjudge.stages.generate import run_generate
        from genjudge.stages.split import shard_path
        from genjudge.engine.threads import set_threads

        set_threads(sm.threads)
        run_generate(shard=int(sm.wildcards.shard), shard_path=shard_path(sm.input.shards, sm.wildcards.shard),
                     out_path=sm.output.generations,
                     meta_path=sm.output.meta, spec=sm.params.spec, store_dir=sm.params.store, run=sm.params.run,
                     lease=lease, log_stream=stream)
