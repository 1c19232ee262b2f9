# The results in the formats report.export names (docs/export.md), from the run's files: no model is
# loaded. A file whose bytes would not change is left as it is, so the manifest alone is the output
# Snakemake tracks (it removes a job's outputs before running it).


rule export:
    input:
        summary=f"{RESULTS}/report/summary.json",
        provenance=f"{RESULTS}/report/provenance.json",
        judgments=all_judgments().values(),
        raw=all_judge_tables(),
        judge_meta=all_judge_metas().values(),
        gen_meta=all_generation_metas(),
        item_tables=all_item_tables(),
        templates=all_judge_templates(),
    output:
        f"{RESULTS}/export/{{format}}/manifest.json",
    log:
        f"{LOGS}/export/{{format}}.log",
    script:
        "../scripts/export.py"
