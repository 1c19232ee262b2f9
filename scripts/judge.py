"""Judge one slice of the answers (rule judge). Leases the judge's GPUs before torch is imported."""

from genjudge.gpu_lease import acquire
from genjudge.job_log import job_log

sm = snakemake  # noqa: F821 - injected by Snakemake
with job_log(sm.log[0], "judge") as stream:
    with acquire(sm.params.gpus, sm.params.lease["inventory"], sm.params.lease["lock_dir"],
                 label=f"{sm.params.run}/judge/{sm.wildcards.jshard}") as lease:
        from genjudge.stages.judge import run_judge
        from genjudge.engine.threads import set_threads

        set_threads(sm.threads)
        run_judge(generations_path=sm.input.generations, out_path=sm.output.raw, meta_path=sm.output.meta,
                  spec=sm.params.spec, template_path=sm.input.template, store_dir=sm.params.store,
                  run=sm.params.run, lease=lease, log_stream=stream, shard=int(sm.wildcards.jshard),
                  n_shards=sm.params.n_shards)
