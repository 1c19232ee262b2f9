rule judge:
    input:
        generations=judge_generations,
        template=judge_template,
        baseline=judge_baseline,
        plugins=plugin_files,
        model=demo_judge,
        submission=submission_settings,
    output:
        # The shard count is in the name: changing judge.shards makes new jobs, not stale files.
        raw=f"{RESULTS}/judge/{{judge}}/shards/{{jshard}}-of-{{nj}}.parquet",
        meta=f"{RESULTS}/judge/{{judge}}/shards/{{jshard}}-of-{{nj}}.meta.json",
    log:
        f"{LOGS}/judge/{{judge}}/{{jshard}}-of-{{nj}}.log",
    benchmark:
        f"{LOGS}/benchmarks/judge/{{judge}}/{{jshard}}-of-{{nj}}.tsv"
    threads: judge_cpus
    resources:
        **slurm_resources("judge"),
        gpu=judge_gpu_resource,
        nodes=1,
        cpus_per_gpu=config["resources"]["judge"]["cpus_per_gpu"],
        mem_mb=judge_mem_mb,
        runtime=judge_runtime,
    params:
        # The verdict pattern is not here: changing it re-parses only.
        **JUDGE_SETTINGS,
    script:
        "../scripts/judge.py"


rule merge_judge:
    input:
        raw=judge_shard_tables,
        meta=judge_shard_metas,
    output:
        raw=f"{RESULTS}/judge/{{judge}}/raw.parquet",
        meta=f"{RESULTS}/judge/{{judge}}/raw.meta.json",
    log:
        f"{LOGS}/merge_judge/{{judge}}.log",
    script:
        "../scripts/merge_judge.py"


rule parse_verdicts:
    input:
        generations=judge_generations,
        raw=f"{RESULTS}/judge/{{judge}}/raw.parquet",
        # what the judge skipped, or that it failed
        meta=f"{RESULTS}/judge/{{judge}}/raw.meta.json",
        plugins=plugin_files,
    output:
        f"{RESULTS}/judgments/{{judge}}.parquet",
    log:
        f"{LOGS}/parse_verdicts/{{judge}}.log",
    params:
        parse=parse_params,
    script:
        "../scripts/parse_verdicts.py"
