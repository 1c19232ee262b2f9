# The demo's small models. They are committed; this rule retrains them
# (deterministically, on CPU) only when a directory is missing. No inputs and a
# shell command rather than a script on purpose: neither a newer checkout of the
# demo data nor of the training code may trigger retraining of committed models.


rule demo_model:
    output:
        directory("models/{name}"),
    log:
        "logs/models/{name}.log",
    wildcard_constraints:
        name="|".join(wfconfig.DEMO_MODELS),
    params:
        python=sys.executable,
    shell:
        "{params.python} -m genjudge.cli train-demo {wildcards.name} {output} > {log} 2>&1"
