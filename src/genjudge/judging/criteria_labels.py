"""A judge checked on labelled criteria: people's `criteria_met` for (item, answer, criterion) triples
against the judge's, as HealthBench's meta-evaluation scores its grader.

Labels come through the judge's `labels` file (judging/labels.py) with two more fields: `criterion`
(the criterion's index in the item's rubric, from 0, or its text) and, optionally, `labeller` (several
people may label one triple). Measured over the labelled triples whose criterion the judge read:

- balanced F1: the mean of the F1 of "met" and the F1 of "not met" (HealthBench's), with a 95%
  percentile bootstrap interval over items;
- accuracy (agreement) with a 95% Wilson interval, Cohen's kappa, the confusion matrix;
- where several labellers labelled the same triple, their balanced F1 with each other (each labeller's
  label against every other's on the triples both labelled), the ceiling the judge is read against.

A triple labelled by several people counts once per labeller for the judge (the judge against each).
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd

from genjudge.errors import InputError
from genjudge.judging.agreement import agreement, cohen_kappa, kappa_fields

TRUE = {"TRUE", "MET", "YES", "1", "1.0"}
FALSE = {"FALSE", "NOT MET", "NO", "0", "0.0"}
N_RESAMPLES = 1000


def criterion_label(value, where: str) -> bool:
    text = str(value).strip().upper()
    if isinstance(value, bool):
        return value
    if text in TRUE:
        return True
    if text in FALSE:
        return False
    raise InputError(f"{where}: label {value!r} is not true or false (a criterion is met or not)")


def judge_criteria(df: pd.DataFrame) -> pd.DataFrame:
    """One row per criterion of each judged answer: its keys, `k` (index), `criterion` (text) and `judge`
    (met true/false; None where the reply gave no verdict)."""
    rows = []
    keys = [c for c in ("generator", "dataset", "opponent", "id", "turn", "sample") if c in df]
    for rec in df[[*keys, "criteria"]].itertuples(index=False):
        for k, c in enumerate(json.loads(rec.criteria or "[]")):
            rows.append(
                {
                    **{key: getattr(rec, key) for key in keys},
                    "k": k,
                    "criterion": c["criterion"],
                    "judge": c["criteria_met"],
                }
            )
    return pd.DataFrame(rows, columns=[*keys, "k", "criterion", "judge"])


def join(df: pd.DataFrame, labels: pd.DataFrame, source: str, where: str) -> pd.DataFrame:
    """The labelled triples with the judge's verdict: a label naming a criterion by index or by text; one
    that names no judged triple is an error naming it."""
    crit = judge_criteria(df)
    keys = ["id", *[k for k in ("generator", "dataset", "turn") if k in labels]]
    labels = labels.rename(columns={"label": "human"})
    index = pd.to_numeric(labels["criterion"], errors="coerce")
    by_index = labels[index.notna()].assign(k=index[index.notna()].astype(int))
    by_text = labels[index.isna()]
    merged = [
        by_index.merge(crit.drop(columns=["criterion"]), on=[*keys, "k"], how="left", indicator=True),
        by_text.merge(crit, on=[*keys, "criterion"], how="left", indicator=True),
    ]
    out = pd.concat([m for m in merged if len(m)], ignore_index=True) if any(len(m) for m in merged) else crit.iloc[:0]
    stray = out[out["_merge"] == "left_only"] if "_merge" in out else out.iloc[:0]
    if len(stray):
        shown = "; ".join(f"{r.where} (id {r.id}, criterion {r.criterion!r})" for r in stray.head(5).itertuples())
        raise InputError(f"{where}: {len(stray)} label(s) of {source} name no judged criterion: {shown}")
    return out.drop(columns=["_merge"], errors="ignore")


def balanced_f1(human: list, judge: list) -> float | None:
    """The mean of the F1 of each class (met, not met); None where neither class occurs."""
    h, j = np.asarray(human, dtype=bool), np.asarray(judge, dtype=bool)
    return _balanced_f1_of(*(int(np.sum(c)) for c in _cells(h, j)))


def _cells(h: np.ndarray, j: np.ndarray) -> tuple:
    """(both met, human met only, judge met only, neither) of paired verdicts."""
    return h & j, h & ~j, ~h & j, ~h & ~j


def _balanced_f1_of(both: int, human_only: int, judge_only: int, neither: int) -> float | None:
    # met: tp both, fp judge_only, fn human_only; not met: tp neither, fp human_only, fn judge_only
    scores = [
        2 * tp / (2 * tp + fp + fn)
        for tp, fp, fn in ((both, judge_only, human_only), (neither, human_only, judge_only))
        if tp + fp + fn
    ]
    return float(np.mean(scores)) if scores else None


def _bootstrap_f1(frame: pd.DataFrame, seed: int = 0) -> list[float] | None:
    """A 95% percentile interval of balanced F1, items resampled (their triples together): each item's
    four counts summed over the drawn items."""
    codes, uniques = pd.factorize(frame["id"], sort=True)
    if len(uniques) < 2:
        return None
    h = np.asarray([bool(x) for x in frame["human"]])
    j = np.asarray([bool(x) for x in frame["judge"]])
    per_item = np.stack([np.bincount(codes, weights=c, minlength=len(uniques)) for c in _cells(h, j)], axis=1)
    rng = np.random.default_rng(seed)
    draws = []
    for _ in range(N_RESAMPLES):
        f = _balanced_f1_of(*per_item[rng.integers(0, len(uniques), len(uniques))].sum(axis=0))
        if f is not None:
            draws.append(f)
    return [float(np.percentile(draws, 2.5)), float(np.percentile(draws, 97.5))] if draws else None


def labellers_ceiling(joined: pd.DataFrame) -> dict | None:
    """The labellers' balanced F1 with each other over the triples several of them labelled."""
    if "labeller" not in joined:
        return None
    keys = [c for c in ("generator", "dataset", "id", "turn", "k") if c in joined]
    pairs_h, pairs_o = [], []
    for _, g in joined.groupby(keys, dropna=False):
        if g["labeller"].nunique() < 2:
            continue
        marks = list(zip(g["labeller"], g["human"]))
        for a, ha in marks:
            for b, hb in marks:
                if a != b:
                    pairs_h.append(bool(ha))
                    pairs_o.append(bool(hb))
    if not pairs_h:
        return None
    return {"balanced_f1": balanced_f1(pairs_h, pairs_o), "n_pairs": len(pairs_h) // 2}


def criterion_agreement(df: pd.DataFrame, labels: pd.DataFrame, source: str, where: str) -> dict:
    joined = join(df, labels, source, where)
    read = joined[joined["judge"].notna()]
    human, judge = [bool(x) for x in read["human"]], [bool(x) for x in read["judge"]]
    out = {
        "kind": "criterion",
        "n_labelled": len(joined),
        "n_judged": len(read),
        "n_unparsed": len(joined) - len(read),
        "n_items": int(joined["id"].nunique()),
        "balanced_f1": {"value": balanced_f1(human, judge), "ci95": _bootstrap_f1(read), "n": len(read)},
        **agreement([str(h) for h in human], [str(j) for j in judge], kappa=False),
        **kappa_fields("cohen_kappa", cohen_kappa([str(h) for h in human], [str(j) for j in judge])),
    }
    ceiling = labellers_ceiling(joined)
    if ceiling:
        out["labellers"] = ceiling
    return out
