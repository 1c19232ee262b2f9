"""The report's models x benchmarks table and its list of failed cells.

One row per generator, one column per (dataset, judge): the judge's headline measure on that
dataset with its 95% interval (reference: accuracy; score: mean score; pairwise against a baseline:
win rate; pairwise `pairs: all`: Bradley-Terry strength; a plugin mode: the first measure of its
leaderboard row), the generator's rank in the column (1 = best, higher values better; ties share
the mean of their ranks) and its rank by intervals (`rank_ub`, Chatbot Arena's: 1 + the generators
whose 95% interval lies wholly above its own, so generators the intervals do not separate share
it), and each generator's mean rank over the columns it has a rank in. A
column ranks its generators only where two or more have a value: a generator alone in a column
(the only one a judge grades, or the others failed) compares with nobody there, and a free rank 1
would lift its mean rank.

`summary.json` gets it as `table`:

    {"columns": [{"key": "<dataset>/<judge>", "dataset", "judge", "mode", "measure", "kind"}],
     "rows": [{"generator", "mean_rank", "n_ranked",
               "values": {"<dataset>/<judge>": {"status", "value", "ci95", "n", "rank", "rank_ub"}}}]}

`kind` is `rate` (0-1), `mean` or `strength`; `status` is `ok`, `failed` (the cell was not judged:
see `failed_cells`), `baseline` (the pairwise judge's baseline) or `not graded` (the judge does not
grade that generator). Rows are sorted by mean rank, generators without one last.
"""

from __future__ import annotations

import pandas as pd

from genjudge.judging import modes
from genjudge.judging.tables import (
    STUDY_NOTE,
    cell_name,
    columns_text,
    failed_note,
    failed_rows,
    headline_lines,
    markdown_table,
    md_line,
    study_rows,
    study_shown,
)

OUTCOME_COUNTS = ("wins", "ties", "losses")
ROW_KEYS = {"generator", "dataset", "judge", "opponent", "mode", "n_items", "n_judged", "n_unparsed", "exact_match"}


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
        if measure is None:  # no cell of the column was judged (all failed): the mode's own headline
            measure, kind = modes.get(mode).leaderboard_measure()
        else:
            kind = "mean" if any((r.get(measure) or {}).get("kind") == "mean" for r in mine) else "rate"
    # How the measure's interval is made, where the mode says (a rubric score's: a bootstrap).
    own = [r for r in rows if (r["dataset"], r["judge"]) == (dataset, judge)]
    method = next((m for r in own if (m := (r.get(measure) or {}).get("method"))), None)
    return {
        "key": f"{dataset}/{judge}",
        "dataset": dataset,
        "judge": judge,
        "mode": mode,
        "measure": measure,
        "kind": kind,
        **({"baseline": section["baseline"]} if paired and kind != "strength" else {}),
        **({"method": method} if method else {}),
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
    for col in columns:  # ranks within each column, 1 = best; none where fewer than two compare
        have = {r["generator"]: r["values"][col["key"]]["value"] for r in rows}
        have = {g: v for g, v in have.items() if v is not None}
        if len(have) < 2:
            have = {}
        ranks = pd.Series(have, dtype=float).rank(ascending=False, method="average")
        bounds = {r["generator"]: _bounds(r["values"][col["key"]]) for r in rows if r["generator"] in have}
        for r in rows:
            g, v = r["generator"], r["values"][col["key"]]
            v["rank"] = float(ranks[g]) if g in ranks else None
            # Chatbot Arena's rank: 1 + the generators whose interval lies wholly above this one's
            v["rank_ub"] = (
                1 + sum(lo > bounds[g][1] for o, (lo, _) in bounds.items() if o != g) if g in bounds else None
            )
    for r in rows:
        ranked = [v["rank"] for v in r["values"].values() if v["rank"] is not None]
        r["mean_rank"] = round(sum(ranked) / len(ranked), 3) if ranked else None
        r["n_ranked"] = len(ranked)
    order = {g: i for i, g in enumerate(exp.generators)}
    rows.sort(key=lambda r: (r["mean_rank"] is None, r["mean_rank"] or 0, order[r["generator"]]))
    out = {
        "columns": columns,
        "rows": [{k: r[k] for k in ("generator", "mean_rank", "n_ranked", "values")} for r in rows],
    }
    warning = mean_rank_warning(out["rows"])
    if warning:
        out["mean_rank_warning"] = warning
    return out


def _bounds(v: dict) -> tuple[float, float]:
    """A value's 95% interval, or the value itself where it has none."""
    ci = v.get("ci95")
    return (float(ci[0]), float(ci[1])) if ci else (float(v["value"]), float(v["value"]))


def mean_rank_warning(rows: list[dict]) -> str | None:
    """Why the mean ranks do not compare, where they are over different numbers of columns (a rank of 1
    in one column is not a mean of 1.5 over two), or None."""
    over = {r["generator"]: r["n_ranked"] for r in rows if r["mean_rank"] is not None}
    if len(set(over.values())) < 2:
        return None
    shown = ", ".join(f"{g} over {columns_text(n)}" for g, n in over.items())
    return (
        f"the mean ranks are over different numbers of columns ({shown}): they do not compare with each "
        "other, and the rows' order by them means little. Compare the generators column by column."
    )


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
        **{k: v[k] for k in OUTCOME_COUNTS if k in v},  # a pairwise win rate's wins, ties, losses
    }


def markdown(table: dict) -> list[str]:
    """The table as report.md and `genjudge summary` print it."""
    return markdown_table(*study_rows(table))


def failed_markdown(failed: list[dict]) -> list[str]:
    if not failed:
        return []
    return ["## Failed cells", "", failed_note(failed), "", *markdown_table(*failed_rows(failed)), ""]


def sections(table: dict, failed: list[dict]) -> list[str]:
    heads = headline_lines(table)
    top = ["## Headlines", "", *(f"- {md_line(h)}" for h in heads), ""] if heads else []
    warn = [f"> **Warning:** {md_line(table['mean_rank_warning'])}", ""] if table.get("mean_rank_warning") else []
    out = ["## Models × benchmarks", "", *warn, *markdown(table), "", STUDY_NOTE, ""] if study_shown(table) else []
    return top + out + failed_markdown(failed)


def summary_lines(table: dict, failed: list[dict], warnings: list[str] = ()) -> list[str]:
    """What `genjudge summary` prints before the leaderboard: the warnings, the table and the failed cells."""
    out = [*markdown(table), ""] if study_shown(table) else []
    out = [*(f"warning: {w}" for w in warnings), *([""] if warnings else []), *out]
    if study_shown(table) and table.get("mean_rank_warning"):
        out += [f"warning: {table['mean_rank_warning']}", ""]
    for f in failed:
        cell = cell_name(f)
        first = f["errors"][0]
        message = first["message"].splitlines()[0] if first["message"] else ""
        out.append(
            f"FAILED {cell} (judge {f['judge']}, {f['stage']}): {first['type']}: {message} [log: {first['log']}]"
        )
    return [*out, ""] if failed else out


def with_sections(text: str, table: dict, failed: list[dict], warnings: list[str] = ()) -> str:
    """report.md with the warnings, the table and the failed cells before its first section."""
    lines = text.splitlines()
    at = next((i for i, line in enumerate(lines) if line.startswith("## ")), len(lines))
    warned = [x for w in warnings for x in (f"> **Warning:** {md_line(w)}", "")]
    return "\n".join([*lines[:at], *warned, *sections(table, failed), *lines[at:]])


class Study:
    """The report stage's view of an experiment with failures: `of` sets the failed cells apart
    (genjudge.store.failures.surviving); `add_to` puts the table and the failures in the summary."""

    def __init__(self, full, survived):
        self.full = full
        self.exp, self.panels = survived.exp, survived.panels
        self.gen_metas, self.judge_metas, self.failed = survived.gen_metas, survived.judge_metas, survived.failed
        self.table: dict = {}
        self.warnings: list[str] = []

    @classmethod
    def of(cls, exp, panels: dict, gen_metas, judge_metas: dict) -> Study:
        """`panels`: the config's `panels` section; `self.panels` keeps those whose judges survived."""
        from genjudge.store.failures import surviving

        return cls(exp, surviving(exp, panels, gen_metas, judge_metas))

    def add_to(self, run) -> None:
        self.table = build(self.full, run.leaderboard, run.across_cells, self.failed)
        run.table, run.failed_cells = self.table, self.failed
        self.warnings = list(run.warnings)

    def markdown(self, text: str) -> str:
        return with_sections(text, self.table, self.failed, self.warnings)
