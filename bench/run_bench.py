"""Benchmarks, each measured side by side in one run on this machine.

1. generation: our path (length-sorted batches) vs a sequential batch-1
   `model.generate` loop, and vs one raw batched `model.generate` call;
2. judging: generate-mode vs logprob-mode items/s;
3. planning: `snakemake -n` for 1,000 and 10,000 shards;
4. split + merge + parse + report on 100,000 pre-generated items (no model), peak memory;
5. resume: fraction of work redone after a kill at a random point (see resume_bench.py).

Writes bench/results.json and prints a table. `--quick` runs every measure at tiny sizes in
seconds (a tiny model in place of the small one) and writes no results file unless --out is given: the test suite
runs it to check that the bench still runs (its figures mean nothing).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))


def machine() -> dict:
    import torch

    return {
        "cpus": os.cpu_count(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "torch_threads": torch.get_num_threads(),
        "cuda": torch.cuda.is_available(),
    }


def mixed_prompts(n: int, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    qs = [json.loads(line)["question"] for line in (ROOT / "config/demo/questions.jsonl").read_text().splitlines()]
    return [rng.choice(qs) + " Explain your reasoning step by step." * rng.randint(0, 6) for _ in range(n)]


def bench_generation(model_dir: str, n: int, new_tokens: int, batch_size: int) -> dict:
    import torch

    from genjudge.config.specs import spec_for
    from genjudge.engine.decoding import Generator, GenParams, run_batches
    from genjudge.engine.loading import load_causal_lm, load_tokenizer
    from genjudge.engine.prompting import render_prompt

    tok = load_tokenizer(model_dir)
    model, _ = load_causal_lm(spec_for("generator", model=model_dir))
    prompts = [render_prompt(tok, p) for p in mixed_prompts(n)]
    # Every path generates exactly new_tokens per prompt, so all compare the same work.
    fixed = {
        "max_new_tokens": new_tokens,
        "min_new_tokens": new_tokens,
        "do_sample": False,
        "pad_token_id": tok.pad_token_id,
    }

    def sequential():
        for p in prompts:
            enc = tok([p], return_tensors="pt", add_special_tokens=False)
            with torch.inference_mode():
                model.generate(**enc, **fixed)

    def raw_batched():
        enc = tok(prompts, return_tensors="pt", padding=True, add_special_tokens=False)
        with torch.inference_mode():
            model.generate(**enc, **fixed)

    gen = Generator(model, tok, GenParams(max_new_tokens=new_tokens), add_special_tokens=False)
    original = gen.generate

    def ours():
        lengths = gen.token_lengths(prompts)
        run_batches(lengths, batch_size, lambda idx: original([prompts[i] for i in idx]))

    # min_new_tokens for our path too (same work as the others): wrap model.generate.
    plain_generate = model.generate
    model.generate = lambda **kw: plain_generate(**{**kw, "min_new_tokens": new_tokens})
    ours()  # warm-up
    out = {}
    for name, fn in (("ours", ours), ("raw_batched", raw_batched), ("sequential_batch1", sequential)):
        if name != "ours":
            model.generate = plain_generate
        t0 = time.perf_counter()
        fn()
        secs = time.perf_counter() - t0
        out[name] = {
            "seconds": round(secs, 3),
            "items_per_s": round(n / secs, 2),
            "tokens_per_s": round(n * new_tokens / secs, 1),
        }
        if name == "ours":
            model.generate = plain_generate
    out["ratio_ours_vs_sequential"] = round(out["ours"]["items_per_s"] / out["sequential_batch1"]["items_per_s"], 2)
    out["ratio_ours_vs_raw_batched"] = round(out["ours"]["items_per_s"] / out["raw_batched"]["items_per_s"], 2)
    out.update(n_prompts=n, new_tokens=new_tokens, batch_size=batch_size, model=model_dir)
    return out


def bench_judge(model_dir: str, n: int, new_tokens: int, batch_size: int) -> dict:
    from genjudge.config.specs import spec_for
    from genjudge.engine.decoding import Generator, GenParams, run_batches
    from genjudge.engine.loading import load_causal_lm, load_tokenizer
    from genjudge.engine.logprob import LogprobScorer
    from genjudge.engine.prompting import render_prompt
    from genjudge.judging import modes
    from genjudge.judging.templates import load_template, render

    ref = modes.get("reference")
    marker = f"{ref.marker}:"

    tok = load_tokenizer(model_dir)
    model, _ = load_causal_lm(spec_for("generator", model=model_dir))
    template = load_template(ROOT / "config/demo/judge_template.txt", ref)
    qs = [json.loads(line) for line in (ROOT / "config/demo/questions.jsonl").read_text().splitlines()]
    items = [qs[i % len(qs)] for i in range(n)]
    prompts = [
        render_prompt(
            tok,
            render(
                template,
                question=q["question"],
                reference=q["answer"],
                candidate=q["answer"] if i % 2 else "something else",
            ),
        )
        for i, q in enumerate(items)
    ]
    gen = Generator(model, tok, GenParams(max_new_tokens=new_tokens), add_special_tokens=False)
    scorer = LogprobScorer(model, tok, add_special_tokens=False, labels=ref.logprob_labels, marker=marker)
    lp_prompts = [p + marker for p in prompts]
    plain_generate = model.generate

    def with_rationale(**kw):  # a judge that writes a 32-token rationale before its verdict
        return plain_generate(**{**kw, "min_new_tokens": 32, "max_new_tokens": 40})

    out = {}
    for name, runner, ps in (
        ("generate", gen, prompts),
        ("generate_with_rationale", gen, prompts),
        ("logprob", scorer, lp_prompts),
    ):
        model.generate = with_rationale if name == "generate_with_rationale" else plain_generate
        lengths = runner.token_lengths(ps)

        def batch(idx, runner=runner, ps=ps):
            return runner.generate([ps[i] for i in idx])

        run_batches(lengths[:batch_size], batch_size, batch)
        t0 = time.perf_counter()
        res, _ = run_batches(lengths, batch_size, batch)
        secs = time.perf_counter() - t0
        out[name] = {
            "seconds": round(secs, 3),
            "items_per_s": round(n / secs, 2),
            "mean_generated_tokens": round(sum(r["n_generated_tokens"] for r in res) / n, 1),
        }
    model.generate = plain_generate
    out["ratio_logprob_vs_generate"] = round(out["logprob"]["items_per_s"] / out["generate"]["items_per_s"], 2)
    out["ratio_logprob_vs_generate_with_rationale"] = round(
        out["logprob"]["items_per_s"] / out["generate_with_rationale"]["items_per_s"], 2
    )
    out.update(n_items=n, generate_max_new_tokens=new_tokens, batch_size=batch_size)
    return out


def workflow_copy(dest: Path) -> None:
    for part in ("Snakefile", "rules", "scripts", "config", "profiles", "report"):
        src = ROOT / part
        (shutil.copytree if src.is_dir() else shutil.copy2)(src, dest / part)


def bench_planning(shard_counts: list[int]) -> dict:
    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        wd = Path(tmp)
        workflow_copy(wd)
        n = max(shard_counts)
        with open(wd / "big.jsonl", "w") as fh:
            for i in range(n):
                fh.write(json.dumps({"id": f"q{i}", "question": f"What is {i} + 1?", "answer": str(i + 1)}) + "\n")
        for shards in shard_counts:
            cmd = [
                sys.executable,
                "-m",
                "snakemake",
                "-n",
                "--quiet",
                "all",
                "--config",
                f"shards={shards}",
                "dataset={'path': 'big.jsonl'}",
                "gpu_inventory=[]",
            ]
            t0 = time.perf_counter()
            proc = subprocess.run(cmd, cwd=wd, capture_output=True, text=True)
            secs = time.perf_counter() - t0
            if proc.returncode != 0:
                raise RuntimeError(proc.stderr[-3000:])
            out[str(shards)] = {"seconds": round(secs, 2)}
    return out


def bench_pipeline(n: int, shards: int) -> dict:
    """split + merge + parse + report on pre-generated answers (bench/scale_bench.py)."""
    from scale_bench import measure

    r = measure(n, shards, planning=False)
    steps = r["steps"]
    return {
        "seconds": {k: v["seconds"] for k, v in steps.items()},
        "pipeline_seconds": round(sum(v["seconds"] for v in steps.values()), 2),
        "peak_rss_mb": max(v["peak_rss_mb"] or 0 for v in steps.values()),
        "n_items": n,
        "shards": shards,
    }


def ensure_model(path: Path, size: str) -> str:
    if not path.exists():
        from genjudge.demo.models import build_model

        build_model(
            path, [ROOT / "config/demo/questions.jsonl", ROOT / "config/templates/reference.txt"], seed=0, size=size
        )
    return str(path)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="tiny sizes and models; no results file unless --out")
    ap.add_argument("--out", help="results JSON (default bench/results.json)")
    args = ap.parse_args()
    import logging

    logging.basicConfig(level=logging.WARNING)
    q = args.quick
    results = {"machine": machine(), "date": time.strftime("%Y-%m-%d %H:%M:%S")}
    # The tiny demo generator (the target's setting), then the 4-layer "small" model for contrast.
    demo = str(ROOT / "models" / "demo-generator")
    results["generation"] = bench_generation(demo, 8 if q else 64, 4 if q else 32, 64)
    with tempfile.TemporaryDirectory() as tmp:  # --quick builds a tiny one instead, and not to keep
        model = ensure_model(Path(tmp) / "tiny", "tiny") if q else ensure_model(ROOT / "bench/.models/small", "small")
        results["generation_small_model"] = bench_generation(model, 8 if q else 64, 4 if q else 32, 64)
    # The trained demo judge on its own template: it writes a real verdict, then stops.
    results["judge"] = bench_judge(str(ROOT / "models" / "demo-judge"), 16 if q else 512, 16, 16)
    results["planning"] = bench_planning([10] if q else [1000, 10000])
    results["pipeline"] = bench_pipeline(400 if q else 100_000, 4 if q else 100)
    out = Path(args.out) if args.out else None if q else ROOT / "bench" / "results.json"
    if out:
        out.write_text(json.dumps(results, indent=2) + "\n")
    g, j, p = results["generation"], results["judge"], results["pipeline"]
    gs = results["generation_small_model"]
    rows = [
        (
            "generation: ours vs sequential batch-1",
            f"{g['ours']['items_per_s']} vs {g['sequential_batch1']['items_per_s']} items/s",
            f"{g['ratio_ours_vs_sequential']}x",
            ">= 10x",
        ),
        (
            "generation: ours vs one raw batched generate",
            f"{g['ours']['items_per_s']} vs {g['raw_batched']['items_per_s']} items/s",
            f"{g['ratio_ours_vs_raw_batched']}x",
            ">= 0.8x",
        ),
        (
            f"  {'tiny' if q else 'small'} model: ours vs sequential batch-1",
            f"{gs['ours']['items_per_s']} vs {gs['sequential_batch1']['items_per_s']} items/s",
            f"{gs['ratio_ours_vs_sequential']}x",
            "",
        ),
        (
            f"  {'tiny' if q else 'small'} model: ours vs raw batched generate",
            f"{gs['ours']['items_per_s']} vs {gs['raw_batched']['items_per_s']} items/s",
            f"{gs['ratio_ours_vs_raw_batched']}x",
            "",
        ),
        (
            "judge: logprob vs generate (demo judge)",
            f"{j['logprob']['items_per_s']} vs {j['generate']['items_per_s']} items/s",
            f"{j['ratio_logprob_vs_generate']}x",
            ">= 5x",
        ),
        (
            "judge: logprob vs generate, 32-token rationale",
            f"{j['logprob']['items_per_s']} vs {j['generate_with_rationale']['items_per_s']} items/s",
            f"{j['ratio_logprob_vs_generate_with_rationale']}x",
            "",
        ),
        *[
            (f"planning: snakemake -n, {k} shards", f"{v['seconds']} s", "", "< 30 s")
            for k, v in results["planning"].items()
        ],
        (
            f"split+merge+parse+report, {p['n_items']} items",
            f"{p['pipeline_seconds']} s, peak {p['peak_rss_mb']} MB",
            "",
            "< 60 s, < 2 GB",
        ),
    ]
    print(f"{'measure':48} {'figures':38} {'ratio':>8}  target")
    for r in rows:
        print(f"{r[0]:48} {r[1]:38} {r[2]:>8}  {r[3]}")
    if out:
        print(f"written to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
