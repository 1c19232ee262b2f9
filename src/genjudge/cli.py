"""`genjudge`: small helpers around the workflow (headline of a run, GPU leases)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def cmd_summary(args) -> int:
    path = Path(args.run_dir) / "report" / "summary.json"
    if not path.exists():
        print(f"error: {path} not found; has the run finished?", file=sys.stderr)
        return 1
    s = json.loads(path.read_text())

    def pct(x):
        return "n/a" if x is None else f"{100 * x:.1f}%"

    ci = s.get("accuracy_ci95")
    print(f"report:   {Path(args.run_dir) / 'report' / 'report.md'}")
    print(f"items:    {s['n_items']}  judged: {s['n_judged']}  unparsed: {s['n_unparsed']} ({pct(s['unparsed_rate'])})")
    print(f"accuracy: {pct(s['accuracy'])}" + (f"  95% CI [{pct(ci[0])}, {pct(ci[1])}]" if ci else ""))
    print(f"exact match: {pct(s['exact_match']['value'])}  "
          f"judge agrees with exact match: {pct(s['judge_exact_match_agreement']['value'])}")
    return 0


def cmd_gpus(args) -> int:
    from .gpu_lease import default_lock_dir, lease_status, resolve_inventory

    inventory = resolve_inventory(args.inventory if args.inventory != "auto" else "auto")
    lock_dir = args.lock_dir or default_lock_dir()
    print(f"inventory: {inventory or 'none (CPU only)'}; lock dir: {lock_dir}")
    for gpu, holder in lease_status(inventory, lock_dir).items():
        print(f"  GPU {gpu}: {holder or 'free'}")
    return 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="genjudge", description=__doc__)
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("summary", help="print the headline numbers of a finished run")
    s.add_argument("run_dir", help="results/<run>")
    s.set_defaults(fn=cmd_summary)
    g = sub.add_parser("gpus", help="show the GPU inventory and who holds each lease")
    g.add_argument("--inventory", default="auto", type=lambda v: v if v == "auto" else v.split(","))
    g.add_argument("--lock-dir", default=None)
    g.set_defaults(fn=cmd_gpus)
    args = p.parse_args(argv)
    return args.fn(args)


if __name__ == "__main__":
    sys.exit(main())
