"""Build a small demo checkpoint (rule demo_model)."""

from genjudge.demo_models import build_model
from genjudge.joblog import job_log

with job_log(snakemake.log[0], "demo_model"):  # noqa: F821 - injected by Snakemake
    build_model(snakemake.output[0], snakemake.input.corpus, seed=snakemake.params.seed)  # noqa: F821
