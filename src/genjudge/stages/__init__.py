"""One module per workflow rule: what each job does, torch-free at import.

May import: errors, models, cluster, store, data, judging, planning, config, engine, export, report_html.
"""
