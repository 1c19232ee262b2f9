"""Validate one dataset and split it into shards (rule split)."""

from genjudge.config.experiment import resolve
from genjudge.stages.split import run_split
from genjudge.store.job_log import end, job_log

sm = snakemake  # noqa: F821 - injected by Snakemake
p = sm.params.split
with job_log(sm.log[0], "split"):
    hf_cache = resolve(sm.config).datasets[sm.wildcards.dataset]["hf"]["cache_dir"]  # not a param: where, not what
    run_split(
        p["path"],
        p["fields"],
        p["format"],
        sm.output.table,
        sm.output.shards,
        p["n_shards"],
        {**p["hf"], "cache_dir": hf_cache},
    )
end()  # without the interpreter's shutdown (genjudge.store.job_log.end)
