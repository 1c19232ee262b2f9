"""The time model's shape on this machine's CPU: predicted against measured decode seconds.

On a CPU the roofline of genjudge.planning.time_model holds with the machine's own memory bandwidth and
FLOP/s (measured once: a large array copy, an fp32 matmul). For the demo model and a small
random Llama of a few tens of MB (built into bench/.models/, git-ignored), at batch 1 and 16 and
two output lengths, each generation is timed as the jobs time theirs (the StepClock stopping criterion:
decode = the steps after the first new token) and set against the model's decode terms for the
same counts. Medians of --repeats runs. Fails (exit 1) when a prediction is off by more than 1.5x.

    nice -n 10 .venv/bin/python bench/plan_bench.py --quick   # seconds: checks it runs
    nice -n 10 .venv/bin/python bench/plan_bench.py           # `make bench`

Writes bench/plan_results.json and prints the table of docs/planning.md.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

MODELS_DIR = ROOT / "bench" / ".models"
# A few tens of MB in fp32: 8 layers, hidden 384 (12.8 M parameters, 51 MB).
SMALL_LLAMA = dict(
    hidden_size=384, intermediate_size=1024, num_hidden_layers=8, num_attention_heads=6, num_key_value_heads=2
)
PROMPT = "Tom has 12 apples and buys 7 more. How many apples does he have now? Think step by step."
TOLERANCE = 1.5


def small_llama() -> Path:
    from genjudge.demo.models import build_model

    path = MODELS_DIR / "llama-small"
    if not path.exists():
        MODELS_DIR.mkdir(parents=True, exist_ok=True)
        build_model(path, [ROOT / "config" / "demo" / "questions.jsonl"], seed=0, size=SMALL_LLAMA)
    return path


def measure(model, tok, batch: int, new_tokens: int, repeats: int) -> dict:
    """Median decode and prefill seconds of `repeats` greedy generations of exactly `new_tokens`."""
    import torch
    from transformers import StoppingCriteriaList

    from genjudge.engine.decoding import StepClock

    enc = tok([PROMPT] * batch, return_tensors="pt", padding=True)
    decode, prefill, steps = [], [], set()
    for i in range(repeats + 1):
        clock = StepClock()
        clock.start()
        with torch.inference_mode():
            model.generate(
                **enc,
                max_new_tokens=new_tokens,
                min_new_tokens=new_tokens,
                do_sample=False,
                pad_token_id=tok.pad_token_id,
                stopping_criteria=StoppingCriteriaList([clock]),
            )
        clock.end()
        if i == 0:  # warm-up
            continue
        m = clock.marks
        prefill.append(m[1] - m[0])
        decode.append(m[-1] - m[1])
        steps.add(len(m) - 3)
    return {
        "prompt_tokens": int(enc["attention_mask"][0].sum()),
        "decode_steps": steps.pop() if len(steps) == 1 else sorted(steps),
        "decode_s": statistics.median(decode),
        "prefill_s": statistics.median(prefill),
    }


def predict(numbers, device, batch: int, prompt_tokens: int, new_tokens: int) -> dict:
    from genjudge.planning.time_model import Layout, Requests, job_time

    req = Requests(batch, prompt_tokens, new_tokens, batches=1, steps=new_tokens - 1)
    t = job_time(numbers, device, Layout("cpu", 0), [req], batch)
    decode = {x.name: x.seconds for x in t.terms if x.name.startswith("decode")}
    return {
        "decode_s": sum(decode.values()),
        "roofline_s": sum(v for k, v in decode.items() if k != "decode step overhead"),
        "overhead_s": decode.get("decode step overhead", 0.0),
        "prefill_s": t.term("prefill"),
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--quick", action="store_true", help="outputs of 4 and 8 tokens, 2 repeats: checks the bench runs, in seconds"
    )
    ap.add_argument("--repeats", type=int, help="timed runs per case (median; at least 5; default 5, --quick 2)")
    ap.add_argument("--out", help="where to write the results (default bench/plan_results.json; none with --quick)")
    args = ap.parse_args(argv)
    if args.repeats is None:
        args.repeats = 2 if args.quick else 5
    if args.repeats < 5 and not args.quick:
        ap.error("--repeats: at least 5")

    import torch

    from genjudge.config.specs import spec_for
    from genjudge.engine.devices import measure_cpu
    from genjudge.engine.loading import load_causal_lm, load_tokenizer
    from genjudge.engine.memory_plan import plan
    from genjudge.planning.time_model import GB, ModelNumbers, duration

    # One thread, as a CPU job gets by default (resources.generate.cpus): no oversubscription of
    # the shared cores, and the device figures measured with the same thread count.
    torch.set_num_threads(1)
    # The bench measures this CPU now, as it is loaded now (--quick: a small copy, its figures mean nothing).
    device = measure_cpu(1, **({"size_mb": 16, "repeats": 2} if args.quick else {}), remember=False)
    lengths = (4, 8) if args.quick else (32, 128)
    rows = []
    for path in (ROOT / "models" / "demo-generator", small_llama()):
        spec = spec_for("generator", model=str(path))
        numbers = ModelNumbers.from_plan(plan(spec, [], 1, 64, "generator"))
        label = f"{path.name} ({numbers.parameters / 1e6:.2g} M params)"
        model, _ = load_causal_lm(spec)
        tok = load_tokenizer(str(path))
        for batch in (1, 16):
            for new in lengths:
                got = measure(model, tok, batch, new, args.repeats)
                want = predict(numbers, device, batch, got["prompt_tokens"], new)
                ratio = got["decode_s"] / want["decode_s"]
                rows.append(
                    {
                        "model": label,
                        "weights_MB": round(numbers.weight_bytes / 1e6, 1),
                        "layers": numbers.layers,
                        "batch": batch,
                        "new_tokens": new,
                        **{f"measured_{k}": v for k, v in got.items()},
                        **{f"predicted_{k}": v for k, v in want.items()},
                        "measured_over_predicted": ratio,
                        "within_tolerance": 1 / TOLERANCE <= ratio <= TOLERANCE,
                    }
                )
                print(
                    f"  {label}, batch {batch}, {new} tokens: measured {duration(got['decode_s'])}, "
                    f"predicted {duration(want['decode_s'])} ({ratio:.2f}x)",
                    flush=True,
                )
    result = {
        "device": {
            "name": device.name,
            "bandwidth_GBps": round(device.bandwidth / GB, 1),
            "fp32_GFLOPs": round(device.flops / 1e9, 1),
            "source": device.source,
        },
        "torch": torch.__version__,
        "torch_threads": torch.get_num_threads(),
        "quick": args.quick,
        "repeats": args.repeats,
        "rows": rows,
    }
    out = Path(args.out) if args.out else None if args.quick else ROOT / "bench" / "plan_results.json"
    if out:
        out.write_text(json.dumps(result, indent=2))
    print(
        f"\n{device.name}: {device.bandwidth / GB:.1f} GB/s copy bandwidth, {device.flops / 1e9:.0f} GFLOP/s fp32 "
        f"matmul; torch {torch.__version__}, {torch.get_num_threads()} threads; medians of {args.repeats}\n"
    )
    print(
        "| model | weights | batch | new tokens | decode measured | predicted (roofline + step overhead) | measured / predicted |"
    )
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['model']} | {r['weights_MB']} MB, {r['layers']} layers | {r['batch']} | {r['new_tokens']} | "
            f"{r['measured_decode_s'] * 1e3:.1f} ms | {r['predicted_decode_s'] * 1e3:.1f} ms "
            f"({r['predicted_roofline_s'] * 1e3:.1f} + {r['predicted_overhead_s'] * 1e3:.1f}) | "
            f"{r['measured_over_predicted']:.2f} |"
        )
    bad = [r for r in rows if not r["within_tolerance"]]
    if bad and args.quick:  # a few milliseconds per case: the check is the full run's
        print(f"\n{len(bad)} case(s) outside {TOLERANCE}x (--quick: not a check)")
        return 0
    if bad:
        print(f"\n{len(bad)} case(s) outside {TOLERANCE}x", file=sys.stderr)
        return 1
    print(f"\nevery case within {TOLERANCE}x")
    return 0


if __name__ == "__main__":
    from _repeats import ended

    sys.exit(ended(main()))
