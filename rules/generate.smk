rule generate:
    input:
        shards=f"{RESULTS}/shards/{{dataset}}",
        model=demo_generator,
        submission=submission_settings,
    output:
        generations=f"{RESULTS}/generations/{{generator}}/{{dataset}}/{{shard}}.parquet",
        meta=f"{RESULTS}/generations/{{generator}}/{{dataset}}/{{shard}}.meta.json",
    log:
        f"{LOGS}/generate/{{generator}}/{{dataset}}/{{shard}}.log",
    benchmark:
        f"{LOGS}/benchmarks/generate/{{generator}}/{{dataset}}/{{shard}}.tsv"
    threads: gen_cpus
    resources:
        **slurm_resources("generate"),
        gpu=generate_gpu_resource,
        cpus_per_gpu=config["resources"]["generate"]["cpus_per_gpu"],
        mem_mb=gen_mem_mb,
        runtime=gen_runtime,
    params:
        # Only what changes the outputs: Snakemake reruns a job when its params change.
        **GENERATE_SETTINGS,
    script:
        "../scripts/generate.py"


rule merge:
    input:
        table=f"{RESULTS}/items/{{dataset}}.parquet",
        shards=generation_shards,
        metas=generation_metas,
        answers=dataset_answer_file,
    output:
        f"{RESULTS}/generations/{{generator}}/{{dataset}}.parquet",
    log:
        f"{LOGS}/merge/{{generator}}/{{dataset}}.log",
    params:
        answers_from=answers_from,
    script:
        "../scripts/merge.py"
