rule report:
    input:
        judgments=all_judgments().values(),
        gen_meta=all_generation_metas(),
        judge_meta=all_judge_metas().values(),
        labels=label_files(),
    output:
        summary=report(
            f"{RESULTS}/report/summary.json",
            caption="../report/summary.rst",
            category="Results",
            labels={"run": RUN, "file": "summary.json"},
        ),
        markdown=report(
            f"{RESULTS}/report/report.md",
            caption="../report/report_md.rst",
            category="Results",
            labels={"run": RUN, "file": "report.md"},
        ),
        categories=report(
            f"{RESULTS}/report/per_category.csv",
            caption="../report/per_category.rst",
            category="Results",
            labels={"run": RUN, "file": "per_category.csv"},
        ),
        provenance=f"{RESULTS}/report/provenance.json",
        html=report(
            f"{RESULTS}/report/report.html",
            caption="../report/report_html.rst",
            category="Results",
            labels={"run": RUN, "file": "report.html"},
        ),
        plots=report(
            directory(f"{RESULTS}/report/plots"),
            patterns=["{name}.png"],
            caption="../report/plots.rst",
            category="Plots",
            labels={"run": RUN, "plot": "{name}"},
        ),
    log:
        f"{LOGS}/report.log",
    params:
        config=config_digest,
        judgments=all_judgments(),
        judge_meta=all_judge_metas(),
        workflow_dir=workflow.basedir,
        again=report_again(),
    script:
        "../scripts/report.py"
