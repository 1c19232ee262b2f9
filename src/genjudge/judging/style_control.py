"""Bradley-Terry strengths with style covariates, as Chatbot Arena's style control does.

Chatbot Arena (Li, Angelopoulos and Chiang 2024, "Does style matter? Disentangling style and substance
in Chatbot Arena", lmsys.org blog, 2024-08-28) adds style features Z_i to the Bradley-Terry logistic
regression of battle i:

    logit P(a beats b) = beta_a - beta_b + gamma . Z_i

with each feature the normalised difference of the two answers, normalize((f_a - f_b) / (f_a + f_b))
(0 where both are 0; normalize: centred and scaled to unit variance over the battles), for the answer's
length, its markdown headers, list items and bold spans. beta are the style-controlled strengths,
gamma the style coefficients. The raw strengths are the same fit without Z.

Arena shows the two answers on randomised sides, so a difference's mean over the battles is about 0.
Here each judged pair is listed one way (the row's generator first, its opponent second; the judge saw
both orders), so normalize scales each difference to unit variance over both orientations of every
pair, where its mean is exactly 0: centring on the pairs as listed would turn an uneven listing into
an advantage of the first side.

Here: length in characters (the same for every tokenizer), headers are lines starting with 1-6 `#`,
list items lines starting with `-`, `*`, `+` or `1.`, bold spans `**…**` or `__…__`, all counted
outside fenced code blocks (a `# comment` in a Python block is no header), as Arena-Hard-Auto's
`add_markdown_info.py` removes them first; the length counts the whole answer. A tie is a
preference of 0.5. The fit is statsmodels' GLM (binomial, logit link; a weak ridge penalty where one
generator won or lost everything, said so), strengths centred at 0 on the log-odds scale like the
report's other Bradley-Terry table; 95% intervals from a seeded bootstrap over items.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from genjudge.judging.length_control import logit_fit

FEATURES = ("length", "headers", "lists", "bold")
N_BOOT = 200
_HEADER = re.compile(r"^\s{0,3}#{1,6}\s", re.M)
_LIST = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+\S", re.M)
_BOLD = re.compile(r"\*\*[^*\n]+\*\*|__[^_\n]+__")
# A fenced code block, as Arena-Hard-Auto finds it (```...``` with no backtick inside).
_CODE = re.compile(r"```[^`]*```")


def style(text) -> dict:
    """The style counts of one answer: markdown outside fenced code blocks, the length of all of it."""
    t = "" if text is None or (isinstance(text, float) and pd.isna(text)) else str(text).strip()
    prose = _CODE.sub("", t)
    return {
        "length": len(t),
        "headers": len(_HEADER.findall(prose)),
        "lists": len(_LIST.findall(prose)),
        "bold": len(_BOLD.findall(prose)),
    }


def style_differences(a_texts, b_texts) -> pd.DataFrame:
    """(f_a - f_b) / (f_a + f_b) per feature and pair (0 where both are 0), before normalising."""
    a = pd.DataFrame([style(t) for t in a_texts], columns=FEATURES).astype(float)
    b = pd.DataFrame([style(t) for t in b_texts], columns=FEATURES).astype(float)
    total = (a + b).to_numpy()
    diff = np.divide((a - b).to_numpy(), total, out=np.zeros_like(total), where=total > 0)
    return pd.DataFrame(diff, columns=FEATURES)


def _design(a: np.ndarray, b: np.ndarray, n_players: int, z: np.ndarray | None) -> np.ndarray:
    """+1 for a game's first player, -1 for its second (players as indices; player 0 the reference),
    then the style columns."""
    m = np.zeros((len(a), n_players))
    rows = np.arange(len(a))
    m[rows, a] += 1.0
    m[rows, b] -= 1.0
    return m[:, 1:] if z is None else np.column_stack([m[:, 1:], z])


def _normalised(diff: np.ndarray) -> tuple[np.ndarray, list[str]]:
    """Each feature scaled to unit variance over both orientations of every game (where its mean is 0:
    a game seen from b's side has the opposite difference); a feature that is always 0 is dropped.
    Centring on the games as listed would turn an uneven listing (one generator always first) into a
    bonus for the first side."""
    sd = np.sqrt((diff**2).mean(axis=0))
    keep = [i for i in range(diff.shape[1]) if sd[i] > 0]
    return diff[:, keep] / sd[keep], [FEATURES[i] for i in keep]


def separated(a, b, y, n_players: int) -> bool:
    """Whether some player won every one of its games, or lost every one (no ties): its strength has no
    finite maximum likelihood, and statsmodels does not warn of such quasi-separation."""
    own = np.concatenate([y, 1.0 - y])  # each game from both players' sides
    who = np.concatenate([a, b])
    for p in range(n_players):
        mine = own[who == p]
        if len(mine) and (np.all(mine == 1.0) or np.all(mine == 0.0)):
            return True
    return False


def fit(a, b, y, diff, players: list[str], controlled: bool) -> tuple[dict, dict, bool]:
    """(strengths centred at 0, style coefficients, penalised) of one sample of games: players' indices
    `a` and `b`, `y` a's preference, `diff` the features' raw differences (games x FEATURES)."""
    z, names = _normalised(diff) if controlled else (None, [])
    params, penalised = logit_fit(y, _design(a, b, len(players), z), separated(a, b, y, len(players)))
    k = len(players) - 1
    beta = np.concatenate([[0.0], params[:k]])
    beta -= beta.mean()
    return dict(zip(players, map(float, beta))), dict(zip(names, map(float, params[k:]))), penalised


def style_controlled(games: pd.DataFrame, n_boot: int = N_BOOT, seed: int = 0) -> dict:
    """`games`: item, a, b, y (a's preference: 1, 0.5, 0), a_text, b_text. Raw and style-controlled
    strengths with bootstrap intervals over items, and each style coefficient (with its interval); where
    nothing can be estimated, {not_estimable: why, n_games, n_items}."""
    players = sorted(set(games["a"]) | set(games["b"]))
    if len(players) < 2 or games["y"].nunique() < 2:
        why = "one generator only" if len(players) < 2 else "every judged pair had the same outcome"
        return {"not_estimable": why, "n_games": len(games), "n_items": int(games["item"].nunique())}
    index = {p: i for i, p in enumerate(players)}
    a, b = games["a"].map(index).to_numpy(), games["b"].map(index).to_numpy()
    y = games["y"].to_numpy(float)
    diff = style_differences(games["a_text"], games["b_text"]).to_numpy()
    raw, _, raw_pen = fit(a, b, y, diff, players, controlled=False)
    ctl, gamma, ctl_pen = fit(a, b, y, diff, players, controlled=True)
    rows = list(games.groupby("item", sort=False).indices.values())
    rng = np.random.default_rng(seed)
    draws = {"raw": {p: [] for p in players}, "controlled": {p: [] for p in players}, "gamma": {f: [] for f in gamma}}
    for _ in range(n_boot if len(rows) > 1 else 0):
        idx = np.concatenate([rows[i] for i in rng.integers(0, len(rows), len(rows))])
        if len(np.unique(y[idx])) < 2 or len(set(a[idx]) | set(b[idx])) < len(players):
            continue
        r, _, _ = fit(a[idx], b[idx], y[idx], diff[idx], players, controlled=False)
        c, gm, _ = fit(a[idx], b[idx], y[idx], diff[idx], players, controlled=True)
        for p in players:
            draws["raw"][p].append(r[p])
            draws["controlled"][p].append(c[p])
        for f in gamma:
            draws["gamma"][f].append(gm.get(f, 0.0))

    def ci(xs):
        return [float(x) for x in np.percentile(xs, [2.5, 97.5])] if len(xs) >= 2 else None

    return {
        "strengths": {
            p: {
                "raw": raw[p],
                "raw_ci95": ci(draws["raw"][p]),
                "controlled": ctl[p],
                "controlled_ci95": ci(draws["controlled"][p]),
            }
            for p in players
        },
        "coefficients": {f: {"value": v, "ci95": ci(draws["gamma"][f])} for f, v in gamma.items()},
        "n_games": len(games),
        "n_items": len(rows),
        "penalised": bool(raw_pen or ctl_pen),
    }


NOTE = (
    "Style control (Chatbot Arena, Li, Angelopoulos and Chiang 2024): Bradley-Terry as a logistic regression with "
    "each pair's style differences as covariates: normalize((f_a - f_b) / (f_a + f_b)) for the answers' length "
    "(characters), markdown headers, list items and bold spans (outside fenced code blocks), normalize scaling to "
    "unit variance over both "
    "orientations of every pair. "
    "Strengths on the log-odds scale, centred at 0; raw: the same fit without the covariates. A style coefficient is "
    "the change in log-odds of winning per standard deviation of that difference (positive: the judge prefers more "
    "of it). Ties count half; 95% intervals: seeded bootstrap over items. (ridge): a generator won or lost every "
    "one of its pairs, so its strength has no finite estimate; a weak ridge penalty keeps it finite."
)


def _interval(ci) -> str:
    return f" [{ci[0]:+.2f}, {ci[1]:+.2f}]" if ci else ""


def table_rows(sc: dict) -> tuple[list[str], list[list[str]]]:
    """`sc`: {judge: {dataset: result}}; strengths raw beside controlled, one row per generator."""
    head = ["judge", "dataset", "generator", "raw strength", "style-controlled strength", "change"]
    rows = []
    for judge, by_ds in sc.items():
        for dataset, r in by_ds.items():
            if r.get("not_estimable"):
                rows.append(
                    [judge, dataset, "–", f"not estimable: {r['not_estimable']} ({r['n_games']} pairs)", "", ""]
                )
                continue
            ridge = " (ridge)" if r.get("penalised") else ""
            for p, v in sorted(r["strengths"].items(), key=lambda kv: -kv[1]["controlled"]):
                rows.append(
                    [
                        judge,
                        dataset,
                        p,
                        f"{v['raw']:+.2f}{_interval(v['raw_ci95'])}{ridge}",
                        f"{v['controlled']:+.2f}{_interval(v['controlled_ci95'])}{ridge}",
                        f"{v['controlled'] - v['raw']:+.2f}",
                    ]
                )
    return head, rows


def coefficient_rows(sc: dict) -> tuple[list[str], list[list[str]]]:
    head = ["judge", "dataset", *FEATURES]
    rows = []
    for judge, by_ds in sc.items():
        for dataset, r in by_ds.items():
            if r.get("not_estimable"):
                continue
            c = r["coefficients"]
            rows.append(
                [
                    judge,
                    dataset,
                    *[f"{c[f]['value']:+.2f}{_interval(c[f]['ci95'])}" if f in c else "–" for f in FEATURES],
                ]
            )
    return head, rows
