"""Print the GPU check and memory plan for the run's config (rule plan)."""

from pathlib import Path

from genjudge.engine import collector
from genjudge.store.job_log import end

collector.pause()  # a short job that is mostly start-up (genjudge.engine.collector)
from genjudge.stages.plan import make_plan, write_plan  # noqa: E402

sm = snakemake  # noqa: F821 - injected by Snakemake
lines, plans = make_plan(sm.config)
text = "\n".join(lines)
print(text)
Path(sm.log[0]).write_text(text + "\n")
write_plan(sm.output[0], plans)
end()  # without the interpreter's shutdown (genjudge.store.job_log.end)
