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


rule all:
    input:
        final_outputs(),
    default_target: True
