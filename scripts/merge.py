"""Merge one generator's shards of one dataset, checking every id appears exactly once (rule merge)."""

from genjudge.stages.merge import merge_dataset_answers, run_merge
from genjudge.store.job_log import end, job_log

sm = snakemake  # noqa: F821 - injected by Snakemake
with job_log(sm.log[0], "merge"):
    if sm.params.answers_from:  # the answers are a field of the dataset: no generation shards
        from genjudge.config.experiment import resolve

        section = resolve(sm.config).datasets[sm.wildcards.dataset]
        merge_dataset_answers(sm.input.table, section, sm.params.answers_from, sm.output[0])
    else:
        run_merge(sm.input.table, list(sm.input.shards), sm.output[0], list(sm.input.metas))
end()  # without the interpreter's shutdown (genjudge.store.job_log.end)
