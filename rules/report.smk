rule report:
    input:
        judgments=f"{RESULTS}/judgments.parquet",
        gen_meta=expand(f"{RESULTS}/generations/{{shard}}.meta.json", shard=SHARDS),
        judge_meta=f"{RESULTS}/judge/raw.meta.json",
    output:
        summary=report(f"{RESULTS}/report/summary.json", caption="../report/summary.rst", category="Results",
                       labels={"run": RUN, "file": "summary.json"}),
        markdown=report(f"{RESULTS}/report/report.md", caption="../report/report_md.rst", category="Results",
                        labels={"run": RUN, "file": "report.md"}),
        categories=report(f"{RESULTS}/report/per_category.csv", caption="../report/per_category.rst",
                          category="Results", labels={"run": RUN, "file": "per_category.csv"}),
        provenance=f"{RESULTS}/report/provenance.json",
    log:
        f"{LOGS}/report.log",
    params:
        # The report shows the config: any change of it rewrites the (cheap) report.
        config=config,
        workflow_dir=workflow.basedir,
    script:
        "../scripts/report.py"
