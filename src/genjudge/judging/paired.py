"""Paired differences between two generators graded by one judge on one dataset.

Two generators answered the same items, so their difference is measured item by item: overlapping
intervals of the two headlines are the wrong test. Over the items both have a parsed verdict for:

- the difference of the headline measure (the share of answers judged correct, the mean score),
  with a 95% percentile interval from a seeded bootstrap over items (`scipy.stats.bootstrap`,
  paired): an item's turns and samples are resampled together;
- a paired test: McNemar's exact test (the binomial test on the discordant items,
  `scipy.stats.binomtest`) where each item has one answer graded correct or not; otherwise, and for
  scores, the Wilcoxon signed-rank test (`scipy.stats.wilcoxon`) on the items' differences;
- where the interval and the test disagree at 5% (one excludes 0, the other does not), a comment
  saying which to read and why (`disagreement`).

Each side comes as one row per item: `num` (answers judged correct, or the sum of scores) over `den`
(parsed answers), the mode's `per_item`.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from genjudge.judging.tables import markdown_table

N_RESAMPLES = 2000
MCNEMAR = "McNemar exact"
WILCOXON = "Wilcoxon signed-rank"


def _ratio_difference(ca, na, cb, nb, axis=-1):
    return ca.sum(axis=axis) / na.sum(axis=axis) - cb.sum(axis=axis) / nb.sum(axis=axis)


def paired_difference(
    a: pd.DataFrame, b: pd.DataFrame, binary: bool, seed: int = 0, n_resamples: int = N_RESAMPLES
) -> dict:
    """a, b: per item (index) `num` and `den`. `binary`: verdicts (a share of correct answers) rather
    than scores. {difference (a - b), ci95, n_items, test, p_value[, a_only, b_only]}."""
    from scipy import stats

    a, b = a[a["den"] > 0], b[b["den"] > 0]
    items = a.index.intersection(b.index, sort=False)
    out: dict = {"difference": None, "ci95": None, "n_items": len(items), "test": None, "p_value": None}
    if not len(items):
        return out
    ca, na = a.loc[items, "num"].to_numpy(float), a.loc[items, "den"].to_numpy(float)
    cb, nb = b.loc[items, "num"].to_numpy(float), b.loc[items, "den"].to_numpy(float)
    out["difference"] = float(_ratio_difference(ca, na, cb, nb))
    if len(items) >= 2:
        ci = stats.bootstrap(
            (ca, na, cb, nb),
            _ratio_difference,
            paired=True,
            vectorized=True,
            n_resamples=n_resamples,
            method="percentile",
            rng=np.random.default_rng(seed),
        ).confidence_interval
        out["ci95"] = [float(ci.low), float(ci.high)]
    if binary and (na == 1).all() and (nb == 1).all():
        a_only, b_only = int(((ca == 1) & (cb == 0)).sum()), int(((ca == 0) & (cb == 1)).sum())
        out.update(test=MCNEMAR, a_only=a_only, b_only=b_only)
        # No discordant item: nothing tells the two apart (the exact test's p is 1).
        out["p_value"] = float(stats.binomtest(a_only, a_only + b_only, 0.5).pvalue) if a_only + b_only else 1.0
        return _with_disagreement(out)
    diffs = ca / na - cb / nb
    out["test"] = f"{WILCOXON} over items' accuracies" if binary else WILCOXON
    out["p_value"] = float(stats.wilcoxon(diffs).pvalue) if np.any(diffs != 0) else 1.0
    return _with_disagreement(out)


def _with_disagreement(out: dict) -> dict:
    """`disagreement`: which to read, and why, where the 95% interval and the test at 5% disagree (one
    excludes 0, the other does not); nothing where they agree."""
    ci, p = out["ci95"], out["p_value"]
    if ci is None or p is None or (ci[0] > 0 or ci[1] < 0) == (p < 0.05):
        return out
    says = (
        "the interval excludes 0 but p is not below 0.05"
        if p >= 0.05
        else "p is below 0.05 but the interval includes 0"
    )
    if out["test"] == MCNEMAR:
        n = out["a_only"] + out["b_only"]
        out["disagreement"] = (
            f"{says}: read the test. Only {n} discordant items tell the two apart; McNemar's exact test holds at "
            "any count, while a percentile bootstrap over so few is only approximate (often too narrow)"
        )
    else:
        out["disagreement"] = (
            f"{says}: they ask different questions. The interval is of the difference of the headlines (answers "
            "pooled), the signed-rank test of whether the items' differences centre on 0; read the interval for "
            "the size, and take the difference as unsettled"
        )
    return out


def paired_table(exp, cells: dict) -> list[dict]:
    """For every judge with a paired measure, every dataset and every pair of generators (in the
    config's order): the paired difference of the first against the second.
    `cells`: {key: (summary, judgments frame)} as the report builds them."""
    from genjudge.judging import modes

    frames: dict = {}
    for s, df in cells.values():
        row = s.leaderboard[0]
        if row["opponent"] is None:
            frames[(row["judge"], row["dataset"], row["generator"])] = df
    out = []
    for judge, section in exp.judges.items():
        mode = modes.get(section["mode"])
        if mode.paired_measure is None:
            continue
        for dataset in exp.datasets:
            gens = [g for g in exp.generators if (judge, dataset, g) in frames]
            per_item = {g: mode.per_item(frames[(judge, dataset, g)]) for g in gens}
            for i, a in enumerate(gens):
                for b in gens[i + 1 :]:
                    d = paired_difference(per_item[a], per_item[b], binary=mode.paired_binary)
                    out.append(
                        {
                            "judge": judge,
                            "dataset": dataset,
                            "a": a,
                            "b": b,
                            "measure": mode.paired_measure,
                            "binary": mode.paired_binary,  # a share of answers (pp), or a mean on the judge's scale
                            **d,
                        }
                    )
    return out


NOTE = (
    "Each pair of generators on the same items: the difference of the headline (the first minus the second; "
    "rates in percentage points) over the items both have a parsed verdict for, with a 95% percentile "
    f"interval from a seeded bootstrap over items ({N_RESAMPLES} resamples; an item's turns and samples stay "
    "together), and a paired test: McNemar's exact test on the items only one of them got right where each "
    "item has one answer, otherwise the Wilcoxon signed-rank test on the items' differences."
)


def table_rows(rows: list[dict]) -> tuple[list[str], list[list[str]]]:
    """(head, rows) of the paired differences as the report shows them."""
    out = []
    for r in rows:
        if r["difference"] is None:
            value = "n/a (no item both parsed)"
        else:
            rate = r.get("binary", r["measure"] != "mean_score")  # rows written before `binary` was
            scale, unit, fmt = (100, " pp", "{:+.1f}") if rate else (1, "", "{:+.2f}")
            value = fmt.format(scale * r["difference"]) + unit
            if r["ci95"]:
                value += " [" + ", ".join(fmt.format(scale * x) for x in r["ci95"]) + "]"
        test = r["test"] or ""
        if "a_only" in r:
            test += f" ({r['a_only']} items only {r['a']} right, {r['b_only']} only {r['b']})"
        if r.get("disagreement"):
            test += f"; {r['disagreement']}"
        p = "" if r["p_value"] is None else f"{r['p_value']:.3g}"
        out.append([r["judge"], r["dataset"], f"{r['a']} - {r['b']}", r["measure"], value, str(r["n_items"]), test, p])
    head = ["judge", "dataset", "pair", "measure", "difference (95% interval)", "items", "test", "p"]
    return head, out


def markdown(rows: list[dict]) -> list[str]:
    """The report's "Paired differences" section (none without a pair)."""
    if not rows:
        return []
    return ["## Paired differences", "", *markdown_table(*table_rows(rows)), "", NOTE, ""]
