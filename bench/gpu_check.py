"""One command that checks a GPU machine (`make gpu-check`), about 8 minutes on one 80 GB GPU:

1. `pytest -m gpu` (the CUDA paths of the workflow);
2. the generation bench at the 1B shape (bench/gpu_bench.py: the workflow's path with the batch that
   batch_size auto chooses, eager and compiled, against raw batched `model.generate` and batch 1);
3. ms per decoding step of the 3B shape at batches 1, 16 and 64 in bf16 (eager and compiled), 8-bit and
   4-bit, against the bandwidth bound of reading the weights once a step;
4. a one-shard workflow run of the 1B shape (`python -m snakemake`, batch_size auto) beside the plan's
   predicted seconds, term by term, without calibration and with `--calibrate` on that run.

It writes bench/gpu_check.json and bench/gpu_check.md naming the GPU and the versions, and this GPU's
entries of the time model's constants (src/genjudge/planning/gpu_constants.json) from what it
measured. Every subprocess inherits the environment; snakemake runs as `python -m snakemake`, so its
console script need not be on PATH. Without CUDA it says so in one line and exits 2.

--quick (the test suite): every part at tiny sizes on the CPU (pytest -m gpu left out), in seconds;
nothing is written.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import gpu_bench  # noqa: E402 - beside this file

STEP_BATCHES = (1, 16, 64)
STEP_PROMPT_TOKENS, STEP_NEW_TOKENS = 128, 64
WORKFLOW_PROMPTS, WORKFLOW_NEW_TOKENS = 1024, 128
PRECISIONS = ("bf16", "bf16 compiled", "8bit", "4bit")


def versions() -> dict:
    import importlib.metadata as md

    import torch

    out = {"torch": torch.__version__, "cuda": torch.version.cuda, "python": sys.version.split()[0]}
    for dist in ("transformers", "bitsandbytes", "accelerate", "snakemake", "vllm"):
        try:
            out[dist] = md.version(dist)
        except md.PackageNotFoundError:
            out[dist] = None
    return out


def run_pytest_gpu(python: list | None = None) -> dict:
    """`pytest -m gpu` in its own process, with this environment; its summary line. `python`: the
    interpreter's command (this one by default)."""
    t0 = time.perf_counter()
    proc = subprocess.run(
        [*(python or [sys.executable]), "-m", "pytest", "-m", "gpu", "-q", "-p", "no:cacheprovider", "-rs"],
        cwd=ROOT,
        env=dict(os.environ),
        capture_output=True,
        text=True,
    )
    return {"returncode": proc.returncode, "summary": summary(proc), "seconds": round(time.perf_counter() - t0, 1)}


def summary(proc) -> str:
    """pytest's last line; where it wrote nothing to stdout (no pytest, a crash), stderr's last line."""
    for stream in (proc.stdout, proc.stderr):
        lines = [line for line in (stream or "").splitlines() if line.strip()]
        if lines:
            return lines[-1]
    return f"exit status {proc.returncode}, no output"


def step_prompts(tok, n: int, tokens: int) -> list[str]:
    """`n` prompts of exactly `tokens` tokens (a fixed text, cut to length)."""
    text = " ".join(["How many apples are left in the basket after lunch?"] * tokens)
    ids = tok(text, add_special_tokens=False)["input_ids"][:tokens]
    return [tok.decode(ids)] * n


def bench_steps(size: str, dtype: str, batches, new_tokens: int, prompt_tokens: int, repeats: int, smoke: bool):
    """Milliseconds per decoding step (after the first new token) of the workflow's Generator at each
    precision and batch: the median of `repeats` generations of exactly `new_tokens`."""
    import torch

    from genjudge.config.specs import spec_for
    from genjudge.engine.decoding import Generator, GenParams
    from genjudge.engine.loading import load_causal_lm, load_tokenizer

    model_dir = gpu_bench.build_model(size, dtype)
    tok = load_tokenizer(model_dir)
    rows: dict = {}
    for precision in PRECISIONS:
        compiled = precision == "bf16 compiled"
        if compiled and smoke:
            continue  # compiling on the CPU would take most of the smoke run
        quant = precision if precision in ("8bit", "4bit") else "none"
        model, _ = load_causal_lm(spec_for("generator", model=model_dir, quantization=quant))
        model.generate = gpu_bench.fixed_generate(model, new_tokens)
        weights = sum(p.numel() * p.element_size() for p in model.parameters())
        rows[precision] = {"weight_bytes": weights, "ms_per_step": {}, "compile_seconds": {}}
        for b in batches:
            g = Generator(model, tok, GenParams(max_new_tokens=new_tokens), False, compile=compiled)
            g.batch_size, g.cache_tokens = b, prompt_tokens + new_tokens
            prompts = step_prompts(tok, b, prompt_tokens)
            g.generate(prompts)  # warm-up (compiles)
            rows[precision]["compile_seconds"][b] = round(g.compile_seconds, 1)
            times = []
            for _ in range(repeats):
                before = (g.timing.decode_seconds, g.timing.decode_steps)
                g.generate(prompts)
                times.append((g.timing.decode_seconds - before[0]) / max(1, g.timing.decode_steps - before[1]))
            rows[precision]["ms_per_step"][b] = round(statistics.median(times) * 1e3, 2)
        del model
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
    return {"size": size, "prompt_tokens": prompt_tokens, "new_tokens": new_tokens, "rows": rows}


def workflow_dataset(path: Path, n: int) -> None:
    import random

    rng = random.Random(0)
    qs = [json.loads(line) for line in (ROOT / "config/demo/questions.jsonl").read_text().splitlines()]
    with open(path, "w") as fh:
        for i in range(n):
            q = rng.choice(qs)
            row = {"id": f"q{i}", "question": q["question"] + " Explain step by step." * rng.randint(0, 8)}
            fh.write(json.dumps({**row, "answer": q["answer"]}) + "\n")


def bench_workflow(model_dir: str, n: int, new_tokens: int, gpu: bool) -> dict:
    """A one-shard generation run through the workflow (batch_size auto), and the plan's prediction
    of that job, term by term, before and after `--calibrate` on it."""
    from genjudge import config as wfconfig
    from genjudge.stages.plan import make_plan

    tmp = Path(tempfile.mkdtemp(prefix="gpu-check-"))
    keep = False  # a failed run's directory is kept: its logs say why
    try:
        for name in ("Snakefile", "rules", "scripts", "config", "profiles"):
            src = ROOT / name
            (shutil.copytree if src.is_dir() else shutil.copy)(src, tmp / name)
        shutil.copytree(ROOT / "models", tmp / "models")
        workflow_dataset(tmp / "questions.jsonl", n)
        cfg = {
            "run": "gpucheck",
            "shards": 1,
            "dataset": {"path": "questions.jsonl"},
            "generator": {"model": str(model_dir), "max_new_tokens": new_tokens, "batch_size": "auto"},
            "judge": {"model": "models/demo-judge"},
            "gpu_inventory": "auto" if gpu else [],
            "lock_dir": str(tmp / "locks"),
            "cache_dir": str(tmp / "cache"),
        }
        (tmp / "check.yaml").write_text(json.dumps(cfg))
        cwd = os.getcwd()
        os.chdir(tmp)
        try:  # the plan before the run (no measurement of it yet), then the run
            config = wfconfig.load(["check.yaml"], [], str(tmp))
            _, plans = make_plan(config, roles=["generator"], workflow_dir=str(tmp))
        finally:
            os.chdir(cwd)
        cmd = [sys.executable, "-m", "snakemake", "--cores", "4", "--configfile", "check.yaml", "--until", "merge"]
        if gpu:
            cmd += ["--resources", "gpu=1"]
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, cwd=tmp, env={**os.environ, "HF_HUB_OFFLINE": "1"}, capture_output=True, text=True)
        wall = time.perf_counter() - t0
        if proc.returncode != 0:
            keep = True
            raise SystemExit(
                f"gpu_check: the workflow run failed (its directory is kept: logs under {tmp / 'logs'}, "
                f"snakemake's under {tmp / '.snakemake' / 'log'}):\n{proc.stderr[-4000:]}"
            )
        gen = Path(model_dir).name
        meta = json.loads((tmp / f"results/gpucheck/generations/{gen}/questions/0.meta.json").read_text())
        bench = (tmp / f"logs/gpucheck/benchmarks/generate/{gen}/questions/0.tsv").read_text().splitlines()
        job = float(dict(zip(bench[0].split("\t"), bench[1].split("\t")))["s"])
        os.chdir(tmp)
        try:
            _, calibrated = make_plan(config, roles=["generator"], workflow_dir=str(tmp), calibrate="results/gpucheck")
        finally:
            os.chdir(cwd)
    finally:
        if not keep:
            shutil.rmtree(tmp, ignore_errors=True)
    measured = {
        "load": meta["load_seconds"],
        "batch search": meta["batch_search_seconds"],
        "compile": meta["compile_seconds"],
        "prefill": meta["prefill_seconds"],
        "decode": meta["decode_seconds"],
        "job": job,
    }
    measured["start-up"] = max(0.0, job - sum(v or 0 for k, v in measured.items() if k != "job"))

    def terms(plan) -> dict:
        t = plan["time"]["questions"]["terms"]
        out = {k: t.get(k, 0.0) for k in ("start-up", "load", "batch search", "compile", "prefill")}
        out["decode"] = sum(v for k, v in t.items() if k.startswith("decode") or k == "quantization")
        out["job"] = plan["time"]["questions"]["seconds"]
        return out

    predicted, after = terms(plans[0]), terms(calibrated[0])
    return {
        "prompts": n,
        "new_tokens": new_tokens,
        "batch_size": meta["batch_size"],
        "planned_batch": plans[0]["batch_size"],
        "batch_choice": (meta.get("batch_choice") or {}).get("reason"),
        "tokens_per_second": meta["tokens_per_second"],
        "wall_seconds": round(wall, 1),
        "measured": {k: round(v or 0, 2) for k, v in measured.items()},
        "predicted": {k: round(v, 2) for k, v in predicted.items()},
        "predicted_calibrated": {k: round(v, 2) for k, v in after.items()},
    }


def constants_from(steps: dict, flow: dict | None, gpu: str, vers: dict, bandwidth: float, layers: int) -> list[dict]:
    """This GPU's entries of the time model's constants, from the step table and the workflow run."""
    rows = steps["rows"]
    stamp = time.strftime("%Y-%m-%d")
    v = f"torch {vers['torch']}, transformers {vers['transformers']}" + (
        f", bitsandbytes {vers['bitsandbytes']}" if vers.get("bitsandbytes") else ""
    )
    how = f"make gpu-check (bench/gpu_check.py): the {steps['size']} shape, {steps['prompt_tokens']}-token prompts"
    weights_s = rows["bf16"]["weight_bytes"] / (bandwidth * 0.7)
    out = []

    def entry(name, value, unit, derivation, **extra):
        out.append(
            {
                "name": name,
                "engine": "transformers",
                "value": value,
                "unit": unit,
                "gpu": gpu,
                "versions": v,
                "date": stamp,
                "command": how,
                "derivation": derivation,
                **extra,
            }
        )

    for mode, key in (("eager", "bf16"), ("compiled", "bf16 compiled")):
        if key in rows:
            step = rows[key]["ms_per_step"][1] / 1e3
            entry(
                "step_overhead_per_layer",
                round(max(step - weights_s, 0) / layers, 6),
                "s",
                f"{step * 1e3:.1f} ms a step at batch 1, less the weights at 70% of the bandwidth, over {layers} layers",
                mode=mode,
            )
    for q in ("8bit", "4bit"):
        for b in (1, 64):
            if q in rows and b in rows[q]["ms_per_step"]:
                ratio = rows[q]["ms_per_step"][b] / rows["bf16"]["ms_per_step"][b]
                entry(
                    "quantization_factor",
                    round(ratio, 2),
                    "x the bf16 step",
                    f"{rows[q]['ms_per_step'][b]} ms against {rows['bf16']['ms_per_step'][b]} ms at batch {b}",
                    precision=q,
                    batch=b,
                )
    if "bf16 compiled" in rows:
        for b, s in rows["bf16 compiled"]["compile_seconds"].items():
            entry("compile_seconds", s, "s", f"the first compiled call at batch {b}", mode="compiled", batch=int(b))
    if flow:
        entry(
            "setup_seconds",
            round(flow["measured"]["start-up"], 1),
            "s",
            "the workflow's generate job: its wall time less load, probes, compile, prefill and decode",
        )
    return out


def write_constants(new: list[dict]) -> None:
    """Replace this GPU's entries of the same constants (same name, mode, precision, batch) with `new`."""
    from genjudge.store import atomic

    path = ROOT / "src/genjudge/planning/gpu_constants.json"
    data = json.loads(path.read_text())

    def key(e):
        return (e["name"], e["gpu"], e.get("mode"), e.get("precision"), e.get("batch"))

    replaced = {key(e) for e in new}
    data["entries"] = [e for e in data["entries"] if key(e) not in replaced] + new
    atomic.write_text(path, json.dumps(data, indent=2) + "\n")


def markdown(res: dict) -> str:
    lines = [
        f"# make gpu-check on {res['gpu']}",
        "",
        f"{res['date']}; " + ", ".join(f"{k} {v}" for k, v in res["versions"].items() if v),
        "",
    ]
    if res.get("pytest"):
        lines += [f"pytest -m gpu: {res['pytest']['summary']} ({res['pytest']['seconds']} s)", ""]
    g = res["generation"]
    lines += [
        "## Generation, 1B shape (tokens/s, median [min-max])",
        "",
        "| path | batch | tokens/s | of the bandwidth bound |",
        "|---|---|---|---|",
    ]
    for k in ("ours", "ours_compiled", "raw_batched", "sequential_batch1"):
        s, f = g[k]["tokens_per_s"], g[k]["fraction_of_bound"]
        lines.append(
            f"| {k} | {g[k]['batch']} | {s['median']} [{s['min']}-{s['max']}] | {f if f is None else f'{f:.0%}'} |"
        )
    lines += [
        "",
        f"ours / raw batched {g['ratio_ours_vs_raw_batched']}x; compiled / raw batched {g['ratio_ours_compiled_vs_raw_batched']}x",
        "",
    ]
    st = res["steps"]
    lines += [
        f"## ms per decoding step, {st['size']} shape",
        "",
        "| precision | "
        + " | ".join(f"batch {b}" for b in STEP_BATCHES if any(b in r["ms_per_step"] for r in st["rows"].values()))
        + " | batch 1 of the bound |",
        "|---" * 5 + "|",
    ]
    for p, r in st["rows"].items():
        cells = [
            str(r["ms_per_step"].get(b, "-"))
            for b in STEP_BATCHES
            if any(b in x["ms_per_step"] for x in st["rows"].values())
        ]
        frac = r.get("fraction_of_bound_batch1")
        lines.append(f"| {p} | " + " | ".join(cells) + f" | {'-' if frac is None else f'{frac:.0%}'} |")
    w = res["workflow"]
    lines += [
        "",
        f"## One-shard workflow run: {w['prompts']} prompts x {w['new_tokens']} new tokens, batch_size auto -> {w['batch_size']} (plan: {w['planned_batch']})",
        "",
        "| term | measured s | plan s | measured / plan | plan after --calibrate s | measured / calibrated |",
        "|---|---|---|---|---|---|",
    ]
    for k in ("start-up", "load", "batch search", "compile", "prefill", "decode", "job"):
        m, p, c = w["measured"][k], w["predicted"][k], w["predicted_calibrated"][k]
        r1 = f"{m / p:.2f}" if p else "-"
        r2 = f"{m / c:.2f}" if c else "-"
        lines.append(f"| {k} | {m} | {p} | {r1} | {c} | {r2} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="every part at tiny sizes on the CPU; writes nothing")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--no-pytest", action="store_true", help="leave out pytest -m gpu")
    args = ap.parse_args(argv)
    import logging

    import torch

    logging.basicConfig(level=logging.WARNING)
    gpu = torch.cuda.is_available()
    if not gpu and not args.quick:
        print(f"gpu-check: torch {torch.__version__} sees no CUDA GPU on this machine; run it on a GPU machine")
        return 2
    smoke = not gpu
    vers = versions()
    name = torch.cuda.get_device_name(0) if gpu else "cpu"
    res = {"date": time.strftime("%Y-%m-%d %H:%M:%S"), "gpu": name, "versions": vers}
    if gpu and not args.no_pytest:
        print("gpu-check: pytest -m gpu ...", flush=True)
        res["pytest"] = run_pytest_gpu()
    print("gpu-check: generation bench ...", flush=True)
    gen_args = argparse.Namespace(
        prompts=8 if smoke else 256,
        new_tokens=4 if smoke else 64,
        sequential_prompts=2 if smoke else 16,
        batch=0,
        raw_batch=8 if smoke else 256,
        repeats=1 if smoke else args.repeats,
        bandwidth_gbs=None,
        cpu_smoke=smoke,
    )
    size, dtype = ("tiny", "float32") if smoke else ("1b", "bfloat16")
    res["generation"] = gpu_bench.bench_generation(gpu_bench.build_model(size, dtype), gen_args)
    print("gpu-check: ms per step ...", flush=True)
    res["steps"] = bench_steps(
        "tiny" if smoke else "3b",
        dtype,
        (1, 4) if smoke else STEP_BATCHES,
        4 if smoke else STEP_NEW_TOKENS,
        16 if smoke else STEP_PROMPT_TOKENS,
        1 if smoke else args.repeats,
        smoke,
    )
    bandwidth = gpu_bench.bandwidth_for(name)
    for r in res["steps"]["rows"].values():
        bound = r["weight_bytes"] / bandwidth * 1e3 if bandwidth else None
        r["fraction_of_bound_batch1"] = round(bound / r["ms_per_step"][1], 3) if bound else None
    print("gpu-check: one-shard workflow run ...", flush=True)
    res["workflow"] = bench_workflow(
        gpu_bench.build_model(size, dtype), 4 if smoke else WORKFLOW_PROMPTS, 4 if smoke else WORKFLOW_NEW_TOKENS, gpu
    )
    md = markdown(res)
    print(md)
    if args.quick:
        return 0
    (ROOT / "bench" / "gpu_check.json").write_text(json.dumps(res, indent=2) + "\n")
    (ROOT / "bench" / "gpu_check.md").write_text(md)
    if bandwidth:
        layers = gpu_bench.SIZES["3b"][2]
        write_constants(constants_from(res["steps"], res["workflow"], name, vers, bandwidth, layers))
    print("written: bench/gpu_check.json, bench/gpu_check.md, src/genjudge/planning/gpu_constants.json")
    return 0


if __name__ == "__main__":
    from _repeats import ended

    sys.exit(ended(main()))
