"""Write summary.json, report.md, per_category.csv and report.html (with its plots) for every cell of the run
(rule report)."""

from genjudge.config import load_plugins
from genjudge.config.jobs import ReportJob
from genjudge.stages.report import run_report
from genjudge.store import failures
from genjudge.store.job_log import end, job_log

sm = snakemake  # noqa: F821 - injected by Snakemake
with job_log(sm.log[0], "report"):
    load_plugins(sm.config)
    job = ReportJob(
        config=sm.config,
        judgments=dict(sm.params.judgments),
        gen_metas=tuple(sm.input.gen_meta),
        judge_metas=dict(sm.params.judge_meta),
        summary_path=sm.output.summary,
        md_path=sm.output.markdown,
        provenance_path=sm.output.provenance,
        categories_path=sm.output.categories,
        workflow_dir=sm.params.workflow_dir,
        html_path=sm.output.html,
        plots_dir=sm.output.plots,
        attempts=tuple(failures.attempts_of(f"results/{sm.config['run']}")),
    )
    run_report(job)
end()  # without the interpreter's shutdown (genjudge.store.job_log.end)
