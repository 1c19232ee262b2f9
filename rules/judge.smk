rule judge:
    input:
        generations=f"{RESULTS}/generations.parquet",
        template=judge_template(),
        baseline=judge_baseline,
        model=demo_judge,
    output:
        # The shard count is in the name: changing judge.shards makes new jobs, not stale files.
        raw=f"{RESULTS}/judge/shards/{{jshard}}-of-{len(JUDGE_SHARDS)}.parquet",
        meta=f"{RESULTS}/judge/shards/{{jshard}}-of-{len(JUDGE_SHARDS)}.meta.json",
    log:
        f"{LOGS}/judge/{{jshard}}.log",
    benchmark:
        f"{LOGS}/benchmarks/judge/{{jshard}}.tsv"
    params:
        # The verdict pattern is not here: changing it re-parses only.
        spec=rerun_params(JUDGE),
        n_shards=len(JUDGE_SHARDS),
    resources:
        gpu=judge_gpu_resource,
        nodes=1,
        cpus_per_gpu=config["resources"]["judge"]["cpus_per_gpu"],
        mem_mb=judge_mem_mb,
        runtime=judge_runtime,
        **slurm_resources(),
    threads: judge_cpus
    script:
        "../scripts/judge.py"


rule merge_judge:
    input:
        raw=expand(f"{RESULTS}/judge/shards/{{jshard}}-of-{len(JUDGE_SHARDS)}.parquet", jshard=JUDGE_SHARDS),
        meta=expand(f"{RESULTS}/judge/shards/{{jshard}}-of-{len(JUDGE_SHARDS)}.meta.json", jshard=JUDGE_SHARDS),
    output:
        raw=f"{RESULTS}/judge/raw.parquet",
        meta=f"{RESULTS}/judge/raw.meta.json",
    log:
        f"{LOGS}/merge_judge.log",
    script:
        "../scripts/merge_judge.py"


rule parse_verdicts:
    input:
        generations=f"{RESULTS}/generations.parquet",
        raw=f"{RESULTS}/judge/raw.parquet",
    output:
        f"{RESULTS}/judgments.parquet",
    log:
        f"{LOGS}/parse_verdicts.log",
    params:
        mode=JUDGE.mode,
        pattern=JUDGE.verdict_pattern,
    script:
        "../scripts/parse_verdicts.py"
