rule split:
    input:
        dataset=dataset_file,
    output:
        table=f"{RESULTS}/items/{{dataset}}.parquet",
        # One directory, not N outputs: matching N inputs against N output
        # patterns made planning quadratic in the number of shards.
        shards=directory(f"{RESULTS}/shards/{{dataset}}"),
    log:
        f"{LOGS}/split/{{dataset}}.log",
    params:
        split=split_params,
    script:
        "../scripts/split.py"
