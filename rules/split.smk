

rule split:
    input:
        dataset=config["dataset"]["path"],
    output:
        table=f"{RESULTS}/items.parquet",
        shards=expand(f"{RESULTS}/shards/{{shard}}.jsonl", shard=SHARDS),
    params:
        fields=config["dataset"]["fields"],
        format=config["dataset"]["format"],
    log:
        f"{LOGS}/split.log",
    script:
        "../scripts/split.py"
