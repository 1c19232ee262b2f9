"""Agreement and bias measures: small exact formulas, no model and no torch.

- `cohen_kappa`: two raters, nominal labels, over the items both rated.
- `fleiss_kappa`: several raters, a table of per-item category counts (same raters per item).
- `correlations`: Pearson and Spearman (average ranks for ties) through pandas.

A kappa or correlation that is not defined (kappa where the expected agreement is 1: every label
one and the same class, so 0/0; a correlation with a constant side) is None with the reason,
never a number: "agreement 100%, kappa 1.00" of one class throughout would be a made-up figure.
- `agreement`: the agreement rate (95% Wilson interval), kappa and the confusion matrix.
- Pairwise bias: `flip_rate`, `first_position_win_rate`, `prefer_longer`.

Every function takes only parsed values: callers drop unparsed votes first and count them apart.
"""

from __future__ import annotations

from collections import Counter

import pandas as pd

from genjudge.judging.stats import rate


def _one_label(label) -> str:
    return f"every label is {label!r} on both sides: the expected agreement is 1, so kappa is 0/0"


def cohen_kappa(a: list, b: list) -> tuple[float | None, str | None]:
    """Cohen's kappa of two raters' labels of the same items, (p_o - p_e) / (1 - p_e), as
    (value, None), or (None, why) where it is not defined: no items, or both raters used one and
    the same label throughout (expected agreement 1: kappa is 0/0, never 1)."""
    if len(a) != len(b):
        raise ValueError(f"cohen_kappa: {len(a)} labels against {len(b)}")
    n = len(a)
    if n == 0:
        return None, "no items rated by both"
    ca, cb = Counter(a), Counter(b)
    expected = sum(ca[k] * cb[k] for k in ca)  # n * n * p_e, in integers: p_e == 1 is exact
    if expected == n * n:
        return None, _one_label(a[0])
    p_o = sum(x == y for x, y in zip(a, b)) / n
    p_e = expected / (n * n)
    return (p_o - p_e) / (1 - p_e), None


def fleiss_kappa(table: list[list[int]], categories: list | None = None) -> tuple[float | None, str | None]:
    """Fleiss' kappa from per-item category counts (rows: items, columns: categories), each row
    summing to the same number of raters (>= 2), as (value, None) or (None, why): no items, or
    every vote in one category (expected agreement 1: kappa is 0/0)."""
    rows = [list(r) for r in table if sum(r)]
    if not rows:
        return None, "no item rated by every rater"
    m = sum(rows[0])
    if m < 2 or any(sum(r) != m for r in rows):
        raise ValueError("fleiss_kappa: every item needs the same number (>= 2) of ratings")
    n = len(rows)
    k = len(rows[0])
    totals = [sum(r[j] for r in rows) for j in range(k)]
    if max(totals) == n * m:
        j = totals.index(n * m)
        name = repr(categories[j]) if categories else f"category {j}"
        return None, f"every vote is {name}: the expected agreement is 1, so kappa is 0/0"
    p_j = [t / (n * m) for t in totals]
    p_i = [(sum(c * c for c in r) - m) / (m * (m - 1)) for r in rows]
    p_bar = sum(p_i) / n
    p_e = sum(p * p for p in p_j)
    return (p_bar - p_e) / (1 - p_e), None


def count_table(votes: list[list], categories: list | None = None) -> tuple[list, list[list[int]]]:
    """(categories, per-item counts) from each item's list of votes."""
    cats = categories or sorted({v for vs in votes for v in vs}, key=str)
    return cats, [[vs.count(c) for c in cats] for vs in votes]


def correlations(x, y, names: tuple[str, str] = ("the first variable", "the second variable")) -> dict:
    """Pearson and Spearman correlation of paired numbers. Where they are not defined (fewer than
    3 pairs, or one side constant) both are None and `undefined` says why."""
    s = pd.DataFrame({"x": pd.to_numeric(pd.Series(list(x)), errors="coerce"), "y": list(y)}).astype(float).dropna()
    n = len(s)
    why = None
    if n < 3:
        why = f"fewer than 3 pairs ({n})"
    else:
        for col, name in zip(("x", "y"), names):
            if s[col].nunique() < 2:
                why = f"{name} {'are' if name.endswith('s') else 'is'} constant: every value is {s[col].iloc[0]:g}"
                break
    if why:
        return {"pearson": None, "spearman": None, "n": n, "undefined": why}
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


def confusion_rows(c: dict) -> tuple[list[str], list[str], list[list[int]]]:
    """summary.json's {human label: {judge label: count}} as report.md and report.html both show it: one
    row per judge verdict, one column per human label (as the judge-against-exact-match matrix has the
    judge's verdicts on its rows). (row labels, column labels, counts)."""
    humans = sorted(c, key=str)
    verdicts = sorted({j for r in c.values() for j in r}, key=str)
    return verdicts, humans, [[int(c[h].get(v, 0)) for h in humans] for v in verdicts]


def agreement(human: list, judge: list, kappa: bool = True) -> dict:
    """Agreement rate with its 95% Wilson interval, Cohen's kappa (nominal labels; None with
    `cohen_kappa_undefined` saying why where it is not defined) and the confusion matrix of parsed
    judge labels against human labels."""
    agree = sum(h == j for h, j in zip(human, judge))
    out = {"agreement": rate(agree, len(human)), "confusion": confusion(human, judge)}
    if kappa:
        out.update(kappa_fields("cohen_kappa", cohen_kappa(list(human), list(judge))))
    return out


def kappa_fields(name: str, result: tuple[float | None, str | None]) -> dict:
    """{name: value} or {name: None, name_undefined: why}, as summary.json holds a kappa."""
    value, why = result
    return {name: value} if why is None else {name: None, f"{name}_undefined": why}


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
