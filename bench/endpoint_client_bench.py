"""The endpoint client's own cost: genjudge's endpoint judge through the judge stage against a bare
`AsyncOpenAI` loop with a semaphore, on the same requests, against a loopback server that answers every
chat completion at once (bench/_instant_server.py, a process of its own). What this measures is what
genjudge owns of a hosted judge with a high rate limit (30,000 requests a minute is 500 a second): the
requests a second its client sustains and the CPU it spends on each.

    python bench/endpoint_client_bench.py            # 2,000 requests at 64 connections, 5 repeats
    python bench/endpoint_client_bench.py --quick    # 100 requests, 1 repeat

Each repeat runs both paths once, in the opposite order from the repeat before (bench/_repeats.py); a
ratio is taken within each repeat and the figure is the median with its min-max. Targets: genjudge's
requests a second at least 0.9x the bare loop's, and its client CPU a request at most 1.3x the bare
loop's. The genjudge path includes what the bare loop does not: rendering each judge prompt, keying and
storing each result durably (an fsync per batch of results), writing each try to the budget's ledger
and parsing the verdicts.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import resource
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "bench"))
from _repeats import MIN_REPEATS, Targets, shown, spread  # noqa: E402

OUT = ROOT / "bench" / "endpoint_client_results.json"
MODEL = "bench-judge"


def cpu_seconds() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server() -> tuple[subprocess.Popen, str]:
    port = free_port()
    proc = subprocess.Popen([sys.executable, str(ROOT / "bench" / "_instant_server.py"), str(port)])
    url = f"http://127.0.0.1:{port}/v1"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(f"{url}/models", timeout=2).close()
            return proc, url
        except OSError:
            time.sleep(0.1)
    proc.kill()
    raise RuntimeError("the instant server did not start in 60 s")


def answers(path: Path, n: int) -> None:
    import pandas as pd

    qs = [json.loads(line) for line in (ROOT / "config/demo/questions.jsonl").read_text().splitlines()]
    rows = [
        {
            "id": f"a{i:05d}",
            "prompt": f"{qs[i % len(qs)]['question']} (#{i})",
            "reference": qs[i % len(qs)]["answer"],
            "category": qs[i % len(qs)].get("category"),
            "output": qs[i % len(qs)]["answer"],
        }
        for i in range(n)
    ]
    pd.DataFrame(rows).to_parquet(path)


def genjudge_path(url: str, gens: Path, work: Path, connections: int):
    import io

    from genjudge.cluster.gpu_lease import Lease
    from genjudge.config.experiment import Cell
    from genjudge.config.jobs import JudgeJob
    from genjudge.config.specs import spec_for
    from genjudge.stages.judge import run_judge

    spec = spec_for(
        "judge",
        model=MODEL,
        engine="openai",
        max_new_tokens=16,
        endpoint={"base_url": url, "max_connections": connections, "check_capabilities": False},
        price={"input_per_mtok": 1.0, "output_per_mtok": 1.0},
    )

    def run() -> int:
        tag = time.monotonic_ns()
        job = JudgeJob(
            spec=spec,
            cells=(Cell("g", "d"),),
            generations={("g", "d"): str(gens)},
            template_path=str(ROOT / "config/demo/judge_template.txt"),
            out_path=str(work / f"j{tag}.parquet"),
            meta_path=str(work / f"j{tag}.meta.json"),
            store_dir=str(work / f"store-{tag}"),  # empty: every verdict is asked for
            run="bench",
        )
        meta = run_judge(job, Lease([], "none"), io.StringIO())
        return meta.computed_items

    return run


def bare_path(url: str, gens: Path, connections: int):
    import pandas as pd
    from openai import AsyncOpenAI

    from genjudge.judging.templates import render

    template = (ROOT / "config/demo/judge_template.txt").read_text()
    df = pd.read_parquet(gens)
    prompts = [
        render(template, question=q, reference=r, candidate=a)
        for q, r, a in zip(df["prompt"], df["reference"], df["output"])
    ]

    async def loop() -> int:
        client = AsyncOpenAI(base_url=url, api_key="none", max_retries=0)
        sem = asyncio.Semaphore(connections)

        async def one(p: str) -> str:
            async with sem:
                r = await client.chat.completions.create(
                    model=MODEL, messages=[{"role": "user", "content": p}], max_tokens=16, temperature=0.0
                )
                return r.choices[0].message.content

        async with client:
            out = await asyncio.gather(*(one(p) for p in prompts))
        return len(out)

    return lambda: asyncio.run(loop())


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="100 requests, 1 repeat: checks the bench runs")
    ap.add_argument("--requests", type=int, default=2000)
    ap.add_argument("--connections", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--out", default=str(OUT))
    args = ap.parse_args(argv)
    if args.quick:
        args.requests, args.repeats = 100, 1
    elif args.repeats < MIN_REPEATS:
        ap.error(f"--repeats {args.repeats}: a ratio is the median of at least {MIN_REPEATS} repeats")
    server, url = start_server()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            work = Path(tmp)
            gens = work / "gens.parquet"
            answers(gens, args.requests)
            paths = {
                "genjudge": genjudge_path(url, gens, work, args.connections),
                "bare AsyncOpenAI": bare_path(url, gens, args.connections),
            }
            for run in paths.values():  # imports and first connections: not timed
                run()
            wall: dict = {n: [] for n in paths}
            cpu: dict = {n: [] for n in paths}
            names = list(paths)
            for r in range(args.repeats):
                for name in names if r % 2 == 0 else names[::-1]:
                    t0, c0 = time.perf_counter(), cpu_seconds()
                    done = paths[name]()
                    wall[name].append(time.perf_counter() - t0)
                    cpu[name].append(cpu_seconds() - c0)
                    assert done == args.requests, f"{name}: {done} of {args.requests} requests done"
    finally:
        server.terminate()
        server.wait(30)
    n = args.requests
    result = {
        "what": f"{n} judge requests at {args.connections} connections against a server that answers at once",
        "quick": args.quick,
        "repeats": args.repeats,
        "requests_per_second": {k: spread([n / s for s in v], 1) for k, v in wall.items()},
        "client_cpu_ms_per_request": {k: spread([1000 * c / n for c in v], 2) for k, v in cpu.items()},
        "rate_over_bare": spread([b / g for g, b in zip(wall["genjudge"], wall["bare AsyncOpenAI"])], 2),
        "cpu_over_bare": spread([g / b for g, b in zip(cpu["genjudge"], cpu["bare AsyncOpenAI"])], 2),
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform()},
    }
    for k in wall:
        print(
            f"{k}: {shown(result['requests_per_second'][k], ' requests/s', 1)}, "
            f"{shown(result['client_cpu_ms_per_request'][k], ' CPU-ms a request')}"
        )
    print(
        f"genjudge over bare: {shown(result['rate_over_bare'], 'x')} the requests a second, "
        f"{shown(result['cpu_over_bare'], 'x')} the CPU a request"
    )
    if not args.quick:
        Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
    return result


def judged(result: dict) -> int:
    t = Targets()
    t.at_least("requests/s over the bare loop", result["rate_over_bare"]["median"], 0.9)
    t.at_most("client CPU a request over the bare loop", result["cpu_over_bare"]["median"], 1.3, "x")
    return t.report(result["quick"])


if __name__ == "__main__":
    from _repeats import ended

    sys.exit(ended(judged(main())))
