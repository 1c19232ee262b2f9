rule generate:
    input:
        shards=f"{RESULTS}/shards",
        model=demo_generator,
    output:
        generations=f"{RESULTS}/generations/{{shard}}.parquet",
        meta=f"{RESULTS}/generations/{{shard}}.meta.json",
    log:
        f"{LOGS}/generate/{{shard}}.log",
    benchmark:
        f"{LOGS}/benchmarks/generate/{{shard}}.tsv"
    params:
        # Only what changes the outputs: Snakemake reruns a job when its params change.
        spec=rerun_params(GENERATOR),
    resources:
        gpu=generate_gpu_resource,
        cpus_per_gpu=config["resources"]["generate"]["cpus_per_gpu"],
        mem_mb=gen_mem_mb,
        runtime=gen_runtime,
        **slurm_resources(),
    threads: gen_cpus
    script:
        "../scripts/generate.py"


rule merge:
    input:
        table=f"{RESULTS}/items.parquet",
        shards=expand(f"{RESULTS}/generations/{{shard}}.parquet", shard=SHARDS),
        metas=expand(f"{RESULTS}/generations/{{shard}}.meta.json", shard=SHARDS),
    output:
        f"{RESULTS}/generations.parquet",
    log:
        f"{LOGS}/merge.log",
    script:
        "../scripts/merge.py"
