# The demo's small models. They are committed; this rule retrains them
# (deterministically, on CPU) only when a directory is missing. No inputs on
# purpose: a newer checkout of the corpus must not trigger retraining.


rule demo_model:
    output:
        directory("models/{name}"),
    wildcard_constraints:
        name="demo-(generator|judge)",
    params:
        root=workflow.basedir,
    log:
        "logs/models/{name}.log",
    script:
        "../scripts/train_demo_model.py"
