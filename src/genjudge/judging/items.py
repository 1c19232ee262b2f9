"""The item is the unit of the report's counts and intervals.

An item's turns (a conversation) and samples (`generator.n_samples`) are answers of one item, not
independent observations: counts say how many items and how many answers, and every rate or mean
over answers has its interval clustered by item (`stats.clustered_rate`, `stats.clustered_mean`).
Within one cell an item is its id; over several cells (a panel) it is also its generator, dataset
and opponent.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from genjudge.judging.stats import clustered_mean, clustered_rate

ITEM_KEYS = ("generator", "dataset", "opponent", "id")


def item_columns(df: pd.DataFrame) -> list[str]:
    return [c for c in ITEM_KEYS if c in df]


_KEY_LIMIT = 2**62  # item keys are renumbered before their product could pass int64


def item_codes(df: pd.DataFrame, mask=None) -> tuple[np.ndarray, int]:
    """(each row's item as 0, 1, ... in order of first appearance, number of items): the groups of
    `df.groupby(item_columns(df), sort=False, dropna=False)` in their order (a missing key is a key of its
    own), each row its own item where the frame has no item columns. With `mask` (a boolean array), those
    of the rows where it holds, as `item_codes(df[mask])` gives them without building that frame.
    Computed with one factorize per column, not a groupby: the report asks this of many small frames."""
    cols = item_columns(df)
    if "id" not in cols:  # no item columns: each row its own item
        n = len(df) if mask is None else int(np.count_nonzero(mask))
        return np.arange(n, dtype=np.int64), n
    key, size = None, 1
    for c in cols:
        codes, uniques = pd.factorize(df[c])  # missing values: -1
        codes = codes.astype(np.int64) + 1
        m = len(uniques) + 1
        if key is None:
            key, size = codes, m
            continue
        if size * m >= _KEY_LIMIT:  # renumbered first, so that the product stays within int64
            key, first = pd.factorize(key)
            size = len(first)
        key, size = key * m + codes, size * m
    if mask is not None:
        key = key[mask]
    key, first = pd.factorize(key)  # renumbered by first appearance
    return key.astype(np.int64, copy=False), len(first)


def count_items(df: pd.DataFrame) -> int:
    """Distinct items among the rows (all rows when the frame has no item columns)."""
    return item_codes(df)[1]


# Float sums with bincount are exact, as pandas' compensated group sums are, where every value is a
# multiple of 1/2 (a win 1, a tie 0.5, a loss 0; integer scores) and the sums stay far below 2**53.
_EXACT_BELOW = 2.0**50


def _sums(codes: np.ndarray, n: int, values: np.ndarray) -> list:
    """Each item's sum of `values` (float), as pandas' groupby sum gives it (missing values count 0)."""
    twice = values * 2
    if np.array_equal(twice, np.trunc(twice)) and np.abs(values).sum() < _EXACT_BELOW:
        return np.bincount(codes, weights=values, minlength=n).tolist()
    return pd.Series(values).groupby(codes, sort=True).sum().tolist()


def rate_of(codes: np.ndarray, n: int, hit: np.ndarray) -> dict:
    """The share of rows where `hit` (booleans) holds, clustered by the rows' items (`item_codes`)."""
    return clustered_rate(
        np.bincount(codes, weights=hit, minlength=n).astype(np.int64).tolist(), np.bincount(codes, minlength=n).tolist()
    )


def share_of(codes: np.ndarray, n: int, values: np.ndarray) -> dict:
    """`item_share` of float `values` over rows whose items are `codes` (`item_codes`)."""
    return clustered_rate(_sums(codes, n, values), np.bincount(codes, minlength=n).tolist())


def item_rate(df: pd.DataFrame, hit) -> dict:
    """The share of `df`'s rows where `hit` (a boolean Series aligned with df) holds, clustered by item."""
    return rate_of(*item_codes(df), pd.Series(hit, index=df.index).astype(bool).to_numpy())


def item_rate_where(df: pd.DataFrame, mask: np.ndarray, hit) -> dict:
    """`item_rate(df[mask], hit)` without building `df[mask]`: `hit` aligned with the rows where `mask` holds."""
    return rate_of(*item_codes(df, mask), np.asarray(hit, dtype=bool))


def item_share(df: pd.DataFrame, values) -> dict:
    """The mean of `values` (each within [0, 1], aligned with df: a win 1, a tie 0.5, a loss 0) as a
    rate over the rows, clustered by item (Wilson at the effective number of answers)."""
    return share_of(*item_codes(df), pd.Series(values, index=df.index).astype(float).to_numpy())


def item_mean(df: pd.DataFrame, values) -> dict:
    """The mean of `values` (aligned with df; missing ones left out) over the rows, clustered by item."""
    return item_mean_where(df, None, values)


def item_mean_where(df: pd.DataFrame, mask, values) -> dict:
    """`item_mean(df[mask], values)` without building `df[mask]`: `values` aligned with the rows where
    `mask` (a boolean array; None: every row) holds."""
    v = pd.to_numeric(pd.Series(values) if mask is not None else pd.Series(values, index=df.index), errors="coerce")
    kept = v.notna().to_numpy()
    rows = kept if mask is None else _within(mask, kept)
    codes, n = item_codes(df, rows)
    return clustered_mean(
        _sums(codes, n, v.to_numpy(dtype=float, na_value=np.nan)[kept]), np.bincount(codes, minlength=n).tolist()
    )


def _within(mask: np.ndarray, inner: np.ndarray) -> np.ndarray:
    """The rows of the whole frame where `mask` holds and, among those, `inner` does."""
    out = np.zeros(len(mask), dtype=bool)
    out[np.flatnonzero(mask)[inner]] = True
    return out


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


def per_turn(df: pd.DataFrame, mode, options: dict | None = None) -> dict:
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
            **mode.measures(g, options),
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
