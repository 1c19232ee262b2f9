"""The item is the unit of the report's counts and intervals.

An item's turns (a conversation) and samples (`generator.n_samples`) are answers of one item, not
independent observations: counts say how many items and how many answers, and every rate or mean
over answers has its interval clustered by item (`stats.clustered_rate`, `stats.clustered_mean`).
Within one cell an item is its id; over several cells (a panel) it is also its generator, dataset
and opponent.
"""

from __future__ import annotations

import pandas as pd

from genjudge.judging.stats import clustered_mean, clustered_rate

ITEM_KEYS = ("generator", "dataset", "opponent", "id")


def item_columns(df: pd.DataFrame) -> list[str]:
    return [c for c in ITEM_KEYS if c in df]


def count_items(df: pd.DataFrame) -> int:
    """Distinct items among the rows (all rows when the frame has no item columns)."""
    cols = item_columns(df)
    return int(len(df[cols].drop_duplicates())) if cols and "id" in cols else len(df)


def _groups(df: pd.DataFrame):
    cols = item_columns(df)
    if "id" not in cols:  # no item columns: each row its own item
        return df.assign(_row=range(len(df))).groupby("_row", sort=False)
    return df.groupby(cols, sort=False, dropna=False)


def item_rate(df: pd.DataFrame, hit) -> dict:
    """The share of `df`'s rows where `hit` (a boolean Series aligned with df) holds, clustered by item."""
    g = _groups(df.assign(_hit=pd.Series(hit, index=df.index).astype(bool)))["_hit"]
    return clustered_rate(g.sum().tolist(), g.size().tolist())


def item_share(df: pd.DataFrame, values) -> dict:
    """The mean of `values` (each within [0, 1], aligned with df: a win 1, a tie 0.5, a loss 0) as a
    rate over the rows, clustered by item (Wilson at the effective number of answers)."""
    g = _groups(df.assign(_v=pd.Series(values, index=df.index).astype(float)))["_v"]
    return clustered_rate(g.sum().tolist(), g.size().tolist())


def item_mean(df: pd.DataFrame, values) -> dict:
    """The mean of `values` (aligned with df; missing ones left out) over the rows, clustered by item."""
    v = pd.to_numeric(pd.Series(values, index=df.index), errors="coerce")
    g = _groups(df.assign(_v=v)[v.notna()])["_v"]
    return clustered_mean(g.sum().tolist(), g.count().tolist())


def answers_per_item(df: pd.DataFrame) -> str | None:
    """What an item's several answers are, for the report: "3 samples per item", "up to 2 turns per
    item", "2 samples x up to 2 turns per item"; None where every item has one answer."""
    parts = []
    if "sample" in df and df["sample"].nunique() > 1:
        parts.append(f"{df['sample'].nunique()} samples")
    if "turn" in df and df["turn"].nunique() > 1:
        per = df.groupby(item_columns(df) or ["id"], dropna=False)["turn"].nunique()
        parts.append(f"{'up to ' if per.min() != per.max() else ''}{per.max()} turns")
    return f"{' x '.join(parts)} per item" if parts else None


def per_turn(df: pd.DataFrame, mode) -> dict:
    """The mode's measures per turn ({} for a single-turn dataset): "1", "2", ..."""
    if "turn" not in df or df["turn"].nunique() < 2:
        return {}
    out = {}
    for turn, g in df.groupby("turn", sort=True):
        out[str(int(turn))] = {
            "n_items": count_items(g),
            "n_answers": len(g),
            "n_judged": int(g["verdict"].notna().sum()),
            "n_unparsed": int(g["verdict"].isna().sum()),
            **mode.metrics(g),
        }
    return out


def turn_table(turns: dict | None, head: str, cell) -> list[str]:
    """The report's "By turn" section (markdown lines; none for a single-turn dataset).
    The headline above it is over every turn of every item."""
    if not turns:
        return []
    out = [
        "## By turn",
        "",
        "Each turn of a conversation is judged on its own; the headline counts every turn of every item.",
        "",
        f"| turn | items | judged | unparsed | {head} |",
        "|---|---|---|---|---|",
    ]
    out += [f"| {t} | {c['n_items']} | {c['n_judged']} | {c['n_unparsed']} | {cell(c)} |" for t, c in turns.items()]
    return [*out, ""]
