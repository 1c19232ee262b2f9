"""Judge every answer (rule judge). Leases all the judge's GPUs before torch is imported."""

from genjudge.gpu_lease import acquire
from genjudge.joblog import job_log

sm = snakemake  # noqa: F821 - injected by Snakemake
with job_log(sm.log[0], "judge") as stream:
    with acquire(sm.params.gpus, sm.params.lease["inventory"], sm.params.lease["lock_dir"],
                 label=f"{sm.params.run}/judge") as lease:
        from genjudge.judge_job import run_judge
        from genjudge.threads import set_threads

        set_threads(sm.threads)
        run_judge(generations_path=sm.input.generations, out_path=sm.output.raw, meta_path=sm.output.meta,
                  spec=sm.params.spec, store_dir=sm.params.store, run=sm.params.run, lease=lease,
                  log_stream=stream)
