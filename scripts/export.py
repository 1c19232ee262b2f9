"""Write the run's results in one of report.export's formats (rule export); loads no model."""

from genjudge.config import load_plugins
from genjudge.config.export import export_settings
from genjudge.stages.export import run_export
from genjudge.store.job_log import end, job_log

sm = snakemake  # noqa: F821 - injected by Snakemake
with job_log(sm.log[0], "export") as stream:
    load_plugins(sm.config)
    done = run_export(export_settings(sm.config), sm.wildcards.format)
    print(
        f"export {sm.wildcards.format}: {len(done.written)} file(s) written, {len(done.unchanged)} unchanged, "
        f"{len(done.removed)} removed",
        file=stream,
    )
end()  # without the interpreter's shutdown (genjudge.store.job_log.end)
