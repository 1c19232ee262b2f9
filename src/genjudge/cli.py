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
    from genjudge.gpu_lease import default_lock_dir, lease_status, resolve_inventory

    inventory = resolve_inventory(args.inventory)
    lock_dir = args.lock_dir or default_lock_dir()
    print(f"inventory: {inventory or 'none (CPU only)'}; lock dir: {lock_dir}")
    for gpu, holder in lease_status(inventory, lock_dir).items():
        print(f"  GPU {gpu}: {holder or 'free'}")
    return 0


def load_workflow_config(configfiles: list[str], root: Path) -> dict:
    """config/config.yaml, then each --configfile over it, validated with the workflow's schema."""
    import yaml
    from snakemake.utils import update_config, validate

    config: dict = {}
    for path in [root / "config" / "config.yaml", *map(Path, configfiles)]:
        if path.exists():
            update_config(config, yaml.safe_load(path.read_text()) or {})
    validate(config, str(root / "config" / "schemas" / "config.schema.yaml"), set_default=True)
    return config


def cmd_plan(args) -> int:
    from genjudge.errors import InputError
    from genjudge.engine.devices import cuda_gpus, driver_info
    from genjudge.engine.memory_plan import parse_inventory_spec, plan, render

    config = load_workflow_config(args.configfile, Path(args.directory))
    try:
        if args.gpus:
            gpus = parse_inventory_spec(args.gpus)
            print(f"GPUs (hypothetical): {len(gpus)} x {gpus[0].total_bytes / 2**30:.0f} GiB")
        else:
            gpus = cuda_gpus()
            print(f"GPUs here: {len(gpus) or 'none'} {driver_info()}")
            for g in gpus:
                print(f"  {g.index}: {g.name}, {g.total_bytes / 2**30:.1f} GiB total, "
                      f"{(g.free_bytes or 0) / 2**30:.1f} GiB free")
        plans = []
        for role in args.role:
            spec = config[role]
            n = config["gpus_per_job"] if role == "generator" else (
                len(gpus) if config["judge"]["gpus"] == "all" else config["judge"]["gpus"])
            job_gpus = gpus[:n] if n else []
            batch = args.batch_size or (spec["batch_size"] if spec["batch_size"] != "auto" else 8)
            p = plan(spec, job_gpus, batch, args.prompt_tokens + spec["max_new_tokens"], role)
            plans.append(p)
            print(render(p))
    except InputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    if args.json:
        Path(args.json).write_text(json.dumps(plans, indent=2, default=str))
    return 0


def cmd_train_demo(args) -> int:
    import logging

    from genjudge.demo.training import train

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    stats = train(args.name, args.out, Path(args.directory))
    print(f"trained {args.name} into {args.out}: {stats}")
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
    pl = sub.add_parser("plan", help="GPU check and memory plan for the configured generator and judge "
                                     "(reads config.json only, loads no weights)")
    pl.add_argument("--configfile", action="append", default=[], help="config file(s) over config/config.yaml")
    pl.add_argument("--gpus", help="hypothetical inventory instead of this machine's, e.g. 4x80GiB")
    pl.add_argument("--role", action="append", choices=["generator", "judge"],
                    help="plan only this model (repeatable); default both")
    pl.add_argument("--batch-size", type=int, help="default: the configured batch size (8 for auto)")
    pl.add_argument("--prompt-tokens", type=int, default=512, help="prompt length assumed for the KV cache")
    pl.add_argument("--directory", default=".", help="the workflow directory")
    pl.add_argument("--json", help="also write the plans to this JSON file")
    pl.set_defaults(fn=cmd_plan)
    t = sub.add_parser("train-demo", help="train one of the demo models (deterministic, CPU)")
    t.add_argument("name", choices=["demo-generator", "demo-judge"])
    t.add_argument("out", help="output directory (must not exist)")
    t.add_argument("--directory", default=".", help="the workflow directory (for the demo data)")
    t.set_defaults(fn=cmd_train_demo)
    args = p.parse_args(argv)
    if getattr(args, "role", None) is None and args.cmd == "plan":
        args.role = ["generator", "judge"]
    return args.fn(args)


if __name__ == "__main__":
    sys.exit(main())
