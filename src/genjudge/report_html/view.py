"""The data of `report/report.html`: what each section shows, as plain dataclasses.

One dataclass per section (its `ident` is the section's HTML id and its template's name), `Table`s of
display strings, `Plot`s (PNG bytes) and the `PageView` that lists the sections in page order. `Page`
(page.py) fills them from the run: the results' sections in results.py, the jobs' in runs.py.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass, field

import pandas as pd

from genjudge.judging.modes.base import rate_text
from genjudge.report_html import plots
from genjudge.report_html.table import MAX_TABLE_ROWS, Table  # noqa: F401 - re-exported

# summary.json fields the sections below read (the rest go to "More from summary.json").
SHOWN = {
    "validity",
    "endpoints",
    "schema_version",
    "run",
    "mode",
    "n_items",
    "n_cells",
    "n_judged",
    "n_unparsed",
    "unparsed_rate",
    "unparsed_reasons",
    "accuracy",
    "accuracy_ci95",
    "exact_match",
    "answers_not_extracted",
    "per_category",
    "placement_warnings",
    "warnings",
    "shards",
    "generator",
    "judge",
    "leaderboard",
    "cells",
    "across_cells",
    # the modes' own measures, shown in the leaderboard, the headline and the plots
    "verdict_counts",
    "mean_p_correct",
    "judge_exact_match_agreement",
    "decided_by",
    "mean_score",
    "score_counts",
    "score_range",
    "rubric_score",
    "tags",
    "criteria",
    "win",
    "tie",
    "loss",
    "position_consistency",
    # read by the sections below this list's first ones
    "n_answers",
    "answers_per_item",
    "unparsed_examples",
    "n_truncated",
    "n_reasoning_unfinished",
    "reasoning_unfinished_rate",
    "n_reasoning_tokens",
    "truncated_rate",
    "truncated_examples",
    "exact_match_shown",
    "exact_match_note",
    "paired",
    "time_model",
    "table",
    "failed_cells",
    "per_turn",
}
PLOT_STUDY = "models_by_benchmarks"  # plots/models_by_benchmarks.png
CELLS_OPEN = 6  # cells whose headlines the page shows unfolded
ROW_KEYS = ("generator", "dataset", "judge", "opponent", "mode", "n_items", "n_judged", "n_unparsed", "exact_match")


@dataclass
class Plot:
    name: str  # file name under plots/ without .png, and the image's id on the page (plot-<name>)
    data: bytes  # PNG

    @property
    def base64(self) -> str:
        return base64.b64encode(self.data).decode("ascii")


@dataclass
class Cell:
    key: str
    summary: object  # RunSummary of the cell
    df: pd.DataFrame

    @property
    def row(self) -> dict:
        return self.summary.leaderboard[0]


def measure_text(v) -> str:
    if not isinstance(v, dict):
        return "" if v is None else str(v)
    if plots.is_mean(v):
        if v.get("value") is None:
            return "n/a"
        ci = f" [{v['ci95'][0]:.2f}, {v['ci95'][1]:.2f}]" if v.get("ci95") else ""
        return f"{v['value']:.2f}{ci}"
    return rate_text(v)


def seconds(x) -> str:
    return "" if x is None else f"{x:.1f}"


# --- the sections, in page order; `ident` is the section's HTML id and its template's name ---------------


@dataclass
class Headline:
    summary: Table | None  # (measure, value) of a single-cell run
    leaderboard: Table
    plot: Plot | None
    exact_match_overlay: bool  # some rows' plots carry normalised exact match
    several_modes: bool
    exact_match_notes: list[str] = field(default_factory=list)  # why exact match is not shown for a row
    cells: list = field(default_factory=list)  # (label, Table): each cell's headline, where there are several
    ident = "headline"

    @property
    def cells_open(self) -> bool:
        """Each cell's headline unfolded, up to CELLS_OPEN cells (more: one click each)."""
        return len(self.cells) <= CELLS_OPEN


@dataclass
class Categories:
    plot: Plot
    heatmap: bool  # several generators: a heat map; else intervals per category
    counts: str  # what the plot's n counts: "judged items" or "judged answers ..."
    ident = "categories"


@dataclass
class Distributions:
    scores: Plot | None
    outcomes: Plot | None
    strengths: Plot | None
    strengths_warnings: list[str] = field(default_factory=list)  # a fit that went without a failed cell's games
    ident = "distributions"


@dataclass
class Confusion:
    plot: Plot | None
    agreement: Table | None
    # (cell, verdict × exact match counts) over the answers the judge graded: what the plot draws
    matrices: list = field(default_factory=list)
    ident = "confusion"


@dataclass
class Human:
    """Can I trust the judge? Agreement with human labels, bias diagnostics, panels of judges."""

    warnings: list[str]
    agreement: Table | None
    plot: Plot | None
    bias_pairwise: Table | None
    bias_length: Table | None
    length_measure: str | None
    panels: Table | None
    # (judge or panel, its confusion matrix: rows the judge's verdicts, columns human labels, as in report.md)
    matrices: list = field(default_factory=list)
    ident = "human"

    @property
    def has_bias(self) -> bool:
        return self.bias_pairwise is not None or self.bias_length is not None


@dataclass
class Unparsed:
    n_unparsed: int
    n_truncated: int
    reasons: Table | None  # None: every verdict was parsed
    plot: Plot | None = None
    examples: Table | None = None
    ident = "unparsed"


@dataclass
class ByTurn:
    """Each turn of multi-turn items (MT-bench) on its own: the measure per cell and turn."""

    table: Table
    plot: Plot | None
    ident = "by_turn"


@dataclass
class GpuUse:
    n_gpus: int
    span: float
    idle_seconds: float
    mean_busy_fraction: float
    never_used: list[str]


@dataclass
class Wait:
    job: str
    after: str
    seconds: float


@dataclass
class Band:
    """One snakemake command's jobs: its own window, idle time and critical path."""

    label: str  # "command 2 of 2, started 2026-01-31 10:02:03"; "" when the page shows one command
    jobs: int
    failed: list[str]  # the attempts that failed in it: "job: error"
    gpu_use: GpuUse | None
    longest_wait: Wait | None  # the longest wait on its critical path
    lanes: Table
    stages: Table
    critical_path: Table


@dataclass
class GpuTimeline:
    bands: list[Band]  # one per snakemake command, oldest first
    load_share: float | None  # model loading's share of the jobs' load + compute time
    plot: Plot | None
    ident = "timeline"

    @property
    def latest(self) -> Band:
        return self.bands[-1]


@dataclass
class Throughput:
    jobs: Table
    ident = "throughput"


@dataclass
class Endpoints:
    jobs: Table
    models: list  # lines: each model's served ids and system fingerprints
    ident = "endpoints"


@dataclass
class Provenance:
    run: Table
    models: Table
    files: Table | None
    packages: Table
    config_yaml: str | None
    ident = "provenance"


@dataclass
class Study:
    """The models x benchmarks table (summary.json's `table`) and its heat map."""

    table: Table
    plot: Plot | None
    note: str
    warning: str | None = None  # the mean ranks are over different numbers of columns
    ident = "study"


@dataclass
class Headlines:
    """Each judge's headline on each dataset with its unit and each generator's value and interval."""

    lines: list[str]
    ident = "headlines"


@dataclass
class Failed:
    """The cells not judged because a job failed, with their errors and logs."""

    table: Table
    note: str
    ident = "failed"


@dataclass
class Paired:
    table: Table
    note: str
    ident = "paired"


@dataclass
class Truncated:
    """Answers the generator cut at max_new_tokens, per cell, and the first of them."""

    counts: Table
    examples: Table
    ident = "truncated"


@dataclass
class TimeModel:
    """The plan's time model on each finished job's counts against what the job measured."""

    table: Table
    ratio: str
    note: str
    fixed_costs: str | None = None  # a warning when fixed costs dominate and the ratios mean little
    ident = "time_model"


@dataclass
class Extra:
    """A top-level field of summary.json no section reads: a table when it is flat enough, else its JSON."""

    title: str
    table: Table | None
    json: str | None


@dataclass
class More:
    fields: list[Extra]
    ident = "more"


NAV = {
    "headlines": "Headlines",
    "failed": "Failed cells",
    "study": "Models × benchmarks",
    "headline": "Leaderboard",
    "paired": "Paired differences",
    "controlled": "Controlled comparisons",
    "by_turn": "By turn",
    "categories": "Categories",
    "rubric": "Rubric",
    "distributions": "Scores",
    "confusion": "Judge vs exact match",
    "human": "Can I trust the judge?",
    "corrected": "Corrected by labels",
    "unparsed": "Unparsed",
    "truncated": "Truncated answers",
    "timeline": "GPU timeline",
    "throughput": "Throughput",
    "endpoints": "Endpoints",
    "time_model": "Time model",
    "provenance": "Provenance",
    "more": "More",
}


@dataclass
class PageView:
    run: str | None
    mode: str | None
    n_items: int | None  # items (questions of the datasets, each once)
    n_answers: int | None  # answers judged (verdicts): items x turns x samples, summed over the cells
    n_unparsed: int | None
    generators: list[str]
    judges: list[str]
    warnings: list[str]
    n_cells: int = 1
    sections: list = field(default_factory=list)  # the sections with something to show, in page order
    plots: list[Plot] = field(default_factory=list)  # every figure on the page, also written to plots/

    @property
    def nav(self) -> list[tuple[str, str]]:
        return [(s.ident, NAV[s.ident]) for s in self.sections]

    def section(self, ident: str):
        return next((s for s in self.sections if s.ident == ident), None)


def clip(text, n: int) -> str:
    text = "" if text is None or (isinstance(text, float) and pd.isna(text)) else " ".join(str(text).split())
    return text if len(text) <= n else text[: n - 1] + "…"


def join(x) -> str:
    return ", ".join(x) if isinstance(x, list) else ("" if x is None else str(x))
