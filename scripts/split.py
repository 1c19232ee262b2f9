"""Validate the dataset and split it into shards (rule split)."""

from genjudge.job_log import job_log
from genjudge.stages.split import run_split

with job_log(snakemake.log[0], "split"):  # noqa: F821 - injected by Snakemake
    run_split(snakemake.input.dataset, snakemake.params.fields, snakemake.params.format,  # noqa: F821
              snakemake.output.table, snakemake.output.shards, snakemake.params.n_shards)  # noqa: F821
