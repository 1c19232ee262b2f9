"""`genjudge`: small helpers around the workflow (headline of a run, its export, GPU leases)."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path


def cmd_summary(args) -> int:
    from genjudge.judging.headline import headline_rows, validity_rows
    from genjudge.store.records import RunSummary

    path = Path(args.run_dir) / "report" / "summary.json"
    if not path.exists():
        print(f"error: {path} not found; has the run finished?", file=sys.stderr)
        return 1
    s = RunSummary.read(path)
    print(f"report: {Path(args.run_dir) / 'report' / 'report.md'}")
    from genjudge.stages.report_table import summary_lines

    lines = summary_lines(s.table, s.failed_cells, s.warnings)
    if lines:
        print("\n".join(lines))
    if s.cells:  # an experiment: the leaderboard
        from genjudge.stages.report_markdown import leaderboard_markdown

        print("\n".join(leaderboard_markdown(s.leaderboard)))
        from genjudge.judging.paired import markdown as paired_markdown

        print("\n".join(paired_markdown(s.paired)[1:]))
        for k, v in validity_rows(s.validity):
            print(f"  {k}: {v}")
        return 0
    rows = headline_rows(s)
    width = max(len(k) for k, _ in rows)
    for k, v in rows:
        print(f"  {k:<{width}}  {v}")
    return 0


def cmd_export(args) -> int:
    """A finished run's results in another format, as `report.export` writes them (docs/export.md)."""
    from genjudge.config.export import recorded_settings
    from genjudge.errors import InputError
    from genjudge.stages.export import run_export

    run_dir = Path(args.run_dir).resolve()
    # results/<run> of a workflow directory, whose templates and plugins the run's config names
    workflow = Path(args.directory).resolve() if args.directory else run_dir.parent.parent
    prov = run_dir / "report" / "provenance.json"
    try:
        if not prov.exists():
            raise InputError(f"{args.run_dir}: no report/provenance.json; give results/<run> of a finished run")
        import json

        config = json.loads(prov.read_text(encoding="utf-8"))["config"]
        if run_dir != workflow / "results" / str(config["run"]):
            raise InputError(
                f"{args.run_dir}: not results/{config['run']} of the workflow directory {workflow} (the run "
                "provenance.json names); give --directory, the directory the run was made in"
            )
        os.chdir(workflow)  # the config's relative paths (templates, plugins) are the workflow's
        done = run_export(recorded_settings(config, "."), args.format, ".")
    except InputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    where = Path(args.run_dir) / "export" / args.format
    print(f"{where}: {len(done.written)} file(s) written, {len(done.unchanged)} unchanged, {len(done.removed)} removed")
    return 0


def cmd_shards(args) -> int:
    from genjudge.data.shard_sizing import render, sizing

    try:
        frame = sizing(args.run_dir, args.max_load_share)
    except FileNotFoundError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print("\n".join(render(frame, args.max_load_share)))
    return 0


def _held_since(holder: str) -> str:
    """`... since=2026-11-23T04:01:02 ...` -> the same with the lease's age appended."""
    import re
    import time

    m = re.search(r"since=(\S+)", holder)
    if not m:
        return holder
    try:
        started = time.mktime(time.strptime(m.group(1), "%Y-%m-%dT%H:%M:%S"))
    except ValueError:
        try:
            started = float(m.group(1))
            holder = holder.replace(m.group(0), f"since={time.strftime('%Y-%m-%dT%H:%M:%S', time.localtime(started))}")
        except ValueError:
            return holder
    age = int(time.time() - started)
    return f"{holder} (held {age // 3600}h{age % 3600 // 60:02d}m{age % 60:02d}s)"


def cmd_gpus(args) -> int:
    """The inventory the workflow would use (same config layers) and who holds each GPU."""
    from genjudge import config as wfconfig
    from genjudge.cluster.gpu_lease import default_lock_dir, lease_status, resolve_inventory
    from genjudge.errors import InputError

    try:
        config = wfconfig.load(args.configfile, args.config, args.directory)
    except InputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    configured = config["gpu_inventory"] if args.inventory is None else args.inventory
    inventory = resolve_inventory(configured)
    lock_dir = args.lock_dir or config["lock_dir"] or default_lock_dir()
    print(
        f"inventory ({'gpu_inventory: ' + str(configured)}): {', '.join(inventory) or 'none (CPU only)'}; "
        f"lock dir: {lock_dir}"
    )
    for gpu, holder in lease_status(inventory, lock_dir).items():
        print(f"  GPU {gpu}: {_held_since(holder) if holder else 'free'}")
    return 0


def _inventory_arg(value: str):
    """As the config's gpu_inventory: `auto`, a count (`4`), or a list of ids (`0,1` or `GPU-...`)."""
    if value == "auto":
        return value
    if value.isdigit():
        return int(value)
    return [x.strip() for x in value.split(",") if x.strip()]


def cmd_plan(args) -> int:
    from genjudge.engine import collector

    collector.pause()  # a short command that is mostly start-up: imports and models on the meta device
    from genjudge import config as wfconfig
    from genjudge.errors import InputError
    from genjudge.stages.plan import make_plan, write_plan

    if args.directory:
        # As snakemake --directory: config files as given here, then every relative path of the
        # config (datasets, models, templates) read from the workflow's directory.
        args.configfile = [os.path.abspath(f) for f in args.configfile]
        if args.json:
            args.json = os.path.abspath(args.json)
        if args.write:
            args.write = os.path.abspath(args.write)
        try:
            os.chdir(args.directory)
        except OSError as exc:
            print(f"error: --directory {args.directory}: {exc.strerror}", file=sys.stderr)
            return 1
        args.directory = "."
    try:
        config = wfconfig.load(args.configfile, args.config, args.directory)
        if args.slurm:
            from genjudge.config.job_settings import ModelJobs
            from genjudge.stages.plan_slurm import sbatch_preview

            print("\n".join(sbatch_preview(ModelJobs.from_config(config))))
            return 0
        lines, plans = make_plan(
            config,
            args.gpus,
            args.role,
            args.batch_size,
            args.prompt_tokens,
            nodes=args.nodes,
            calibrate=args.calibrate,
            workflow_dir=args.directory,
            write=args.write,
            allow_result_changes=args.allow_result_changes,
        )
    except InputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print("\n".join(lines))
    if args.json:
        write_plan(args.json, plans)
    return 0


def cmd_train_demo(args) -> int:
    import logging

    if Path(args.out).exists():  # before torch is imported: one line, no traceback
        print(f"error: {args.out} already exists; remove it or choose another directory", file=sys.stderr)
        return 1
    from genjudge.demo.training import train

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    stats = train(args.name, args.out, Path(args.directory))
    print(f"trained {args.name} into {args.out}: {stats}")
    return 0


def cmd_baseline(args) -> int:
    """Another model's published answers as the generations file `judge.baseline` names."""
    from genjudge import config as wfconfig
    from genjudge.config.experiment import resolve
    from genjudge.data.baseline import build_baseline
    from genjudge.errors import InputError

    try:
        config = wfconfig.load(args.configfile, args.config, args.directory)
        datasets = resolve(config, check_pairs=False).datasets  # the baseline file is what this writes
        name = args.dataset or next(iter(datasets))
        if name not in datasets:
            raise InputError(f"--dataset: {name!r} is not one of the run's datasets {list(datasets)}")
        out = build_baseline(datasets[name], args.answers, args.field, args.out)
    except InputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(f"{len(out)} baseline answers from {args.answers} (field {args.field!r}) -> {args.out}")
    return 0


def _config_arguments(parser) -> None:
    """--configfile and --config, as snakemake takes them."""
    parser.add_argument(
        "--configfile",
        nargs="+",
        action="extend",
        default=[],
        metavar="FILE",
        help="config file(s), as for snakemake: later files over earlier ones (none: the demo, config/demo.yaml)",
    )
    parser.add_argument(
        "--config",
        nargs="*",
        action="extend",
        default=[],
        metavar="KEY=VALUE",
        help="overrides, as snakemake's --config",
    )


def _add_export(sub) -> None:
    ex = sub.add_parser(
        "export",
        help="write a finished run's results in another tool's format (eee: Every Eval Ever), as report.export does",
    )
    ex.add_argument("run_dir", help="results/<run>")
    from genjudge.config.export import FORMATS

    ex.add_argument("--format", required=True, choices=FORMATS, help="eee: Every Eval Ever 0.3.0")
    ex.add_argument(
        "--directory",
        default=None,
        help="the workflow directory the run was made in (default: the one holding results/<run>)",
    )
    ex.set_defaults(fn=cmd_export)


def _add_plan(sub) -> None:
    pl = sub.add_parser(
        "plan",
        help="GPU check and memory plan for the configured generator and judge "
        "(reads config.json only, loads no weights)",
    )
    _config_arguments(pl)
    pl.add_argument(
        "--gpus",
        nargs="+",
        metavar="[ROLE=]SPEC",
        help="GPUs to plan for instead of this machine's: a type of the plan's table (4xA100-80GB, 8xH100, "
        "2xL40S) or a size (4x80GiB); ROLE=SPEC for one role (generator=8xL4 judge=4xA100-80GB)",
    )
    pl.add_argument(
        "--nodes",
        nargs="+",
        metavar="[ROLE=]N",
        help="the wall-clock on SLURM: N nodes for both roles, or ROLE=N each (slurm.<role>.gpus_per_node GPUs "
        "a node); default: this machine's GPUs (--resources gpu=N)",
    )
    pl.add_argument(
        "--calibrate",
        metavar="RUN_DIR",
        help="a finished run (results/<run>, e.g. a small pilot) whose measured load, prefill and decode "
        "seconds replace the time model's assumptions (default: this run's own results, where they exist)",
    )
    pl.add_argument(
        "--role",
        action="append",
        choices=["generator", "judge"],
        help="plan only this model (repeatable); default both",
    )
    pl.add_argument(
        "--batch-size",
        type=int,
        help="plan memory and time for this batch size (default: the configured one; for auto, what it would pick)",
    )
    pl.add_argument(
        "--prompt-tokens",
        type=int,
        default=None,
        help="prompt length for the KV cache (default: estimated from the dataset and the template)",
    )
    pl.add_argument(
        "--directory",
        default=None,
        help="the workflow's directory, as snakemake --directory: relative paths in the config are read from "
        "there (default: the current directory, with this package's schema and templates)",
    )
    pl.add_argument("--json", help="also write the plans to this JSON file")
    pl.add_argument(
        "--write",
        metavar="FILE",
        help="write the advice as a config layer (shards, judge.parallel, and each role's resources runtime "
        "and mem_mb from the estimates) to pass with --configfile after your config; an engine other than "
        "the configured one changes every result and is written only with --allow-result-changes",
    )
    pl.add_argument(
        "--allow-result-changes",
        action="store_true",
        help="with --write, also write advised settings that change results (another engine: every item "
        "generated and judged again)",
    )
    pl.add_argument(
        "--slurm",
        action="store_true",
        help="print the sbatch options every model job gets under the SLURM executor (nothing is "
        "submitted; the profile's own flags, such as --slurm-requeue, come on top)",
    )
    pl.set_defaults(fn=cmd_plan)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="genjudge", description=__doc__)
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("summary", help="print the headline numbers of a finished run")
    s.add_argument("run_dir", help="results/<run>")
    s.set_defaults(fn=cmd_summary)
    _add_export(sub)
    sh = sub.add_parser(
        "shards",
        help="right-size generation shards: model load seconds against compute seconds per shard, from a run's metas",
    )
    sh.add_argument("run_dir", help="results/<run>")
    sh.add_argument(
        "--max-load-share",
        type=float,
        default=0.1,
        help="the largest share of a job's time that loading the model may take (default 0.1)",
    )
    sh.set_defaults(fn=cmd_shards)
    g = sub.add_parser("gpus", help="show the GPU inventory the workflow uses and who holds each lease")
    _config_arguments(g)
    g.add_argument(
        "--inventory",
        default=None,
        type=_inventory_arg,
        help="instead of the config's gpu_inventory: auto, a count (4 = GPUs 0-3) or ids (0,2 or GPU-...)",
    )
    g.add_argument(
        "--lock-dir",
        default=None,
        help="lease lock directory (default: the config's lock_dir, else the per-machine default)",
    )
    g.add_argument("--directory", default=None, help="the workflow directory (default: this package's)")
    g.set_defaults(fn=cmd_gpus)
    _add_plan(sub)
    b = sub.add_parser(
        "baseline",
        help="write another model's published answers (e.g. AlpacaEval's) as a pairwise baseline file, "
        "with the ids the run gives its items",
    )
    b.add_argument("answers", help="the answers file, read with the run's dataset settings (fields, format)")
    b.add_argument("out", help="the parquet file judge.baseline names")
    b.add_argument("--field", default="output", help="the field holding each answer (default: output)")
    b.add_argument("--dataset", help="whose settings to read it with (default: the run's first dataset)")
    _config_arguments(b)
    b.add_argument("--directory", default=None, help="the workflow directory (default: this package's)")
    b.set_defaults(fn=cmd_baseline)
    t = sub.add_parser("train-demo", help="train one of the demo models (deterministic, CPU)")
    t.add_argument("name", choices=["demo-generator", "demo-judge"], help="which demo model")
    t.add_argument("out", help="output directory (must not exist)")
    t.add_argument("--directory", default=".", help="the workflow directory (for the demo data)")
    t.set_defaults(fn=cmd_train_demo)
    args = p.parse_args(argv)
    if getattr(args, "role", None) is None and args.cmd == "plan":
        args.role = ["generator", "judge"]
    try:
        code = args.fn(args)
        sys.stdout.flush()  # inside the try: a closed pipe shows here, not at the interpreter's exit
        return code
    except BrokenPipeError:
        # The reader took what it wanted (`genjudge summary | head`) and closed the pipe: stop as a shell tool
        # does, without a traceback; what is left to flush goes nowhere.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141  # 128 + SIGPIPE, the status of a tool the signal ended


def command() -> int:
    """The `genjudge` command: main(), then out without the interpreter's shutdown once its output is
    flushed (genjudge.store.job_log.end: 2.5 CPU-s of a command that imported torch and transformers)."""
    from genjudge.store.job_log import end

    code = main()
    end(code)
    return code


if __name__ == "__main__":
    sys.exit(command())
