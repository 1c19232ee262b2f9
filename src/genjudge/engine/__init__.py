"""What runs a model: everything that imports torch (loading, prompting, decoding, batch size, logprob,
memory plan), and the endpoint engine (`endpoint/`, a model behind an OpenAI-compatible API), which
imports none.

May import: errors, models, cluster, store, config, planning.
"""
