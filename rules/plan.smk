# `snakemake plan`: GPU check and memory plan from config.json alone (no weights loaded).


rule plan:
    input:
        demo_models,
    output:
        f"{RESULTS}/plan.json",
    log:
        f"{LOGS}/plan.log",
    script:
        "../scripts/plan.py"
