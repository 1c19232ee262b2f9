

rule report:
    input:
        judgments=f"{RESULTS}/judgments.parquet",
        gen_meta=expand(f"{RESULTS}/generations/{{shard}}.meta.json", shard=SHARDS),
        judge_meta=f"{RESULTS}/judge/raw.meta.json",
    output:
        summary=f"{RESULTS}/report/summary.json",
        markdown=f"{RESULTS}/report/report.md",
        provenance=f"{RESULTS}/report/provenance.json",
    params:
        config=config,
        workflow_dir=workflow.basedir,
    log:
        f"{LOGS}/report.log",
    script:
        "../scripts/report.py"
