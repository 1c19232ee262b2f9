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
    """A mean with its 95% normal interval: {value, ci95, n}."""
    n = len(values)
    if n == 0:
        return {"value": None, "ci95": None, "n": 0}
    mean = sum(values) / n
    if n == 1:
        return {"value": mean, "ci95": None, "n": 1}
    sd = math.sqrt(sum((x - mean) ** 2 for x in values) / (n - 1))
    half = Z95 * sd / math.sqrt(n)
    return {"value": mean, "ci95": [mean - half, mean + half], "n": n}
