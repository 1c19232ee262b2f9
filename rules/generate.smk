

rule generate:
    input:
        shards=f"{RESULTS}/shards",
        model=demo_generator,
    output:
        generations=f"{RESULTS}/generations/{{shard}}.parquet",
        meta=f"{RESULTS}/generations/{{shard}}.meta.json",
    params:
        spec=config["generator"],
        gpus=config["gpus_per_job"],
        lease=lease_params(),
        store=f"{config['cache_dir']}/generations",
        run=RUN,
    resources:
        gpu=generate_gpu_resource,
        cpus_per_gpu=config["resources"]["generate"]["cpus_per_gpu"],
        mem_mb=gen_mem_mb,
        runtime=gen_runtime,
        **slurm_resources(),
    threads: gen_cpus
    log:
        f"{LOGS}/generate/{{shard}}.log",
    benchmark:
        f"{LOGS}/benchmarks/generate/{{shard}}.tsv"
    script:
        "../scripts/generate.py"


rule merge:
    input:
        table=f"{RESULTS}/items.parquet",
        shards=expand(f"{RESULTS}/generations/{{shard}}.parquet", shard=SHARDS),
    output:
        f"{RESULTS}/generations.parquet",
    log:
        f"{LOGS}/merge.log",
    script:
        "../scripts/merge.py"
