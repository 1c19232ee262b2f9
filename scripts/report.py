"""Write summary.json and report.md (rule report)."""

from genjudge.job_log import job_log
from genjudge.stages.report import run_report

sm = snakemake  # noqa: F821 - injected by Snakemake
with job_log(sm.log[0], "report"):
    s = run_report(sm.input.judgments, list(sm.input.gen_meta), sm.input.judge_meta, sm.params.config,
                   sm.output.summary, sm.output.markdown, sm.output.provenance, sm.params.workflow_dir)
