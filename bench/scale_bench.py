"""Scale: a synthetic dataset (default 1,000,000 items) in 1,000 shards with pre-generated answers
(no model). Measures planning (`snakemake -n` of the whole DAG) and the light steps (split, merge,
parse, report with report.html), each in a process of its own: wall time and peak memory (max RSS).

    python bench/scale_bench.py [--items 1000000] [--shards 1000] [--out bench/scale_results.json]

Targets: planning at most 15 s and 1.5 GB, each step under 2 GB (a miss: a `TARGET MISSED` line, exit
status 1).

    python bench/scale_bench.py --report-only [--html-items 100000] [--repeats 5]

times the report step alone on 100,000 items, with report.html and its plots against without them
(summary.json, report.md, per_category.csv only), alternating, each in a process of its own.
Target: under 10 s and 1 GB with the HTML.

    python bench/scale_bench.py --quick [--report-only]

runs the same steps on 400 items in 4 shards in seconds, to check the bench still runs (the test
suite does); it writes no results file unless --out is given.
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

from _repeats import Targets

ROOT = Path(__file__).resolve().parents[1]
GEN, DS, JUDGE = "gen", "data", "judge"

STEP = r"""
import json, sys
import pandas as pd
step, wd, n, shards = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
from genjudge.config import defaults
from genjudge.config.experiment import Cell, resolve
cfg = defaults(run="bench", shards=shards, dataset={"path": f"{wd}/data.jsonl"},
               generator={"model": "g", "max_new_tokens": 3}, generators={"gen": {}}, datasets={"data": {}},
               judge={"model": "j"}, judges={"judge": {}})
gens = {("gen", "data"): f"{wd}/generations/gen/data.parquet"}
if step == "split":
    from genjudge.stages.split import run_split
    run_split(f"{wd}/data.jsonl", {"id": "id", "prompt": "question", "reference": "answer", "category": "category"},
              "auto", f"{wd}/items.parquet", f"{wd}/shards", shards)
elif step == "fake-generate":  # stands in for the model: every other answer right
    from genjudge.store.records import GenerateMeta
    for i in range(shards):  # as if on 4 GPUs, one shard after another on each: 0.3 s load, 0.6 s generating
        s = pd.read_json(f"{wd}/shards/{i}.jsonl", lines=True, dtype={"id": str, "reference": str})
        out = pd.DataFrame({"id": s["id"], "prompt_sent": s["prompt"],
                            "output": [r if j % 2 else "wrong" for j, r in enumerate(s["reference"])],
                            "n_prompt_tokens": 10, "n_generated_tokens": 3, "finish_reason": "eos", "key": s["id"]})
        out.to_parquet(f"{wd}/generations/gen/data/{i}.parquet", index=False)
        GenerateMeta(generator="gen", dataset="data", shard=i, n_items=len(s), hostname="h", generate_seconds=0.6,
                     load_seconds=0.3, computed_items=len(s), started_at=float(i // 4), finished_at=i // 4 + 0.95,
                     gpus=[str(i % 4)], model_fingerprint="x").write(f"{wd}/generations/gen/data/{i}.meta.json")
elif step == "merge":
    from genjudge.stages.merge import run_merge
    run_merge(f"{wd}/items.parquet", [f"{wd}/generations/gen/data/{i}.parquet" for i in range(shards)],
              gens[("gen", "data")], [f"{wd}/generations/gen/data/{i}.meta.json" for i in range(shards)])
elif step == "fake-judge":
    from dataclasses import MISSING, fields
    from genjudge.store.records import JudgeMeta, JudgeRecord, write_judge_records
    g = pd.read_parquet(gens[("gen", "data")], columns=["id", "output"])
    raw = pd.DataFrame({"generator": "gen", "dataset": "data", "opponent": None, "id": g["id"], "order": 0,
                        "decided_by": "judge", "judge_prompt": "a judge prompt of some length " * 20,
                        "judge_output": ["VERDICT: CORRECT" if o != "wrong" else "VERDICT: INCORRECT"
                                         for o in g["output"]],
                        "p_correct": float("nan"), "judge_n_prompt_tokens": 1, "judge_n_generated_tokens": 1,
                        "judge_finish_reason": "eos", "judge_key": g["id"]})
    # Columns a single-turn, single-sample judge leaves at their defaults (turn, sample, ...).
    raw = raw.assign(**{f.name: f.default for f in fields(JudgeRecord) if f.name not in raw and f.default is not MISSING})
    write_judge_records(f"{wd}/raw.parquet", raw)
    end = (shards + 3) // 4 + 2.0
    JudgeMeta(judge_seconds=8, load_seconds=2, computed_items=n, model_fingerprint="y", started_at=end, hostname="h",
              finished_at=end + 10.5, gpus=["0", "1", "2", "3"], cells={"gen/data": {"n_items": n, "resumed": 0, "computed": n}}
              ).write(f"{wd}/raw.meta.json")
elif step == "parse":
    from genjudge.stages.parse import run_parse
    run_parse([Cell("gen", "data")], gens, f"{wd}/raw.parquet", f"{wd}/judgments.parquet", "reference", None, "judge")
elif step in ("report", "report-no-html"):
    from genjudge.config.jobs import ReportJob
    from genjudge.stages.report import run_report
    html = (f"{wd}/report.html", f"{wd}/plots") if step == "report" else (None, None)
    s = run_report(ReportJob(cfg, {"judge": f"{wd}/judgments.parquet"},
                   tuple(f"{wd}/generations/gen/data/{i}.meta.json" for i in range(shards)), {"judge": f"{wd}/raw.meta.json"},
                   f"{wd}/summary.json", f"{wd}/report.md", f"{wd}/provenance.json", f"{wd}/per_category.csv", wd,
                   *html))
    assert s.n_items == n and abs(s.accuracy - 0.5) < 0.01, (s.n_items, s.accuracy)
"""


def timed(cmd: list[str], cwd: Path) -> dict:
    """Wall time and max RSS of one command, via GNU time when present."""
    gnu_time = shutil.which("time") if Path("/usr/bin/time").exists() else None
    full = ["/usr/bin/time", "-f", "%M"] + cmd if gnu_time else cmd
    t0 = time.perf_counter()
    proc = subprocess.run(
        full, cwd=cwd, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT / "src")}
    )
    secs = time.perf_counter() - t0
    if proc.returncode != 0:
        raise RuntimeError(proc.stderr[-3000:])
    rss = int(proc.stderr.strip().splitlines()[-1]) / 1024 if gnu_time else None
    return {"seconds": round(secs, 2), "peak_rss_mb": round(rss, 1) if rss else None}


def write_dataset(path: Path, n: int) -> None:
    cats = ["arithmetic", "capitals", "counting", "words"]
    with open(path, "w") as fh:
        for i in range(n):
            fh.write(
                json.dumps(
                    {"id": f"q{i:07d}", "question": f"What is {i} + 1?", "answer": str(i + 1), "category": cats[i % 4]}
                )
                + "\n"
            )


def prepare(wd: Path, n: int) -> None:
    for part in ("Snakefile", "rules", "scripts", "config", "profiles", "report", "models"):
        src = ROOT / part
        (shutil.copytree if src.is_dir() else shutil.copy2)(src, wd / part)
    (wd / "shards").mkdir()
    (wd / "generations" / GEN / DS).mkdir(parents=True)
    write_dataset(wd / "data.jsonl", n)


def measure(n: int, shards: int, planning: bool = True) -> dict:
    """Planning and the light steps on n synthetic items in `shards` shards."""
    with tempfile.TemporaryDirectory() as tmp:
        wd = Path(tmp)
        prepare(wd, n)
        results = {"n_items": n, "shards": shards, "date": time.strftime("%Y-%m-%d %H:%M:%S"), "cpus": os.cpu_count()}
        if planning:  # the whole DAG (split, shards x generate, merge, judge, parse, report), dry-run
            results["planning"] = timed(
                [
                    sys.executable,
                    "-m",
                    "snakemake",
                    "-n",
                    "--quiet",
                    "--config",
                    f"shards={shards}",
                    "dataset={'path': 'data.jsonl'}",
                    "gpu_inventory=[]",
                ],
                wd,
            )
        steps = {}
        for step in ("split", "fake-generate", "merge", "fake-judge", "parse", "report"):
            steps[step] = timed([sys.executable, "-c", STEP, step, str(wd), str(n), str(shards)], wd)
        results["steps"] = {k: v for k, v in steps.items() if not k.startswith("fake")}
    return results


def median_spread(xs: list[float]) -> dict:
    xs = sorted(xs)
    return {"median": round(statistics.median(xs), 2), "min": round(xs[0], 2), "max": round(xs[-1], 2), "runs": xs}


def measure_report(n: int, shards: int, repeats: int) -> dict:
    """The report step with report.html against without, `repeats` times each, alternating."""
    with tempfile.TemporaryDirectory() as tmp:
        wd = Path(tmp)
        prepare(wd, n)
        for step in ("split", "fake-generate", "merge", "fake-judge", "parse"):
            timed([sys.executable, "-c", STEP, step, str(wd), str(n), str(shards)], wd)
        runs: dict[str, list[dict]] = {"report-no-html": [], "report": []}
        for _ in range(repeats):
            for step in runs:
                runs[step].append(timed([sys.executable, "-c", STEP, step, str(wd), str(n), str(shards)], wd))
        html_bytes = (wd / "report.html").stat().st_size
        n_plots = len(list((wd / "plots").glob("*.png")))
    out = {"n_items": n, "shards": shards, "repeats": repeats, "date": time.strftime("%Y-%m-%d %H:%M:%S")}
    for step, rs in runs.items():
        out[step] = {
            "seconds": median_spread([r["seconds"] for r in rs]),
            "peak_rss_mb": median_spread([r["peak_rss_mb"] or 0.0 for r in rs]),
        }
    out["html_over_no_html"] = round(out["report"]["seconds"]["median"] / out["report-no-html"]["seconds"]["median"], 2)
    out["report_html_bytes"], out["plots"] = html_bytes, n_plots
    return out


# --quick: seconds, to check that the bench still runs against the package (its figures mean nothing).
QUICK = {"items": 400, "shards": 4, "html_items": 400, "repeats": 1}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--items", type=int, default=1_000_000)
    ap.add_argument("--shards", type=int, default=1_000)
    ap.add_argument("--out", help="results JSON (default bench/scale_results.json, bench/report_results.json)")
    ap.add_argument("--report-only", action="store_true", help="only the report step, with and without report.html")
    ap.add_argument("--html-items", type=int, default=100_000)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--quick", action="store_true", help=f"{QUICK}, no results file unless --out")
    args = ap.parse_args()
    if args.quick:
        for k, v in QUICK.items():
            if getattr(args, k) == ap.get_default(k):
                setattr(args, k, v)
    if args.report_only:
        r = measure_report(args.html_items, args.shards, args.repeats)
        out = Path(args.out) if args.out else None if args.quick else ROOT / "bench" / "report_results.json"
        print(f"report step, {args.html_items:,} items, {args.shards:,} shards, median of {args.repeats} (min-max):")
        for step in ("report-no-html", "report"):
            t, m = r[step]["seconds"], r[step]["peak_rss_mb"]
            print(
                f"  {step:15} {t['median']:6.2f} s ({t['min']}-{t['max']}), peak {m['median']:.0f} MB ({m['min']:.0f}-{m['max']:.0f})"
            )
        print(
            f"  with report.html / without: {r['html_over_no_html']}x; report.html {r['report_html_bytes']:,} bytes, {r['plots']} plots"
        )
        print("  target: report with report.html under 10 s and 1024 MB")
        write(r, out)
        targets = Targets()
        targets.at_most("report with report.html, seconds", r["report"]["seconds"]["median"], 10, " s")
        targets.at_most("report with report.html, peak memory", r["report"]["peak_rss_mb"]["median"], 1024, " MB")
        return targets.report(args.quick)
    results = measure(args.items, args.shards)
    print(f"{args.items:,} items, {args.shards:,} shards")
    print(
        f"  planning (snakemake -n): {results['planning']['seconds']} s, peak {results['planning']['peak_rss_mb']} MB"
        "  (target <= 15 s, <= 1536 MB)"
    )
    for k, v in results["steps"].items():
        print(f"  {k:8} {v['seconds']:8.2f} s, peak {v['peak_rss_mb']} MB  (target < 2048 MB)")
    write(results, Path(args.out) if args.out else None if args.quick else ROOT / "bench" / "scale_results.json")
    targets = Targets()
    targets.at_most("planning (snakemake -n), seconds", results["planning"]["seconds"], 15, " s")
    for k, v in {"planning": results["planning"], **results["steps"]}.items():
        targets.at_most(f"{k}, peak memory", v["peak_rss_mb"] or 0, 1536 if k == "planning" else 2048, " MB")
    return targets.report(args.quick)


def write(results: dict, out: Path | None) -> None:
    if out:
        out.write_text(json.dumps(results, indent=2) + "\n")
        print(f"written to {out}")


if __name__ == "__main__":
    from _repeats import ended

    sys.exit(ended(main()))
