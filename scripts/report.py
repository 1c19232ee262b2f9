"""Write summary.json, report.md, per_category.csv and report.html (with its plots) for every cell of the run
(rule report)."""

from genjudge.config import load_plugins
from genjudge.stages.report import run_report
from genjudge.store import failures
from genjudge.store.job_log import end, job_log

sm = snakemake  # noqa: F821 - injected by Snakemake
with job_log(sm.log[0], "report"):
    load_plugins(sm.config)
    run_report(
        sm.config,
        sm.params.judgments,
        list(sm.input.gen_meta),
        sm.params.judge_meta,
        sm.output.summary,
        sm.output.markdown,
        sm.output.provenance,
        sm.params.workflow_dir,
        sm.output.categories,
        sm.output.html,
        sm.output.plots,
        attempts=failures.attempts_of(f"results/{sm.config['run']}"),
    )
end()  # without the interpreter's shutdown (genjudge.store.job_log.end)
