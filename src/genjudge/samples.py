"""The sample axis: with `generator.n_samples: k` every item has rows for samples 0..k-1.

A generation, a judge record and a judgment are keyed by `ROW_KEY` (id + sample);
files written before samples existed (or an outside baseline) have one answer per id,
which is sample 0.
"""

from __future__ import annotations

import pandas as pd

ROW_KEY = ["id", "sample"]


def with_sample(df: pd.DataFrame) -> pd.DataFrame:
    """`df` with a `sample` column (0 for every row where the file had none), right after `id`."""
    if "sample" in df.columns:
        return df
    df = df.copy()
    df.insert(df.columns.get_loc("id") + 1 if "id" in df.columns else 0, "sample", 0)
    return df


def answers_by_row(df: pd.DataFrame) -> dict:
    """(id, sample) -> output of a generations frame."""
    df = with_sample(df)
    return dict(zip(zip(df["id"], df["sample"]), df["output"]))


def answer_for(answers: dict, item_id, sample: int):
    """The answer an opponent gave for this (id, sample): its own sample of that index, else its only one."""
    got = answers.get((item_id, sample))
    return got if got is not None or (item_id, sample) in answers else answers.get((item_id, 0))
