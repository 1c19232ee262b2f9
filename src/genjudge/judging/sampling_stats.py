"""Measures over several samples per item (`generator.n_samples`): the item is the unit.

The k samples of an item are not independent observations, so every interval here
is over items: a measure is first reduced to one number per item (its accuracy
over its samples, its mean score, its share of wins), then averaged over items.
A rate (accuracy, pass@k, a share) has a Wilson interval at the effective
number of observations of its per-item values (`stats.clustered_rate`, bounded
by the samples behind them): it stays within [0, 1]. A mean score has a normal
interval over the per-item values. Unparsed verdicts are left out of an item's
samples, as everywhere in the report.

- pass@k: the unbiased estimator of Chen et al. (2021), 1 - C(n-c, k) / C(n, k)
  for an item with n parsed samples of which c are correct, averaged over the
  items with n >= k. pass@1 is the mean accuracy over samples.
- majority vote (self-consistency): each sample votes its extracted answer (the
  whole output when the dataset sets no extraction; a sample with nothing
  extracted does not vote): by its value when it is a number (`extraction.parse_number`,
  as exact match compares them: `1,000` and `1000` are one answer, `5` and `-5`
  two), by its normalised text (`textnorm.normalise`) otherwise; a number and a
  text never vote together. The most frequent answer wins, a tie
  going to the answer given by the lowest sample index. It is correct when the
  judge said so for most of the samples giving it (a tie: the first such
  sample's verdict); an item where no sample voted counts as wrong.
- agreement: per item, the share of its voting samples that gave the voted
  answer, and whether all its parsed verdicts are the same (unanimity).
"""

from __future__ import annotations

import math
from collections import Counter

import pandas as pd

from genjudge.data.dataset import is_missing
from genjudge.judging.extraction import NO_ANSWER, parse_number
from genjudge.judging.stats import clustered_rate, mean_interval, rate
from genjudge.judging.textnorm import normalise


def pass_at_k(n: int, c: int, k: int) -> float:
    """Probability that at least one of k samples drawn without replacement from n, c of them correct, is."""
    if not 0 <= c <= n or not 1 <= k <= n:
        raise ValueError(f"pass@k needs 0 <= c <= n and 1 <= k <= n (n={n}, c={c}, k={k})")
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def reported_ks(n_samples: int) -> list[int]:
    """1, 2, 4, ... up to n_samples, and n_samples itself."""
    ks, k = [], 1
    while k < n_samples:
        ks.append(k)
        k *= 2
    return [*ks, n_samples]


def vote_key(row) -> str | None:
    """What one sample votes, or None when it has no answer: a number's exact value as `#` and
    the value (`#1000`, `#-5`, `#5/2`: `#` never appears in normalised text), else the
    normalised text of its extracted answer."""
    reason = getattr(row, "answer_reason", None)
    if isinstance(reason, str) and reason.startswith(NO_ANSWER):
        return None
    extracted = getattr(row, "answer_extracted", None)
    text = row.output if is_missing(extracted) else extracted
    text = None if is_missing(text) else str(text)
    number = parse_number(text)
    if number is not None:
        return f"#{number}"
    return normalise(text) or None


def majority_vote(votes: list[str | None], verdicts: list[str | None], correct: str = "correct"):
    """(voted answer, agreement share, judged correct) for one item's samples in sample order.
    Returns (None, None, False) when no sample voted."""
    counted = Counter(v for v in votes if v is not None)
    if not counted:
        return None, None, False
    top = max(counted.values())
    answer = next(v for v in votes if v is not None and counted[v] == top)  # first-given among the tied
    said = [x for v, x in zip(votes, verdicts) if v == answer and not is_missing(x)]
    yes = sum(x == correct for x in said)
    if yes * 2 == len(said):  # a tie, or no parsed verdict: the first sample's verdict
        judged = bool(said) and said[0] == correct
    else:
        judged = yes * 2 > len(said)
    return answer, top / sum(counted.values()), judged


def _unit(df: pd.DataFrame) -> list[str]:
    """What one item is: its id, or (id, turn) where conversations have several turns graded."""
    return ["id", "turn"] if "turn" in df and df["turn"].nunique() > 1 else ["id"]


def _items(df: pd.DataFrame):
    """(item, that item's rows in sample order), items in first-seen order."""
    df = df.sort_values(["sample"], kind="stable")
    return df.groupby(_unit(df), sort=False)


def _unanimity(items) -> dict:
    verdicts = [g["verdict"].dropna() for _, g in items]
    several = [v for v in verdicts if len(v) >= 2]
    return rate(sum(v.nunique() == 1 for v in several), len(several))


def item_share(values: list[float], answers: int) -> dict:
    """The mean of per-item shares in [0, 1], as a rate with its interval over the items (the
    effective n bounded by the `answers` behind the shares)."""
    return clustered_rate(values, [1] * len(values), cap=max(answers, len(values)))


def common(df: pd.DataFrame) -> dict:
    return {"n_items": int(len(df[_unit(df)].drop_duplicates())), "n_samples": int(df["sample"].nunique())}


def reference_measures(df: pd.DataFrame, correct: str = "correct") -> dict:
    """Mean accuracy over samples (per item, then over items), pass@k, majority vote, agreement."""
    items = _items(df)
    k_max = int(df["sample"].nunique())
    per_item, passes, votes, agreement, vote_em = [], {k: [] for k in reported_ks(k_max)}, [], [], []
    answers = {k: 0 for k in passes}  # parsed samples behind each pass@k
    voters = 0
    for _, g in items:
        parsed = g["verdict"].dropna()
        n, c = len(parsed), int((parsed == correct).sum())
        if n:
            per_item.append(c / n)
        for k in passes:
            if n >= k:
                passes[k].append(pass_at_k(n, c, k))
                answers[k] += n
        rows = list(g.itertuples())
        answer, share, judged = majority_vote([vote_key(r) for r in rows], g["verdict"].tolist(), correct)
        votes.append(judged)
        if share is not None:
            agreement.append(share)
            voters += sum(vote_key(r) is not None for r in rows)
        em = [r.exact_match for r in rows if answer is not None and vote_key(r) == answer]
        vote_em.append(bool(em) and not is_missing(em[0]) and bool(em[0]))
    return {
        **common(df),
        "mean_accuracy": item_share(per_item, answers[1]),
        "pass_at_k": {str(k): item_share(v, answers[k]) for k, v in passes.items()},
        "majority_vote_accuracy": rate(sum(votes), len(votes)),
        "majority_vote_exact_match": rate(sum(vote_em), len(vote_em)),
        "answer_agreement": item_share(agreement, voters),
        "verdict_unanimity": _unanimity(items),
    }


def score_measures(df: pd.DataFrame) -> dict:
    """The mean over items of each item's mean score; the mean within-item spread (sd) of scores."""
    items = _items(df)
    means, spreads = [], []
    for _, g in items:
        s = pd.to_numeric(g["score"], errors="coerce").dropna() if "score" in g else pd.Series(dtype=float)
        if len(s):
            means.append(float(s.mean()))
        if len(s) >= 2:
            spreads.append(float(s.std(ddof=1)))
    return {
        **common(df),
        "mean_score_over_items": mean_interval(means),
        "within_item_score_sd": mean_interval(spreads),
        "verdict_unanimity": _unanimity(items),
    }


def pairwise_measures(df: pd.DataFrame, outcomes=("win", "tie", "loss")) -> dict:
    """Each outcome's share among an item's parsed samples, averaged over items (interval clustered by item)."""
    items = _items(df)
    shares = {o: [] for o in outcomes}
    answers = 0
    for _, g in items:
        parsed = g["verdict"].dropna()
        answers += len(parsed)
        if len(parsed):
            for o in outcomes:
                shares[o].append(float((parsed == o).mean()))
    return {
        **common(df),
        **{f"{o}_over_items": item_share(v, answers) for o, v in shares.items()},
        "verdict_unanimity": _unanimity(items),
    }


def _value(v: dict) -> str:
    if v.get("value") is None:
        return "n/a"
    if v.get("kind") == "mean":
        ci = f" [{v['ci95'][0]:.3f}, {v['ci95'][1]:.3f}]" if v.get("ci95") else ""
        return f"{v['value']:.3f}{ci}"
    ci = f" [{100 * v['ci95'][0]:.1f}, {100 * v['ci95'][1]:.1f}]" if v.get("ci95") else ""
    return f"{100 * v['value']:.1f}%{ci}"


def markdown(m: dict | None) -> list[str]:
    """The report's section on samples; nothing when the run has one sample per item."""
    if not m:
        return []
    out = [
        "## Samples",
        "",
        f"{m['n_items']} items x {m['n_samples']} samples. Each measure is per item first, then over items; "
        "intervals are over items (rates: 95% Wilson at the effective number of items, within [0, 1]; "
        "mean scores: 95% normal).",
        "",
        "| measure | value | items |",
        "|---|---|---|",
    ]
    for name, v in m.items():
        if name == "pass_at_k":
            out += [f"| pass@{k} | {_value(x)} | {x['n']} |" for k, x in v.items()]
        elif isinstance(v, dict):
            out.append(f"| {name.replace('_', ' ')} | {_value(v)} | {v['n']} |")
    return [*out, ""]
