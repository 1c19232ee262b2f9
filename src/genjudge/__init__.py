"""Generate-then-judge LLM experiments: the logic behind the Snakemake workflow.

Modules are importable without torch; model code imports torch lazily so that a
job can lease its GPUs and set CUDA_VISIBLE_DEVICES before CUDA is touched.
"""

__version__ = "0.1.0"
