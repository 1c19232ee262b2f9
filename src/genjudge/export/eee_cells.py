"""The cells an export writes, from a run's files: each judge's cells and each panel's, with the report's
figures for them and their answers counted as the report counts them (skipped answers set apart, an
unfinished reasoning trace counted as `report.unfinished_reasoning` says; a panel's votes as the
report reads them). A cell that failed keeps its items and its error, and no figure."""

from __future__ import annotations

import pandas as pd

from genjudge.config.experiment import Cell, of_cell
from genjudge.config.export import ExportSettings
from genjudge.data.conversation import expand_turns
from genjudge.errors import InputError
from genjudge.export.inputs import CellInput, RunContext, RunData
from genjudge.export.scrub import Scrubber
from genjudge.judging import modes
from genjudge.judging.modes.base import count_unfinished
from genjudge.judging.panels import KEYS, panel_judgments

# The answer's columns a panel's rows take from its first judge's judgments (the panel's frame lacks them).
ANSWER_COLUMNS = ["prompt_sent", "reasoning", "n_prompt_tokens", "n_generated_tokens", "finish_reason"]
# A judge's own columns, which a failed panel cell's rows (its first judge's answers) do not keep.
JUDGE_COLUMNS = ["verdict", "unparsed_reason", "unparsed_detail", "decided_by", "judge_output", "p_correct"]


def cell_summaries(summary: dict) -> dict:
    """(generator, dataset, judge, opponent) -> that cell's figures: summary.json's `cells`, or the summary
    itself for a run of one cell."""
    out = {}
    for s in (summary.get("cells") or {}).values() or [summary]:
        for row in s.get("leaderboard") or []:
            out[(row["generator"], row["dataset"], row["judge"], row["opponent"])] = s
    return out


def failures(summary: dict) -> dict:
    """(generator, dataset, judge, opponent) -> what failed, in words (stage, error types and messages)."""
    out = {}
    for f in summary.get("failed_cells") or []:
        errors = "; ".join(f"{e.get('type')}: {e.get('message')}" for e in f.get("errors") or [])
        out[(f["generator"], f["dataset"], f["judge"], f["opponent"])] = f"failed at {f['stage']}: {errors}"
    return out


def stored_calls(judge: str, raw: pd.DataFrame | None) -> dict:
    """(judge, id, turn, sample, order) -> {text, n_in, n_out} of a judge's stored calls."""
    if raw is None or raw.empty:
        return {}
    turns = raw["turn"] if "turn" in raw else [1] * len(raw)
    return {
        (judge, i, int(t), int(s), int(o)): {"text": x, "n_in": int(a), "n_out": int(b)}
        for i, t, s, o, x, a, b in zip(
            raw["id"],
            turns,
            raw["sample"],
            raw["order"],
            raw["judge_output"],
            raw["judge_n_prompt_tokens"],
            raw["judge_n_generated_tokens"],
        )
        if isinstance(x, str)
    }


def _sample_keys(df: pd.DataFrame) -> pd.DataFrame:
    df = df if "turn" in df else df.assign(turn=1)
    return df if "sample" in df else df.assign(sample=0)


def failed_rows(data: RunData, settings: ExportSettings, cell: Cell) -> pd.DataFrame:
    """A failed cell's answers where its generation finished (its judge failed), else its items: each turn
    and sample, without an answer."""
    answers = data.generations.get((cell.generator, cell.dataset))
    if answers is not None and len(answers):
        return _sample_keys(answers).reset_index(drop=True)
    items = data.items.get(cell.dataset)
    if items is None:
        raise InputError(f"{settings.results}/items/{cell.dataset}.parquet: not found; the export needs the items")
    n = settings.generators[cell.generator].n_samples
    turns = expand_turns(items)
    return pd.concat([turns.assign(sample=s) for s in range(n)]).sort_values(["id", "turn", "sample"], kind="stable")


def kept(df: pd.DataFrame) -> pd.DataFrame:
    """The answers the report counts (those skipped as too long set apart)."""
    return df[df["skipped"].isna()] if "skipped" in df else df


def judge_cells(settings: ExportSettings, data: RunData) -> list[CellInput]:
    figures, failed = cell_summaries(data.summary), failures(data.summary)
    across = data.summary.get("across_cells") or {}
    validity = (data.summary.get("validity") or {}).get("judges") or {}
    out = []
    for judge, cells in settings.cells.items():
        entry = settings.judges[judge]
        mode = modes.get(entry.mode)
        frame = data.judgments.get(judge)
        raw = stored_calls(judge, data.raw.get(judge))
        for cell in cells:
            key = (cell.generator, cell.dataset, judge, cell.opponent)
            ci = CellInput(judge, cell, mode, entry.options, [entry], pd.DataFrame())
            if key in figures and frame is not None:  # judged (its verdicts may all have failed to parse)
                rows = of_cell(frame, cell).reset_index(drop=True)
                ci.rows = count_unfinished(rows, mode, entry.options, settings.unfinished_reasoning)
                ci.summary, ci.raw, ci.error = figures[key], raw, failed.get(key)
                ci.figures = {} if ci.failed else mode.leaderboard(figures[key])
                ci.across = {
                    name: t[cell.dataset] for name, t in (across.get(judge) or {}).items() if cell.dataset in t
                }
                corrected = (validity.get(judge) or {}).get("corrected") or {}
                if cell.key in (corrected.get("cells") or {}):
                    ci.corrected = {"measure": corrected["measure"], **corrected["cells"][cell.key]}
            elif key in failed:
                ci.error, ci.rows = failed[key], failed_rows(data, settings, cell)
            else:
                raise InputError(
                    f"{settings.results}/report/summary.json: no figures for judge {judge!r}'s cell {cell.key!r}; "
                    "the report is older than the run's config: run the workflow (or its report) first"
                )
            out.append(ci)
    return out


def panel_cells(settings: ExportSettings, data: RunData, judged: list[CellInput]) -> list[CellInput]:
    """Each panel's cells: its verdicts and the members' votes, with the figures validity.panels holds
    per cell; a cell any member failed is failed for the panel too."""
    panels = (data.summary.get("validity") or {}).get("panels") or {}
    by_key = {(c.name, c.cell): c for c in judged}
    out = []
    for name, panel in settings.panels.items():
        members = [settings.judges[j] for j in panel.judges]
        mode = modes.get(panel.mode)
        options = {"score_range": list(panel.score_range)} if panel.score_range else None
        votes = None
        for cell in settings.cells[panel.judges[0]]:
            ci = CellInput(name, cell, mode, options, members, pd.DataFrame(), panel_rule=panel.rule)
            broken = [by_key[(j, cell)] for j in panel.judges if by_key[(j, cell)].failed]
            figures = ((panels.get(name) or {}).get("cells") or {}).get(cell.key)
            if broken or figures is None:
                ci.error = broken[0].error if broken else "the panel has no verdicts for this cell"
                ci.rows = by_key[(panel.judges[0], cell)].rows.drop(columns=JUDGE_COLUMNS, errors="ignore")
            else:
                if votes is None:  # the panel's verdicts over every surviving cell, as the report reads them
                    frames = {j: kept(data.judgments[j]) for j in panel.judges}
                    votes = panel_judgments(panel.as_dict(), frames)
                ci.rows = _with_answers(of_cell(votes, cell), kept(by_key[(panel.judges[0], cell)].rows))
                ci.figures = figures
                ci.raw = {k: v for j in panel.judges for k, v in by_key[(j, cell)].raw.items()}
            out.append(ci)
    return out


def _with_answers(panel_rows: pd.DataFrame, first: pd.DataFrame) -> pd.DataFrame:
    """The panel's rows with the answer's own columns (its prompt as sent, trace, tokens) beside them."""
    first = _sample_keys(first)
    cols = [c for c in ANSWER_COLUMNS if c in first and c not in panel_rows]
    if not cols:
        return panel_rows.reset_index(drop=True)
    first = first.assign(opponent=first["opponent"].astype(object).where(first["opponent"].notna(), None))
    extra = first.set_index(KEYS)[cols].reindex(pd.MultiIndex.from_frame(panel_rows[KEYS]))
    return pd.concat([panel_rows.reset_index(drop=True), extra.reset_index(drop=True)], axis=1)


def context(settings: ExportSettings, data: RunData) -> RunContext:
    prov = data.provenance
    models = prov.get("models") or {}
    fingerprints = {(role, n): (m or {}).get("fingerprint") for role in models for n, m in models[role].items()}
    files = (prov.get("inputs") or {}).get("datasets") or {}
    digests = {}
    for name in settings.datasets:
        sha = (files.get(name) or {}).get("sha256")
        if sha:
            digests[name] = {"sha256": sha, "of": "the dataset as read (its file, or its directory's files)"}
        elif data.item_digests.get(name):
            digests[name] = {"sha256": data.item_digests[name], "of": "the run's table of its items, as read"}
    served: dict = {}
    for role, metas in (("generators", [(m.generator, m) for m in data.gen_metas]), ("judges", _judge_jobs(data))):
        for name, m in metas:
            ep = m.endpoint or {}
            entry = served.setdefault((role, name), {"served_models": set(), "system_fingerprints": set()})
            entry["served_models"] |= set(ep.get("served_models") or {})
            entry["system_fingerprints"] |= set(ep.get("system_fingerprints") or {}) - {"None"}  # none sent
    return RunContext(
        settings=settings,
        scrub=Scrubber(settings.private, settings.results),
        packages=prov.get("packages") or {},
        fingerprints=fingerprints,
        dataset_digests=digests,
        served=served,
        templates=data.templates,
    )


def _judge_jobs(data: RunData) -> list:
    return [(j, job) for j, meta in data.judge_metas.items() for job in meta.jobs()]
