"""Merge the generation shards, checking every id appears exactly once (rule merge)."""

from genjudge.job_log import job_log
from genjudge.stages.merge import run_merge

with job_log(snakemake.log[0], "merge"):  # noqa: F821 - injected by Snakemake
    run_merge(snakemake.input.table, list(snakemake.input.shards), snakemake.output[0])  # noqa: F821
