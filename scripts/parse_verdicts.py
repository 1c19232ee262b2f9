"""Parse stored judge outputs into verdicts (rule parse_verdicts); loads no model."""

from genjudge.config import load_plugins
from genjudge.job_log import job_log
from genjudge.stages.parse import run_parse

sm = snakemake  # noqa: F821 - injected by Snakemake
with job_log(sm.log[0], "parse_verdicts"):
    load_plugins(sm.config)
    run_parse(sm.input.generations, sm.input.raw, sm.output[0], sm.params.mode, sm.params.pattern)
