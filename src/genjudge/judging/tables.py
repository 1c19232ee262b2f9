"""The report's tables as text, (head, rows) with every cell a string: report.md, report.html and
`genjudge summary` show the same rows. The models x benchmarks table (summary.json's `table`, built by
stages.report_table) and the failed cells (`failed_cells`)."""

from __future__ import annotations

import re

from genjudge.errors import InputError
from genjudge.judging import modes
from genjudge.judging.headline import value_text

STUDY_NOTE = (
    "Each column is one judge on one dataset: its headline measure with the 95% interval and, in "
    "parentheses, the generator's rank in the column (1 = best; ties share their mean rank; a column ranks "
    "only where two or more generators have a value) and, where it differs, its rank by intervals (Chatbot "
    "Arena's: 1 + the generators whose 95% interval lies wholly above its own): a rank from the values alone "
    "separates generators whose intervals overlap. Mean rank: over the columns where the generator has a "
    "rank (how many in parentheses). A pairwise column's win rate counts ties half (AlpacaEval, Chatbot "
    "Arena); W/T/L beside it counts the verdicts won, tied and lost."
)
BUDGET_NOTE = (
    "A cell stopped by max_cost_usd is not broken: what was paid for is stored, and the same command with a larger "
    "max_cost_usd sends only what is left."
)


def failed_note(failed: list[dict]) -> str:
    """FAILED_NOTE, and what a budget stop asks for where a cell was stopped by one."""
    budget = any(e.get("type") == "BudgetReached" for c in failed for e in c.get("errors") or [])
    return f"{FAILED_NOTE} {BUDGET_NOTE}" if budget else FAILED_NOTE


FAILED_NOTE = (
    "Not judged (or, failed job parse, judged with no verdict parsed), and left out of every measure of this "
    "report; the rest of the run is complete. Fix the cause and run the same command again: only the failed jobs "
    "and what reads them run again."
)


def study_shown(table: dict) -> bool:
    """Whether the models x benchmarks table compares anything (more than one generator or column)."""
    return bool(table.get("columns")) and (len(table["columns"]) > 1 or len(table["rows"]) > 1)


def _rank(v: dict) -> str:
    """` (2)`, or ` (2; 1 by intervals)` where the intervals do not separate what the values rank apart."""
    if v.get("rank") is None:
        return ""
    ub = v.get("rank_ub")
    return f" ({v['rank']:g}" + (f"; {ub:g} by intervals" if ub is not None and ub != v["rank"] else "") + ")"


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
            cells.append(value_text(v, c["kind"]) + _rank(v))
        cells.append("" if r["mean_rank"] is None else f"{r['mean_rank']:.2f} ({columns_text(r['n_ranked'])})")
        rows.append(cells)
    return head, rows


def _against_baseline(mode: str) -> bool:
    """Whether a column's mode grades against a baseline. `genjudge summary` loads no plugins: a mode of
    one grades alone here, unless its column names a baseline."""
    try:
        return modes.get(mode).needs_baseline
    except InputError:
        return False


def measure_unit(col: dict) -> str:
    """What a column's headline is and its unit, in words."""
    if col["kind"] == "strength":
        return (
            "Bradley-Terry strength from every pair judged (log scale, centred at 0; ties count half; 95% bootstrap "
            "interval over items)"
        )
    if _against_baseline(col["mode"]) or col.get("baseline"):
        return (
            f"win rate against {col.get('baseline') or 'the baseline'}: wins plus half the ties, as a share of the "
            "parsed verdicts (%, 95% interval clustered by item)"
        )
    if col["kind"] == "mean":
        how = col.get("method") or "clustered by item"
        return f"{(col['measure'] or 'mean').replace('_', ' ')} on the judge's scale (95% interval: {how})"
    if col["measure"] == "accuracy":
        return "accuracy: the share of parsed verdicts that are correct (%, 95% interval clustered by item)"
    return f"{(col['measure'] or 'measure').replace('_', ' ')} (a share of parsed verdicts, %, 95% interval)"


def headline_lines(table: dict) -> list[str]:
    """One line per judge and dataset: its headline measure, its unit, and each generator's value with its
    interval and the items it is over: what the top of report.md and report.html state."""
    out = []
    for col in table.get("columns") or []:
        parts = []
        for r in table["rows"]:
            v = r["values"][col["key"]]
            if v["status"] in ("not graded", "baseline"):
                continue
            text = value_text(v, col["kind"]) if v["status"] == "ok" else v["status"]
            if "wins" in v:  # the verdicts, each count with its unit
                text = text.split(" (W/T/L")[0] + f" ({v['wins']} wins, {v['ties']} ties, {v['losses']} losses)"
            if v["status"] == "ok" and v.get("n"):
                text += f" over {v['n']} items"
            parts.append(f"{r['generator']} {text}")
        if parts:
            out.append(f"judge {col['judge']} on {col['dataset']}, {measure_unit(col)}: " + "; ".join(parts))
    return out


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
                else f"{f['stage']} {e.get('judge', f['judge'])}"  # judge, or parse: judged, no verdict read
            )
            message = " ".join(e["message"].split())
            message = message if len(message) <= width else message[: width - 1] + "…"
            rows.append([cell_name(f), f["judge"], job, f"{e['type']}: {message}", e["log"]])
    return ["cell", "judge", "failed job", "error", "log"], rows


# Markdown's active characters in text from outputs, datasets, errors and the config, and what each becomes:
# a backslash escape where CommonMark and Python-Markdown (mkdocs) both take it, a character reference where
# one of them would show the backslash (`~`, `$`; `<`, `>` and `&` as HTML entities). `]` only before `(`
# or `[` (the brackets of an interval, `[0.1, 0.3]`, stay as they are: no link starts without `](`), `!`
# only before `[`, a run of `_` only where it is not inside a word (`mean_score` stays).
_ACTIVE = re.compile(r"[\\`*#{}|]|[&<>~$]|\](?=\(|\s?\[)|!(?=\[)|_+")
_ENTITY = {"&": "&amp;", "<": "&lt;", ">": "&gt;", "~": "&#126;", "$": "&#36;"}
# What starts a block at the beginning of a line (besides `#`, `>`, `*`, `|` and backticks, escaped anywhere):
# a list item (`-`, `+`, `1.`, `1)`), a setext underline or thematic break (`=`, `-`), a link reference
# definition (`[`).
_LINE_START = re.compile(r"^(?:[-+=\[]|\d{1,9}(?=[.)](?: |$)))")


def _escaped(m: re.Match) -> str:
    c, s = m.group(), m.string
    if c in _ENTITY:
        return _ENTITY[c]
    if c[0] == "_":
        inside = m.start() > 0 and m.end() < len(s) and s[m.start() - 1].isalnum() and s[m.end()].isalnum()
        return c if inside else "\\_" * len(c)
    return "\\" + c


def md_text(text) -> str:
    """Text from outputs, datasets, errors or the config as markdown shows it, never as markup: on one line
    (whitespace and line breaks as one space: a line break could start a heading or end a table row),
    with every character markdown would act on escaped (`_ACTIVE`), so that a model's `<script>`, a
    `[link](javascript:...)`, an `![image](http://...)`, `*emphasis*` or a `|` ending a table cell show as
    the characters they are."""
    return _ACTIVE.sub(_escaped, " ".join(str(text).split()))


def md_line(text) -> str:
    """`md_text` for running text, where it may begin a line: a list marker, `=`/`-` underline or `[`
    definition at its start is escaped too."""
    out = md_text(text)
    m = _LINE_START.match(out)
    if not m:
        return out
    if m.group() == "=":
        return "&#61;" + out[1:]
    if m.group().isdigit():
        return m.group() + "\\" + out[m.end() :]
    return "\\" + out


def md_code(text) -> str:
    """Text from the config or data as an inline code span (a model name, the run's name), on one line:
    delimited by a run of backticks longer than any inside it, so that none ends the span early."""
    text = " ".join(str(text).split())
    ticks = "`" * (max((len(r) for r in re.findall("`+", text)), default=0) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") or not text else ""
    return f"{ticks}{pad}{text}{pad}{ticks}"


def markdown_table(head: list[str], rows: list[list[str]]) -> list[str]:
    """A markdown table; every cell is text (`md_text`)."""

    def line(cells):
        return "| " + " | ".join(md_text(c) for c in cells) + " |"

    return [line(head), "|" + "---|" * len(head), *map(line, rows)]


def failed_pairs(failed: list, judge: str, dataset: str) -> list[str]:
    """The failed cells of `judge` on `dataset` ("a vs b"): games the Bradley-Terry fit went without."""
    return [
        f"{f['generator']}" + (f" vs {f['opponent']}" if f.get("opponent") else "")
        for f in failed or []
        if f.get("judge") == judge and f.get("dataset") == dataset
    ]
