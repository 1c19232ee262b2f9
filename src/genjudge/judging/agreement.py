"""Agreement and bias measures: small exact formulas, no model and no torch.

- `cohen_kappa`: two raters, nominal labels, over the items both rated.
- `fleiss_kappa`: several raters, a table of per-item category counts (same raters per item).
- `correlations`: Pearson and Spearman (average ranks for ties) through pandas.
- `agreement`: the agreement rate (95% Wilson interval), kappa and the confusion matrix.
- Pairwise bias: `flip_rate`, `first_position_win_rate`, `prefer_longer`.

Every function takes only parsed values: callers drop unparsed votes first and count them apart.
"""

from __future__ import annotations

from collections import Counter

import pandas as pd

from genjudge.judging.stats import rate


def cohen_kappa(a: list, b: list) -> float | None:
    """Cohen's kappa of two raters' labels of the same items: (p_o - p_e) / (1 - p_e).
    None when there are no items; 1.0 when both used one and the same label throughout."""
    if len(a) != len(b):
        raise ValueError(f"cohen_kappa: {len(a)} labels against {len(b)}")
    n = len(a)
    if n == 0:
        return None
    p_o = sum(x == y for x, y in zip(a, b)) / n
    ca, cb = Counter(a), Counter(b)
    p_e = sum(ca[k] * cb[k] for k in ca) / (n * n)
    if p_e == 1:
        return 1.0 if p_o == 1 else 0.0
    return (p_o - p_e) / (1 - p_e)


def fleiss_kappa(table: list[list[int]]) -> float | None:
    """Fleiss' kappa from per-item category counts (rows: items, columns: categories), each row
    summing to the same number of raters (>= 2). None for no items."""
    rows = [list(r) for r in table if sum(r)]
    if not rows:
        return None
    m = sum(rows[0])
    if m < 2 or any(sum(r) != m for r in rows):
        raise ValueError("fleiss_kappa: every item needs the same number (>= 2) of ratings")
    n = len(rows)
    k = len(rows[0])
    p_j = [sum(r[j] for r in rows) / (n * m) for j in range(k)]
    p_i = [(sum(c * c for c in r) - m) / (m * (m - 1)) for r in rows]
    p_bar = sum(p_i) / n
    p_e = sum(p * p for p in p_j)
    if p_e == 1:
        return 1.0 if p_bar == 1 else 0.0
    return (p_bar - p_e) / (1 - p_e)


def count_table(votes: list[list], categories: list | None = None) -> tuple[list, list[list[int]]]:
    """(categories, per-item counts) from each item's list of votes."""
    cats = categories or sorted({v for vs in votes for v in vs}, key=str)
    return cats, [[vs.count(c) for c in cats] for vs in votes]


def correlations(x, y) -> dict:
    """Pearson and Spearman correlation of paired numbers; None where undefined (n < 3 or no spread)."""
    s = pd.DataFrame({"x": pd.to_numeric(pd.Series(list(x)), errors="coerce"), "y": list(y)}).astype(float).dropna()
    n = len(s)
    if n < 3 or s["x"].nunique() < 2 or s["y"].nunique() < 2:
        return {"pearson": None, "spearman": None, "n": n}
    return {
        "pearson": float(s["x"].corr(s["y"], method="pearson")),
        # Spearman's rho is Pearson's r of the ranks (ties share their average rank).
        "spearman": float(s["x"].rank().corr(s["y"].rank(), method="pearson")),
        "n": n,
    }


def confusion(human: list, judge: list) -> dict:
    """{human label: {judge label: count}} over the items both labelled."""
    out: dict = {}
    for h, j in zip(human, judge):
        row = out.setdefault(str(h), {})
        row[str(j)] = row.get(str(j), 0) + 1
    return {h: dict(sorted(r.items())) for h, r in sorted(out.items())}


def agreement(human: list, judge: list, kappa: bool = True) -> dict:
    """Agreement rate with its 95% Wilson interval, Cohen's kappa (nominal labels) and the
    confusion matrix of parsed judge labels against human labels."""
    agree = sum(h == j for h, j in zip(human, judge))
    out = {"agreement": rate(agree, len(human)), "confusion": confusion(human, judge)}
    if kappa:
        out["cohen_kappa"] = cohen_kappa(list(human), list(judge))
    return out


# --- pairwise bias ------------------------------------------------------------------------------
# Outcomes are from the candidate's side ("win", "tie", "loss"); order 0 shows the candidate
# first (as A), order 1 second (as B).


def flip_rate(order0: list, order1: list) -> dict:
    """Share of pairs whose outcome changes when the answers swap places (both orders parsed)."""
    both = [(a, b) for a, b in zip(order0, order1) if a is not None and b is not None]
    return rate(sum(a != b for a, b in both), len(both))


def _first_won(outcome: str, order: int) -> bool | None:
    """Whether the answer shown first won one judgment; None for a tie."""
    if outcome == "tie":
        return None
    return (outcome == "win") == (order == 0)


def first_position_win_rate(order0: list, order1: list) -> dict:
    """Over every single judgment (either order) that named a winner: the share won by the
    answer shown first. 50% is no position bias."""
    firsts = [
        w
        for order, outcomes in ((0, order0), (1, order1))
        for o in outcomes
        if o is not None and (w := _first_won(o, order)) is not None
    ]
    return rate(sum(firsts), len(firsts))


def prefer_longer(outcomes: list, candidate_lengths: list, opponent_lengths: list) -> dict:
    """Over decided outcomes (win or loss) of answers of different lengths: the share won by the longer."""
    longer_won = [
        (o == "win") == (lc > lo)
        for o, lc, lo in zip(outcomes, candidate_lengths, opponent_lengths)
        if o in ("win", "loss") and lc != lo
    ]
    return rate(sum(longer_won), len(longer_won))
