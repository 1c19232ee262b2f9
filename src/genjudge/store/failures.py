"""Failures a model job records instead of stopping the study.

A generation or judge job that raises writes its declared outputs as a failure (no rows; the meta's
`error` says what went wrong and where the full log is) and exits 0. Snakemake then goes on with
everything downstream: the merge of a failed generation writes an empty file that says so, the
judges grade the cells whose answers exist and skip the rest, and the report lists the failed cells
with their errors. The run still ends with exit status 1 (`stop_if_failed`).

Each recorded failure is appended to `results/<run>/failures/<role>/<job>.jsonl`; how many there
are is a parameter of the job, so the next run of the same command reruns exactly the failed jobs
and what reads them (Snakemake: "params have changed since last execution"), while a job that has
since succeeded keeps its count and is not rerun again. The item cache makes the reruns compute
only what is missing.

A job killed from outside (a SLURM time limit, out of host memory) cannot record anything: Snakemake
handles it as any failed job (retries with more memory and time on SLURM; the jobs that read it wait).
"""

from __future__ import annotations

import json
import logging
import os
import socket
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path

from genjudge.errors import InputError
from genjudge.store import atomic
from genjudge.store.records import INVOCATION_ENV

FAILED_KEY = b"genjudge.failed"  # schema metadata of a merged generations file whose shards failed


def history_path(results: str, role: str, job: str) -> Path:
    """Where a job's recorded failures are kept (`job`: `<generator>/<dataset>/<shard>`, `<judge>/<i>-of-<n>`)."""
    return Path(results) / "failures" / role / f"{job}.jsonl"


def attempts(path) -> int:
    """How many failures a job has recorded (0 when none): a parameter of the job, to rerun it after one."""
    try:
        with open(path, encoding="utf-8") as fh:
            return sum(1 for line in fh if line.strip())
    except FileNotFoundError:
        return 0


def recorded_attempts(results: str, role: str) -> dict[str, int]:
    """Job -> its count of recorded failures, for every job of `role` that recorded one: one walk of
    the run's failures directory while planning, rather than a file opened per job."""
    root = Path(results) / "failures" / role
    counts = {str(p.relative_to(root).with_suffix("")): attempts(p) for p in root.glob("**/*.jsonl")}
    return {job: n for job, n in counts.items() if n}


def describe(exc: BaseException, log: str) -> dict:
    message = str(exc).strip() or type(exc).__name__
    return {"type": type(exc).__name__, "message": message[:4000], "log": str(log), "at": round(time.time(), 3)}


@contextmanager
def recorded(history, log: str, what: str, write_failure):
    """Run the job's body; on an exception, record it and call `write_failure(error)` to write the
    job's outputs as a failure, then return normally. The traceback goes to the job's log.

    Yields the attempt's record: when it started, on which host, by which snakemake command; the body
    adds `gpus` once it holds them, so that the report draws the failed attempt where it ran."""
    attempt = {
        "started_at": round(time.time(), 3),
        "hostname": socket.gethostname(),
        "invocation": os.environ.get(INVOCATION_ENV),
        "gpus": [],
    }
    try:
        yield attempt
    except Exception as exc:  # noqa: BLE001 - any failure of this one job is recorded, not raised
        error = describe(exc, log)
        if isinstance(exc, InputError):  # a configuration or input error: its one clear message, no traceback
            logging.getLogger("failures").error(
                "%s failed: %s; recorded in %s, the rest of the run goes on", what, exc, history
            )
        else:
            logging.getLogger("failures").exception(
                "%s failed; recorded in %s, the rest of the run goes on", what, history
            )
        Path(history).parent.mkdir(parents=True, exist_ok=True)
        with open(history, "a", encoding="utf-8") as fh:
            fh.write(json.dumps({**error, **attempt}) + "\n")
        write_failure(error)
        first = error["message"].splitlines()[0]
        print(f"error: {what} failed (recorded; the other cells go on): {first} [log: {log}]", file=sys.__stderr__)


def attempts_of(results) -> list[dict]:
    """Every recorded failure of a run's model jobs, oldest first: {role, job, at, started_at, hostname,
    gpus, invocation, type, message, log} (attempts recorded before `started_at` was kept have none)."""
    root = Path(results) / "failures"
    out = []
    for path in sorted(root.glob("*/**/*.jsonl")):
        role = path.relative_to(root).parts[0]
        job = str(path.relative_to(root / role).with_suffix(""))
        with open(path, encoding="utf-8") as fh:
            out += [{"role": role, "job": job, **json.loads(line)} for line in fh if line.strip()]
    return sorted(out, key=lambda a: a.get("at") or 0)


def write_failed_generations(path, errors: list[dict]) -> None:
    """A merged generations file for a (generator, dataset) whose shards failed: no rows, the errors
    in the file's metadata."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = pa.schema([("id", pa.string()), ("output", pa.string())], metadata={FAILED_KEY: json.dumps(errors)})
    with atomic.atomic_path(path) as tmp:
        pq.write_table(pa.Table.from_pylist([], schema=schema), tmp)


def generation_errors(path) -> list[dict] | None:
    """The failed shards' errors of a merged generations file, or None when its generation succeeded."""
    import pyarrow.parquet as pq

    meta = pq.read_schema(path).metadata or {}
    return json.loads(meta[FAILED_KEY]) if FAILED_KEY in meta else None


def shard_errors(metas) -> list[dict]:
    """[{generator, dataset, shard, type, message, log, at}] of the generation metas that recorded a failure."""
    return [{"generator": m.generator, "dataset": m.dataset, "shard": m.shard, **m.error} for m in metas if m.error]


def failed_pairs(generations: dict) -> dict:
    """(generator, dataset) -> errors, for the merged generations files (by pair) that record a failure."""
    return {pair: errs for pair, path in generations.items() if (errs := generation_errors(path)) is not None}


def skipped_cells(cells, failed: dict) -> dict:
    """Cell -> errors, for the cells whose answers (or, pairwise, whose opponent's) failed."""
    out = {}
    for cell in cells:
        errs = [e for g in (cell.generator, cell.opponent) if g for e in failed.get((g, cell.dataset), [])]
        if errs:
            out[cell] = errs
    return out


def failed_cells(exp, gen_metas, judge_metas: dict) -> list[dict]:
    """One row per (judge, cell) not judged, with what failed first: the generation of its answers
    (`stage: generate`, the failed shards' errors; the judge never saw them, whatever became of it),
    else the judge's job, or the judge on that cell alone (`stage: judge`)."""
    by_pair: dict = {}
    for e in shard_errors(gen_metas):
        by_pair.setdefault((e["generator"], e["dataset"]), []).append(e)
    rows = []
    for judge in exp.judges:
        meta = judge_metas.get(judge)
        for cell in exp.cells(judge):
            stage = "generate"
            errors = [e for g in (cell.generator, cell.opponent) if g for e in by_pair.get((g, cell.dataset), [])]
            if not errors and meta is not None and meta.error:
                stage, errors = "judge", [{"judge": judge, **e} for m in meta.jobs() if (e := m.error)] or [meta.error]
            elif not errors and meta is not None and meta.cell_errors.get(cell.key):
                stage, errors = "judge", [{"judge": judge, **e} for e in meta.cell_errors[cell.key]]
            if errors:
                rows.append(
                    {
                        "judge": judge,
                        "generator": cell.generator,
                        "dataset": cell.dataset,
                        "opponent": cell.opponent,
                        "stage": stage,
                        "errors": errors,
                    }
                )
    return rows


@dataclass
class Surviving:
    """What the report can use: the experiment less the failed cells and the judges with none left,
    the panels without such judges, the metas of the jobs that succeeded; and the failures."""

    exp: object
    panels: dict  # name -> the panel's `panels` entry
    gen_metas: list
    judge_metas: dict
    failed: list


def surviving(exp, panels: dict, gen_metas, judge_metas: dict) -> Surviving:
    """`panels`: the config's `panels` section."""
    failed = failed_cells(exp, gen_metas, judge_metas)
    gone: dict = {}
    for row in failed:
        gone.setdefault(row["judge"], set()).add((row["generator"], row["dataset"], row["opponent"]))
    skipped = {j: [c for c in exp.cells(j) if (c.generator, c.dataset, c.opponent) in keys] for j, keys in gone.items()}
    kept = exp.without(skipped)
    empty = {j for j in kept.judges if not kept.cells(j)}
    kept = replace(kept, judges={j: s for j, s in kept.judges.items() if j not in empty})
    panels = {n: p for n, p in panels.items() if not set(p["judges"]) & empty}
    return Surviving(
        exp=kept,
        panels=panels,
        gen_metas=[m for m in gen_metas if not m.error],
        judge_metas={j: m for j, m in judge_metas.items() if j in kept.judges},
        failed=failed,
    )
