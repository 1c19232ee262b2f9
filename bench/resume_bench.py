"""Fraction of generation work redone after a SIGKILL at a random point, over several trials.

Each trial starts a real generation job (the package's generate path with its
per-batch checkpoint) in a child process, kills it with SIGKILL at a random
moment, reruns it to completion, and counts the items whose generation had
started in the killed process but was lost (at most one batch by design). --quick: one trial of 40
items, in seconds, to check the bench still runs (the test suite does).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CHILD = r"""
import io, sys
import pandas as pd
from genjudge.engine import decoding as generation
from genjudge.stages.generate import run_generate
from genjudge.cluster.gpu_lease import Lease

plain = generation.Generator.generate
def announced(self, prompts):
    print(f"batch {len(prompts)}", flush=True)
    return plain(self, prompts)
generation.Generator.generate = announced
from genjudge.config.specs import spec_for
spec = spec_for("generator", model=sys.argv[1], max_new_tokens=24, batch_size=int(sys.argv[5]))
from genjudge.config.jobs import GenerateJob
job = GenerateJob(spec=spec, shard_path=sys.argv[2], out_path=sys.argv[3] + "/out.parquet",
                  meta_path=sys.argv[3] + "/out.meta.json", store_dir=sys.argv[4], run="bench")
m = run_generate(job, Lease([], "none"), io.StringIO())
print("done", m.resumed_items, m.computed_items, flush=True)
"""


def trial(model: str, n: int, batch: int, rng: random.Random, full_seconds: float) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        shard = tmp / "0.jsonl"
        with open(shard, "w") as fh:
            for i in range(n):
                fh.write(
                    json.dumps(
                        {
                            "id": f"q{i}",
                            "prompt": f"What is {i} + {i % 9}?" + " Think." * (i % 4),
                            "reference": None,
                            "category": None,
                        }
                    )
                    + "\n"
                )
        env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
        cmd = [sys.executable, "-c", CHILD, model, str(shard), str(tmp), str(tmp / "store"), str(batch)]
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, env=env)
        started, t0, gen_seconds, timer = 0, None, None, None
        kill_at = rng.uniform(0.1, 0.9) * full_seconds
        for line in proc.stdout:  # ends when the process dies
            if line.startswith("batch"):
                if t0 is None:  # the kill lands at a random moment, mid-batch or not
                    t0 = time.monotonic()
                    timer = threading.Timer(kill_at, proc.send_signal, args=(signal.SIGKILL,))
                    timer.start()
                started += int(line.split()[1])
            elif line.startswith("done"):
                gen_seconds = time.monotonic() - t0
        proc.wait()
        if timer:
            timer.cancel()
        out = subprocess.run(cmd, capture_output=True, text=True, env=env, check=True).stdout
        _, resumed, computed = out.strip().splitlines()[-1].split()
        redone = started - int(resumed)
        return {
            "generation_seconds": gen_seconds,
            "killed_after_items_started": started,
            "resumed": int(resumed),
            "computed_on_rerun": int(computed),
            "redone_items": redone,
            "redone_fraction": round(redone / n, 4),
        }


# --quick: seconds, to check that the bench still runs against the package (its figures mean nothing).
QUICK = {"trials": 1, "items": 40}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--trials", type=int, default=5)
    ap.add_argument("--items", type=int, default=1000)
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--quick", action="store_true", help=f"{QUICK}")
    args = ap.parse_args()
    if args.quick:
        for k, v in QUICK.items():
            if getattr(args, k) == ap.get_default(k):
                setattr(args, k, v)
    model = str(ROOT / "models" / "demo-generator")
    rng = random.Random(args.seed)
    # Calibrate: how long the generation itself takes when nothing kills it (--quick: a guess).
    if args.quick:
        full = 0.5
    else:
        full = trial(model, args.items, args.batch_size, random.Random(0), full_seconds=1e9)["generation_seconds"]
    rows = [trial(model, args.items, args.batch_size, rng, full_seconds=full) for _ in range(args.trials)]
    for r in rows:
        print(r)
    mean = sum(r["redone_fraction"] for r in rows) / len(rows)
    worst = max(r["redone_items"] for r in rows)
    print(
        f"{args.trials} kills at random points, {args.items} items, batch {args.batch_size}: "
        f"mean fraction of work redone {mean:.2%}, worst {worst} items (one batch = {args.batch_size})"
    )
    return 0


if __name__ == "__main__":
    from _repeats import ended

    sys.exit(ended(main()))
