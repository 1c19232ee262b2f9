"""The report's models x benchmarks table and its list of failed cells.

One row per generator, one column per (dataset, judge): the judge's headline measure on that
dataset with its 95% interval (reference: accuracy; score: mean score; pairwise against a baseline:
win rate; pairwise `pairs: all`: Bradley-Terry strength; a plugin mode: the first measure of its
leaderboard row), the generator's rank in the column (1 = best, higher values better; ties share
the mean of their ranks), and each generator's mean rank over the columns it has a value in.

`summary.json` gets it as `table`:

    {"columns": [{"key": "<dataset>/<judge>", "dataset", "judge", "mode", "measure", "kind"}],
     "rows": [{"generator", "mean_rank", "n_ranked",
               "values": {"<dataset>/<judge>": {"status", "value", "ci95", "n", "rank"}}}]}

`kind` is `rate` (0-1), `mean` or `strength`; `status` is `ok`, `failed` (the cell was not judged:
see `failed_cells`), `baseline` (the pairwise judge's baseline) or `not graded` (the judge does not
grade that generator). Rows are sorted by mean rank, generators without one last.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from genjudge.judging import modes
from genjudge.judging.headline import value_text
from genjudge.store import atomic

ROW_KEYS = {"generator", "dataset", "judge", "opponent", "mode", "n_items", "n_judged", "n_unparsed", "exact_match"}
PLOT_NAME = "models_by_benchmarks"


def headline_measure(row: dict) -> str | None:
    """The first measure (a dict with a value) of a leaderboard row: the mode's headline."""
    return next((k for k, v in row.items() if k not in ROW_KEYS and isinstance(v, dict) and "value" in v), None)


def _column(exp, dataset: str, judge: str, rows: list[dict]) -> dict:
    section = exp.judges[judge]
    mode = section["mode"]
    paired = modes.get(mode).needs_baseline
    if paired and section["pairs"] == "all":
        measure, kind = "strength", "strength"
    else:
        mine = [r for r in rows if (r["dataset"], r["judge"]) == (dataset, judge)]
        measure = next((m for r in mine if (m := headline_measure(r))), None)
        kind = "mean" if any((r.get(measure) or {}).get("kind") == "mean" for r in mine) else "rate"
    return {
        "key": f"{dataset}/{judge}",
        "dataset": dataset,
        "judge": judge,
        "mode": mode,
        "measure": measure,
        "kind": kind,
    }


def build(exp, leaderboard: list[dict], across_cells: dict, failed: list[dict]) -> dict:
    """The table from the experiment as configured (`exp`, every cell), the leaderboard rows and
    strengths of the cells judged, and the failed cells."""
    columns = []
    for dataset in exp.datasets:
        for judge in exp.judges:
            if dataset in exp.judge_datasets(judge):
                columns.append(_column(exp, dataset, judge, leaderboard))
    failed_at = {(f["generator"], f["dataset"], f["judge"]) for f in failed}
    rows = []
    for g in exp.generators:
        values = {}
        for col in columns:
            values[col["key"]] = _value(exp, g, col, leaderboard, across_cells, failed_at)
        rows.append({"generator": g, "values": values})
    for col in columns:  # ranks within each column, 1 = best
        have = {r["generator"]: r["values"][col["key"]]["value"] for r in rows}
        have = {g: v for g, v in have.items() if v is not None}
        ranks = pd.Series(have, dtype=float).rank(ascending=False, method="average")
        for r in rows:
            r["values"][col["key"]]["rank"] = float(ranks[r["generator"]]) if r["generator"] in ranks else None
    for r in rows:
        ranked = [v["rank"] for v in r["values"].values() if v["rank"] is not None]
        r["mean_rank"] = round(sum(ranked) / len(ranked), 3) if ranked else None
        r["n_ranked"] = len(ranked)
    order = {g: i for i, g in enumerate(exp.generators)}
    rows.sort(key=lambda r: (r["mean_rank"] is None, r["mean_rank"] or 0, order[r["generator"]]))
    return {
        "columns": columns,
        "rows": [{k: r[k] for k in ("generator", "mean_rank", "n_ranked", "values")} for r in rows],
    }


def _value(exp, generator: str, col: dict, leaderboard, across_cells, failed_at) -> dict:
    empty = {"status": "not graded", "value": None, "ci95": None, "n": None}
    dataset, judge = col["dataset"], col["judge"]
    section = exp.judges[judge]
    graded = {c.generator for c in exp.cells(judge) if c.dataset == dataset}
    if col["kind"] == "strength":
        graded |= {c.opponent for c in exp.cells(judge) if c.dataset == dataset}
    if (generator, dataset, judge) in failed_at or (
        col["kind"] == "strength" and any((g, dataset, judge) in failed_at for g in graded)
    ):
        # pairs: all: the strengths are fitted on every pair, so one failed pair fails the column's values
        return {**empty, "status": "failed"}
    if generator == section["baseline"] and modes.get(section["mode"]).needs_baseline and col["kind"] != "strength":
        return {**empty, "status": "baseline"}
    if generator not in graded:
        return empty
    if col["kind"] == "strength":
        s = across_cells.get(judge, {}).get("bradley_terry", {}).get(dataset, {}).get(generator)
        if not s:
            return {**empty, "status": "ok"}
        return {"status": "ok", "value": s["strength"], "ci95": s.get("ci95"), "n": None}
    row = next(
        (r for r in leaderboard if (r["generator"], r["dataset"], r["judge"]) == (generator, dataset, judge)), None
    )
    v = (row or {}).get(col["measure"]) or {}
    return {
        "status": "ok",
        "value": v.get("value"),
        "ci95": v.get("ci95"),
        "n": v.get("n", (row or {}).get("n_judged")),
    }


def _rank(x) -> str:
    return "" if x is None else f"{x:g}"


def markdown(table: dict) -> list[str]:
    """The table as report.md and `genjudge summary` print it."""
    cols = table["columns"]
    head = ["generator", *(f"{c['dataset']} · {c['judge']} ({(c['measure'] or '-').replace('_', ' ')})" for c in cols)]
    head.append("mean rank")
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in table["rows"]:
        cells = [r["generator"]]
        for c in cols:
            v = r["values"][c["key"]]
            cells.append(value_text(v, c["kind"]) + (f" ({_rank(v['rank'])})" if v["rank"] is not None else ""))
        mean = "" if r["mean_rank"] is None else f"{r['mean_rank']:.2f} (of {r['n_ranked']})"
        out.append("| " + " | ".join([*cells, mean]) + " |")
    return out


NOTE = (
    "Each column is one judge on one dataset: its headline measure with the 95% interval and, in "
    "parentheses, the generator's rank in the column (1 = best; ties share their mean rank). Mean rank: "
    "over the columns where the generator has a value (how many in parentheses)."
)


def failed_markdown(failed: list[dict]) -> list[str]:
    if not failed:
        return []
    out = [
        "## Failed cells",
        "",
        "Not judged, and left out of every measure above; the rest of the run is complete. Fix the cause and "
        "run the same command again: only the failed jobs and what reads them run again.",
        "",
        "| cell | judge | failed job | error | log |",
        "|---|---|---|---|---|",
    ]
    for f in failed:
        cell = f"{f['generator']}/{f['dataset']}" + (f" vs {f['opponent']}" if f["opponent"] else "")
        for e in f["errors"]:
            job = (
                f"generate {e['generator']}/{e['dataset']}/{e['shard']}"
                if f["stage"] == "generate"
                else f"judge {e.get('judge', f['judge'])}"
            )
            message = " ".join(e["message"].split()).replace("|", "\\|")
            message = message if len(message) <= 240 else message[:239] + "…"
            out.append(f"| {cell} | {f['judge']} | {job} | {e['type']}: {message} | {e['log']} |")
    return [*out, ""]


def shown(table: dict) -> bool:
    """Whether the table compares anything (more than one generator or column)."""
    return bool(table.get("columns")) and (len(table["columns"]) > 1 or len(table["rows"]) > 1)


def sections(table: dict, failed: list[dict]) -> list[str]:
    out = ["## Models × benchmarks", "", *markdown(table), "", NOTE, ""] if shown(table) else []
    return out + failed_markdown(failed)


def summary_lines(table: dict, failed: list[dict]) -> list[str]:
    """What `genjudge summary` prints before the leaderboard: the table and the failed cells."""
    out = [*markdown(table), ""] if shown(table) else []
    for f in failed:
        cell = f"{f['generator']}/{f['dataset']}" + (f" vs {f['opponent']}" if f["opponent"] else "")
        first = f["errors"][0]
        message = first["message"].splitlines()[0] if first["message"] else ""
        out.append(
            f"FAILED {cell} (judge {f['judge']}, {f['stage']}): {first['type']}: {message} [log: {first['log']}]"
        )
    return [*out, ""] if failed else out


def with_sections(text: str, table: dict, failed: list[dict]) -> str:
    """report.md with the table and the failed cells before its first section."""
    lines = text.splitlines()
    at = next((i for i, line in enumerate(lines) if line.startswith("## ")), len(lines))
    return "\n".join([*lines[:at], *sections(table, failed), *lines[at:]])


def write_plot(table: dict, plots_dir) -> Path | None:
    """`plots/models_by_benchmarks.png`: the table as a heat map (after report.html wrote its plots)."""
    from genjudge.report_html import plots

    if plots_dir is None or not shown(table):
        return None
    fig = plots.models_by_benchmarks(table)
    if fig is None:
        return None
    path = Path(plots_dir) / f"{PLOT_NAME}.png"
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic.atomic_path(path) as tmp:
        Path(tmp).write_bytes(plots.png(fig))
    return path


class Study:
    """The report stage's view of an experiment with failures: `of` sets the failed cells apart
    (genjudge.store.failures.surviving); `add_to` puts the table and the failures in the summary."""

    def __init__(self, full, survived):
        self.full = full
        self.exp, self.config = survived.exp, survived.config
        self.gen_metas, self.judge_metas, self.failed = survived.gen_metas, survived.judge_metas, survived.failed
        self.table: dict = {}

    @classmethod
    def of(cls, exp, config: dict, gen_metas, judge_metas: dict) -> Study:
        from genjudge.store.failures import surviving

        return cls(exp, surviving(exp, config, gen_metas, judge_metas))

    def add_to(self, run) -> None:
        self.table = build(self.full, run.leaderboard, run.across_cells, self.failed)
        run.table, run.failed_cells = self.table, self.failed

    def markdown(self, text: str) -> str:
        return with_sections(text, self.table, self.failed)

    def write_plot(self, plots_dir) -> Path | None:
        return write_plot(self.table, plots_dir)
