# Small demo checkpoints, built offline and deterministically when missing.


rule demo_model:
    input:
        corpus=["config/demo/questions.jsonl", "config/templates/reference.txt"],
    output:
        directory("models/{name}"),
    wildcard_constraints:
        name="demo-[A-Za-z0-9_-]+",
    params:
        seed=lambda wildcards: 1 if wildcards.name.endswith("judge") else 0,
    log:
        "logs/models/{name}.log",
    script:
        "../scripts/build_demo_model.py"
