"""The test suite's CPU budget per module (tests/durations.json) against a run's CPU log.

    GENJUDGE_TEST_CPU_LOG=/tmp/cpu.tsv .venv/bin/python -m pytest -n 3 --dist loadscope ...
    .venv/bin/python tests/budget.py /tmp/cpu.tsv            # exit 1 naming modules over budget
    .venv/bin/python tests/budget.py /tmp/cpu.tsv --table    # the per-module table, markdown
    .venv/bin/python tests/budget.py /tmp/cpu.tsv --write NOTE    # record the log as the new budget
    .venv/bin/python tests/budget.py /tmp/a.tsv /tmp/b.tsv --write NOTE    # each module's costliest run

    GENJUDGE_TEST_PROCESS_LOG=/tmp/procs make test    # every Python process the suite starts records its CPU
    .venv/bin/python tests/budget.py /tmp/procs --processes    # their CPU by kind: Snakemake, jobs by rule, ...

A module is over budget when its CPU seconds grew by more than GROWTH and by more than SLACK
seconds (a module of a few seconds varies by more than 30% from run to run), beyond the machine's
factor: the median, over the modules that run no model and no snakemake, of their CPU seconds over
their budget's (a machine 1.8 times slower than the budget's takes about 1.8 times as long for all;
a module whose own tests grew moves the median little). The modules that run snakemake or its jobs
have a factor of their own, the same median over them: they mostly start processes (imports, a model's
load), which do not follow a machine's speed at computing (a machine that took 0.62 of the budget's
CPU-s for the model-free modules took 0.72 for these, and 6 of them looked grown by the first factor);
with fewer than CALIBRATION_MODULES of them the first factor serves. `--factor 1` compares as recorded. CPU
seconds, not wall: they hold while other work shares the machine. A module the budget lacks is named too: a new
module gets its line with --write (after review of what it costs), as docs/development.md says.
Written from several runs on one machine, the budget takes each module's costliest: a module whose
cost depends on a cache the machine keeps (torch.compile's, vLLM's) is then budgeted at its cold
figure, which a fresh clone on a fresh machine pays.
Tests that ran snakemake without the `workflow` or `slurm` mark are named: `make test-fast` would
run them.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from dataclasses import dataclass, field
from pathlib import Path

BUDGET = Path(__file__).with_name("durations.json")
GROWTH = 0.30
SLACK = 3.0
CALIBRATION_MIN_S = 2.0  # a module of less says little of the machine's speed
CALIBRATION_MODULES = 5  # fewer: the factor is 1
WORKFLOW_MARKS = {"workflow", "slurm"}


@dataclass
class Module:
    cpu_s: float = 0.0
    wall_s: float = 0.0
    tests: int = 0
    snakemake_runs: int = 0
    dry_runs: int = 0
    jobs: int = 0
    failed: int = 0  # tests that failed: they may have stopped early, and cost less than they should
    by_rule: dict = field(default_factory=dict)


def read_log(path) -> tuple[dict[str, Module], list[str]]:
    """Per module, the sums of a GENJUDGE_TEST_CPU_LOG; and the tests that ran snakemake unmarked."""
    modules: dict[str, Module] = {}
    unmarked = []
    for line in Path(path).read_text().splitlines():
        cols = line.split("\t")
        if len(cols) < 3:
            continue
        cols += [""] * (9 - len(cols))
        cpu, wall, nodeid, runs, dry, jobs, by_rule, marks, outcome = cols[:9]
        m = modules.setdefault(nodeid.split("::")[0], Module())
        m.failed += outcome == "failed"
        m.cpu_s += float(cpu)
        m.wall_s += float(wall)
        m.tests += 1
        m.snakemake_runs += int(runs or 0)
        m.dry_runs += int(dry or 0)
        m.jobs += int(jobs or 0)
        for part in filter(None, by_rule.split(",")):
            rule, n = part.split("=")
            m.by_rule[rule] = m.by_rule.get(rule, 0) + int(n)
        if int(runs or 0) and not set(marks.split(",")) & WORKFLOW_MARKS:
            unmarked.append(nodeid)
    return modules, unmarked


def table(modules: dict[str, Module]) -> str:
    rows = [
        "| module | CPU-s | wall-s | tests | snakemake runs (dry) | jobs | jobs by rule |",
        "|---|---:|---:|---:|---:|---:|---|",
    ]
    total = Module()
    for name, m in sorted(modules.items(), key=lambda kv: -kv[1].cpu_s):
        rules = ", ".join(f"{r} {n}" for r, n in sorted(m.by_rule.items(), key=lambda kv: -kv[1]))
        failed = f" ({m.failed} failed)" if m.failed else ""
        rows.append(
            f"| {name.removeprefix('tests/')} | {m.cpu_s:.0f} | {m.wall_s:.0f} | {m.tests}{failed} | "
            f"{m.snakemake_runs} ({m.dry_runs}) | {m.jobs} | {rules} |"
        )
        for k in ("cpu_s", "wall_s", "tests", "snakemake_runs", "dry_runs", "jobs"):
            setattr(total, k, getattr(total, k) + getattr(m, k))
    rows.append(
        f"| **total** | {total.cpu_s:.0f} | {total.wall_s:.0f} | {total.tests} | "
        f"{total.snakemake_runs} ({total.dry_runs}) | {total.jobs} | |"
    )
    return "\n".join(rows)


def runs_processes(entry: dict) -> bool:
    """Whether a module ran snakemake or its jobs (its cost is mostly processes' start-up): its budget
    entry, or a run's `vars(Module)`."""
    return bool(entry["jobs"] or entry["snakemake_runs"])


def machine_factor(modules: dict[str, Module], budget: dict, processes: bool = False) -> tuple[float, int]:
    """(how many times the budget's CPU-s this run's machine takes, the modules it is the median of):
    the modules that run no model and no snakemake (with `processes`, those that run snakemake or its
    jobs), of at least CALIBRATION_MIN_S in the budget and without failed tests; 1.0 where fewer than
    CALIBRATION_MODULES are in both."""
    ratios = sorted(
        m.cpu_s / want["cpu_s"]
        for name, m in modules.items()
        if (want := budget["modules"].get(name))
        and runs_processes(want) == processes
        and runs_processes(vars(m)) == processes
        and not m.failed
        and want["cpu_s"] >= CALIBRATION_MIN_S
    )
    if len(ratios) < CALIBRATION_MODULES:
        return 1.0, len(ratios)
    return statistics.median(ratios), len(ratios)


def check(
    modules: dict[str, Module], budget: dict, factor: float = 1.0, process_factor: float | None = None
) -> list[str]:
    """Lines naming each module over budget (its budget times `factor`, the machine's; a module that
    runs snakemake or its jobs times `process_factor` where given) or missing from it (none: within
    budget)."""
    expected = budget["modules"]
    out = []
    for name, m in sorted(modules.items()):
        want = expected.get(name)
        if want is None:
            out.append(f"{name}: {m.cpu_s:.0f} CPU-s, not in {BUDGET.name} (a new module: add it with --write)")
            continue
        f = process_factor if process_factor is not None and runs_processes(want) else factor
        slower = f" x {f:.2f} for this machine" if f != 1.0 else ""
        scaled = want["cpu_s"] * f
        if m.cpu_s > scaled * (1 + GROWTH) and m.cpu_s - scaled > SLACK:
            out.append(
                f"{name}: {m.cpu_s:.0f} CPU-s against {want['cpu_s']:.0f} budgeted{slower} "
                f"(+{m.cpu_s / max(scaled, 0.1) - 1:.0%}); jobs {m.jobs} against {want['jobs']}, "
                f"snakemake runs {m.snakemake_runs} against {want['snakemake_runs']}"
            )
    return out


def costliest(runs: list[dict[str, Module]]) -> dict[str, Module]:
    """Each module as it was in the run where it cost the most CPU-s."""
    out: dict[str, Module] = {}
    for modules in runs:
        for name, m in modules.items():
            if name not in out or m.cpu_s > out[name].cpu_s:
                out[name] = m
    return out


def budget_of(modules: dict[str, Module], note: str) -> dict:
    return {
        "about": "Each test module's CPU seconds, snakemake invocations and jobs in a full run, the costliest "
        "where several were recorded (tests/budget.py checks a run's GENJUDGE_TEST_CPU_LOG against it; "
        "docs/development.md).",
        "measured": note,
        "modules": {
            name: {"cpu_s": round(m.cpu_s, 1), "snakemake_runs": m.snakemake_runs, "jobs": m.jobs}
            for name, m in sorted(modules.items())
        },
    }


def process_kind(rec: dict) -> str:
    """What a process of a GENJUDGE_TEST_PROCESS_LOG record was: a Snakemake invocation (a dry run,
    the two inside each SLURM job), a job by rule, a pytest worker, a model server, a torchrun group."""
    script = rec["argv"][0] if rec.get("argv") else ""
    torch = " (imports torch)" if rec.get("torch") else ""
    if script.endswith("snakemake/__main__.py") or script.endswith("/bin/snakemake"):
        what = "inside a SLURM job" if rec.get("cluster_job") else "dry run" if rec.get("dry_run") else "run"
        return f"snakemake: {what}{torch}"
    if "/.snakemake/scripts/" in script:  # Snakemake's copy of scripts/<rule>.py: tmpXXXX.<rule>.py
        return f"job: {Path(script).name.split('.')[-2]}{torch}"
    if rec.get("pytest_worker"):
        return "pytest worker (the tests' own work)"
    if script.endswith("api_server.py"):
        return "vLLM OpenAI server"
    if script.endswith("distributed/run.py"):
        return "torchrun"
    if "/bench/" in script:
        return f"bench: {Path(script).name}{torch}"
    return f"other: {Path(script).name or script}{torch}"


def read_processes(directory) -> dict[str, list[float]]:
    """CPU seconds of each process of a GENJUDGE_TEST_PROCESS_LOG directory, by process_kind."""
    kinds: dict[str, list[float]] = {}
    for path in Path(directory).glob("*.json"):
        try:
            rec = json.loads(path.read_text())
            cpu = float(rec["cpu_s"])
        except (OSError, ValueError, KeyError, TypeError):
            continue  # a process killed while writing its record
        kinds.setdefault(process_kind(rec), []).append(cpu)
    return kinds


def process_table(kinds: dict[str, list[float]]) -> str:
    total = sum(sum(v) for v in kinds.values())
    rows = [
        "| process | processes | CPU-s | CPU-s each (median) | share |",
        "|---|---:|---:|---:|---:|",
    ]
    for kind, cpu in sorted(kinds.items(), key=lambda kv: -sum(kv[1])):
        rows.append(
            f"| {kind} | {len(cpu)} | {sum(cpu):.0f} | {statistics.median(cpu):.2f} | {sum(cpu) / max(total, 1e-9):.0%} |"
        )
    rows.append(f"| **total** | {sum(len(v) for v in kinds.values())} | {total:.0f} | | |")
    return "\n".join(rows)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "log", nargs="+", help="a GENJUDGE_TEST_CPU_LOG file of a full run (--write: one or more, on one machine)"
    )
    ap.add_argument("--table", action="store_true", help="print the per-module table (markdown) and exit")
    ap.add_argument(
        "--processes",
        action="store_true",
        help="LOG is a GENJUDGE_TEST_PROCESS_LOG directory: print the CPU of the suite's processes by kind",
    )
    ap.add_argument(
        "--write",
        metavar="NOTE",
        help="record the log as the budget (several: each module's costliest run), with NOTE saying how they were run",
    )
    ap.add_argument(
        "--factor", type=float, help="the machine's speed against the budget's (default: measured from the log)"
    )
    args = ap.parse_args(argv)
    if args.processes:
        kinds = read_processes(args.log[0])
        if not kinds:
            print(f"{args.log[0]}: no process records (was GENJUDGE_TEST_PROCESS_LOG set for the run?)")
            return 2
        print(process_table(kinds))
        return 0
    if len(args.log) > 1 and not args.write:
        ap.error("several logs are for --write; a check or a table reads one")
    if args.write and args.table:
        ap.error("--write or --table, not both")
    runs = []
    for log in args.log:
        modules, unmarked = read_log(log)
        if not modules:
            print(f"{log}: no test lines (was GENJUDGE_TEST_CPU_LOG set for the run?)")
            return 2
        runs.append(modules)
    modules = runs[0]  # a check or a table reads one log
    if args.table:
        print(table(modules))
        return 0
    if args.write:
        for log, run in zip(args.log, runs):
            if failed := sorted(name for name, m in run.items() if m.failed):
                print(
                    f"{log}: tests failed in {', '.join(failed)}: their figures may be off (a failure stops early or hangs)"
                )
        modules = costliest(runs)
        BUDGET.write_text(json.dumps(budget_of(modules, args.write), indent=1) + "\n")
        print(f"{BUDGET}: {len(modules)} modules, {sum(m.cpu_s for m in modules.values()):.0f} CPU-s")
        return 0
    budget = json.loads(BUDGET.read_text())
    factor, n = machine_factor(modules, budget)
    process_factor, n_processes = machine_factor(modules, budget, processes=True)
    if args.factor is not None:
        factor = process_factor = args.factor
        print(f"machine factor {factor:.2f} (given)")
    else:
        print(
            f"machine factor {factor:.2f} (median of {n} modules without models or snakemake: their CPU-s over "
            "the budget's)"
            if n >= CALIBRATION_MODULES
            else f"machine factor 1 (only {n} modules without models or snakemake to measure it from)"
        )
        if n_processes >= CALIBRATION_MODULES:
            print(f"factor {process_factor:.2f} for the {n_processes} modules that run snakemake or its jobs")
        else:
            process_factor = factor
            print(f"only {n_processes} modules that run snakemake or its jobs: the factor {factor:.2f} serves them")
    problems = check(modules, budget, factor, process_factor)
    problems += [f"{t}: ran snakemake but is not marked workflow (make test-fast runs it)" for t in unmarked]
    total, want = sum(m.cpu_s for m in modules.values()), sum(m["cpu_s"] for m in budget["modules"].values())
    print(f"{len(modules)} modules, {total:.0f} CPU-s (budget {want:.0f})")
    failed = {name: m.failed for name, m in modules.items() if m.failed}
    if failed:
        print(f"  failed tests (their modules' figures may be low): {failed}")
    for line in problems:
        print(f"  {line}")
    print("within budget" if not problems else f"{len(problems)} over budget or unlisted")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
