"""A second, independent computation of summary.json's figures, straight from the judgments parquet
files and the config: plain pandas, scipy and statsmodels, nothing from genjudge.judging.

It is written from the documented rules (docs/reference-checks.md lists what it covers), not from the
code it checks: intervals clustered by item come from statsmodels' cluster-robust OLS of the answers
on a constant (Korn and Graubard's effective n for rates, CR1 for means), Wilson intervals from
statsmodels' proportion_confint, kappas from statsmodels' inter_rater, McNemar's test from its
contingency tables; ranks from scipy's rankdata.

`expected(config, judgments, strengths)` returns {"cells": {key: figures}, "run": figures}; the test
compares each with summary.json field by field (`compare`).
"""

from __future__ import annotations

import math
import re
import string
import unicodedata
from collections import Counter

import numpy as np
import pandas as pd
import statsmodels.api as sm
from scipy import stats
from statsmodels.stats.contingency_tables import mcnemar
from statsmodels.stats.inter_rater import cohens_kappa, fleiss_kappa
from statsmodels.stats.proportion import proportion_confint

Z = float(stats.norm.ppf(0.975))
SAMPLE_KEYS = ["generator", "dataset", "opponent", "id", "turn", "sample"]
OUTCOMES = ("win", "tie", "loss")
VERDICT_VALUE = {"correct": 1.0, "partial": 0.5, "incorrect": 0.0}


# --- intervals ------------------------------------------------------------------------------------


def wilson(p: float, n: float) -> list[float]:
    """Wilson's 95% interval of p observed over n (possibly effective, fractional), kept within
    [0, 1] and around p."""
    lo, hi = proportion_confint(p * n, n, alpha=0.05, method="wilson")
    return [max(0.0, min(p, float(lo))), min(1.0, max(p, float(hi)))]


def simple_rate(k: int, n: int) -> dict:
    return {"value": k / n if n else None, "ci95": wilson(k / n, n) if n else None, "n": n}


def cluster_rate(y, groups, cap: float | None = None) -> dict:
    """The share of answers `y` (0..1 each) with a Wilson interval at the effective number of answers
    p(1 - p) / Var(p), Var(p) the cluster-robust variance of the mean (no small-sample correction),
    at most the answers (or `cap`); one answer per cluster is the plain Wilson interval over them."""
    y = np.asarray(y, float)
    groups = np.asarray(pd.factorize(pd.Series(list(groups), dtype=object))[0])
    if not len(y):
        return {"value": None, "ci95": None, "n": 0}
    k, total = len(np.unique(groups)), len(y)
    p = min(1.0, max(0.0, float(y.mean())))
    plain = cap is None and k == total and set(np.unique(y)) <= {0.0, 1.0}
    if plain:
        return {"value": p, "ci95": wilson(p, k), "n": k}
    most = float(cap if cap is not None else total)
    if p in (0.0, 1.0):
        n_eff = float(k)
    elif k == 1:  # one cluster: its residuals sum to 0, no variance between clusters to see
        n_eff = most
    else:
        fit = sm.OLS(y, np.ones((total, 1))).fit(
            cov_type="cluster", cov_kwds={"groups": groups, "use_correction": False}
        )
        var = float(fit.bse[0]) ** 2
        n_eff = most if var <= 1e-15 else min(most, p * (1 - p) / var)
    return {"value": p, "ci95": wilson(p, n_eff), "n": k, "n_answers": int(round(most)), "n_effective": n_eff}


def cluster_mean(y, groups) -> dict:
    """The mean of all values, its 95% normal interval from the CR1 cluster-robust standard error."""
    y = np.asarray(y, float)
    groups = np.asarray(pd.factorize(pd.Series(list(groups), dtype=object))[0])
    if not len(y):
        return {"value": None, "ci95": None, "n": 0, "kind": "mean"}
    k = len(np.unique(groups))
    out = {"value": float(y.mean()), "ci95": None, "n": k, "kind": "mean"}
    if len(y) != k:
        out["n_answers"] = len(y)
    if k > 1:
        fit = sm.OLS(y, np.ones((len(y), 1))).fit(
            cov_type="cluster", cov_kwds={"groups": groups, "use_correction": True}
        )
        half = Z * float(fit.bse[0])
        out["ci95"] = [out["value"] - half, out["value"] + half]
    return out


def plain_mean(values) -> dict:
    v = np.asarray(list(values), float)
    if not len(v):
        return {"value": None, "ci95": None, "n": 0, "kind": "mean"}
    m = float(v.mean())
    if len(v) == 1:
        return {"value": m, "ci95": None, "n": 1, "kind": "mean"}
    half = Z * float(v.std(ddof=1)) / math.sqrt(len(v))
    return {"value": m, "ci95": [m - half, m + half], "n": len(v), "kind": "mean"}


# --- text --------------------------------------------------------------------------------------


def normalise(text) -> str:
    """The documented normalisation (SQuAD's, with its articles dropped only before their word): lower
    case; the characters `+ - ^ _ ( ) [ ] { } = < > \\` are kept as written (the Unicode minus `−` as
    `-`); any other punctuation (ASCII, and Unicode categories P*) separates words; "the" and "an"
    dropped before any next word, "a" before a next word of two or more characters with nothing but
    spaces or opening quotes between (a choice letter among letters stays); the last word always stays."""
    if text is None or (isinstance(text, float) and math.isnan(text)):
        return ""
    kept = set("+-^_()[]{}=<>\\")
    s = str(text).lower().replace("\u2212", "-")
    out = []
    for c in s:
        if c not in kept and (c in string.punctuation or unicodedata.category(c)[0] == "P"):
            opening = c in "\"'" or unicodedata.category(c) in ("Ps", "Pi")
            out.append(" " if opening else " | ")  # "|" (itself punctuation) marks a break
        else:
            out.append(c)
    tokens = "".join(out).split()
    words = [(t, tokens[i + 1 : i + 2] not in ([], ["|"])) for i, t in enumerate(tokens) if t != "|"]
    kept_words = []
    for j, (w, joined) in enumerate(words):
        nxt = words[j + 1][0] if j + 1 < len(words) else ""
        if nxt and (w in ("the", "an") or (w == "a" and joined and len(nxt) > 1)):
            continue
        kept_words.append(w)
    return " ".join(kept_words)


def vote_number(text) -> float | None:
    """A plain number's value (sign `-` or `−`, `$`, commas grouping thousands, decimals, `%`, a full stop
    after), for votes: a sample answering a number votes its value, any other its normalised text."""
    s = str(text).strip().replace("\u2212", "-")
    m = re.fullmatch(r"([+-]?)\$?((?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?|\.\d+)\s?%?\.?", s)
    return None if m is None else float(m.group(1) + m.group(2).replace(",", ""))


def vote_key(text):
    """("number", value) or ("text", normalised text), or None for no answer."""
    if missing(text):
        return None
    number = vote_number(text)
    if number is not None:
        return ("number", number)
    key = normalise(text)
    return ("text", key) if key else None


def missing(x) -> bool:
    return x is None or (isinstance(x, float) and math.isnan(x)) or x is pd.NA


# --- one cell ------------------------------------------------------------------------------------


def item_keys(df: pd.DataFrame, item) -> list:
    """Each row's item: the values of the `item` columns, as one tuple."""
    return [tuple(str(v) for v in t) for t in df[list(item)].itertuples(index=False)]


def _parsed(df):
    return df[df["verdict"].notna()]


def within(m: dict, score_range) -> dict:
    """A mean score's interval cut at the ends of the scale: no mean lies past them."""
    if score_range is None or not m["ci95"]:
        return m
    lo, hi = m["ci95"]
    return {**m, "ci95": [max(lo, float(score_range[0])), min(hi, float(score_range[1]))]}


def mode_measures(df: pd.DataFrame, mode: str, item=("id",), score_range=None) -> dict:
    """The mode's measures over rows `df` (a cell, a category, a turn, a panel), clustered by `item`;
    a mean score's interval kept within `score_range`."""
    parsed = _parsed(df)
    groups = item_keys(parsed, item)
    if mode == "reference":
        out = {
            "accuracy": cluster_rate((parsed["verdict"] == "correct").astype(float), groups),
            "verdict_counts": {str(k): int(v) for k, v in Counter(parsed["verdict"]).items()},
        }
        if "p_correct" in df and df["p_correct"].notna().any():
            out["mean_p_correct"] = float(df["p_correct"].dropna().mean())
        return out
    if mode == "score":
        scores = pd.to_numeric(parsed["verdict"], errors="coerce")
        return {
            "mean_score": within(cluster_mean(scores, groups), score_range),
            "score_counts": {f"{k:g}": int(v) for k, v in sorted(Counter(scores).items())},
        }
    # AlpacaEval's and Arena's win rate: a win 1, a tie 0.5, a loss 0, averaged over the verdicts
    out = {
        "win_rate": {
            **cluster_rate(parsed["verdict"].map({"win": 1.0, "tie": 0.5, "loss": 0.0}), groups),
            "wins": int((parsed["verdict"] == "win").sum()),
            "ties": int((parsed["verdict"] == "tie").sum()),
            "losses": int((parsed["verdict"] == "loss").sum()),
        }
    }
    out.update({o: cluster_rate((parsed["verdict"] == o).astype(float), groups) for o in OUTCOMES})
    cons = parsed[parsed["position_consistent"].notna()]
    cgroups = item_keys(cons, item)
    out["position_consistency"] = cluster_rate(cons["position_consistent"].astype(bool).astype(float), cgroups)
    return out


def counts(df: pd.DataFrame) -> dict:
    parsed = _parsed(df)
    return {
        "n_items": int(df["id"].nunique()),
        "n_answers": len(df),
        "n_judged": len(parsed),
        "n_unparsed": len(df) - len(parsed),
    }


def exact_match(df: pd.DataFrame) -> dict:
    has = df[df["exact_match"].notna()]
    return cluster_rate(has["exact_match"].astype(bool).astype(float), has["id"])


def truncated(df: pd.DataFrame) -> pd.Series:
    return df["finish_reason"].eq("length").fillna(False) if "finish_reason" in df else pd.Series(False, index=df.index)


def exact_match_shown(df: pd.DataFrame, dataset: dict) -> bool:
    """Extraction configured (for every item, or by a rule of `answer.by_category` for some categories),
    or at least 90% of the references there of at most 5 words."""
    answer = dataset.get("answer") or {}
    settings = [answer, *(answer.get("by_category") or [])]
    if any(s.get("reference") or s.get("candidate") for s in settings):
        return True
    refs = [r for r in df["reference"] if isinstance(r, str) and r.strip()]
    return bool(refs) and sum(len(r.split()) <= 5 for r in refs) / len(refs) >= 0.9


def pass_at_k(n: int, c: int, k: int) -> float:
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def sample_measures(df: pd.DataFrame, mode: str) -> dict:
    """Measures over several samples per item: per item (id, or (id, turn) with turns) first."""
    unit = ["id", "turn"] if df["turn"].nunique() > 1 else ["id"]
    df = df.sort_values("sample", kind="stable")
    units = list(df.groupby(unit, sort=False))
    k_max = int(df["sample"].nunique())
    out = {"n_items": len(units), "n_samples": k_max}

    def share(values, answers):
        return cluster_rate(values, range(len(values)), cap=max(answers, len(values)))

    several = [g["verdict"].dropna() for _, g in units]
    several = [v for v in several if len(v) >= 2]
    unanimity = simple_rate(sum(v.nunique() == 1 for v in several), len(several))
    if mode == "reference":
        ks, k = [], 1
        while k < k_max:
            ks.append(k)
            k *= 2
        ks.append(k_max)
        per_item, passes, answers = [], {k: [] for k in ks}, {k: 0 for k in ks}
        votes = []
        for _, g in units:
            parsed = g["verdict"].dropna()
            n, c = len(parsed), int((parsed == "correct").sum())
            if n:
                per_item.append(c / n)
            for k in ks:
                if n >= k:
                    passes[k].append(pass_at_k(n, c, k))
                    answers[k] += n
            keys = []
            for r in g.itertuples():
                reason = getattr(r, "answer_reason", None)
                if isinstance(reason, str) and reason.startswith("no answer extracted"):
                    keys.append(None)
                    continue
                ext = getattr(r, "answer_extracted", None)
                keys.append(vote_key(r.output if missing(ext) else ext))
            tally = Counter(x for x in keys if x is not None)
            if not tally:
                votes.append(False)
                continue
            top = max(tally.values())
            answer = next(x for x in keys if x is not None and tally[x] == top)
            said = [v for x, v in zip(keys, g["verdict"]) if x == answer and not missing(v)]
            yes = sum(v == "correct" for v in said)
            votes.append((bool(said) and said[0] == "correct") if 2 * yes == len(said) else 2 * yes > len(said))
        out.update(
            mean_accuracy=share(per_item, answers[1]),
            pass_at_k={str(k): share(v, answers[k]) for k, v in passes.items()},
            majority_vote_accuracy=simple_rate(sum(votes), len(votes)),
            verdict_unanimity=unanimity,
        )
    elif mode == "score":
        means, sds = [], []
        for _, g in units:
            s = pd.to_numeric(g["verdict"], errors="coerce").dropna()
            if len(s):
                means.append(float(s.mean()))
            if len(s) >= 2:
                sds.append(float(s.std(ddof=1)))
        out.update(
            mean_score_over_items=plain_mean(means), within_item_score_sd=plain_mean(sds), verdict_unanimity=unanimity
        )
    else:
        shares, answers = {o: [] for o in OUTCOMES}, 0
        for _, g in units:
            parsed = g["verdict"].dropna()
            answers += len(parsed)
            if len(parsed):
                for o in OUTCOMES:
                    shares[o].append(float((parsed == o).mean()))
        out.update({f"{o}_over_items": share(v, answers) for o, v in shares.items()})
        out["verdict_unanimity"] = unanimity
    return out


def counted_unfinished(df: pd.DataFrame, mode: str, score_range, policy: str) -> pd.DataFrame:
    """report.unfinished_reasoning (`incorrect` by default): an answer whose trace never closed
    (reasoning_state `unclosed`, no verdict) counts as `incorrect` (reference) or the lowest score of the
    range (score); pairwise modes, and `leave_out`, leave it without a verdict."""
    if policy != "incorrect" or mode == "pairwise" or "reasoning_state" not in df:
        return df
    hit = (df["reasoning_state"] == "unclosed") & df["verdict"].isna()
    df = df.copy()
    worst = "incorrect" if mode == "reference" else f"{float(score_range[0]):g}"
    df.loc[hit, "verdict"] = worst
    df.loc[hit, "unparsed_reason"] = None
    return df


def cell_figures(df: pd.DataFrame, mode: str, dataset: dict, score_range) -> dict:
    """summary.json's figures of one cell from its judgments (skipped answers already left out)."""
    df = df.copy()
    df["turn"] = df.get("turn", 1)
    cut = truncated(df)
    n = len(df)
    unclosed = df["reasoning_state"].eq("unclosed") if "reasoning_state" in df else pd.Series(False, index=df.index)
    out = {
        **counts(df),
        "unparsed_rate": (n - len(_parsed(df))) / n if n else None,
        "n_truncated": int(cut.sum()),
        "truncated_rate": float(cut.mean()) if n else None,
        "exact_match": exact_match(df),
        "exact_match_shown": exact_match_shown(df, dataset),
        **mode_measures(df, mode, score_range=score_range),
        "n_reasoning_unfinished": int(unclosed.sum()),
        "reasoning_unfinished_counted_as": next(iter(df.loc[unclosed & df["verdict"].notna(), "verdict"]), None),
    }
    if "answer_strict" in df:  # exact match's answers read by a fallback heuristic, by how
        loose = df[df["exact_match"].notna() & df["answer_extraction"].notna()]
        loose = loose[~loose["answer_strict"].astype(bool)]
        out["exact_match_fallbacks"] = dict(Counter(str(h) for h in loose["answer_extraction"]))
    if mode == "reference":
        parsed = _parsed(df)
        both = parsed[parsed["exact_match"].notna() & (parsed["decided_by"] == "judge")]
        agree = ((both["verdict"] == "correct") == both["exact_match"].astype(bool)).astype(float)
        out["judge_exact_match_agreement"] = cluster_rate(agree, both["id"])
        out["decided_by"] = {str(k): int(v) for k, v in Counter(df["decided_by"]).items()}
        if "answer_extraction" in df:  # the cascade's rule decisions by the extraction that found the answer
            ruled = df.loc[df["decided_by"] == "rule", "answer_extraction"]
            out["rule_extraction"] = dict(Counter("whole text" if missing(h) else str(h) for h in ruled))
        # summary.json: the rate as `accuracy_rate`, its value and interval as `accuracy`, `accuracy_ci95`
        rate = out.pop("accuracy")
        out.update(accuracy=rate["value"], accuracy_ci95=rate["ci95"], accuracy_rate=rate)
    if mode == "score":
        out["score_range"] = list(score_range)
    out["per_category"] = {}
    for cat, g in df.groupby(df["category"].astype(object).where(df["category"].notna(), "(none)"), sort=True):
        out["per_category"][str(cat)] = {
            **counts(g),
            "n_truncated": int(truncated(g).sum()),
            "exact_match": exact_match(g),
            **mode_measures(g, mode, score_range=score_range),
        }
    if df["turn"].nunique() >= 2:
        out["per_turn"] = {
            str(int(t)): {**counts(g), **mode_measures(g, mode, score_range=score_range)} for t, g in df.groupby("turn")
        }
    if "sample" in df and df["sample"].nunique() > 1:
        out["samples"] = sample_measures(df, mode)
        if mode == "score":  # a mean of item means lies within the scale too
            out["samples"]["mean_score_over_items"] = within(out["samples"]["mean_score_over_items"], score_range)
    return out


def leaderboard_row(fig: dict, cell, judge: str, mode: str) -> dict:
    measures = (
        {"accuracy": fig["accuracy_rate"]}
        if mode == "reference"
        else {"mean_score": fig["mean_score"]}
        if mode == "score"
        else {k: fig[k] for k in ("win_rate", *OUTCOMES, "position_consistency")}
    )
    return {
        "generator": cell[0],
        "dataset": cell[1],
        "judge": judge,
        "opponent": cell[2],
        "mode": mode,
        **{k: fig[k] for k in ("n_items", "n_answers", "n_judged", "n_unparsed", "n_truncated", "truncated_rate")},
        **measures,
        "exact_match": fig["exact_match"],
        "exact_match_shown": fig["exact_match_shown"],
    }


# --- the experiment's shape -----------------------------------------------------------------------


def judge_cells(config: dict, judge: dict) -> list[tuple]:
    """(generator, dataset, opponent) of every cell a judge grades, in the report's order."""
    gens = [g for g in config["_generators"] if not judge.get("generators") or g in judge["generators"]]
    datasets = [d for d in config["_datasets"] if not judge.get("datasets") or d in judge["datasets"]]
    out = []
    for d in datasets:
        if judge["mode"] != "pairwise":
            out += [(g, d, None) for g in gens]
        elif judge["pairs"] == "all":
            out += [(a, d, b) for i, a in enumerate(gens) for b in gens[i + 1 :]]
        elif judge["baseline"] in config["_generators"]:
            out += [(g, d, judge["baseline"]) for g in gens if g != judge["baseline"]]
        else:
            out += [(g, d, None) for g in gens]
    return out


def cell_key(cell: tuple) -> str:
    return f"{cell[0]}/{cell[1]}" + (f" vs {cell[2]}" if cell[2] else "")


def of_cell(df: pd.DataFrame, cell: tuple) -> pd.DataFrame:
    opp = df["opponent"].astype(object).where(df["opponent"].notna(), "")
    return df[(df["generator"] == cell[0]) & (df["dataset"] == cell[1]) & (opp == (cell[2] or ""))].reset_index(
        drop=True
    )


# --- the models x benchmarks table -----------------------------------------------------------------


def table(config: dict, rows: list[dict], strengths: dict, silent: set = frozenset()) -> dict:
    """Columns (dataset, judge), each generator's value there, ranks where two or more compare,
    mean ranks; `strengths`: the Bradley-Terry strengths summary.json holds (an input here); `silent`: the
    (generator, dataset, judge) cells where the judge was asked and none of its own verdicts parsed."""
    columns, values = [], {g: {} for g in config["_generators"]}
    for d in config["_datasets"]:
        for j, judge in config["_judges"].items():
            if judge.get("datasets") and d not in judge["datasets"]:
                continue
            key = f"{d}/{j}"
            cells = [c for c in judge_cells(config, judge) if c[1] == d]
            mode = judge["mode"]
            if mode == "pairwise" and judge["pairs"] == "all":
                measure, kind = "strength", "strength"
            else:
                measure = {"reference": "accuracy", "score": "mean_score", "pairwise": "win_rate"}[mode]
                kind = "mean" if mode == "score" else "rate"
            columns.append({"key": key, "dataset": d, "judge": j, "mode": mode, "measure": measure, "kind": kind})
            graded = {c[0] for c in cells} | ({c[2] for c in cells} if kind == "strength" else set())
            # a cell with answers and no parsed verdict failed, as did one whose judge parsed none of its own
            # (rules' and unfinished traces' verdicts aside): its generator's value; every value of a strength
            # column, fitted on every pair
            failed = {
                r["generator"]
                for r in rows
                if (r["dataset"], r["judge"]) == (d, j)
                and r.get("n_answers")
                and (not r["n_judged"] or (r["generator"], d, j) in silent)
            }
            for g in config["_generators"]:
                empty = {"status": "not graded", "value": None, "ci95": None, "n": None}
                if g in failed or (kind == "strength" and failed & graded):
                    v = {**empty, "status": "failed"}
                elif mode == "pairwise" and kind != "strength" and g == judge["baseline"]:
                    v = {**empty, "status": "baseline"}
                elif g not in graded:
                    v = empty
                elif kind == "strength":
                    s = strengths.get(j, {}).get(d, {}).get(g)
                    v = (
                        {"status": "ok", "value": s["strength"], "ci95": s["ci95"], "n": None}
                        if s
                        else {**empty, "status": "ok"}
                    )
                else:
                    row = next(r for r in rows if (r["generator"], r["dataset"], r["judge"]) == (g, d, j))
                    m = row[measure]
                    v = {"status": "ok", "value": m["value"], "ci95": m["ci95"], "n": m.get("n", row["n_judged"])}
                    v.update({k: m[k] for k in ("wins", "ties", "losses") if k in m})
                values[g][key] = v
    for col in columns:
        have = [(g, values[g][col["key"]]["value"]) for g in config["_generators"]]
        have = [(g, v) for g, v in have if v is not None]
        ranks = dict(zip([g for g, _ in have], stats.rankdata([-v for _, v in have]))) if len(have) >= 2 else {}
        # FastChat's leaderboard rank (recompute_final_ranking): 1, plus one for each model whose lower
        # bound is above this one's upper bound
        ci = {g: values[g][col["key"]]["ci95"] or [v, v] for g, v in have}
        for g in config["_generators"]:
            values[g][col["key"]]["rank"] = float(ranks[g]) if g in ranks else None
            values[g][col["key"]]["rank_ub"] = (
                1 + sum(1 for o in ranks if o != g and ci[o][0] > ci[g][1]) if g in ranks else None
            )
    out_rows = []
    for i, g in enumerate(config["_generators"]):
        ranked = [v["rank"] for v in values[g].values() if v["rank"] is not None]
        mean = round(float(np.mean(ranked)), 3) if ranked else None
        out_rows.append({"generator": g, "mean_rank": mean, "n_ranked": len(ranked), "values": values[g], "_i": i})
    out_rows.sort(key=lambda r: (r["mean_rank"] is None, r["mean_rank"] or 0, r["_i"]))
    return {"columns": columns, "rows": [{k: v for k, v in r.items() if k != "_i"} for r in out_rows]}


# --- paired differences ----------------------------------------------------------------------------


def _ratio_difference(ca, na, cb, nb, axis=-1):
    return ca.sum(axis=axis) / na.sum(axis=axis) - cb.sum(axis=axis) / nb.sum(axis=axis)


def paired(config: dict, frames: dict) -> list[dict]:
    """Every judge with a paired measure, every dataset, every pair of generators (config order) with
    single-answer cells: the difference over the items both have a parsed verdict for."""
    out = []
    for j, judge in config["_judges"].items():
        if judge["mode"] == "pairwise":
            continue
        binary = judge["mode"] == "reference"
        for d in config["_datasets"]:
            gens = [g for g in config["_generators"] if (j, d, g) in frames]
            per = {}
            for g in gens:
                parsed = _parsed(frames[(j, d, g)])
                num = (parsed["verdict"] == "correct").astype(float) if binary else pd.to_numeric(parsed["verdict"])
                agg = pd.DataFrame({"id": parsed["id"], "num": num}).groupby("id", sort=False)["num"]
                per[g] = pd.DataFrame({"num": agg.sum(), "den": agg.size().astype(float)})
            for i, a in enumerate(gens):
                for b in gens[i + 1 :]:
                    items = [x for x in per[a].index if x in set(per[b].index)]
                    row = {"judge": j, "dataset": d, "a": a, "b": b, "measure": "accuracy" if binary else "mean_score"}
                    row.update(difference=None, ci95=None, n_items=len(items), test=None, p_value=None)
                    if items:
                        ca, na = per[a].loc[items, "num"].to_numpy(), per[a].loc[items, "den"].to_numpy()
                        cb, nb = per[b].loc[items, "num"].to_numpy(), per[b].loc[items, "den"].to_numpy()
                        row["difference"] = float(ca.sum() / na.sum() - cb.sum() / nb.sum())
                        if len(items) >= 2:
                            ci = stats.bootstrap(
                                (ca, na, cb, nb),
                                _ratio_difference,
                                paired=True,
                                vectorized=True,
                                n_resamples=2000,
                                method="percentile",
                                rng=np.random.default_rng(0),
                            ).confidence_interval
                            row["ci95"] = [float(ci.low), float(ci.high)]
                        if binary and (na == 1).all() and (nb == 1).all():
                            a_only, b_only = int(((ca == 1) & (cb == 0)).sum()), int(((ca == 0) & (cb == 1)).sum())
                            both = int(((ca == 1) & (cb == 1)).sum())
                            neither = len(items) - a_only - b_only - both
                            p = (
                                mcnemar([[both, a_only], [b_only, neither]], exact=True).pvalue
                                if a_only + b_only
                                else 1.0
                            )
                            row.update(test="McNemar exact", a_only=a_only, b_only=b_only, p_value=float(p))
                        else:
                            diffs = ca / na - cb / nb
                            row["test"] = "Wilcoxon signed-rank" + (" over items' accuracies" if binary else "")
                            row["p_value"] = float(stats.wilcoxon(diffs).pvalue) if np.any(diffs != 0) else 1.0
                    out.append(row)
    return out


# --- agreement, bias, panels --------------------------------------------------------------------


def kappa2(a: list, b: list) -> tuple:
    """Cohen's kappa through statsmodels, (None, why) where the expected agreement is 1."""
    if not a:
        return None, "no items rated by both"
    cats = sorted(set(a) | set(b), key=str)
    t = pd.crosstab(pd.Categorical(a, cats), pd.Categorical(b, cats), dropna=False).to_numpy()
    ca, cb = Counter(a), Counter(b)
    if sum(ca[c] * cb[c] for c in cats) == len(a) ** 2:
        return None, "undefined"
    with np.errstate(invalid="ignore", divide="ignore"):  # its z statistic, unused, may be 0/0
        return float(cohens_kappa(t).kappa), None


def kappa_many(rows: list[list]) -> tuple:
    if not rows:
        return None, "no item"
    cats = sorted({v for r in rows for v in r}, key=str)
    t = np.array([[r.count(c) for c in cats] for r in rows])
    if t.sum(axis=0).max() == t.sum():
        return None, "undefined"
    return float(fleiss_kappa(t, method="fleiss")), None


def corr(x, y) -> dict:
    s = pd.DataFrame({"x": pd.to_numeric(pd.Series(list(x)), errors="coerce"), "y": list(y)}).astype(float).dropna()
    if len(s) < 3 or s["x"].nunique() < 2 or s["y"].nunique() < 2:
        return {"pearson": None, "spearman": None, "n": len(s)}
    return {
        "pearson": float(stats.pearsonr(s["x"], s["y"]).statistic),
        "spearman": float(stats.spearmanr(s["x"], s["y"]).statistic),
        "n": len(s),
    }


def length(text) -> int:
    return 0 if missing(text) else len(str(text).strip())


def bias(df: pd.DataFrame, mode: str) -> dict:
    if mode == "pairwise":
        both = df[df["outcome_order0"].notna() & df["outcome_order1"].notna()]
        flips = int((both["outcome_order0"] != both["outcome_order1"]).sum())
        firsts = [o == "win" for o in df["outcome_order0"].dropna() if o != "tie"]
        firsts += [o == "loss" for o in df["outcome_order1"].dropna() if o != "tie"]
        out = {
            "flip_rate": simple_rate(flips, len(both)),
            "first_position_win_rate": simple_rate(sum(firsts), len(firsts)),
        }
        if "opponent_output" in df and df["opponent_output"].notna().any():
            dec = [
                (v == "win") == (length(a) > length(b))
                for v, a, b in zip(df["verdict"], df["output"], df["opponent_output"])
                if v in ("win", "loss") and length(a) != length(b)
            ]
            out["prefer_longer"] = simple_rate(sum(dec), len(dec))
        return out
    parsed = _parsed(df)
    if mode == "score":
        values = pd.to_numeric(parsed["verdict"], errors="coerce")
    elif set(parsed["verdict"]) <= set(VERDICT_VALUE):
        values = parsed["verdict"].map(VERDICT_VALUE)
    else:
        return {}
    return {"length_correlation": corr([length(t) for t in parsed["output"]], values)}


def human_agreement(df: pd.DataFrame, labels: pd.DataFrame, mode: str) -> dict:
    """Agreement with labels keyed by generator, dataset, turn and id (every sample of an answer)."""
    keys = ["generator", "dataset", "turn", "id"]
    lab = labels.rename(columns={"label": "human"})
    joined = df.merge(lab, on=keys, how="inner")
    parsed = joined[joined["verdict"].notna()]
    # the share labelled is of the answers of the generators and datasets the labels name
    scope = df[df["generator"].isin(set(labels["generator"])) & df["dataset"].isin(set(labels["dataset"]))]
    out = {
        "n_items": len(scope[["generator", "dataset", "opponent", "id"]].astype(str).drop_duplicates()),
        "n_answers": len(scope),
        "n_labelled": len(joined),
        "n_judged": len(parsed),
        "n_unparsed": len(joined) - len(parsed),
    }
    if mode == "score":
        human, judge = parsed["human"].astype(float).tolist(), pd.to_numeric(parsed["verdict"]).tolist()
        out["agreement"] = simple_rate(sum(h == j for h, j in zip(human, judge)), len(human))
        out["correlation"] = corr(judge, human)
        pairs = [(f"{h:g}", f"{j:g}") for h, j in zip(human, judge)]
    else:
        human, judge = parsed["human"].tolist(), parsed["verdict"].tolist()
        out["agreement"] = simple_rate(sum(h == j for h, j in zip(human, judge)), len(human))
        out["cohen_kappa"] = kappa2(human, judge)[0]
        pairs = list(zip(map(str, human), map(str, judge)))
    confusion: dict = {}
    for h, j in pairs:
        confusion.setdefault(h, Counter())[j] += 1
    out["confusion"] = {h: dict(c) for h, c in confusion.items()}
    return out


def panel(config: dict, name: str, frames: dict) -> dict:
    """A panel's verdicts per answer of its first judge, its counts, kappas and measures."""
    p = config["panels"][name]
    judges, rule, mode = p["judges"], p.get("rule") or "majority", config["_judges"][p["judges"][0]]["mode"]

    def keyed(df):
        df = df.copy()
        df["opponent"] = df["opponent"].astype(object).where(df["opponent"].notna(), None)
        return df.set_index(SAMPLE_KEYS)

    first = keyed(frames[judges[0]])
    votes = pd.DataFrame({j: keyed(frames[j])["verdict"].reindex(first.index) for j in judges})
    verdicts, no_majority, n_parsed = [], [], []
    for row in votes.itertuples(index=False):
        got = [v for v in row if not missing(v)]
        n_parsed.append(len(got))
        if not got:
            verdicts.append(None)
            no_majority.append(False)
            continue
        if rule == "mean":
            verdicts.append(f"{np.mean([float(v) for v in got]):g}")
            no_majority.append(False)
            continue
        top, n = Counter(got).most_common(1)[0]
        met = n == len(got) if rule == "unanimous" else 2 * n > len(got)
        verdicts.append(top if met else ("tie" if mode == "pairwise" else None))
        no_majority.append(not met)
    panel_df = first.reset_index()[SAMPLE_KEYS].assign(verdict=verdicts)
    panel_df["position_consistent"] = None
    full = votes[votes.notna().all(axis=1)]
    pairs = {}
    for i, a in enumerate(judges):
        for b in judges[i + 1 :]:
            both = votes[votes[a].notna() & votes[b].notna()]
            pairs[f"{a} / {b}"] = {"cohen_kappa": kappa2(list(both[a]), list(both[b]))[0], "n": len(both)}
    ranges = [config["_judges"][j].get("score_range") for j in judges] if rule == "mean" else [None]
    bounds = [min(r[0] for r in ranges), max(r[1] for r in ranges)] if all(ranges) else None
    measures = mode_measures(panel_df, mode, item=("generator", "dataset", "opponent", "id"), score_range=bounds)
    measures = {
        k: v for k, v in measures.items() if isinstance(v, dict) and "value" in v and k != "position_consistency"
    }
    return {
        "n_items": len(votes),
        "n_decided": sum(v is not None for v in verdicts),
        "no_majority": sum(no_majority),
        "none_parsed": sum(n == 0 for n in n_parsed),
        "parsed_votes_per_item": {str(k): v for k, v in sorted(Counter(n_parsed).items())},
        "inter_judge": {
            "fleiss_kappa": kappa_many([list(r) for r in full.itertuples(index=False)])[0],
            "n_all_parsed": len(full),
            "pairs": pairs,
        },
        "measures": measures,
    }


# --- the whole summary ---------------------------------------------------------------------------


def expected(config: dict, judgments: dict, strengths: dict, labels: dict | None = None) -> dict:
    """The figures of summary.json from `judgments` (judge -> its judgments file as read by pandas)
    and `config` (with `_generators`, `_datasets`, `_judges`: the named entries, settings resolved);
    `labels`: judge -> its human labels frame (generator, dataset, turn, id, label)."""
    kept, skipped = {}, {}
    for j, df in judgments.items():
        # Text columns as Python objects: small frames filter many times faster than Arrow strings.
        df = df.astype({c: object for c in df.columns if pd.api.types.is_string_dtype(df[c])})
        if "turn" not in df:
            df["turn"] = 1
        gone = df["skipped"].notna() if "skipped" in df else pd.Series(False, index=df.index)
        kept[j], skipped[j] = df[~gone].reset_index(drop=True), df[gone].reset_index(drop=True)
    several_judges = len(config["_judges"]) > 1
    cells, rows, frames = {}, [], {}
    policy = (config.get("report") or {}).get("unfinished_reasoning", "incorrect")
    judged = {  # the headline's view: unfinished traces counted (the judge's agreement never sees them)
        j: counted_unfinished(kept[j], judge["mode"], judge["score_range"], policy)
        for j, judge in config["_judges"].items()
    }
    silent = set()
    for j, judge in config["_judges"].items():
        for cell in judge_cells(config, judge):
            asked = of_cell(kept[j], cell).query("decided_by == 'judge'")
            if len(asked) and asked["verdict"].isna().all():
                silent.add((cell[0], cell[1], j))
            df = of_cell(judged[j], cell)
            fig = cell_figures(df, judge["mode"], config["_datasets"][cell[1]], judge["score_range"])
            fig["n_skipped"] = len(of_cell(skipped[j], cell))
            fig["leaderboard"] = [leaderboard_row(fig, cell, j, judge["mode"])]
            rows.append(fig["leaderboard"][0])
            cells[f"{cell_key(cell)} | {j}" if several_judges else cell_key(cell)] = fig
            if cell[2] is None:
                frames[(j, cell[1], cell[0])] = df
    figs = list(cells.values())
    n, judged = sum(f["n_answers"] for f in figs), sum(f["n_judged"] for f in figs)
    cut = sum(f["n_truncated"] for f in figs)
    items = {(str(d), str(i)) for df in kept.values() for d, i in zip(df["dataset"], df["id"])}
    run = {
        "n_items": len(items) if len(cells) > 1 else sum(f["n_items"] for f in figs),
        "n_answers": n,
        "n_judged": judged,
        "n_unparsed": n - judged,
        "unparsed_rate": (n - judged) / n if n else None,
        "n_truncated": cut,
        "truncated_rate": cut / n if n else None,
        "n_skipped": sum(f["n_skipped"] for f in figs),
        "n_reasoning_unfinished": sum(f["n_reasoning_unfinished"] for f in figs),
        "reasoning_unfinished_counted_as": " / ".join(
            dict.fromkeys(f["reasoning_unfinished_counted_as"] for f in figs if f["reasoning_unfinished_counted_as"])
        )
        or None,
        "leaderboard": rows,
        "paired": paired(config, frames),
        "table": table(config, rows, strengths, silent),
    }
    validity = {"judges": {}, "panels": {}}
    for j, judge in config["_judges"].items():
        entry = {"bias": bias(kept[j], judge["mode"])}
        if labels and j in labels:
            entry["human"] = human_agreement(kept[j], labels[j], judge["mode"])
        validity["judges"][j] = entry
    for name in config.get("panels") or {}:
        validity["panels"][name] = panel(config, name, kept)
    run["validity"] = validity
    return {"cells": cells, "run": run}


# --- comparison ------------------------------------------------------------------------------------


def compare(expected, actual, path: str = "summary", tol: float = 1e-6) -> list[str]:
    """Every field of `expected` against the same field of `actual` (dicts and lists recursively,
    numbers within `tol`, n_effective within its rounding); the differences, as paths."""
    out = []
    if isinstance(expected, dict):
        if not isinstance(actual, dict):
            return [f"{path}: expected a dict, got {actual!r}"]
        for k, v in expected.items():
            if k not in actual:
                out.append(f"{path}.{k}: missing")
            else:
                out += compare(v, actual[k], f"{path}.{k}", 0.006 if k == "n_effective" else tol)
        return out
    if isinstance(expected, (list, tuple)):
        if not isinstance(actual, (list, tuple)) or len(actual) != len(expected):
            return [f"{path}: expected {expected!r}, got {actual!r}"]
        for i, (e, a) in enumerate(zip(expected, actual)):
            out += compare(e, a, f"{path}[{i}]", tol)
        return out
    if isinstance(expected, (bool, np.bool_)) or expected is None or isinstance(expected, str):
        return (
            []
            if expected == actual or (expected is None and actual is None)
            else [f"{path}: {expected!r} != {actual!r}"]
        )
    if isinstance(expected, (int, float, np.integer, np.floating)):
        if not isinstance(actual, (int, float)) or isinstance(actual, bool):
            return [f"{path}: {expected!r} != {actual!r}"]
        return (
            []
            if math.isclose(float(expected), float(actual), rel_tol=tol, abs_tol=tol)
            else [f"{path}: {expected!r} != {actual!r}"]
        )
    return [f"{path}: cannot compare {expected!r}"]


# --- rubric grading, as HealthBench's simple-evals computes it (written from its rules) ---------------


def rubric_answer_score(criteria: list[dict], met: list) -> float | None:
    """Met points over positive points; None where a criterion is unread (the answer is left out)."""
    if any(m is None for m in met):
        return None
    total = sum(c["points"] for c in criteria if c["points"] > 0)
    return sum(c["points"] for c, m in zip(criteria, met) if m) / total


def rubric_clipped_bootstrap(scores_by_item: dict, n: int = 4000, seed: int = 1) -> dict:
    """The mean of the answers' scores clipped to [0, 1], and a 95% percentile interval and standard
    deviation from resampling items with numpy (a loop of its own, another seed than the code's)."""
    items = list(scores_by_item)
    sums = np.array([sum(scores_by_item[i]) for i in items])
    counts = np.array([len(scores_by_item[i]) for i in items], dtype=float)
    value = float(np.clip(sums.sum() / counts.sum(), 0, 1))
    rng = np.random.default_rng(seed)
    draws = []
    for _ in range(n):
        pick = rng.integers(0, len(items), len(items))
        draws.append(np.clip(sums[pick].sum() / counts[pick].sum(), 0, 1))
    draws = np.array(draws)
    return {
        "value": value,
        "ci95": [float(np.percentile(draws, 2.5)), float(np.percentile(draws, 97.5))],
        "std": float(draws.std()),
    }
