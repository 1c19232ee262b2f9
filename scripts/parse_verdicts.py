"""Parse stored judge outputs into verdicts (rule parse_verdicts); loads no model."""

from genjudge.joblog import job_log
from genjudge.parse_job import run_parse
from genjudge.verdicts import DEFAULT_LABELS

with job_log(snakemake.log[0], "parse_verdicts"):  # noqa: F821 - injected by Snakemake
    run_parse(snakemake.input.generations, snakemake.input.raw, snakemake.output[0],  # noqa: F821
              snakemake.params.pattern, DEFAULT_LABELS)  # noqa: F821
