"""Generate-then-judge LLM experiments: the logic behind the Snakemake workflow.

The package is made of wings, each owning one concern; a wing imports only the wings listed in its
own docstring (tests/test_architecture.py holds the same table and checks every import):

    errors       the one error type of bad input (a module)
    models       references to models and what is known of them without loading them
    cluster      placement: GPU leases, what each job asks Snakemake and SLURM for, the judge's layout
    store        what runs leave on disk: atomic writes, the item store, versioned records, logs
    data         datasets, conversations, samples, shards
    judging      grading modes, templates, verdicts, extraction and statistics (torch-free)
    planning     the time model, the run's schedule, calibration from finished runs
    config       the configuration: schema, loading, typed specs, experiments, the checks of a run
    engine       everything that imports torch (or vLLM): loading, prompting, generation, logprob
    export       the results in other tools' formats (Every Eval Ever's records)
    report_html  the HTML report page
    stages       one module per workflow rule
    demo         the demo's small models and their training
    cli          the `genjudge` command (a module)

Modules are importable without torch; model code imports torch lazily so that a job can lease its
GPUs and set CUDA_VISIBLE_DEVICES before CUDA is touched.
"""

__version__ = "0.1.0"
