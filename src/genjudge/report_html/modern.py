"""The page's sections for controlled pairwise results and corrected judge figures, as data.

`controlled`: summary.json's `across_cells.<judge>.length_controlled` (AlpacaEval 2.0's length-controlled
win rate beside the raw one, with the GLM's coefficients) and `style_controlled` (Bradley-Terry strengths
with Chatbot Arena's style covariates beside the raw ones, and each covariate's coefficient).
`corrected`: `validity.judges.<judge>.corrected` (PPI++ beside the judge's own figure and the labels'
alone, which items were labelled, the warnings and refusals). The rows are those of report.md.
"""

from __future__ import annotations

from dataclasses import dataclass

from genjudge.judging import length_control, ppi, style_control
from genjudge.report_html.table import Table


@dataclass
class Controlled:
    length: Table | None
    length_note: str
    strengths: Table | None
    coefficients: Table | None
    style_note: str
    ident = "controlled"


@dataclass
class Corrected:
    table: Table | None
    note: str
    refused: list[str]  # "judge: why"
    labelled: list[str]  # "judge, cell: ids"
    warnings: list[str]
    ident = "corrected"


def controlled(s: dict) -> Controlled | None:
    across = s.get("across_cells") or {}
    lc = {j: m["length_controlled"] for j, m in across.items() if m.get("length_controlled")}
    sc = {j: m["style_controlled"] for j, m in across.items() if m.get("style_controlled")}
    if not (lc or sc):
        return None
    return Controlled(
        length=Table(*length_control.table_rows(lc)) if lc else None,
        length_note=length_control.NOTE,
        strengths=Table(*style_control.table_rows(sc)) if sc else None,
        coefficients=Table(*style_control.coefficient_rows(sc), "narrow") if sc else None,
        style_note=style_control.NOTE,
    )


def corrected(s: dict) -> Corrected | None:
    entries = {
        j: e["corrected"] for j, e in ((s.get("validity") or {}).get("judges") or {}).items() if e.get("corrected")
    }
    if not entries:
        return None
    head, rows = ppi.table_rows(entries)
    labelled, warnings = [], []
    for judge, c in entries.items():
        for key, x in c["cells"].items():
            more = " …" if x["n_labelled_items"] > len(x["labelled_ids"]) else ""
            labelled.append(f"{judge}, {key}: {x['n_labelled_items']} items: {', '.join(x['labelled_ids'])}{more}")
            warnings += [f"{judge}, {key}: {w}" for w in x["warnings"]]
    measure = next(iter(entries.values()))["measure"]
    return Corrected(
        table=Table(head, rows) if rows else None,
        note=ppi.NOTE.format(measure=measure),
        refused=[f"{j}: {c['refused']}" for j, c in entries.items() if c.get("refused")],
        labelled=labelled,
        warnings=warnings,
    )
