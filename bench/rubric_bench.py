"""Rubric grading with the in-process vLLM engine, its prefix cache on and off.

A rubric judge's requests for one answer share everything up to the criterion (config/templates/rubric.txt
puts the instructions and the conversation first, the criterion last), so an engine with a prefix cache
computes an item's conversation once for all its criteria. Here: 40 items with a conversation of their
own and 10 criteria each (400 requests, the mode's own prompts: judging/modes/rubric.py), judged with
greedy decoding of 16 tokens by two vLLM engines of one model that differ only in
`enable_prefix_caching`. Each repeat runs both, in the opposite order from the repeat before, each
after `reset_prefix_cache()` (a repeat never reads a cache an earlier one filled).

    python bench/rubric_bench.py            # 40 items x 10 criteria, 5 repeats
    python bench/rubric_bench.py --quick    # 4 items x 3 criteria, 1 repeat

Measured: criteria a second with and without the cache (the median of the per-repeat ratios, its
min-max), and the prefix-cache hit rate: the prompt tokens vLLM served from its cache over all prompt
tokens, from each request's own `num_cached_tokens`. Targets: at least 1.5x with the cache, a hit rate of at least 70%. The model is a
random Llama (hidden 256, 4 layers, heads of 64: bench/engine_bench.py) on the CPU; on a GPU the
prefill is cheaper against the rest and the ratio smaller.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "bench"))
from _repeats import MIN_REPEATS, Targets, shown, spread  # noqa: E402

OUT = ROOT / "bench" / "rubric_results.json"
NEW_TOKENS = 16
TOPICS = ["a fever", "a headache", "a rash", "back pain", "a cough", "dizziness", "a sprained ankle", "insomnia"]


def prompts(n_items: int, n_criteria: int) -> list[str]:
    """The rubric mode's requests for n_items answers, each with n_criteria criteria."""
    import pandas as pd

    from genjudge.config.specs import spec_for
    from genjudge.judging import modes

    rows = []
    for i in range(n_items):
        topic = TOPICS[i % len(TOPICS)]
        messages = [
            {"role": "user", "content": f"I have had {topic} for {i + 2} days. " * 6 + "What should I do?"},
            {"role": "assistant", "content": f"How severe is {topic}, and is anything else wrong? " * 3},
            {"role": "user", "content": f"It is getting worse, item {i}. " * 5},
        ]
        rubric = [
            {"criterion": f"Mentions point {k} about {topic} for item {i}.", "points": 5 - k, "tags": []}
            for k in range(n_criteria)
        ]
        rows.append(
            {
                "id": f"i{i}",
                "prompt": messages[-1]["content"],
                "reference": None,
                "messages": json.dumps(messages),
                "rubric": json.dumps(rubric),
                "output": f"See a doctor about {topic} today. " * 4,
                "turn": 1,
                "sample": 0,
            }
        )
    template = (ROOT / "config/templates/rubric.txt").read_text()
    reqs = modes.get("rubric").requests(pd.DataFrame(rows), spec_for("judge", model="m", mode="rubric"), template)
    return [r.text for r in reqs]


def cached_share(outputs) -> float:
    """Prompt tokens served from the prefix cache over all prompt tokens, from each request's own count."""
    cached = sum(o.num_cached_tokens or 0 for o in outputs)
    total = sum(len(o.prompt_token_ids) for o in outputs)
    return cached / total if total else 0.0


def engine(model: Path, caching: bool):
    from vllm import LLM

    return LLM(
        model=str(model),
        dtype="float32",
        enforce_eager=True,
        max_model_len=2048,
        enable_prefix_caching=caching,
        seed=0,
        # On the CPU backend the KV cache is sized in bytes (gpu_memory_utilization would reserve that share of
        # the machine's memory): 1 GiB each, two engines.
        kv_cache_memory_bytes=1 << 30,
    )


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="4 items x 3 criteria, 1 repeat: checks the bench runs")
    ap.add_argument("--items", type=int, default=40)
    ap.add_argument("--criteria", type=int, default=10)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--out", default=str(OUT))
    args = ap.parse_args(argv)
    if args.quick:
        args.items, args.criteria, args.repeats = 4, 3, 1
    elif args.repeats < MIN_REPEATS:
        ap.error(f"--repeats {args.repeats}: a ratio is the median of at least {MIN_REPEATS} repeats")
    os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")  # the engine in this process: its metrics read here
    from engine_bench import small_model
    from vllm import SamplingParams

    texts = prompts(args.items, args.criteria)
    model = small_model()
    engines = {"prefix cache on": engine(model, True), "prefix cache off": engine(model, False)}
    params = SamplingParams(max_tokens=NEW_TOKENS, temperature=0.0)
    chats = [[{"role": "user", "content": t}] for t in texts]
    seconds: dict = {k: [] for k in engines}
    rates = []
    names = list(engines)
    for r in range(args.repeats):
        for name in names if r % 2 == 0 else names[::-1]:
            llm = engines[name]
            llm.reset_prefix_cache()
            t0 = time.perf_counter()
            outputs = llm.chat(chats, params, use_tqdm=False)
            seconds[name].append(time.perf_counter() - t0)
            if name == "prefix cache on":
                rates.append(cached_share(outputs))
    n = len(texts)
    result = {
        "what": f"{args.items} items x {args.criteria} criteria ({n} requests), greedy, {NEW_TOKENS} new tokens",
        "quick": args.quick,
        "repeats": args.repeats,
        "criteria_per_second": {k: spread([n / s for s in v], 1) for k, v in seconds.items()},
        "cache_over_no_cache": spread(
            [off / on for on, off in zip(seconds["prefix cache on"], seconds["prefix cache off"])], 2
        ),
        "hit_rate": spread(rates, 3),
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform()},
    }
    for k, v in result["criteria_per_second"].items():
        print(f"{k}: {shown(v, ' criteria/s', 1)}")
    print(f"with the cache: {shown(result['cache_over_no_cache'], 'x')}; hit rate {shown(result['hit_rate'], '', 3)}")
    if not args.quick:
        Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
    return result


def judged(result: dict) -> int:
    t = Targets()
    t.at_least("criteria/s with the prefix cache over without", result["cache_over_no_cache"]["median"], 1.5)
    t.at_least("prefix-cache hit rate", result["hit_rate"]["median"], 0.7, "")
    return t.report(result["quick"])


if __name__ == "__main__":
    from _repeats import ended

    sys.exit(ended(judged(main())))
