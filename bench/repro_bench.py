"""What changes with the batch: outputs that differ between batch sizes, per dtype and decoding.

The 44 demo questions are generated through the workflow's own path (length-sorted
batches, left padding, per-sample seeds when sampling) at batch sizes 1, 4 and 16,
and in float32 and bfloat16, greedy and sampled (temperature 1.5); the table
counts the items whose text differs from batch size 1 with the same settings.
Per-sample seeds make the randomness independent of the batch; what remains is
the numerics: a batch of another shape may take other kernels, whose rounding
differs in low-precision dtypes, and one flipped token changes the rest.

    python bench/repro_bench.py [--device cuda]

Writes bench/repro_results.json (or --out) and prints the table. --quick: the first 8 questions, 4
tokens, in seconds, to check the bench still runs (the test suite does); no results file unless --out.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "bench"))

BATCH_SIZES = (1, 4, 16)


def outputs(model, tok, prompts, params, batch_size) -> list[str]:
    from genjudge.engine.decoding import Generator, run_batches
    from genjudge.engine.sampling import sample_seed

    gen = Generator(model, tok, params, add_special_tokens=True)
    seeds = [sample_seed(params.seed, p, 0) for p in prompts]
    lengths = gen.token_lengths(prompts)

    def compute(idx):
        batch = [prompts[j] for j in idx]
        return gen.generate(batch, seeds=[seeds[j] for j in idx] if params.do_sample else None)

    results, _ = run_batches(lengths, batch_size, compute)
    return [r["output"] for r in results]


def main(argv=None):
    import torch
    from run_bench import machine
    from transformers import AutoModelForCausalLM

    from genjudge.engine.decoding import GenParams
    from genjudge.engine.loading import load_tokenizer

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--new-tokens", type=int, default=24)
    ap.add_argument("--out", help="results JSON (default bench/repro_results.json)")
    ap.add_argument("--quick", action="store_true", help="8 questions, 4 tokens; no results file unless --out")
    args = ap.parse_args(argv)
    demo = ROOT / "models/demo-generator"
    tok = load_tokenizer(str(demo))
    prompts = [json.loads(line)["question"] for line in (ROOT / "config/demo/questions.jsonl").read_text().splitlines()]
    if args.quick:
        prompts, args.new_tokens = prompts[:8], 4
    results = {"machine": machine(), "device": args.device, "n_items": len(prompts), "rows": []}
    print(f"{'dtype':<10} {'decoding':<9} " + " ".join(f"bs{b}!=bs1" for b in BATCH_SIZES[1:]))
    for dtype in ("float32", "bfloat16"):
        model = AutoModelForCausalLM.from_pretrained(demo, dtype=getattr(torch, dtype)).eval().to(args.device)
        for sampled in (False, True):
            params = GenParams(max_new_tokens=args.new_tokens, do_sample=sampled, temperature=1.5, seed=0)
            ref = outputs(model, tok, prompts, params, 1)
            differ = {}
            for bs in BATCH_SIZES[1:]:
                got = outputs(model, tok, prompts, params, bs)
                differ[bs] = sum(a != b for a, b in zip(ref, got))
            decoding = "sampled" if sampled else "greedy"
            results["rows"].append({"dtype": dtype, "decoding": decoding, "differ_from_batch_1": differ})
            print(f"{dtype:<10} {decoding:<9} " + " ".join(f"{differ[b]:>8}" for b in BATCH_SIZES[1:]), flush=True)
    out = args.out or (None if args.quick else ROOT / "bench/repro_results.json")
    if out:
        Path(out).write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    from _repeats import ended

    ended(main())
