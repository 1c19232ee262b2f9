"""The report's length- and style-controlled pairwise results, from the stored judgments (no model).

For a pairwise judge against a baseline (`pairs: baseline`): each generator's length-controlled win
rate (judging/length_control.py, AlpacaEval 2.0). Wherever generators of the run met each other (the
Bradley-Terry strengths): the strengths with style covariates beside the raw ones
(judging/style_control.py, Chatbot Arena's style control). Both go to summary.json's `across_cells`
under each judge, beside `bradley_terry`.
"""

from __future__ import annotations

import pandas as pd

from genjudge.judging import length_control, modes, style_control
from genjudge.judging.bias import answer_length
from genjudge.judging.tables import markdown_table


def _outcomes(df: pd.DataFrame) -> pd.DataFrame:
    """Judged pairs with both answers: item (id), key (id and turn: an instruction), y, delta, texts
    (none where the judgments lack the other side's answers)."""
    if "opponent_output" not in df:
        df = df.assign(opponent_output=None)
    d = df[df["verdict"].isin(list(length_control.PREFERENCE)) & df["opponent_output"].notna()]
    turns = d["turn"].astype(str) if "turn" in d else "1"
    return pd.DataFrame(
        {
            "generator": d["generator"].astype(str),
            "opponent": d["opponent"].astype(object).where(d["opponent"].notna(), None),
            "dataset": d["dataset"].astype(str),
            "item": d["id"].astype(str),
            "key": d["id"].astype(str) + "\x00" + turns,
            "y": d["verdict"].map(length_control.PREFERENCE).astype(float),
            "delta": [answer_length(a) - answer_length(b) for a, b in zip(d["output"], d["opponent_output"])],
            "a_text": d["output"].to_numpy(),
            "b_text": d["opponent_output"].to_numpy(),
        }
    )


def length_controlled(pairs: pd.DataFrame, seed: int = 0, n_boot: int = length_control.N_BOOT) -> dict:
    """{dataset: {generator: LC result}} over the pairs against the baseline."""
    out: dict = {}
    for dataset, d in pairs.groupby("dataset", sort=True):
        for gen, g in d.groupby("generator", sort=True):
            gamma = length_control.difficulty(d, gen, by="key")
            frame = g[["item", "y", "delta"]].copy()
            if len(gamma):
                frame["difficulty"] = g["key"].map(gamma).fillna(float(gamma.mean())).to_numpy()
            r = length_control.lc_win_rate(frame, n_boot=n_boot, seed=seed)
            opponents = g["opponent"].dropna().unique()
            r["baseline"] = str(opponents[0]) if len(opponents) else None
            out.setdefault(str(dataset), {})[str(gen)] = r
    return out


def style_controlled(pairs: pd.DataFrame, seed: int = 0, n_boot: int = style_control.N_BOOT) -> dict:
    """{dataset: style-controlled strengths} over the pairs of generators of the run."""
    games = pairs[pairs["opponent"].notna()]
    out = {}
    for dataset, d in games.groupby("dataset", sort=True):
        r = style_control.style_controlled(
            d.rename(columns={"generator": "a", "opponent": "b"})[["item", "a", "b", "y", "a_text", "b_text"]],
            n_boot=n_boot,
            seed=seed,
        )
        if r:
            out[str(dataset)] = r
    return out


def controlled(exp, judgments: dict, seed: int = 0, n_boot: int = length_control.N_BOOT) -> dict:
    """{judge: {length_controlled, style_controlled}} for the pairwise judges that have them; `n_boot`
    resamples of items for their intervals (config report.bootstrap; 0: point estimates alone)."""
    from genjudge.stages.validity import with_baseline_answers

    out = {}
    for judge, df in judgments.items():
        section = exp.judges[judge]
        if not modes.get(section["mode"]).needs_baseline or df.empty:
            continue
        pairs = _outcomes(with_baseline_answers(df, section))
        entry = {}
        if section["pairs"] == "baseline" and len(pairs):
            entry["length_controlled"] = length_controlled(pairs, seed, n_boot)
        if len(pairs) and pairs["opponent"].notna().any():
            sc = style_controlled(pairs, seed, n_boot)
            if sc:
                entry["style_controlled"] = sc
        if entry:
            out[judge] = entry
    return out


def markdown(across: dict) -> list[str]:
    """report.md's section: raw beside controlled, with each covariate's coefficient."""
    lc = {j: m["length_controlled"] for j, m in across.items() if m.get("length_controlled")}
    sc = {j: m["style_controlled"] for j, m in across.items() if m.get("style_controlled")}
    if not (lc or sc):
        return []
    out = ["## Length- and style-controlled comparisons", ""]
    if lc:
        out += [
            "### Length-controlled win rate",
            "",
            *markdown_table(*length_control.table_rows(lc)),
            "",
            length_control.NOTE,
            "",
        ]
    if sc:
        out += [
            "### Bradley-Terry strengths with style control",
            "",
            *markdown_table(*style_control.table_rows(sc)),
            "",
            "Style coefficients:",
            "",
            *markdown_table(*style_control.coefficient_rows(sc)),
            "",
            style_control.NOTE,
            "",
        ]
    return out
