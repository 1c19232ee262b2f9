"""A run's results in the formats other tools read: Every Eval Ever's aggregate and instance-level records
(`eee_records`, `eee_instances`), their files and layout (`eee_files`), and the paths of this machine kept
out of them (`scrub`). Built from the report's figures and the stored judgments, never recomputed.

May import: errors, store, data, judging, config.
"""
