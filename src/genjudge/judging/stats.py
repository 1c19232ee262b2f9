"""Intervals for proportions and means: one small function per measure.

Answers come in clusters: an item's turns and samples are not independent observations. A rate
over clustered answers (`clustered_rate`) is the share of all answers with a Wilson interval at the
effective number of observations: p(1 - p) over the cluster-robust (linearised) variance of the
ratio, as Korn and Graubard (1998) do for survey proportions. With one answer per item that is
exactly the Wilson interval over the items; the interval always lies within [0, 1]. A mean over
clustered answers (`clustered_mean`) has a normal interval with the cluster-robust standard error
(with one answer per item, the usual one).
"""

from __future__ import annotations

import math

Z95 = 1.959964


def wilson_interval(successes: int, n: int, z: float = Z95) -> tuple[float, float] | None:
    """95% Wilson score interval; None when n == 0."""
    if n == 0:
        return None
    return wilson_bounds(successes / n, n, z)


def wilson_bounds(p: float, n: float, z: float = Z95) -> tuple[float, float]:
    """The Wilson score interval of a proportion p observed over n (possibly effective, fractional)."""
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    # Within [0, 1] and around p, whatever the rounding at p = 0 or 1.
    return (max(0.0, min(p, centre - half)), min(1.0, max(p, centre + half)))


def rate(k: int, n: int) -> dict:
    """A proportion with its 95% Wilson interval: {value, ci95, n}."""
    ci = wilson_interval(k, n)
    return {"value": (k / n) if n else None, "ci95": list(ci) if ci else None, "n": n}


def clustered_rate(successes: list[float], trials: list[float], cap: float | None = None) -> dict:
    """A rate over clusters (items), cluster i with successes[i] of trials[i] answers: the share of
    all answers, with a Wilson interval at the effective n (clustered by item; see the module).

    {value, ci95, n: clusters with a trial} as `rate`, plus, where some cluster holds several
    answers, n_answers and n_effective. Successes may be fractional (a per-item share: trials 1
    each, and `cap`, the answers behind them, bounding the effective n). A rate where every answer
    agrees (0 or 1) has no variance to measure: its effective n is the number of clusters."""
    pairs = [(float(x), float(t)) for x, t in zip(successes, trials) if t > 0]
    k = len(pairs)
    if k == 0:
        return {"value": None, "ci95": None, "n": 0}
    total = sum(t for _, t in pairs)
    p = min(1.0, max(0.0, sum(x for x, _ in pairs) / total))
    if cap is None and all(t == 1 and x in (0.0, 1.0) for x, t in pairs):
        return {"value": p, "ci95": list(wilson_bounds(p, k)), "n": k}  # one answer per item: plain Wilson
    most = float(cap if cap is not None else total)
    var = sum((x - p * t) ** 2 for x, t in pairs) / total**2
    if p in (0.0, 1.0):
        n_eff = float(k)
    elif var == 0:
        n_eff = most
    else:
        n_eff = min(most, p * (1 - p) / var)
    return {
        "value": p,
        "ci95": list(wilson_bounds(p, n_eff)),
        "n": k,
        "n_answers": int(round(most)),
        "n_effective": round(n_eff, 2),
    }


def clustered_mean(sums: list[float], counts: list[int]) -> dict:
    """A mean over clusters (items) of several values each, cluster i summing to sums[i] over
    counts[i] values: the mean of all values with a 95% normal interval from the cluster-robust
    standard error (CR1; one value per cluster gives the usual s / sqrt(n)).
    {value, ci95, n: clusters, kind: "mean"}, plus n_answers where clusters hold several values."""
    pairs = [(float(s), int(c)) for s, c in zip(sums, counts) if c > 0]
    k = len(pairs)
    if k == 0:
        return {"value": None, "ci95": None, "n": 0, "kind": "mean"}
    total = sum(c for _, c in pairs)
    mean = sum(s for s, _ in pairs) / total
    out = {"value": mean, "ci95": None, "n": k, "kind": "mean"}
    if total != k:
        out["n_answers"] = total
    if k > 1:
        var = k / (k - 1) * sum((s - mean * c) ** 2 for s, c in pairs) / total**2
        half = Z95 * math.sqrt(var)
        out["ci95"] = [mean - half, mean + half]
    return out


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


def interval_method(m: dict) -> str:
    """How the 95% interval of a measure as this module gives it (`rate`, `clustered_rate`,
    `clustered_mean`, `mean_interval`) was made, in words, read from its own fields."""
    if m.get("kind") == "mean":
        if m.get("n_answers"):
            return "normal, cluster-robust standard error (CR1) by item"
        return "normal, standard error of the mean"
    if m.get("n_effective") is not None:
        return "Wilson score at the effective number of answers, clustered by item (Korn-Graubard)"
    return "Wilson score"


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
