"""Concatenate the judge shards (rule merge_judge)."""

from genjudge.stages.judge import merge_judge_shards
from genjudge.store.job_log import end, job_log

sm = snakemake  # noqa: F821 - injected by Snakemake
with job_log(sm.log[0], "merge_judge"):
    merge_judge_shards(list(sm.input.raw), list(sm.input.meta), sm.output.raw, sm.output.meta)
end()  # without the interpreter's shutdown (genjudge.store.job_log.end)
