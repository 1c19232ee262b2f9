"""Scores of answers graded against their items' rubrics, as HealthBench defines them.

- An answer's score: the points of the criteria it meets over the sum of the rubric's positive points.
  Negative criteria (what it must not do) subtract where met, so a score may be below 0; it is clipped
  only in the mean.
- The overall score: the mean of the answers' scores, clipped to [0, 1].
- Tags: an item's own tags (`example_tags`) take its answer's score; a rubric tag scores the criteria
  that carry it, as an answer's score is made, where they hold a positive one; each tag's score is the
  clipped mean of those over the answers that have it.
- Intervals: a percentile bootstrap over items (`scipy.stats.bootstrap`, 1,000 resamples, a fixed
  seed: an item's turns and samples are resampled together), of the clipped mean; the bootstrap's
  standard deviation beside it, as HealthBench reports it (its `bootstrap_std`).

A criterion the judge's reply did not say of (unparsed) is either left out with its whole answer
(`leave_out`, the default: the answer is counted among the unparsed, never given a guessed score) or
counted as not met (`not_met`).
"""

from __future__ import annotations

import numpy as np

N_RESAMPLES = 1000
BOOTSTRAP = "percentile bootstrap over items (1,000 resamples), of the mean clipped to [0, 1]"


def answer_score(criteria: list[dict], met: list, unparsed: str = "leave_out") -> float | None:
    """One answer's score (None: left out, a criterion unparsed under `leave_out`)."""
    if any(m is None for m in met):
        if unparsed == "leave_out":
            return None
        met = [bool(m) for m in met]
    return _score(criteria, met)


def _score(criteria: list[dict], met: list) -> float | None:
    positive = sum(c["points"] for c in criteria if c["points"] > 0)
    if positive <= 0:
        return None
    return sum(c["points"] for c, m in zip(criteria, met) if m) / positive


def rubric_tag_scores(criteria: list[dict], met: list, unparsed: str = "leave_out") -> dict:
    """{rubric tag: its criteria's score} of one answer, for the tags that hold a positive criterion."""
    if any(m is None for m in met):
        if unparsed == "leave_out":
            return {}
        met = [bool(m) for m in met]
    by_tag: dict = {}
    for c, m in zip(criteria, met):
        for tag in c.get("tags") or []:
            by_tag.setdefault(tag, ([], []))
            by_tag[tag][0].append(c)
            by_tag[tag][1].append(m)
    out = {}
    for tag, (cs, ms) in by_tag.items():
        s = _score(cs, ms)
        if s is not None:
            out[tag] = s
    return out


def _clipped_means(sums, counts, axis=-1):
    return np.clip(sums.sum(axis=axis) / counts.sum(axis=axis), 0.0, 1.0)


def score_measure(sums: np.ndarray, counts: np.ndarray, seed: int = 0, n_resamples: int = N_RESAMPLES) -> dict:
    """The clipped mean of answers' scores, with its 95% interval: `sums` and `counts` are per item (an
    item's turns and samples together). {value, ci95, bootstrap_std, n_items, n_answers, kind, method}."""
    from scipy import stats

    n_answers = int(counts.sum())
    out = {
        "value": None,
        "ci95": None,
        "bootstrap_std": None,
        "n_items": len(sums),
        "n_answers": n_answers,
        "kind": "mean",
        "method": BOOTSTRAP,
    }
    if not n_answers:
        return out
    out["value"] = float(_clipped_means(sums, counts))
    if len(sums) >= 2:
        res = stats.bootstrap(
            (sums, counts),
            _clipped_means,
            paired=True,
            vectorized=True,
            n_resamples=n_resamples,
            method="percentile",
            rng=np.random.default_rng(seed),
        )
        out["ci95"] = [float(res.confidence_interval.low), float(res.confidence_interval.high)]
        out["bootstrap_std"] = float(res.standard_error)
    return out
