

rule judge:
    input:
        generations=f"{RESULTS}/generations.parquet",
        template=judge_template(),
        baseline=judge_baseline,
        model=demo_judge,
    output:
        raw=f"{RESULTS}/judge/shards/{{jshard}}.parquet",
        meta=f"{RESULTS}/judge/shards/{{jshard}}.meta.json",
    params:
        # The verdict pattern is not a judge parameter: changing it re-parses only.
        spec={k: v for k, v in config["judge"].items() if k != "verdict_pattern"},
        gpus=judge_gpus(),
        lease=lease_params(),
        store=f"{config['cache_dir']}/judge",
        run=RUN,
        n_shards=len(JUDGE_SHARDS),
    resources:
        gpu=judge_gpu_resource,
        nodes=1,
        cpus_per_gpu=config["resources"]["judge"]["cpus_per_gpu"],
        mem_mb=judge_mem_mb,
        runtime=judge_runtime,
        **slurm_resources(),
    threads: judge_cpus
    log:
        f"{LOGS}/judge/{{jshard}}.log",
    benchmark:
        f"{LOGS}/benchmarks/judge/{{jshard}}.tsv"
    script:
        "../scripts/judge.py"


rule merge_judge:
    input:
        raw=expand(f"{RESULTS}/judge/shards/{{jshard}}.parquet", jshard=JUDGE_SHARDS),
        meta=expand(f"{RESULTS}/judge/shards/{{jshard}}.meta.json", jshard=JUDGE_SHARDS),
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
    params:
        mode=config["judge"]["mode"],
        pattern=config["judge"]["verdict_pattern"],
    log:
        f"{LOGS}/parse_verdicts.log",
    script:
        "../scripts/parse_verdicts.py"
