"""GPU benchmark, measured side by side in one run on the GPUs of this machine.

1. generation on one GPU: our path (length-sorted batches, `Generator` + `run_batches`) vs
   one raw batched `model.generate` over all prompts vs a sequential batch-1 loop; tokens/s
   against the memory-bandwidth bound of decoding, batch x bandwidth / weight bytes (each
   step reads every weight once), with the bandwidth from the GPU's name or --bandwidth-gbs;
2. judging with the GPUs present: `device_map` (one process, layers spread), `tensor` (one
   torchrun group, transformers' tensor-parallel plan) and `replicas` (one process per GPU,
   each on its share of the prompts, started together).

The model is a random Llama built here (no download): by default the largest shape up to 3B
parameters whose weights take at most half of one GPU (so that replicas run and batches fit),
or --size; every path generates exactly --new-tokens per prompt.
Figures are the median of --repeats runs (runs of the three generation paths alternate)
with their spread (min-max). Writes bench/gpu_results.json and prints a table.

Without CUDA it exits with a message (status 2); --cpu-smoke runs the whole script on the CPU
with the tiny demo judge to check it end to end (its figures mean nothing). --quick runs every
path at tiny sizes with the tiny model in seconds, on the GPUs when there are any, else (saying so)
as --cpu-smoke; it writes no results file unless --out is given. The test suite runs it.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

# Peak memory bandwidth (bytes/s) by GPU name, from the vendors' data sheets; the first match wins.
BANDWIDTH = [
    ("H200", 4.8e12),
    ("H100 PCIe", 2.0e12),
    ("H100 NVL", 3.9e12),
    ("H100", 3.35e12),
    ("GH200", 4.0e12),
    ("A100-SXM4-80GB", 2.039e12),
    ("A100 80GB PCIe", 1.935e12),
    ("A100-PCIE-40GB", 1.555e12),
    ("A100", 1.555e12),
    ("L40S", 0.864e12),
    ("L40", 0.864e12),
    ("A6000", 0.768e12),
    ("A10G", 0.6e12),
    ("A10", 0.6e12),
    ("L4", 0.3e12),
    ("V100", 0.9e12),
    ("RTX 4090", 1.008e12),
    ("RTX 3090", 0.936e12),
    ("T4", 0.32e12),
]

SIZES = {  # Llama shapes: hidden, intermediate, layers, heads, key/value heads
    "tiny": (64, 128, 2, 4, 2),
    "125m": (768, 2048, 12, 12, 4),
    "1b": (2048, 5632, 16, 32, 8),
    "3b": (3072, 8192, 28, 24, 8),
    "8b": (4096, 14336, 32, 32, 8),
}


def n_params(size: str, vocab: int = 512) -> int:
    h, inter, layers, heads, kv = SIZES[size]
    per_layer = 2 * h * h + 2 * h * (h // heads) * kv + 3 * h * inter + 2 * h
    return layers * per_layer + 2 * vocab * h + h


def size_to_fit(gpu_bytes: int, bytes_per_param: int, largest: str = "3b") -> str:
    """The largest shape (up to `largest`) whose weights take at most half of one GPU: one GPU holds
    a replica with room for its batches."""
    fitting = [s for s in SIZES if n_params(s) * bytes_per_param <= gpu_bytes / 2]
    order = list(SIZES)
    fitting = [s for s in fitting if order.index(s) <= order.index(largest)]
    return fitting[-1] if fitting else "tiny"


def bandwidth_for(name: str) -> float | None:
    for key, bw in BANDWIDTH:
        if key.lower() in name.lower():
            return bw
    return None


def stats(values: list[float]) -> dict:
    return {"median": round(statistics.median(values), 2), "min": round(min(values), 2), "max": round(max(values), 2)}


def build_model(size: str, dtype: str) -> str:
    """A random Llama of `size` with the demo judge's tokenizer, saved once under bench/.models."""
    import shutil

    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    path = ROOT / "bench" / ".models" / f"gpu-{size}-{dtype}"
    if (path / "config.json").exists():
        return str(path)
    tok_dir = ROOT / "models" / "demo-judge"
    tok = AutoTokenizer.from_pretrained(tok_dir)
    h, inter, layers, heads, kv = SIZES[size]
    cfg = LlamaConfig(
        vocab_size=len(tok),
        hidden_size=h,
        intermediate_size=inter,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=kv,
        max_position_embeddings=4096,
        tie_word_embeddings=False,
        bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id,
        pad_token_id=tok.pad_token_id,
    )
    torch.manual_seed(0)
    with torch.device("cuda" if torch.cuda.is_available() else "cpu"):
        model = LlamaForCausalLM(cfg).to(getattr(torch, dtype))
    tmp = path.with_name(path.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    model.save_pretrained(tmp)
    for f in tok_dir.iterdir():
        if f.name.startswith("tokenizer") or f.suffix == ".jinja":
            shutil.copy(f, tmp / f.name)
    tmp.rename(path)
    return str(path)


def prompts_for(tok, n: int) -> list[str]:
    import random

    from genjudge.engine.prompting import render_prompt

    rng = random.Random(0)
    qs = [json.loads(line)["question"] for line in (ROOT / "config/demo/questions.jsonl").read_text().splitlines()]
    return [render_prompt(tok, rng.choice(qs) + " Explain step by step." * rng.randint(0, 8)) for _ in range(n)]


def sync():
    import torch

    if torch.cuda.is_available():
        torch.cuda.synchronize()


def fixed_generate(model, new_tokens: int):
    """model.generate producing exactly `new_tokens` for every prompt (the same work on every path)."""
    plain = model.generate
    return lambda **kw: plain(**{**kw, "min_new_tokens": new_tokens, "max_new_tokens": new_tokens})


# --- 1. generation paths on one GPU --------------------------------------------------------


def bench_generation(model_dir: str, args) -> dict:
    import torch

    from genjudge.config.specs import spec_for
    from genjudge.engine.batch_size import auto_batch_size
    from genjudge.engine.decoding import Generator, GenParams, run_batches
    from genjudge.engine.loading import load_causal_lm, load_tokenizer

    tok = load_tokenizer(model_dir)
    spec = spec_for("generator", model=model_dir, max_new_tokens=args.new_tokens)
    model, _ = load_causal_lm(spec)
    n, t = args.prompts, args.new_tokens
    prompts = prompts_for(tok, n)
    seq_prompts = prompts[: args.sequential_prompts]
    weight_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
    config = model.config
    kv = 2 * config.num_hidden_layers * config.num_key_value_heads * (config.hidden_size // config.num_attention_heads)
    kv *= next(model.parameters()).element_size()
    lengths = Generator(model, tok, GenParams(max_new_tokens=t), False).token_lengths(prompts)
    longest = prompts[max(range(n), key=lambda i: lengths[i])]
    model.generate = fixed_generate(model, t)
    # The workflow's path: the batch batch_size auto chooses (its probes), eager and compiled.
    gens, choices = {}, {}
    for name, compiled in (("ours", False), ("ours_compiled", True)):
        # The CPU smoke run checks the script: compiling there would take most of its time.
        compiled = compiled and not args.cpu_smoke
        g = Generator(model, tok, GenParams(max_new_tokens=t), add_special_tokens=False, compile=compiled)
        g.cache_tokens = max(lengths) + t
        c = auto_batch_size(g, longest, n, spec, kv, t) if args.batch == 0 else None
        g.batch_size = c.batch if c is not None else args.batch
        gens[name], choices[name] = g, c
    fixed = {"do_sample": False, "pad_token_id": tok.pad_token_id}

    def ours_with(g):
        def run():
            run_batches(lengths, g.batch_size, lambda idx: g.generate([prompts[i] for i in idx]))
            return n * t

        return run

    def raw_batched():
        for i in range(0, n, args.raw_batch):
            part = prompts[i : i + args.raw_batch]
            enc = tok(part, return_tensors="pt", padding=True, add_special_tokens=False).to(model.device)
            with torch.inference_mode():
                model.generate(**enc, **fixed)
        return n * t

    def sequential():
        for p in seq_prompts:
            enc = tok([p], return_tensors="pt", add_special_tokens=False).to(model.device)
            with torch.inference_mode():
                model.generate(**enc, **fixed)
        return len(seq_prompts) * t

    paths = {
        "ours": ours_with(gens["ours"]),
        "ours_compiled": ours_with(gens["ours_compiled"]),
        "raw_batched": raw_batched,
        "sequential_batch1": sequential,
    }
    for fn in paths.values():  # warm-up (kernels, allocator, compilation)
        fn()
    rates: dict[str, list[float]] = {k: [] for k in paths}
    peaks: dict[str, int] = {}
    names = list(paths)
    for r in range(args.repeats):
        for name in names if r % 2 == 0 else names[::-1]:  # alternate the order
            if torch.cuda.is_available():
                torch.cuda.reset_peak_memory_stats()
            sync()
            t0 = time.perf_counter()
            tokens = paths[name]()
            sync()
            rates[name].append(tokens / (time.perf_counter() - t0))
            if torch.cuda.is_available():
                peaks[name] = max(peaks.get(name, 0), torch.cuda.max_memory_allocated())
    name = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu"
    bw = args.bandwidth_gbs * 1e9 if args.bandwidth_gbs else bandwidth_for(name)
    out = {
        "gpu": name,
        "weight_bytes": weight_bytes,
        "bandwidth_bytes_per_s": bw,
        "bandwidth_source": "--bandwidth-gbs" if args.bandwidth_gbs else ("GPU name" if bw else None),
        "prompts": n,
        "sequential_prompts": len(seq_prompts),
        "new_tokens": t,
        "batch_size": gens["ours"].batch_size,
        "batch_choice": {k: c.meta() if c else None for k, c in choices.items()},
        "batch_search_seconds": {k: c.search_seconds if c else 0.0 for k, c in choices.items()},
        "compile_seconds": round(gens["ours_compiled"].compile_seconds, 1),
        "repeats": args.repeats,
    }
    for k, v in rates.items():
        batch = {
            "ours": gens["ours"].batch_size,
            "ours_compiled": gens["ours_compiled"].batch_size,
            "raw_batched": min(n, args.raw_batch),
            "sequential_batch1": 1,
        }[k]
        bound = batch * bw / weight_bytes if bw else None
        out[k] = {
            "tokens_per_s": stats(v),
            "batch": batch,
            "peak_memory_bytes": peaks.get(k),
            "bandwidth_bound_tokens_per_s": round(bound, 1) if bound else None,
            "fraction_of_bound": round(statistics.median(v) / bound, 3) if bound else None,
        }
    med = {k: statistics.median(v) for k, v in rates.items()}
    out["ratio_ours_vs_sequential"] = round(med["ours"] / med["sequential_batch1"], 2)
    out["ratio_ours_vs_raw_batched"] = round(med["ours"] / med["raw_batched"], 2)
    out["ratio_ours_compiled_vs_raw_batched"] = round(med["ours_compiled"] / med["raw_batched"], 2)
    return out


# --- 2. judge: device_map vs tensor vs replicas ---------------------------------------------


def worker(args) -> int:
    """One judging process: device_map over its visible GPUs, a tensor-parallel rank, or a replica
    on its share; prints one JSON line (rank 0 only in a group)."""
    import torch

    from genjudge.config.specs import spec_for
    from genjudge.engine import tensor_parallel
    from genjudge.engine.decoding import Generator, GenParams, run_batches
    from genjudge.engine.loading import load_causal_lm, load_tokenizer

    if tensor_parallel.active():
        tensor_parallel.init()
    tok = load_tokenizer(args.model)
    model, placement = load_causal_lm(spec_for("judge", model=args.model))
    prompts = prompts_for(tok, args.prompts)[args.part :: args.parts]
    gen = Generator(model, tok, GenParams(max_new_tokens=args.new_tokens), add_special_tokens=False)
    model.generate = fixed_generate(model, args.new_tokens)
    lengths = gen.token_lengths(prompts)

    def run():
        run_batches(
            lengths, args.batch or 64, tensor_parallel.agree(lambda idx: gen.generate([prompts[i] for i in idx]))
        )

    run()  # warm-up
    spans = []
    for r in range(args.repeats):
        barrier(args.barrier, f"{r}", args.part, args.parts)
        sync()
        t0 = time.time()
        run()
        sync()
        spans.append((t0, time.time()))
    if tensor_parallel.is_writer():
        print(
            "RESULT "
            + json.dumps(
                {
                    "part": args.part,
                    "tokens": len(prompts) * args.new_tokens,
                    "spans": spans,
                    "placement": placement,
                    "gpus": torch.cuda.device_count(),
                }
            ),
            flush=True,
        )
    tensor_parallel.finish()
    return 0


def barrier(directory: str | None, tag: str, part: int, parts: int) -> None:
    """Replicas start each repeat together: a file per process, wait for all."""
    if not directory or parts == 1:
        return
    Path(directory, f"{tag}.{part}").touch()
    while len(list(Path(directory).glob(f"{tag}.*"))) < parts:
        time.sleep(0.005)


def launch(kind: str, n_gpus: int, model_dir: str, args, tmp: Path) -> dict:
    """Start the processes of one judge layout and gather their timings."""
    base = [
        sys.executable,
        str(Path(__file__).resolve()),
        "_worker",
        "--model",
        model_dir,
        "--prompts",
        str(args.judge_prompts),
        "--new-tokens",
        str(args.new_tokens),
        "--batch",
        str(args.batch or 64),
        "--repeats",
        str(args.repeats),
    ]
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    visible = ",".join(str(i) for i in range(n_gpus))
    cpus = os.cpu_count() or 1
    procs = []
    # The machine's CPU threads shared out among the processes (torchrun alone would set 1).
    env["OMP_NUM_THREADS"] = str(cpus if kind == "device_map" else max(1, cpus // max(n_gpus, 1)))
    if kind == "device_map":
        procs.append(subprocess.Popen(base, env={**env, "CUDA_VISIBLE_DEVICES": visible}, stdout=subprocess.PIPE))
    elif kind == "tensor":
        cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={n_gpus}", *base[1:]]
        procs.append(
            subprocess.Popen(
                cmd,
                env={**env, "CUDA_VISIBLE_DEVICES": visible, "GENJUDGE_TENSOR_PARALLEL": "1"},
                stdout=subprocess.PIPE,
            )
        )
    else:
        bar = tmp / f"barrier-{kind}"
        bar.mkdir()
        for i in range(n_gpus):
            cmd = [*base, "--part", str(i), "--parts", str(n_gpus), "--barrier", str(bar)]
            device = str(i) if args.device_count else ""
            procs.append(subprocess.Popen(cmd, env={**env, "CUDA_VISIBLE_DEVICES": device}, stdout=subprocess.PIPE))
    results = []
    for p in procs:
        out = p.communicate()[0].decode()
        if p.returncode != 0:
            raise SystemExit(f"gpu_bench: the {kind} judge run failed (exit {p.returncode})")
        results += [json.loads(line[7:]) for line in out.splitlines() if line.startswith("RESULT ")]
    tokens = sum(r["tokens"] for r in results)
    rates = []
    for rep in range(args.repeats):  # wall time of a repeat: first start to last end over the processes
        start = min(r["spans"][rep][0] for r in results)
        end = max(r["spans"][rep][1] for r in results)
        rates.append(tokens / (end - start))
    return {
        "processes": len(procs) if kind != "tensor" else n_gpus,
        "tokens_per_s": stats(rates),
        "tokens": tokens,
        "placement": [r["placement"] for r in results],  # parameters per device, per process (rank 0 in a group)
    }


def bench_judge(model_dir: str, n_gpus: int, args) -> dict:
    import tempfile

    kinds = ["device_map", "tensor", "replicas"] if n_gpus >= 2 else ["device_map"]
    out = {"gpus": n_gpus, "prompts": args.judge_prompts, "new_tokens": args.new_tokens, "batch_size": args.batch or 64}
    with tempfile.TemporaryDirectory() as tmp:
        for kind in kinds:
            print(f"gpu_bench: judge {kind} over {n_gpus} GPU(s)...", file=sys.stderr, flush=True)
            out[kind] = launch(kind, n_gpus, model_dir, args, Path(tmp))
    if n_gpus < 2:
        out["note"] = "one GPU: tensor and replicas need two or more"
    else:
        dm = out["device_map"]["tokens_per_s"]["median"]
        out["ratio_tensor_vs_device_map"] = round(out["tensor"]["tokens_per_s"]["median"] / dm, 2)
        out["ratio_replicas_vs_device_map"] = round(out["replicas"]["tokens_per_s"]["median"] / dm, 2)
    return out


def table(res: dict) -> str:
    g = res["generation"]
    rows = [("measure", "tokens/s median [min-max]", "bound", "of bound")]
    for k in ("ours", "ours_compiled", "raw_batched", "sequential_batch1"):
        s = g[k]["tokens_per_s"]
        bound = g[k]["bandwidth_bound_tokens_per_s"]
        rows.append(
            (
                f"generate: {k} (batch {g[k]['batch']})",
                f"{s['median']} [{s['min']}-{s['max']}]",
                f"{bound}" if bound else "-",
                f"{g[k]['fraction_of_bound']:.0%}" if bound else "-",
            )
        )
    rows.append(
        (
            "ours / sequential, ours / raw batched, compiled / raw batched",
            f"{g['ratio_ours_vs_sequential']}x, {g['ratio_ours_vs_raw_batched']}x, "
            f"{g['ratio_ours_compiled_vs_raw_batched']}x",
            "",
            "",
        )
    )
    j = res["judge"]
    for k in ("device_map", "tensor", "replicas"):
        if k in j:
            s = j[k]["tokens_per_s"]
            rows.append((f"judge: {k} on {j['gpus']} GPU(s)", f"{s['median']} [{s['min']}-{s['max']}]", "", ""))
    if "ratio_tensor_vs_device_map" in j:
        rows.append(
            (
                "tensor / device_map, replicas / device_map",
                f"{j['ratio_tensor_vs_device_map']}x, {j['ratio_replicas_vs_device_map']}x",
                "",
                "",
            )
        )
    width = [max(len(r[i]) for r in rows) for i in range(4)]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, width)) for r in rows)


# --quick: seconds, to check that the bench still runs against the package (its figures mean nothing).
QUICK = {
    "prompts": 8,
    "sequential_prompts": 2,
    "judge_prompts": 8,
    "new_tokens": 4,
    "batch": 8,
    "repeats": 1,
    "raw_batch": 8,
}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = sys.argv[1:2] == ["_worker"]
    ap.add_argument(
        "--size", choices=list(SIZES), help="the random Llama's shape (default: the largest up to 3b within half a GPU)"
    )
    ap.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float16", "float32"])
    ap.add_argument("--prompts", type=int, default=256, help="prompts of the generation comparison")
    ap.add_argument("--sequential-prompts", type=int, default=16, help="prompts of the batch-1 loop (it is slow)")
    ap.add_argument("--judge-prompts", type=int, default=512)
    ap.add_argument("--new-tokens", type=int, default=64)
    ap.add_argument("--batch", type=int, default=0, help="our path's batch (default 0: batch_size auto's choice)")
    ap.add_argument("--raw-batch", type=int, default=256, help="the batches of raw model.generate (default 256)")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--bandwidth-gbs", type=float, help="GPU memory bandwidth in GB/s (default: from the GPU's name)")
    ap.add_argument("--out", help="results JSON (default bench/gpu_results.json)")
    ap.add_argument("--cpu-smoke", action="store_true", help="run on the CPU with the tiny model (checks the script)")
    ap.add_argument("--quick", action="store_true", help=f"the tiny model, {QUICK}; without CUDA as --cpu-smoke")
    if sub:
        ap.add_argument("--model")
        ap.add_argument("--part", type=int, default=0)
        ap.add_argument("--parts", type=int, default=1)
        ap.add_argument("--barrier")
        args = ap.parse_args(sys.argv[2:])
        return worker(args)
    args = ap.parse_args()
    import logging

    import torch

    logging.basicConfig(level=logging.WARNING)
    if args.quick:
        for k, v in QUICK.items():
            if getattr(args, k) == ap.get_default(k):
                setattr(args, k, v)
        args.size = args.size or "tiny"
        if not torch.cuda.is_available():
            print(
                "gpu_bench --quick: torch sees no CUDA GPU here: the GPU measurements are skipped; "
                "the CPU smoke run checks the rest of the script (its figures mean nothing)",
                flush=True,
            )
            args.cpu_smoke = True
    if not torch.cuda.is_available() and not args.cpu_smoke:
        print(
            "gpu_bench: torch sees no CUDA GPU here (torch "
            f"{torch.__version__}, CUDA {torch.version.cuda}); run it on a GPU machine "
            "(or --cpu-smoke to check the script on the CPU)",
            file=sys.stderr,
        )
        return 2
    args.device_count = torch.cuda.device_count()
    if args.cpu_smoke:
        args.size, args.dtype = "tiny", "float32"
    elif not args.size:
        per_param = 4 if args.dtype == "float32" else 2
        args.size = size_to_fit(torch.cuda.get_device_properties(0).total_memory, per_param)
    model_dir = build_model(args.size, args.dtype)
    res = {"date": time.strftime("%Y-%m-%d %H:%M:%S"), "torch": torch.__version__, "size": args.size}
    res["generation"] = bench_generation(model_dir, args)
    res["judge"] = bench_judge(model_dir, args.device_count or (2 if args.cpu_smoke else 0), args)
    out = args.out or (None if args.quick else ROOT / "bench" / "gpu_results.json")
    if out:
        Path(out).write_text(json.dumps(res, indent=2) + "\n")
    print(
        f"GPU: {res['generation']['gpu']} x {args.device_count}; model: random Llama {args.size} {args.dtype}, "
        f"weights {res['generation']['weight_bytes'] / 1e9:.2f} GB"
    )
    print(table(res))
    if out:
        print(f"written to {out}")
    return 0


if __name__ == "__main__":
    from _repeats import ended

    sys.exit(ended(main()))
