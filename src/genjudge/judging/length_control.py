"""Length-controlled win rate against a baseline, as AlpacaEval 2.0 defines it.

AlpacaEval 2.0 (Dubois, Galambosi, Liang and Hashimoto 2024, "Length-Controlled AlpacaEval: A Simple
Way to Debias Automatic Evaluators", arXiv:2404.04475; alpaca_eval's `metrics/glm_winrate.py`, GLM
`length_controlled_v1`) fits the judge's preference for the model's answer over the baseline's with
the logistic GLM

    logit P(model preferred) = theta + phi * tanh(delta / sd(delta)) + psi * gamma_x

(its formula `np.tanh(std_delta_len) + instruction_difficulty + not_gamed_baseline - 1`: no intercept
beside the model term), where delta is the length difference of the two answers in characters, sd its
standard deviation over the items, theta the model term, gamma_x the instruction's difficulty and
psi its weight. The length-controlled win rate is the GLM's prediction with the length difference set
to 0, averaged over the instructions: mean_x logistic(theta + psi * gamma_x). A tie is a preference
of 0.5, as AlpacaEval counts it.

Where this differs, and why: AlpacaEval takes gamma_x from its leaderboard's fit over many models, and
regularises the fit towards "gamed" baselines it ships. Here gamma_x is what alpaca_eval's analysis
code falls back to without a precomputed difficulty, the logit of the item's mean preference, taken
over the *other* generators judged against the same baseline (smoothed: (sum + 0.5) / (n + 1)), so a
generator's own outcome never explains itself; with one generator alone there is no instruction term.
delta is the model's length minus the baseline's (AlpacaEval's sign is the reverse; the win rate is the
same, phi changes sign). The fit is statsmodels' GLM (binomial, logit link) without a penalty; where the
outcomes are perfectly separated it falls back to a weak ridge penalty and says so. The 95% interval
is a seeded percentile bootstrap over items.
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd

N_BOOT = 200
RIDGE = 1e-3  # the ridge penalty of a separated fit (per observation, as statsmodels scales it)
PREFERENCE = {"win": 1.0, "tie": 0.5, "loss": 0.0}
COLUMNS = ("model", "length", "instruction")  # the GLM's terms, in this order


def logit_fit(y, X, separated: bool = False) -> tuple[np.ndarray, bool]:
    """Coefficients of a logistic GLM of the preferences `y` (in [0, 1]) on the columns of `X` (an
    array; no intercept added), and whether the ridge fallback was needed (separation). `separated`:
    the caller knows the data are separated (statsmodels warns only of complete separation; under
    quasi-separation the fit drifts to large but finite coefficients with small standard errors)."""
    from statsmodels.genmod import families
    from statsmodels.genmod.generalized_linear_model import GLM
    from statsmodels.tools.sm_exceptions import PerfectSeparationWarning

    model = GLM(np.asarray(y, float), np.asarray(X, float), family=families.Binomial())
    if not separated:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # statsmodels' other warnings (convergence, domain) would print per fit
            warnings.simplefilter("error", PerfectSeparationWarning)
            try:
                params = np.asarray(model.fit().params)
                if np.all(np.isfinite(params)) and np.max(np.abs(params)) < 30:
                    return params, False
            except (PerfectSeparationWarning, np.linalg.LinAlgError, ValueError):
                pass
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return np.asarray(model.fit_regularized(alpha=RIDGE, L1_wt=0.0).params), True


def _logistic(x):
    return 1.0 / (1.0 + np.exp(-x))


def design(delta, difficulty=None) -> tuple[np.ndarray, list[str]]:
    """The GLM's columns (and their names, of COLUMNS) for length differences `delta` (model minus
    baseline) and, where given, the instructions' difficulties; a length term only where lengths differ."""
    delta = np.asarray(delta, float)
    cols, names = [np.ones(len(delta))], ["model"]
    sd = float(np.std(delta, ddof=1)) if len(delta) > 1 else 0.0
    if sd > 0:
        cols.append(np.tanh(delta / sd))
        names.append("length")
    if difficulty is not None and np.ptp(np.asarray(difficulty, float)) > 0:
        # a constant difficulty (the other generators did alike on every item) is the model term again
        cols.append(np.asarray(difficulty, float))
        names.append("instruction")
    return np.column_stack(cols), names


def lc_point(y, delta, difficulty=None) -> dict:
    """The length-controlled win rate of one sample of items, with the GLM's coefficients."""
    y = np.asarray(y, float)
    if len(y) == 0:
        return {"value": None, "coefficients": {}, "penalised": False}
    if np.all(y == y[0]):  # one outcome throughout: nothing to explain, the rate is that outcome
        return {"value": float(y[0]), "coefficients": {}, "penalised": False}
    X, names = design(delta, difficulty)
    params, penalised = logit_fit(y, X)
    keep = [i for i, n in enumerate(names) if n != "length"]  # predicted with no length difference
    value = float(np.mean(_logistic(X[:, keep] @ params[keep])))
    return {"value": value, "coefficients": dict(zip(names, map(float, params))), "penalised": penalised}


def lc_win_rate(frame: pd.DataFrame, n_boot: int = N_BOOT, seed: int = 0) -> dict:
    """`frame`: one row per judged pair with `item` (the bootstrap's cluster), `y` (preference for the
    model: 1 win, 0.5 tie, 0 loss), `delta` (model's length minus the baseline's) and optionally
    `difficulty`. {value, ci95, raw (mean preference, ties half), raw_ci95, coefficients, n, penalised}."""
    has_difficulty = "difficulty" in frame and frame["difficulty"].notna().all()
    y, delta = frame["y"].to_numpy(float), frame["delta"].to_numpy(float)
    diff = frame["difficulty"].to_numpy(float) if has_difficulty else None
    point = lc_point(y, delta, diff)
    out = {
        "value": point["value"],
        "ci95": None,
        "raw": float(y.mean()) if len(y) else None,
        "raw_ci95": None,
        "coefficients": point["coefficients"],
        "penalised": point["penalised"],
        "n": int(frame["item"].nunique()),
        "n_pairs": len(frame),
        "instruction_term": bool(has_difficulty),
        "kind": "length_controlled",
    }
    rows = list(frame.groupby("item", sort=False).indices.values())
    if len(rows) < 2 or n_boot < 1:
        return out
    rng = np.random.default_rng(seed)
    lc, raw = [], []
    for _ in range(n_boot):
        idx = np.concatenate([rows[i] for i in rng.integers(0, len(rows), len(rows))])
        lc.append(lc_point(y[idx], delta[idx], diff[idx] if has_difficulty else None)["value"])
        raw.append(float(y[idx].mean()))
    out["ci95"] = [float(x) for x in np.percentile(lc, [2.5, 97.5])]
    out["raw_ci95"] = [float(x) for x in np.percentile(raw, [2.5, 97.5])]
    return out


def difficulty(outcomes: pd.DataFrame, generator: str, by: str = "item") -> pd.Series:
    """gamma_x of each instruction (column `by`) for `generator`: the logit of the other generators'
    smoothed mean preference on it against the same baseline (`outcomes`: generator, `by`, y); empty
    where no other generator was judged."""
    others = outcomes[outcomes["generator"] != generator]
    if others.empty:
        return pd.Series(dtype=float)
    g = others.groupby(by)["y"].agg(["sum", "count"])
    p = (g["sum"] + 0.5) / (g["count"] + 1.0)
    return np.log(p / (1 - p))


NOTE = (
    "Length-controlled win rate (AlpacaEval 2.0, Dubois et al. 2024): a logistic GLM of the judge's preference "
    "(win 1, tie 0.5, loss 0) on the model term, tanh of the standardised length difference (characters, model "
    "minus baseline) and, with several generators against one baseline, the instruction's difficulty (logit of the "
    "other generators' mean preference on it), predicted with no length difference and averaged over the items. "
    "Raw: the mean preference, ties half. 95% intervals: seeded bootstrap over items. A positive length coefficient "
    "means the judge prefers the longer answer."
)


def _coef(c: dict, k: str) -> str:
    return f"{c[k]:+.2f}" if k in c else "–"


def table_rows(lc: dict) -> tuple[list[str], list[list[str]]]:
    """`lc`: {judge: {dataset: {generator: result}}}; one row per (judge, dataset, generator)."""
    from genjudge.judging.modes.base import rate_text

    head = [
        "judge",
        "dataset",
        "generator",
        "vs",
        "raw win rate",
        "length-controlled",
        "model",
        "length",
        "instruction",
    ]
    rows = []
    for judge, by_ds in lc.items():
        for dataset, by_gen in by_ds.items():
            for gen, r in by_gen.items():
                c = r["coefficients"]
                rows.append(
                    [
                        judge,
                        dataset,
                        gen,
                        r.get("baseline") or "baseline",
                        rate_text({"value": r["raw"], "ci95": r["raw_ci95"]}),
                        rate_text(r) + (" (ridge)" if r["penalised"] else ""),
                        *[_coef(c, k) for k in COLUMNS],
                    ]
                )
    return head, rows
