"""Parse stored judge outputs into one judgment per (cell, item); no model is loaded here."""

from __future__ import annotations

import pandas as pd

from genjudge.config.experiment import Cell, cell_generations, of_cell
from genjudge.data.samples import SampleView, answers_by_row
from genjudge.judging import modes, reasoning
from genjudge.judging.answer_rules import methods_for
from genjudge.judging.extraction import check_answer
from genjudge.judging.modes.base import JUDGE_THINKING
from genjudge.store import atomic
from genjudge.store.records import read_judge_records

# What parsing needs from the raw judge rows: not the prompts, which are most of their bytes.
RAW_NEEDED = [
    "generator",
    "dataset",
    "opponent",
    "id",
    "turn",
    "sample",
    "order",
    "decided_by",
    "judge_output",
    "judge_prompt",
    "p_correct",
    "judge_finish_reason",
    "skipped",
]


EMPTY_COLUMNS = ["judge", "generator", "dataset", "opponent", "id", "turn", "sample", "verdict", "unparsed_reason"]


def parse_judgments(
    gens: pd.DataFrame,
    raw: pd.DataFrame,
    mode: str,
    pattern: str | None = None,
    answer: dict | None = None,
    options: dict | None = None,
) -> pd.DataFrame:
    """One cell: a generator's answers on one dataset and the judge's raw rows for them.
    `answer` is the dataset's extraction before exact match (each row's methods by its category);
    `options["reasoning"]` the judge's
    reasoning settings (its trace is stripped before the verdict is read)."""
    df = gens.copy()
    raw = without_judge_reasoning(raw, (options or {}).get("reasoning")).drop(columns=["judge_prompt"], errors="ignore")
    categories = df["category"] if "category" in df else [None] * len(df)
    checks = [check_answer(c, r, methods_for(answer, k)) for c, r, k in zip(df["output"], df["reference"], categories)]
    df["exact_match"] = [c.match for c in checks]
    if "reasoning_state" in df:  # no answer to match: left out of exact match as of judging, never wrong
        unclosed = (df["reasoning_state"] == reasoning.UNCLOSED).to_numpy()
        df["exact_match"] = df["exact_match"].astype(object).where(~unclosed, None)
    df["answer_extracted"] = [c.candidate for c in checks]
    df["reference_extracted"] = [c.reference for c in checks]
    df["answer_reason"] = [c.reason for c in checks]
    # How each answer was found, and whether strictly (what the cascade and the report count by).
    df["answer_extraction"] = [c.how for c in checks]
    df["answer_strict"] = [c.strict for c in checks]
    df = modes.get(mode).parse(df, raw, pattern, options)
    return with_skipped(df, raw)


def with_skipped(df: pd.DataFrame, raw: pd.DataFrame) -> pd.DataFrame:
    """`skipped`: why an answer was neither generated nor judged (too long for a context, on_too_long:
    skip), from the generation or the judge's record; such a row has no verdict and no unparsed reason:
    the report leaves it out of every count and lists it."""
    why = df["skipped"] if "skipped" in df else pd.Series(None, index=df.index, dtype=object)
    if "skipped" in raw and raw["skipped"].notna().any():
        from genjudge.judging.modes.base import orders

        judged = orders(raw, df, 0)["skipped"].to_numpy()
        why = why.where(why.notna(), pd.Series(judged, index=df.index))
    df["skipped"] = why.astype(object).where(why.notna(), None)
    gone = df["skipped"].notna()
    if gone.any():
        for col in ("verdict", "unparsed_reason", "unparsed_detail", "exact_match"):
            if col in df:
                df[col] = df[col].astype(object).where(~gone, None)
    return df


def without_judge_reasoning(raw: pd.DataFrame, settings: dict | None) -> pd.DataFrame:
    """The judge's outputs after its own reasoning trace; a trace that never closed leaves no text
    and the finish reason that says so (its verdict is unparsed with that reason)."""
    if not settings or "judge_output" not in raw or raw.empty:
        return raw
    prompts = raw["judge_prompt"] if "judge_prompt" in raw else pd.Series(None, index=raw.index)
    split = [reasoning.judge_text(t, settings, p) for t, p in zip(raw["judge_output"], prompts)]
    finish = raw["judge_finish_reason"] if "judge_finish_reason" in raw else pd.Series(None, index=raw.index)
    return raw.assign(
        judge_output=[t for t, _ in split],
        judge_finish_reason=[JUDGE_THINKING if cut else f for (_, cut), f in zip(split, finish)],
    )


def run_parse(
    cells: list[Cell],
    generations: dict,
    raw_path,
    out_path,
    mode: str,
    pattern: str | None,
    judge: str,
    answers: dict | None = None,
    options: dict | None = None,
) -> pd.DataFrame:
    import pyarrow.parquet as pq

    present = set(pq.read_schema(raw_path).names)
    raw = read_judge_records(raw_path, [c for c in RAW_NEEDED if c in present])
    if "turn" not in raw:  # judged before conversations had turns: every row is turn 1
        raw["turn"] = 1
    frames = []
    for cell, gens in cell_generations(cells, generations):
        df = parse_judgments(gens, of_cell(raw, cell), mode, pattern, (answers or {}).get(cell.dataset), options)
        df.insert(0, "judge", judge)
        df.insert(1, "generator", cell.generator)
        df.insert(2, "dataset", cell.dataset)
        df.insert(3, "opponent", cell.opponent)
        if cell.opponent:  # the other side's answer, for the length-bias diagnostics
            theirs = answers_by_row(pd.read_parquet(generations[(cell.opponent, cell.dataset)]))
            turns = df["turn"] if "turn" in df else [1] * len(df)
            # Sample s met the opponent's sample s, or its only one (as in the judge's requests).
            df["opponent_output"] = [
                SampleView(theirs, s).get((i, t)) for i, t, s in zip(df["id"], turns, df["sample"])
            ]
        frames.append(df)
    # No cell (every one failed upstream): an empty table the report reads as such.
    out = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=EMPTY_COLUMNS)
    atomic.write_parquet(out_path, out)
    return out
