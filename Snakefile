# Generate-then-judge LLM experiments: split -> generate (one job per shard,
# pinned GPUs) -> merge -> judge (all GPUs of a node) -> parse -> report.
from snakemake.utils import min_version

min_version("9.20")


configfile: "config/config.yaml"


include: "rules/common.smk"
include: "rules/models.smk"
include: "rules/split.smk"
include: "rules/generate.smk"
include: "rules/judge.smk"
include: "rules/report.smk"
include: "rules/plan.smk"


# Light steps run in the main snakemake process, not as cluster jobs.
localrules:
    all,
    demo_model,
    split,
    merge,
    merge_judge,
    parse_verdicts,
    report,
    plan,


rule all:
    input:
        final_outputs(),
    default_target: True
