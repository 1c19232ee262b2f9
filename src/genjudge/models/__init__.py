"""References to models and what is known of them without loading them: local directories and hub
ids, their fingerprints (`modelref`), and what vLLM can run (`vllm_support`, read from config.json).

May import: errors.
"""
