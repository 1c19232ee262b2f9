"""What runs leave on disk: atomic writes (`atomic`), the per-item store that jobs resume from
(`item_store`), the typed and versioned meta, judge and summary records (`records`), provenance,
job logs (`job_log`) and failed jobs' records (`failures`).

May import: errors, cluster (a meta records where SLURM ran the job).
"""
