"""The endpoint engine (`engine: openai`): a model behind an OpenAI-compatible chat completions API,
a hosted one or a model server (`vllm serve`, SGLang, TGI, llama.cpp) that several studies share.

It imports no torch and reads no model files: the server applies its own chat template and tokenizer.
`settings` holds what the config says (`endpoint`, `price`, `max_cost_usd`) as typed data; `requests`
turns a prompt into a request and a response into a result; `policy` decides what is retried, how long
to wait and how many requests are in flight; `client` sends them; `cost` prices them and keeps the
budget; `tries` writes each try down before it is sent, so that one with no answer stays counted;
`probe` checks what the configuration relies on before money is spent; `batch` sends them as provider
batch files; `ledgers` keeps what a job paid for, probed and stopped at beside its store, and its lock;
`stats` is the job meta's account; `run` is the engine seam (`engine.completion.complete` hands it a
job's prompts). `settings.SECRETS` is the one redaction every message leaving the engine goes through.

May import: what `engine` may (errors, models, cluster, store, config, planning); never torch.
"""
