"""Parse stored judge outputs into verdicts; no model is loaded here."""

from __future__ import annotations

import pandas as pd

from . import atomic
from .textnorm import exact_match
from .verdicts import compile_pattern, parse_verdict


def parse_judgments(gens: pd.DataFrame, raw: pd.DataFrame, pattern: str, labels: dict) -> pd.DataFrame:
    rx = compile_pattern(pattern)
    df = gens.merge(raw, on="id", how="inner", validate="one_to_one")
    parsed = [parse_verdict(t, rx, labels) for t in df["judge_output"]]
    df["verdict"] = [p.verdict for p in parsed]
    df["unparsed_reason"] = [p.reason for p in parsed]
    df["n_verdict_markers"] = [p.n_markers for p in parsed]
    df["exact_match"] = [exact_match(c, r) for c, r in zip(df["output"], df["reference"])]
    return df


def run_parse(generations_path, raw_path, out_path, pattern: str, labels: dict) -> pd.DataFrame:
    df = parse_judgments(pd.read_parquet(generations_path), pd.read_parquet(raw_path), pattern, labels)
    atomic.write_parquet(out_path, df)
    return df
