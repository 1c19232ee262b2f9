"""engine: openai against the in-process vLLM engine, through the workflow's own judge stage.

One judge cell of N answers is judged by `stages.judge.run_judge` with the same model, prompts and
settings (greedy, fp32, verdicts written in up to 16 tokens): in process (`engine: vllm`) and through
vLLM's OpenAI-compatible server on loopback (`engine: openai`, `max_connections` in flight). Each repeat
starts from an empty item store and runs every path once, in the opposite order from the repeat before.

    python bench/endpoint_bench.py            # 400 answers on a random Llama (hidden 256), 5 repeats
    python bench/endpoint_bench.py --quick    # 16 answers on the demo judge, 1 repeat
    --server URL                              # a server already serving the model (as tests/endpoints.py starts one)

Measured, each the median of the repeats with its min-max:
- throughput: verdicts per second through the endpoint over in process (target >= 0.8x);
- faults: with one request in ten answered 429 with Retry-After: 1 (a loopback proxy, tests/endpoints.py),
  the wall time over the same proxy's without faults (target <= 1.5x);
- a provider's rate limit: a proxy that lets R requests a second through (429 and Retry-After beyond,
  R a third of what the server does), the rate of answers over the run's steady part (its middle 80%)
  over R, or over the server's own rate in the same repeat where a loaded machine makes that lower
  (target >= 0.85).
"""

from __future__ import annotations

import argparse
import io
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "tests"))  # the loopback server and proxy the endpoint tests use
from _repeats import MIN_REPEATS, Targets, alternate, ratios, shown, spread  # noqa: E402

OUT = ROOT / "bench" / "endpoint_results.json"
NEW_TOKENS = 16


def answers(path: Path, n: int) -> None:
    """n answers to the demo questions (each question asked again, some answers wrong), as a merged
    generations file."""
    import pandas as pd

    qs = [json.loads(line) for line in (ROOT / "config/demo/questions.jsonl").read_text().splitlines()]
    rows = []
    for i in range(n):
        q = qs[i % len(qs)]
        rows.append(
            {
                "id": f"a{i:05d}",
                "prompt": q["question"] + (f" (asked again, {i // len(qs)})" if i >= len(qs) else ""),
                "reference": q["answer"],
                "category": q.get("category"),
                "output": q["answer"] if i % 3 else f"not {q['answer']}",
            }
        )
    pd.DataFrame(rows).to_parquet(path)


def judge(spec, gens: Path, work: Path, name: str) -> dict:
    from judges import judge_with

    from genjudge.cluster.gpu_lease import Lease
    from genjudge.config.experiment import Cell

    store = work / f"store-{name}-{time.monotonic_ns()}"  # empty: every verdict is asked for
    meta = judge_with(
        cells=[Cell("g", "d")],
        generations={("g", "d"): str(gens)},
        out_path=work / f"{name}.parquet",
        meta_path=work / f"{name}.meta.json",
        spec=spec,
        template_path=ROOT / "config/demo/judge_template.txt",
        store_dir=store,
        run="bench",
        lease=Lease([], "none"),
        log_stream=io.StringIO(),
    )
    import pandas as pd

    return {"meta": meta, "verdicts": pd.read_parquet(work / f"{name}.parquet")["judge_output"].tolist()}


def steady_rate(events: list, start: float) -> float:
    """Answers a second over the middle 80% of the run (the first and last tenth are ramp-up and tail)."""
    done = sorted(t for t, _, what in events if what == "ok" and t >= start)
    if len(done) < 10:
        return 0.0
    a, b = done[len(done) // 10], done[len(done) * 9 // 10]
    n = len(done) * 9 // 10 - len(done) // 10
    return n / (b - a) if b > a else 0.0


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="16 answers on the demo judge: checks the bench runs")
    ap.add_argument("--answers", type=int, default=400)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument(
        "--connections", type=int, nargs="+", default=[16, 64], help="max_connections of the throughput paths"
    )
    ap.add_argument("--server", help="the URL (.../v1) of a server already serving the model")
    ap.add_argument("--limit", type=float, help="the rate limit's requests a second (default: a third of the server's)")
    ap.add_argument("--only-limit", action="store_true", help="measure the rate limit alone (with --limit)")
    ap.add_argument("--out", default=str(OUT))
    args = ap.parse_args(argv)
    if args.quick:
        args.answers, args.repeats = 16, 1
    elif args.repeats < MIN_REPEATS:
        ap.error(f"--repeats {args.repeats}: a ratio is the median of at least {MIN_REPEATS} repeats")
    from endpoints import FaultProxy, VllmServer

    from genjudge.config.specs import spec_for

    if args.quick:
        model, served = ROOT / "models" / "demo-judge", "models/demo-judge"
    else:
        from engine_bench import small_model

        model = small_model()
        served = str(model.relative_to(ROOT))
    server = None
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        if args.server:
            url = args.server
        else:
            server = VllmServer(served, work / "server.log", engine_process=True).wait()
            url = server.url
        gens = work / "gens.parquet"
        answers(gens, args.answers)
        common = {"max_new_tokens": NEW_TOKENS}
        local = spec_for(
            "judge", model=str(model), engine="vllm", dtype="float32", vllm={"enforce_eager": True}, **common
        )
        clean = FaultProxy(url)
        faulty = FaultProxy(url, rate=0.1, faults=["429"], seed=3, retry_after="1")
        proxies = [clean, faulty]

        def remote(base_url: str, connections: int = args.connections[0]):
            return spec_for(
                "judge",
                model=served,
                engine="openai",
                endpoint={"base_url": base_url, "max_connections": connections, "timeout": 120},
                **common,
            )

        try:
            first = {
                "in process": judge(local, gens, work, "warm-local"),  # starts the engine: not timed
                "endpoint": judge(remote(url), gens, work, "warm-endpoint"),
            }
            same = sum(a == b for a, b in zip(first["in process"]["verdicts"], first["endpoint"]["verdicts"]))
            paths = {
                "in process": lambda: judge(local, gens, work, "local"),
                **{
                    f"endpoint x{k}": (lambda k=k: judge(remote(url, k), gens, work, f"endpoint{k}"))
                    for k in args.connections
                },
                "endpoint, clean proxy": lambda: judge(remote(clean.url), gens, work, "clean"),
                "endpoint, 10% 429": lambda: judge(remote(faulty.url), gens, work, "faulty"),
            }
            if args.only_limit:
                paths = {k: v for k, v in paths.items() if k.startswith("endpoint x")}
            seconds = alternate(paths, 1 if args.only_limit else args.repeats)
            for name, xs in seconds.items():
                print(f"{name}: {shown(spread(xs), ' s')}", flush=True)
            per_second = args.answers / min(seconds[f"endpoint x{args.connections[0]}"])
            # A third of what the server does: the limit binds.
            limit = args.limit or max(2.0, round(per_second / 3, 1))
            limited = FaultProxy(url, limit=limit)
            proxies.append(limited)
            rates, free = [], []
            for r in range(args.repeats):
                # The server's own rate at the moment, through the clean proxy: where a loaded machine makes
                # it slower than the limit, the limit is not what binds, and the share is of what it does.
                for proxy in (clean, limited) if r % 2 == 0 else (limited, clean):
                    proxy.reset()
                    start = time.monotonic()
                    judge(remote(proxy.url), gens, work, "limited")
                    (free if proxy is clean else rates).append(steady_rate(proxy.events, start))
            rates = [got / min(limit, unlimited) for got, unlimited in zip(rates, free)]
        finally:
            for p in proxies:
                p.stop()
            if server is not None:
                server.stop()
    if args.only_limit:
        share = spread(rates, 3)
        print(f"\nrate limit {limit:g}/s: {shown(share, '', 3)} of it sustained")
        return {"quick": False, "rate_limit": {"requests_per_second": limit, "steady_share": share}}
    result = {
        "what": (
            f"{args.answers} verdicts (up to {NEW_TOKENS} tokens, greedy, fp32) through the judge stage; the "
            f"fault and rate-limit paths at max_connections {args.connections[0]}"
        ),
        "model": "demo-judge" if args.quick else "random Llama (hidden 256, 4 layers, heads of 64), vocabulary 32,000",
        "quick": args.quick,
        "repeats": args.repeats,
        "seconds": {k: spread(v) for k, v in seconds.items()},
        "endpoint_over_in_process": {
            f"max_connections {k}": ratios(seconds[f"endpoint x{k}"], seconds["in process"]) for k in args.connections
        },
        "faulted_over_clean": {
            **spread([f / c for f, c in zip(seconds["endpoint, 10% 429"], seconds["endpoint, clean proxy"])], 2),
            "repeats": args.repeats,
        },
        "rate_limit": {
            "requests_per_second": limit,
            "server_alone_per_second": spread(free, 1),
            "steady_share": spread(rates, 3),
        },
        # Greedy near-ties of a random model can tip either way under another batching (the server's).
        "identical_verdicts": f"{same}/{args.answers}",
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform()},
    }
    if not args.quick:
        Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
    print(
        "\nendpoint / in process: "
        + ", ".join(f"{k}: {shown(v, 'x')}" for k, v in result["endpoint_over_in_process"].items())
        + " of the throughput; "
        f"10% 429: {shown(result['faulted_over_clean'], 'x')} the clean wall time; "
        f"rate limit {limit:g}/s: {shown(result['rate_limit']['steady_share'], '', 3)} of it sustained; "
        f"identical verdicts {result['identical_verdicts']}"
    )
    return result


def judged(result: dict) -> int:
    t = Targets()
    for k, r in result.get("endpoint_over_in_process", {}).items():
        t.at_least(f"endpoint verdicts/s over in process, {k}", r["median"], 0.8)
    if "faulted_over_clean" in result:
        t.at_most("10% 429 wall time over clean", result["faulted_over_clean"]["median"], 1.5, "x")
    t.at_least("rate limit sustained", result["rate_limit"]["steady_share"]["median"], 0.85, "")
    return t.report(result["quick"])


if __name__ == "__main__":
    from _repeats import ended

    sys.exit(ended(judged(main())))
