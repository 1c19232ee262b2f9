"""The judge's headline corrected by human labels (PPI++, judging/ppi.py), cell by cell, for the
report's "Can I trust the judge?" section: the corrected estimate beside the judge's own figure and the
labels' alone, which answers were labelled, and warnings where the labelled answers are not a random
sample. Labels that may be of another generator's answers are refused for correction."""

from __future__ import annotations

import numpy as np
import pandas as pd

from genjudge.data.samples import with_sample
from genjudge.judging import labels as human
from genjudge.judging import ppi
from genjudge.judging.tables import markdown_table, md_line, md_text

SHOWN_IDS = 20  # labelled ids listed per cell (all are counted)
SHOWN_CATEGORIES = 8  # categories named in a warning (all are counted)
UNEVEN_P = 0.01  # a warning's test (categories missed, labelled share by category) below this warns


def target(mode) -> tuple[str, bool, callable]:
    """(what is estimated, whether it is a rate, value of a verdict or label): the share of wins
    (pairwise), of the first verdict label `correct` (or the mode's first label), or the mean score."""
    k = human.kind(mode)
    if k == "winner":
        # the share of wins (ties count 0): a rate PPI++ and Wilson take; the headline win rate counts ties half
        return "share of wins", True, lambda v: float(v == "win")
    if k == "verdict":
        values = list(dict.fromkeys(mode.labels.values()))
        pos = "correct" if "correct" in values else values[0]
        return f"share {pos}", True, lambda v: float(v == pos)
    return "mean score", False, lambda v: float(pd.to_numeric(v, errors="coerce"))


def refusal(df: pd.DataFrame, labels: pd.DataFrame, joined: pd.DataFrame) -> str | None:
    """Why these labels cannot correct this judge's figures, or None."""
    gens = sorted(map(str, df["generator"].unique()))
    if "generator" not in labels and len(gens) > 1:
        return (
            f"the labels do not say whose answers they grade (map labels.fields.generator) and this judge grades "
            f"{len(gens)} generators ({', '.join(gens)}): a label of another generator's answer corrects nothing"
        )
    if "dataset" not in labels and df["dataset"].nunique() > 1:
        in_several = df[df["id"].astype(str).isin(set(labels["id"]))].groupby("id")["dataset"].nunique()
        shared = sorted(map(str, in_several[in_several > 1].index))
        if shared:
            return (
                f"the labels do not say which dataset they grade (map labels.fields.dataset) and {len(shared)} labelled "
                f"id(s) occur in several of this judge's datasets (e.g. {', '.join(map(repr, shared[:3]))}): a label "
                "of one dataset's answer corrects nothing in another"
            )
    opponents = df.groupby("generator")["opponent"].nunique()
    if "opponent" not in labels and df["opponent"].notna().any() and (opponents > 1).any():
        return "the labels do not say which pair they grade (map labels.fields.opponent) and generators meet several"
    differing = human.differing_answers(joined, labels)
    if differing:
        return (
            f"{differing['n_labels']} label(s) each apply to answers that differ ({differing['n_answers']} answers of "
            f"{', '.join(differing['generators'])}): a label must be of the answer it corrects"
        )
    return None


def _named(cats: list[str]) -> str:
    return ", ".join(cats[:SHOWN_CATEGORIES]) + (
        f" and {len(cats) - SHOWN_CATEGORIES} more" if len(cats) > SHOWN_CATEGORIES else ""
    )


def chance_of_missing(sizes, n: int, k: int, draws: int = 4000) -> float:
    """The chance that a uniform random sample of `n` of the answers (categories of `sizes` answers)
    leaves out `k` or more categories entirely: multivariate hypergeometric draws, a fixed seed."""
    rng = np.random.default_rng(0)
    counts = rng.multivariate_hypergeometric(np.asarray(sizes, np.int64), n, size=draws)
    return float(np.mean((counts == 0).sum(axis=1) >= k))


def sampling_warnings(cell: pd.DataFrame, labelled: pd.Series) -> list[str]:
    """Signs that the labelled answers are not a uniform random sample of the cell's: categories left
    out where a random sample of as many answers would almost surely have met them, or a labelled share
    that differs by category."""
    cats = cell["category"].fillna("(none)").astype(str) if "category" in cell else pd.Series("(none)", cell.index)
    every = sorted(cats.unique())
    if len(every) < 2 or not labelled.any():
        return []
    seen = sorted(cats[labelled].unique())
    if len(seen) < len(every):
        missing = [c for c in every if c not in seen]
        n_labelled = int(labelled.sum())
        p = chance_of_missing(cats.value_counts().to_numpy(), n_labelled, len(missing))
        if p < UNEVEN_P:
            return [
                f"the labels cover only {len(seen)} of the {len(every)} categories ({_named(seen)}; none of "
                f"{_named(missing)}): a random sample of {n_labelled} of the {len(cats)} answers leaves out "
                f"{len(missing)} or more categories with chance {p:.2g}, so the labels look chosen; the corrected "
                "figure holds for the labelled categories at best"
            ]
        return []
    from scipy.stats import chi2_contingency

    table = pd.crosstab(cats, labelled)
    if table.shape[1] == 2 and (table.to_numpy() > 0).all():
        p = float(chi2_contingency(table.to_numpy())[1])
        if p < UNEVEN_P:
            return [
                f"the labelled share differs by category (chi-square p = {p:.2g}): the labels look chosen, "
                "not drawn at random, and the correction assumes a random sample"
            ]
    return []


def _keyed(df: pd.DataFrame) -> pd.DataFrame:
    """`df` with turn and sample columns (1 and 0 where it has none) and "" for no opponent."""
    df = with_sample(df if "turn" in df else df.assign(turn=1))
    return df.assign(opponent=df["opponent"].astype(object).where(df["opponent"].notna(), ""))


def corrected_figures(df: pd.DataFrame, section: dict, mode, where: str) -> dict:
    """{measure, rate, refused, cells: {cell key: figures}} of one judge's judgments and labels."""
    labels = human.read_labels(section, mode)
    source = str(section["path"])
    joined = human.join(df, labels, mode, source, where)
    measure, is_rate, value = target(mode)
    out: dict = {"measure": measure, "rate": is_rate, "labels": source, "cells": {}}
    why = refusal(df, labels, joined)
    if why:
        out["refused"] = why
        return out
    keys = ["generator", "dataset", "opponent", "id", "turn", "sample"]
    frame, lab = _keyed(df), _keyed(joined)
    human_of = dict(zip(map(tuple, lab[keys].astype(str).to_numpy()), lab["human"]))
    frame["human"] = [human_of.get(k) for k in map(tuple, frame[keys].astype(str).to_numpy())]
    for (gen, ds, opp), cell in frame.groupby(["generator", "dataset", "opponent"], sort=True):
        has = cell["human"].notna()
        if not has.any():
            continue
        parsed = cell["verdict"].notna()
        y = np.array([value(v) for v in cell.loc[has & parsed, "human"]], float)
        f = np.array([value(v) for v in cell.loc[has & parsed, "verdict"]], float)
        fu = np.array([value(v) for v in cell.loc[~has & parsed, "verdict"]], float)
        ok = ~np.isnan(y) & ~np.isnan(f)
        figures = ppi.corrected(y[ok], f[ok], fu[~np.isnan(fu)], rate=is_rate)
        ids = sorted(map(str, cell.loc[has, "id"].unique()))
        figures.update(
            n_answers=len(cell),
            n_labelled_unparsed=int((has & ~parsed).sum()),
            labelled_ids=ids[:SHOWN_IDS],
            n_labelled_items=len(ids),
            warnings=sampling_warnings(cell, has),
        )
        key = f"{gen}/{ds}" + (f" vs {opp}" if opp else "")
        out["cells"][key] = figures
    return out


def markdown(entries: dict) -> list[str]:
    if not entries:
        return []
    out = ["### Judge figures corrected by human labels (PPI++)", ""]
    for judge, c in entries.items():
        if c.get("refused"):
            out += [f"> **Not corrected ({md_text(judge)}):** {md_text(c['refused'])}.", ""]
    head, rows = ppi.table_rows(entries)
    if rows:
        measure = next(iter(entries.values()))["measure"]
        out += [*markdown_table(head, rows), "", ppi.NOTE.format(measure=measure), ""]
    for judge, c in entries.items():
        for key, x in c["cells"].items():
            ids = ", ".join(map(md_text, x["labelled_ids"]))
            shown = ids + (" ..." if x["n_labelled_items"] > len(x["labelled_ids"]) else "")
            out.append(f"- {md_line(judge)}, {md_text(key)}: labelled items ({x['n_labelled_items']}): {shown}")
            out += [f"  - **Warning:** {md_text(w)}" for w in x["warnings"]]
    return [*out, ""]
