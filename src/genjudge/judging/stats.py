"""Intervals for proportions and means: one small function per measure."""

from __future__ import annotations

import math

Z95 = 1.959964


def wilson_interval(successes: int, n: int, z: float = Z95) -> tuple[float, float] | None:
    """95% Wilson score interval; None when n == 0."""
    if n == 0:
        return None
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return (max(0.0, centre - half), min(1.0, centre + half))


def rate(k: int, n: int) -> dict:
    """A proportion with its 95% Wilson interval: {value, ci95, n}."""
    ci = wilson_interval(k, n)
    return {"value": (k / n) if n else None, "ci95": list(ci) if ci else None, "n": n}


def mean_interval(values: list[float]) -> dict:
    """A mean with its 95% normal interval: {value, ci95, n, kind: "mean"} (a rate has no kind)."""
    n = len(values)
    if n == 0:
        return {"value": None, "ci95": None, "n": 0, "kind": "mean"}
    mean = sum(values) / n
    if n == 1:
        return {"value": mean, "ci95": None, "n": 1, "kind": "mean"}
    sd = math.sqrt(sum((x - mean) ** 2 for x in values) / (n - 1))
    half = Z95 * sd / math.sqrt(n)
    return {"value": mean, "ci95": [mean - half, mean + half], "n": n, "kind": "mean"}


def bradley_terry(matches: list[tuple[str, str, float]], iterations: int = 500, tol: float = 1e-10) -> dict:
    """Bradley-Terry strengths from (a, b, score of a) matches, score 1 win, 0.5 tie, 0 loss.

    Fitted by Hunter's MM algorithm with a tie counted as half a win each way and a
    weak prior (one tie of every player against a virtual average player), so a
    player that won or lost everything still has a finite strength. Strengths are on
    the log scale, centred at 0: P(a beats b) = 1 / (1 + exp(s_b - s_a)).
    """
    players = sorted({p for a, b, _ in matches for p in (a, b)})
    wins = {p: 0.5 for p in players}  # the prior's half win
    pairs: dict = {}
    for a, b, score in matches:
        wins[a] += score
        wins[b] += 1 - score
        key = (a, b) if a < b else (b, a)
        pairs[key] = pairs.get(key, 0) + 1
    gamma = {p: 1.0 for p in players}
    for _ in range(iterations):
        new = {}
        for p in players:
            denom = 1.0 / (gamma[p] + 1.0)  # the prior's one game against strength 1
            for (a, b), n in pairs.items():
                if p in (a, b):
                    denom += n / (gamma[a] + gamma[b])
            new[p] = wins[p] / denom
        mean_log = sum(math.log(v) for v in new.values()) / len(new)
        new = {p: v / math.exp(mean_log) for p, v in new.items()}
        done = max(abs(math.log(new[p]) - math.log(gamma[p])) for p in players) < tol
        gamma = new
        if done:
            break
    return {p: math.log(v) for p, v in gamma.items()}


def bradley_terry_intervals(groups: list[list[tuple[str, str, float]]], n_boot: int = 200, seed: int = 0) -> dict:
    """Strengths with 95% bootstrap intervals, resampling whole groups (an item's matches) with replacement."""
    import random

    point = bradley_terry([m for g in groups for m in g])
    rng = random.Random(seed)
    draws = {p: [] for p in point}
    for _ in range(n_boot):
        sample = [m for _ in groups for m in groups[rng.randrange(len(groups))]]
        fit = bradley_terry(sample, iterations=200, tol=1e-8)
        for p in point:
            draws[p].append(fit.get(p, 0.0))
    out = {}
    for p, s in point.items():
        d = sorted(draws[p])
        lo, hi = d[int(0.025 * (len(d) - 1))], d[int(0.975 * (len(d) - 1))]
        out[p] = {"strength": s, "ci95": [lo, hi]}
    return out
