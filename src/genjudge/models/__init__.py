"""References to models and what is known of them without loading them: local directories and hub
ids, their fingerprints (`modelref`), what vLLM can run (`vllm_support`, read from config.json), and
models behind an endpoint: their URLs and what stands for them in keys (`endpoints`).

May import: errors.
"""
