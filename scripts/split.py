"""Validate one dataset and split it into shards (rule split)."""

from genjudge.job_log import job_log
from genjudge.stages.split import run_split

sm = snakemake  # noqa: F821 - injected by Snakemake
p = sm.params.split
with job_log(sm.log[0], "split"):
    run_split(p["path"], p["fields"], p["format"], sm.output.table, sm.output.shards, p["n_shards"], p["hf"])
