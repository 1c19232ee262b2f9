"""Everything that imports torch: loading, prompting, decoding, batch size, logprob, memory plan.

May import: errors, models, cluster, store, config, planning.
"""
