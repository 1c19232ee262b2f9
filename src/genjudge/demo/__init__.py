"""The demo's small models and their training (CPU, fixed seeds).

May import: errors, models, cluster, store, data, judging, planning, config, engine.
"""
