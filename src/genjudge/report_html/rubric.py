"""The page's account of answers graded against their items' rubrics (judge.mode rubric): the score of
each generator by tag (its items' own tags and the rubric's, HealthBench's themes and axes) as a table
and a heat map, and each answer's criteria, met, not met or unparsed, with the judge's explanation.

A mode says it has such criteria by `per_item_criteria`; nothing here names a mode."""

from __future__ import annotations

import json
from dataclasses import dataclass

import pandas as pd

from genjudge.judging import modes
from genjudge.report_html import plots
from genjudge.report_html.table import Table

ANSWERS_SHOWN = 200  # answers whose criteria the page lists (the judgments files hold them all)
MARK = {True: "met", False: "not met", None: "unparsed"}


@dataclass
class Rubric:
    tags: Table | None
    plot: object  # Plot of the tag scores, or None
    answers: Table
    method: str
    ident = "rubric"


def graded_cells(cells) -> list:
    return [c for c in cells if getattr(modes.get(c.summary.mode), "per_item_criteria", False)]


def tag_frame(cells, label) -> pd.DataFrame:
    """One row per cell and tag: its score, interval and answers (as category_heatmap reads them)."""
    rows = []
    for c in cells:
        for tag, m in (c.summary.metrics.get("tags") or {}).items():
            rows.append(
                {
                    **{k: c.row.get(k) for k in ("generator", "dataset", "judge")},
                    "opponent": "",
                    "category": tag,
                    "measure": "rubric_score",
                    "mean": True,
                    "value": m.get("value"),
                    "n": m.get("n_answers"),
                    "ci": m.get("ci95"),
                    "label": label(c),
                }
            )
    return pd.DataFrame(rows)


def _score(v) -> str:
    return "" if v is None or pd.isna(v) else f"{float(v):.3f}"


def answer_rows(cells, label) -> list[list[str]]:
    rows = []
    for c in cells:
        for r in c.df.itertuples():
            criteria = json.loads(getattr(r, "criteria", None) or "[]")
            marks = "; ".join(
                f"[{MARK[x['criteria_met']]}] [{x['points']:g}] {x['criterion']}"
                + (f" ({x['explanation']})" if x.get("explanation") else "")
                for x in criteria
            )
            rows.append([label(c), str(r.id), _score(getattr(r, "score", None)), marks])
    return rows


def rubric_section(page) -> Rubric | None:
    cells = graded_cells(page.cells)
    if not cells:
        return None
    frame = tag_frame(cells, page.cell_label)
    tags = None
    plot = None
    if not frame.empty:
        head = ["tag", *dict.fromkeys(frame["label"])]
        body = []
        for tag, g in frame.groupby("category", sort=True):
            by = {lab: v for lab, v in zip(g["label"], zip(g["value"], g["ci"], g["n"]))}
            cells_text = []
            for lab in head[1:]:
                v, ci, n = by.get(lab, (None, None, None))
                ci_text = f" [{ci[0]:.3f}, {ci[1]:.3f}]" if ci else ""
                cells_text.append("" if v is None else f"{v:.3f}{ci_text} (n={n})")
            body.append([tag, *cells_text])
        tags = Table(head, body)
        plot = page.plot("rubric_tags", plots.category_heatmap(frame, {j: (0.0, 1.0) for j in frame["judge"]}))
    answers = Table(
        ["cell", "item", "score", "criteria (met, not met, unparsed; points; the judge's explanation)"],
        answer_rows(cells, page.cell_label),
        limit=ANSWERS_SHOWN,
    )
    method = (cells[0].summary.metrics.get("rubric_score") or {}).get("method", "")
    return Rubric(tags, plot, answers, method)
