"""Benchmarks, each measured side by side in one run on this machine.

1. generation: our path (length-sorted batches) vs a sequential batch-1
   `model.generate` loop, and vs one raw batched `model.generate` call;
2. judging: generate-mode vs logprob-mode items/s;
3. planning: `snakemake -n` for 1,000 and 10,000 shards and of 1,000,000 items in 1,000 shards (wall time
   and peak memory), beside the SLURM executor plugin's import alone (it runs `scontrol` as Snakemake
   loads it: where a controller does not answer, every figure of the row includes that wait);
4. split + merge + parse + report on 100,000 pre-generated items (no model), peak memory;
5. resume: fraction of work redone after a kill at a random point (see resume_bench.py).

Each ratio is the median of --repeats (at least 5) alternating repeats, taken within each repeat,
with its min-max (bench/_repeats.py); planning is the median of --repeats alternating repeats, the
pipeline of 3. A missed target prints a `TARGET MISSED` line and the exit status is 1. `--only planning`
runs the planning row alone.

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
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
from _repeats import MIN_REPEATS, Targets, alternate, ratios, shown, spread  # noqa: E402


def machine() -> dict:
    from importlib.metadata import version

    import torch

    return {
        "snakemake": version("snakemake"),
        "snakemake_executor_plugin_slurm": version("snakemake-executor-plugin-slurm"),
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


def bench_generation(model_dir: str, n: int, new_tokens: int, batch_size: int, repeats: int) -> dict:
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

    def ours_fixed():
        model.generate = lambda **kw: plain_generate(**{**kw, "min_new_tokens": new_tokens})
        try:
            ours()
        finally:
            model.generate = plain_generate

    paths = {"ours": ours_fixed, "raw_batched": raw_batched, "sequential_batch1": sequential}
    for fn in paths.values():  # warm-up: first calls pay one-time costs
        fn()
    seconds = alternate(paths, repeats)
    out = {
        name: {
            "seconds": spread(secs),
            "items_per_s": spread([n / s for s in secs], 2),
            "tokens_per_s": spread([n * new_tokens / s for s in secs], 1),
        }
        for name, secs in seconds.items()
    }
    out["ratio_ours_vs_sequential"] = ratios(seconds["ours"], seconds["sequential_batch1"])
    out["ratio_ours_vs_raw_batched"] = ratios(seconds["ours"], seconds["raw_batched"])
    out.update(n_prompts=n, new_tokens=new_tokens, batch_size=batch_size, model=model_dir, repeats=repeats)
    return out


def bench_judge(model_dir: str, n: int, new_tokens: int, batch_size: int, repeats: int) -> dict:
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

    paths, generated = {}, {}
    for name, runner, ps in (
        ("generate", gen, prompts),
        ("generate_with_rationale", gen, prompts),
        ("logprob", scorer, lp_prompts),
    ):
        lengths = runner.token_lengths(ps)
        wrapped = with_rationale if name == "generate_with_rationale" else plain_generate

        def batch(idx, runner=runner, ps=ps):
            return runner.generate([ps[i] for i in idx])

        def path(name=name, lengths=lengths, batch=batch, wrapped=wrapped):
            model.generate = wrapped
            try:
                res, _ = run_batches(lengths, batch_size, batch)
            finally:
                model.generate = plain_generate
            generated[name] = sum(r["n_generated_tokens"] for r in res) / n

        model.generate = wrapped
        run_batches(lengths[:batch_size], batch_size, batch)  # warm-up
        model.generate = plain_generate
        paths[name] = path
    seconds = alternate(paths, repeats)
    out = {
        name: {
            "seconds": spread(secs),
            "items_per_s": spread([n / s for s in secs], 2),
            "mean_generated_tokens": round(generated[name], 1),
        }
        for name, secs in seconds.items()
    }
    out["ratio_logprob_vs_generate"] = ratios(seconds["logprob"], seconds["generate"])
    out["ratio_logprob_vs_generate_with_rationale"] = ratios(seconds["logprob"], seconds["generate_with_rationale"])
    out.update(n_items=n, generate_max_new_tokens=new_tokens, batch_size=batch_size, repeats=repeats)
    return out


def workflow_copy(dest: Path) -> None:
    for part in ("Snakefile", "rules", "scripts", "config", "profiles", "report"):
        src = ROOT / part
        (shutil.copytree if src.is_dir() else shutil.copy2)(src, dest / part)


PLANNING_TARGETS = {1000: 4.0, 10000: 20.0}  # seconds of `snakemake -n` by shard count
MILLION_TARGETS = (15.0, 1536.0)  # seconds and MB of the 1,000,000-item plan in 1,000 shards


def bench_planning(shard_counts: list[int], items: int, repeats: int) -> dict:
    """`snakemake -n` of the whole run at each shard count, of `items` items in 1,000 shards (its peak
    memory too), and the SLURM plugin's import, alternating, each in a process of its own."""
    from scale_bench import timed, write_dataset

    with tempfile.TemporaryDirectory() as tmp:
        wd = Path(tmp)
        workflow_copy(wd)
        with open(wd / "big.jsonl", "w") as fh:
            for i in range(max(shard_counts)):
                fh.write(json.dumps({"id": f"q{i}", "question": f"What is {i} + 1?", "answer": str(i + 1)}) + "\n")
        write_dataset(wd / "million.jsonl", items)
        plan = [sys.executable, "-m", "snakemake", "-n", "--quiet", "all", "--config", "gpu_inventory=[]"]
        cmds = {str(s): [*plan, f"shards={s}", "dataset={'path': 'big.jsonl'}"] for s in shard_counts}
        cmds[f"{items:,} items, {min(1000, items):,} shards"] = [
            *plan,
            f"shards={min(1000, items)}",
            "dataset={'path': 'million.jsonl'}",
        ]
        cmds["slurm_plugin_import"] = [sys.executable, "-c", "import snakemake_executor_plugin_slurm"]
        runs: dict[str, list[dict]] = {name: [] for name in cmds}
        names = list(cmds)
        for r in range(repeats):
            for name in names if r % 2 == 0 else names[::-1]:
                runs[name].append(timed(cmds[name], wd))
    return {
        name: {
            "seconds": spread([x["seconds"] for x in rs], 2),
            "peak_rss_mb": spread([x["peak_rss_mb"] or 0.0 for x in rs], 1),
            "repeats": repeats,
        }
        for name, rs in runs.items()
    }


def planning_rows(planning: dict, targets: Targets) -> None:
    import snakemake

    print(f"planning (Snakemake {snakemake.__version__}), median of {next(iter(planning.values()))['repeats']}:")
    for k, v in planning.items():
        if k == "slurm_plugin_import":
            what, goal = "  the SLURM plugin's import alone", "(in every snakemake command)"
        elif "items" in k:
            what, goal = f"  snakemake -n, {k}", "<= 15 s, <= 1.5 GB"
            targets.at_most(f"planning {k}", v["seconds"]["median"], MILLION_TARGETS[0], " s")
            targets.at_most(f"planning {k}, peak memory", v["peak_rss_mb"]["median"], MILLION_TARGETS[1], " MB")
        else:
            target = PLANNING_TARGETS.get(int(k))
            what, goal = f"  snakemake -n, {k} shards", f"<= {target:g} s" if target else ""
            if target:
                targets.at_most(f"planning: snakemake -n, {k} shards", v["seconds"]["median"], target, " s")
        figures = f"{shown(v['seconds'], ' s')}, peak {v['peak_rss_mb']['median']:.0f} MB"
        print(f"{what:48} {figures:52} {'':>20}  {goal}")
    if planning["slurm_plugin_import"]["seconds"]["median"] > 2:
        print("  the SLURM plugin's import took over 2 s: its controller answers slowly (docs/slurm.md)")


def bench_pipeline(n: int, shards: int, repeats: int) -> dict:
    """split + merge + parse + report on pre-generated answers (bench/scale_bench.py), `repeats` times."""
    from scale_bench import measure

    runs = [measure(n, shards, planning=False)["steps"] for _ in range(repeats)]
    return {
        "seconds": {k: spread([r[k]["seconds"] for r in runs], 2) for k in runs[0]},
        "pipeline_seconds": spread([sum(v["seconds"] for v in r.values()) for r in runs], 2),
        "peak_rss_mb": max(v["peak_rss_mb"] or 0 for r in runs for v in r.values()),
        "n_items": n,
        "shards": shards,
        "repeats": repeats,
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
    ap.add_argument(
        "--repeats", type=int, default=MIN_REPEATS, help=f"alternating repeats per ratio (at least {MIN_REPEATS})"
    )
    ap.add_argument("--only", choices=["planning"], help="run this row alone (no results file unless --out)")
    args = ap.parse_args()
    import logging

    logging.basicConfig(level=logging.WARNING)
    q = args.quick
    if not q and args.repeats < MIN_REPEATS:
        ap.error(f"--repeats {args.repeats}: a ratio is the median of at least {MIN_REPEATS} repeats")
    reps = 2 if q else args.repeats
    results = {"machine": machine(), "date": time.strftime("%Y-%m-%d %H:%M:%S")}
    # Not ratios: each against its own target, the median of the alternating repeats.
    planning = bench_planning([10] if q else [1000, 10000], 400 if q else 1_000_000, 1 if q else reps)
    results["planning"] = planning
    if args.only == "planning":
        if args.out:
            Path(args.out).write_text(json.dumps(results, indent=2) + "\n")
        targets = Targets()
        planning_rows(planning, targets)
        return targets.report(q)
    # The tiny demo generator (the target's setting), then the 4-layer "small" model for contrast.
    demo = str(ROOT / "models" / "demo-generator")
    results["generation"] = bench_generation(demo, 4 if q else 64, 4 if q else 32, 64, reps)
    with tempfile.TemporaryDirectory() as tmp:  # --quick builds a tiny one instead, and not to keep
        model = ensure_model(Path(tmp) / "tiny", "tiny") if q else ensure_model(ROOT / "bench/.models/small", "small")
        results["generation_small_model"] = bench_generation(model, 4 if q else 64, 4 if q else 32, 64, reps)
    # The trained demo judge on its own template: it writes a real verdict, then stops.
    judge = str(ROOT / "models" / "demo-judge")
    results["judge"] = bench_judge(judge, 4 if q else 512, 16, 16, reps)
    results["pipeline"] = bench_pipeline(40 if q else 100_000, 4 if q else 100, 1 if q else 3)
    out = Path(args.out) if args.out else None if q else ROOT / "bench" / "results.json"
    if out:
        out.write_text(json.dumps(results, indent=2) + "\n")
    g, j, p = results["generation"], results["judge"], results["pipeline"]
    gs = results["generation_small_model"]
    targets = Targets()
    small = "tiny" if q else "small"

    def speeds(r, a, b):
        return f"{shown(r[a]['items_per_s'], '', 1)} vs {shown(r[b]['items_per_s'], '', 1)} items/s"

    rows = [
        ("generation: ours vs sequential batch-1", speeds(g, "ours", "sequential_batch1"),
         g["ratio_ours_vs_sequential"], 10),
        ("generation: ours vs one raw batched generate", speeds(g, "ours", "raw_batched"),
         g["ratio_ours_vs_raw_batched"], 0.8),
        (f"  {small} model: ours vs sequential batch-1", speeds(gs, "ours", "sequential_batch1"),
         gs["ratio_ours_vs_sequential"], None),
        (f"  {small} model: ours vs raw batched generate", speeds(gs, "ours", "raw_batched"),
         gs["ratio_ours_vs_raw_batched"], None),
        ("judge: logprob vs generate (demo judge)", speeds(j, "logprob", "generate"),
         j["ratio_logprob_vs_generate"], 5),
        ("judge: logprob vs generate, 32-token rationale", speeds(j, "logprob", "generate_with_rationale"),
         j["ratio_logprob_vs_generate_with_rationale"], None),
    ]  # fmt: skip
    print(f"medians of {reps} alternating repeats [min-max]; a ratio is taken within each repeat")
    print(f"{'measure':48} {'figures':52} {'ratio':>20}  target")
    for what, figures, ratio, target in rows:
        print(f"{what:48} {figures:52} {shown(ratio, 'x'):>20}  {f'>= {target}x' if target else ''}")
        if target:
            targets.at_least(what, ratio["median"], target)
    planning_rows(planning, targets)
    what = f"split+merge+parse+report, {p['n_items']} items"
    figures = f"{shown(p['pipeline_seconds'], ' s')}, peak {p['peak_rss_mb']} MB"
    print(f"{what:48} {figures:52} {'':>20}  < 60 s, < 2 GB")
    targets.at_most(what, p["pipeline_seconds"]["median"], 60, " s")
    targets.at_most(f"{what}, peak memory", p["peak_rss_mb"], 2048, " MB")
    if out:
        print(f"written to {out}")
    return targets.report(q)


if __name__ == "__main__":
    from _repeats import ended

    sys.exit(ended(main()))
