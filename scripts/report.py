"""Write summary.json, report.md and per_category.csv (rule report)."""

from genjudge.config import load_plugins
from genjudge.job_log import job_log
from genjudge.stages.report import run_report

sm = snakemake  # noqa: F821 - injected by Snakemake
with job_log(sm.log[0], "report"):
    load_plugins(sm.config)
    run_report(sm.input.judgments, list(sm.input.gen_meta), sm.input.judge_meta, sm.params.config,
               sm.output.summary, sm.output.markdown, sm.output.provenance, sm.params.workflow_dir,
               sm.output.categories)
