"""Parse one judge's stored outputs into verdicts, cell by cell (rule parse_verdicts); loads no model."""

from genjudge.config import load_plugins
from genjudge.experiment import judge_inputs, resolve
from genjudge.job_log import job_log
from genjudge.stages.parse import run_parse

sm = snakemake  # noqa: F821 - injected by Snakemake
cfg, w, p = sm.config, sm.wildcards, sm.params.parse
with job_log(sm.log[0], "parse_verdicts"):
    load_plugins(cfg)
    exp = resolve(cfg)
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
