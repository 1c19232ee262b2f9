

rule split:
    input:
        dataset=config["dataset"]["path"],
    output:
        table=f"{RESULTS}/items.parquet",
        # One directory, not N outputs: matching N inputs against N output
        # patterns made planning quadratic in the number of shards.
        shards=directory(f"{RESULTS}/shards"),
    params:
        fields=config["dataset"]["fields"],
        format=config["dataset"]["format"],
        n_shards=len(SHARDS),
    log:
        f"{LOGS}/split.log",
    script:
        "../scripts/split.py"
