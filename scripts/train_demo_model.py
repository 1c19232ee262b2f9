"""Train one of the demo models (rule demo_model)."""

from pathlib import Path

from genjudge.demo_training import train
from genjudge.joblog import job_log

sm = snakemake  # noqa: F821 - injected by Snakemake
with job_log(sm.log[0], "demo_model"):
    train(sm.wildcards.name, sm.output[0], Path(sm.params.root))
