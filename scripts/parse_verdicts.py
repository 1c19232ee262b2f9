"""Parse one judge's stored outputs into verdicts, cell by cell (rule parse_verdicts); loads no model.
Cells the judge skipped (their answers failed), cells that failed alone and every cell of a judge
whose job failed have none."""

from genjudge.config import load_plugins
from genjudge.config.experiment import judge_inputs, resolve
from genjudge.stages.parse import run_parse
from genjudge.store.job_log import end, job_log
from genjudge.store.records import JudgeMeta

sm = snakemake  # noqa: F821 - injected by Snakemake
cfg, w, p = sm.config, sm.wildcards, sm.params.parse
with job_log(sm.log[0], "parse_verdicts"):
    load_plugins(cfg)
    exp = resolve(cfg)
    meta = JudgeMeta.read(sm.input.meta)
    gone = {**meta.skipped_cells, **meta.cell_errors}
    exp = exp.without({w.judge: [c for c in exp.cells(w.judge) if meta.error or c.key in gone]})
    run_parse(
        exp.cells(w.judge),
        judge_inputs(exp, w.judge, f"results/{cfg['run']}"),
        sm.input.raw,
        sm.output[0],
        p["mode"],
        p["pattern"],
        w.judge,
        p["answers"],
        p["options"],
    )
end()  # without the interpreter's shutdown (genjudge.store.job_log.end)
