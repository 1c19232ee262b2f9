"""The sample axis: with `generator.n_samples: k` every item has rows for samples 0..k-1.

A generation, a judge record and a judgment are keyed by `ROW_KEY` (id, turn, sample:
a sample is a conversation of its own, each of its turns a row); files written before
samples existed (or an outside baseline) have one answer per (id, turn), which is sample 0.
"""

from __future__ import annotations

import pandas as pd

ROW_KEY = ["id", "turn", "sample"]


def with_sample(df: pd.DataFrame) -> pd.DataFrame:
    """`df` with a `sample` column (0 for every row where the file had none), right after `id`."""
    if "sample" in df.columns:
        return df
    df = df.copy()
    df.insert(df.columns.get_loc("id") + 1 if "id" in df.columns else 0, "sample", 0)
    return df


def answers_by_row(df: pd.DataFrame) -> dict:
    """(id, turn, sample) -> output of a generations frame (turn 1, sample 0 where it has no such column)."""
    turns = df["turn"].astype(int) if "turn" in df else [1] * len(df)
    samples = df["sample"].astype(int) if "sample" in df else [0] * len(df)
    return dict(zip(zip(df["id"], turns, samples), df["output"]))


class SampleView:
    """An opponent's answers by (id, turn) as sample `sample` sees them: the opponent's own sample
    of that index, else its sample 0 (an opponent with one sample, or an outside baseline); `answers`
    is keyed (id, turn, sample), or (id, turn) for one answer per turn."""

    _NONE = object()

    def __init__(self, answers: dict, sample: int):
        self.answers, self.sample = answers, int(sample)

    def get(self, key, default=None):
        item_id, turn = key
        # Keys (id, turn, sample); a map keyed (id, turn) alone holds one answer per turn.
        for k in ((item_id, int(turn), self.sample), (item_id, int(turn), 0), (item_id, int(turn))):
            got = self.answers.get(k, self._NONE)
            if got is not self._NONE:
                return got
        return default

    def __contains__(self, key) -> bool:
        return self.get(key, self._NONE) is not self._NONE

    def __getitem__(self, key):
        got = self.get(key, self._NONE)
        if got is self._NONE:
            raise KeyError(key)
        return got
