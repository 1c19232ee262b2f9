"""The report's tables as text, (head, rows) with every cell a string: report.md, report.html and
`genjudge summary` show the same rows. The models x benchmarks table (summary.json's `table`, built by
stages.report_table) and the failed cells (`failed_cells`)."""

from __future__ import annotations

import html

from genjudge.judging.headline import value_text

STUDY_NOTE = (
    "Each column is one judge on one dataset: its headline measure with the 95% interval and, in "
    "parentheses, the generator's rank in the column (1 = best; ties share their mean rank; a column ranks "
    "only where two or more generators have a value). Mean rank: over the columns where the generator has a "
    "rank (how many in parentheses)."
)
FAILED_NOTE = (
    "Not judged, and left out of every measure of this report; the rest of the run is complete. Fix the cause and "
    "run the same command again: only the failed jobs and what reads them run again."
)


def study_shown(table: dict) -> bool:
    """Whether the models x benchmarks table compares anything (more than one generator or column)."""
    return bool(table.get("columns")) and (len(table["columns"]) > 1 or len(table["rows"]) > 1)


def _rank(x) -> str:
    return "" if x is None else f"{x:g}"


def columns_text(n: int) -> str:
    """How many columns a mean rank is over: `1 column`, `3 columns`."""
    return f"{n} column{'s' if n != 1 else ''}"


def study_rows(table: dict) -> tuple[list[str], list[list[str]]]:
    """One row per generator: each column's value with its interval and rank, and the mean rank."""
    cols = table["columns"]
    head = ["generator", *(f"{c['dataset']} · {c['judge']} ({(c['measure'] or '-').replace('_', ' ')})" for c in cols)]
    head.append("mean rank")
    rows = []
    for r in table["rows"]:
        cells = [r["generator"]]
        for c in cols:
            v = r["values"][c["key"]]
            cells.append(value_text(v, c["kind"]) + (f" ({_rank(v['rank'])})" if v["rank"] is not None else ""))
        cells.append("" if r["mean_rank"] is None else f"{r['mean_rank']:.2f} ({columns_text(r['n_ranked'])})")
        rows.append(cells)
    return head, rows


def cell_name(f: dict) -> str:
    return f"{f['generator']}/{f['dataset']}" + (f" vs {f['opponent']}" if f["opponent"] else "")


def failed_rows(failed: list[dict], width: int = 240) -> tuple[list[str], list[list[str]]]:
    """One row per failed job of each failed cell: the cell, its judge, the job, the error and its log."""
    rows = []
    for f in failed:
        for e in f["errors"]:
            job = (
                f"generate {e['generator']}/{e['dataset']}/{e['shard']}"
                if f["stage"] == "generate"
                else f"judge {e.get('judge', f['judge'])}"
            )
            message = " ".join(e["message"].split())
            message = message if len(message) <= width else message[: width - 1] + "…"
            rows.append([cell_name(f), f["judge"], job, f"{e['type']}: {message}", e["log"]])
    return ["cell", "judge", "failed job", "error", "log"], rows


def md_text(text) -> str:
    """Text from outputs, datasets or errors as markdown shows it, never as markup: `<`, `>` and `&`
    as entities (Markdown viewers render raw HTML: a model's `<script>` would run), `|` escaped."""
    return html.escape(str(text), quote=False).replace("|", "\\|")


def markdown_table(head: list[str], rows: list[list[str]]) -> list[str]:
    """A markdown table; every cell is text (`md_text`)."""

    def line(cells):
        return "| " + " | ".join(md_text(c) for c in cells) + " |"

    return [line(head), "|" + "---|" * len(head), *map(line, rows)]
