"""Parse stored judge outputs into one judgment per item; no model is loaded here."""

from __future__ import annotations

import pandas as pd

from genjudge import atomic
from genjudge.judging import modes
from genjudge.judging.textnorm import exact_match
from genjudge.records import read_judge_records

# What parsing needs from the raw judge rows: not the prompts, which are most of their bytes.
RAW_NEEDED = ["id", "order", "decided_by", "judge_output", "p_correct"]


def parse_judgments(gens: pd.DataFrame, raw: pd.DataFrame, mode: str, pattern: str | None = None) -> pd.DataFrame:
    df = gens.copy()
    df["exact_match"] = [exact_match(c, r) for c, r in zip(df["output"], df["reference"])]
    return modes.get(mode).parse(df, raw, pattern)


def run_parse(generations_path, raw_path, out_path, mode: str, pattern: str | None) -> pd.DataFrame:
    df = parse_judgments(pd.read_parquet(generations_path), read_judge_records(raw_path, RAW_NEEDED), mode, pattern)
    atomic.write_parquet(out_path, df)
    return df
