"""Placement: the GPU leases of a machine (`gpu_lease`), what each job asks Snakemake and SLURM for
(`job_resources`, `slurm_submission`, `slurm_array_task`), where SLURM runs the current job
(`slurm_job`), and the rules of `judge.parallel` on plain model facts (`judge_layout`).

May import: errors, models.
"""
