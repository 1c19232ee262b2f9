

rule report:
    input:
        judgments=f"{RESULTS}/judgments.parquet",
        gen_meta=expand(f"{RESULTS}/generations/{{shard}}.meta.json", shard=SHARDS),
        judge_meta=f"{RESULTS}/judge/raw.meta.json",
    output:
        summary=f"{RESULTS}/report/summary.json",
        markdown=f"{RESULTS}/report/report.md",
    params:
        config=config,
    log:
        f"{LOGS}/report.log",
    script:
        "../scripts/report.py"
