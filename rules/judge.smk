

rule judge:
    input:
        generations=f"{RESULTS}/generations.parquet",
        template=config["judge"]["template"],
        model=demo_judge,
    output:
        raw=f"{RESULTS}/judge/raw.parquet",
        meta=f"{RESULTS}/judge/raw.meta.json",
    params:
        spec={k: v for k, v in config["judge"].items() if k != "verdict_pattern"},
        gpus=judge_gpus(),
        lease=lease_params(),
        store=f"{config['cache_dir']}/judge",
        run=RUN,
    resources:
        gpu=judge_gpu_resource,
        nodes=1,
        cpus_per_gpu=config["resources"]["judge"]["cpus_per_gpu"],
        mem_mb=judge_mem_mb,
        runtime=judge_runtime,
        **slurm_resources(),
    threads: judge_cpus
    log:
        f"{LOGS}/judge.log",
    benchmark:
        f"{LOGS}/benchmarks/judge.tsv"
    script:
        "../scripts/judge.py"


rule parse_verdicts:
    input:
        generations=f"{RESULTS}/generations.parquet",
        raw=f"{RESULTS}/judge/raw.parquet",
    output:
        f"{RESULTS}/judgments.parquet",
    params:
        pattern=config["judge"]["verdict_pattern"],
    log:
        f"{LOGS}/parse_verdicts.log",
    script:
        "../scripts/parse_verdicts.py"
