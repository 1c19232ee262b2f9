# Generate-then-judge LLM experiments: split -> generate (one job per shard,
# pinned GPUs) -> merge -> judge (all GPUs of a node) -> parse -> report.
from snakemake.utils import min_version

min_version("9.20")


# The demo's config only when no --configfile is given: a user's config starts
# from the schema's documented defaults, never from the demo's values.
if not workflow.overwrite_configfiles:

    configfile: "config/demo.yaml"


report: "report/workflow.rst"


include: "rules/common.smk"
include: "rules/models.smk"
include: "rules/split.smk"
include: "rules/generate.smk"
include: "rules/judge.smk"
include: "rules/report.smk"
include: "rules/export.smk"
include: "rules/plan.smk"


# Snakemake inspects each input, params and resource function's signature several times per job.
remember_signatures(workflow.rules)


# Light steps run in the main snakemake process, not as cluster jobs.
localrules:
    all,
    demo_model,
    split,
    merge,
    merge_judge,
    parse_verdicts,
    report,
    export,
    plan,


rule all:
    default_target: True
    input:
        final_outputs(),


# A report listing failed cells ends the run with exit status 1, as a failed job would.
onsuccess:
    stop_if_failed()
