"""What an export is made from: per cell, the report's figures and the judged answers; for the run, the
provenance of its models and datasets. Plain values, read from the run's files by the export stage."""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from genjudge.config.experiment import Cell
from genjudge.config.export import ExportSettings, JudgeEntry
from genjudge.export.scrub import Scrubber


@dataclass
class CellInput:
    """One (generator, dataset, judge or panel[, opponent]) cell.

    `rows`: its judged answers as the report counts them (report.unfinished_reasoning applied), the
    answers skipped as too long among them (`skipped` says why); for a panel, its verdicts per answer
    with each member's vote (`vote:<judge>`). `summary`: the cell's figures from summary.json (None for a
    failed cell, whose `error` says what failed and whose `rows` are its items, without verdicts).
    `raw`: (judge, id, turn, sample, order) -> the judge's call as stored (text, tokens)."""

    name: str  # the judge's or the panel's name
    cell: Cell
    mode: object  # genjudge.judging.modes.JudgeMode
    options: dict | None
    judges: list[JudgeEntry]  # the judge, or the panel's members
    rows: pd.DataFrame
    summary: dict | None = None
    figures: dict = field(default_factory=dict)  # the leaderboard's figures of the cell: {measure: figure}
    raw: dict = field(default_factory=dict)
    error: str | None = None
    panel_rule: str | None = None
    across: dict = field(default_factory=dict)  # figures over the judge's cells: {name: this cell's part}
    corrected: dict | None = None  # PPI++ figures of this cell (validity.judges.<judge>.corrected)

    @property
    def failed(self) -> bool:
        return self.error is not None


@dataclass
class RunContext:
    settings: ExportSettings
    scrub: Scrubber
    packages: dict  # provenance.json's package versions
    fingerprints: dict  # ("generators" | "judges", name) -> the model files' digest
    dataset_digests: dict  # dataset -> sha256 of its file as read, or of the run's item table
    served: dict  # ("generators" | "judges", name) -> {served_models: [...], system_fingerprints: [...]}
    templates: dict  # judge -> [(rule or None, text)], the default first


@dataclass
class RunData:
    """A finished run's files, as read: summary.json and provenance.json (dicts), each judge's judgments
    and stored calls (frames; no prompts), the jobs' metas, the item tables (dataset -> frame), the
    answers of cells whose judge failed ((generator, dataset) -> frame) and each judge's templates
    ([(rule or None, text)], the default first)."""

    summary: dict
    provenance: dict
    judgments: dict
    raw: dict = field(default_factory=dict)
    gen_metas: list = field(default_factory=list)
    judge_metas: dict = field(default_factory=dict)
    items: dict = field(default_factory=dict)
    generations: dict = field(default_factory=dict)
    item_digests: dict = field(default_factory=dict)
    templates: dict = field(default_factory=dict)
