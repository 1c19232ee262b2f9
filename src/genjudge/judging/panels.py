"""Panels of judges (`panels:`): two or more judges of `judges:` and a rule combining their votes.

- `majority`: the verdict more than half of the PARSED votes agree on; otherwise a tie for
  pairwise judges and "no majority" for verdicts, counted.
- `unanimous`: every parsed vote agrees; otherwise as `majority`'s no majority.
- `mean` (score modes): the mean of the parsed scores.

An unparsed vote is never a vote: it neither counts for a verdict nor shrinks the panel
silently; each item records how many judges were parsed, and an item no judge parsed is
unparsed for the panel. Panels are computed from the judges' stored judgments when the
report is written, so a change of rule or members never runs a judge again.
"""

from __future__ import annotations

from collections import Counter

import pandas as pd

from genjudge.errors import InputError
from genjudge.judging import agreement, modes

RULES = ("majority", "unanimous", "mean")
NO_MAJORITY = "no majority"
KEYS = ["generator", "dataset", "opponent", "id", "turn", "sample"]


def resolve_panels(panels: dict, exp) -> dict:
    """name -> {judges, rule, mode} of the config's `panels` section; raises InputError naming
    `panels.<name>.<key>`."""
    out = {}
    for name, p in panels.items():
        where = f"panels.{name}"
        judges = list(p.get("judges") or [])
        rule = p.get("rule") or "majority"
        if len(judges) < 2:
            raise InputError(f"{where}.judges: a panel names two or more judges (has {judges})")
        unknown = [j for j in judges if j not in exp.judges]
        if unknown:
            raise InputError(f"{where}.judges: {unknown} not among the judges {list(exp.judges)}")
        if len(set(judges)) != len(judges):
            raise InputError(f"{where}.judges: {judges} names a judge twice")
        mode_names = {exp.judges[j]["mode"] for j in judges}
        if len(mode_names) > 1:
            raise InputError(f"{where}.judges: the judges grade in different modes {sorted(mode_names)}")
        mode = modes.get(mode_names.pop())
        if rule not in RULES:
            raise InputError(f"{where}.rule: {rule!r} is not one of {list(RULES)}")
        numeric = not mode.labels and not mode.needs_baseline
        if (rule == "mean") != numeric:
            wanted = "mean" if numeric else "majority or unanimous"
            raise InputError(f"{where}.rule: {rule!r} does not fit mode {mode.name!r}; use {wanted}")
        cells = [set(map(tuple, _cells(exp, j))) for j in judges]
        if any(c != cells[0] for c in cells[1:]):
            raise InputError(f"{where}.judges: the judges do not grade the same generators, datasets and pairs")
        out[name] = {"judges": judges, "rule": rule, "mode": mode.name}
        if rule == "mean":  # the panel's mean score lies within its judges' ranges
            ranges = [exp.judges[j].get("score_range") for j in judges]
            if all(ranges):
                out[name]["score_range"] = [min(r[0] for r in ranges), max(r[1] for r in ranges)]
    return out


def _cells(exp, judge):
    return [(c.generator, c.dataset, c.opponent) for c in exp.cells(judge)]


def combine(votes: list, rule: str, pairwise: bool) -> tuple:
    """The panel's verdict from the votes (None entries are unparsed and dropped).
    Returns (verdict or None, reason when None, whether the rule was met)."""
    parsed = [v for v in votes if v is not None]
    if not parsed:
        return None, "no judge of the panel parsed", False
    if rule == "mean":
        return f"{sum(float(v) for v in parsed) / len(parsed):g}", None, True
    top, n = Counter(parsed).most_common(1)[0]
    if (n == len(parsed)) if rule == "unanimous" else (2 * n > len(parsed)):
        return top, None, True
    return ("tie", None, False) if pairwise else (None, NO_MAJORITY, False)


def _with_turn(df: pd.DataFrame) -> pd.DataFrame:
    """A copy with `turn` and `sample` columns (judgments parsed before conversations had turns, or
    before samples: all turn 1, sample 0)."""
    df = df.copy() if "turn" in df else df.assign(turn=1)
    return df if "sample" in df else df.assign(sample=0)


def panel_judgments(panel: dict, judgments: dict) -> pd.DataFrame:
    """One row per (cell, item): the first member's item columns, each member's vote, the number
    of parsed votes, and the panel's verdict (unparsed_reason says why there is none)."""
    mode = modes.get(panel["mode"])
    first = _with_turn(judgments[panel["judges"][0]])
    first["opponent"] = first["opponent"].astype(object).where(first["opponent"].notna(), None)
    keep = [c for c in first.columns if c in ("category", "prompt", "reference", "output", "exact_match")]
    df = first[KEYS + keep].copy()
    for j in panel["judges"]:
        other = _with_turn(judgments[j])
        other["opponent"] = other["opponent"].astype(object).where(other["opponent"].notna(), None)
        votes = other.set_index(KEYS)["verdict"]
        df[f"vote:{j}"] = votes.reindex(pd.MultiIndex.from_frame(df[KEYS])).to_numpy()
    vote_cols = [f"vote:{j}" for j in panel["judges"]]
    rows = [[None if pd.isna(v) else v for v in r] for r in df[vote_cols].itertuples(index=False)]
    out = [combine(r, panel["rule"], mode.needs_baseline) for r in rows]
    df["n_parsed_votes"] = [sum(v is not None for v in r) for r in rows]
    df["verdict"] = pd.Series([v for v, _, _ in out], index=df.index, dtype=object)
    df["unparsed_reason"] = pd.Series([why for _, why, _ in out], index=df.index, dtype=object)
    df["no_majority"] = [n > 0 and not met for n, (_, _, met) in zip(df["n_parsed_votes"], out)]
    if panel["rule"] == "mean":
        df["score"] = pd.to_numeric(df["verdict"], errors="coerce")
    return df


def inter_judge(df: pd.DataFrame, judges: list[str]) -> dict:
    """Fleiss' kappa over the items every judge parsed, and Cohen's kappa for each pair of judges
    over the items both parsed; a kappa that is not defined is None with `<name>_undefined` saying why."""
    cols = [f"vote:{j}" for j in judges]
    full = df[df[cols].notna().all(axis=1)]
    cats, table = agreement.count_table([list(r) for r in full[cols].itertuples(index=False)])
    pairs = {}
    for i, a in enumerate(judges):
        for b in judges[i + 1 :]:
            both = df[df[f"vote:{a}"].notna() & df[f"vote:{b}"].notna()]
            pairs[f"{a} / {b}"] = {
                **agreement.kappa_fields(
                    "cohen_kappa", agreement.cohen_kappa(list(both[f"vote:{a}"]), list(both[f"vote:{b}"]))
                ),
                "n": len(both),
            }
    return {
        **agreement.kappa_fields("fleiss_kappa", agreement.fleiss_kappa(table, cats)),
        "n_all_parsed": len(full),
        "pairs": pairs,
    }


def panel_summary(panel: dict, df: pd.DataFrame) -> dict:
    """The panel's measures: the mode's own over its verdicts (over all its cells, and per cell), votes
    parsed per item, no-majority count and inter-judge agreement."""
    mode = modes.get(panel["mode"])
    parsed_counts = Counter(df["n_parsed_votes"])
    out = {
        "judges": panel["judges"],
        "rule": panel["rule"],
        "mode": panel["mode"],
        "n_items": len(df),
        "n_decided": int(df["verdict"].notna().sum()),
        "no_majority": int(df["no_majority"].sum()),
        "no_majority_is": "tie" if mode.needs_baseline else "no verdict",
        "none_parsed": int((df["n_parsed_votes"] == 0).sum()),
        "parsed_votes_per_item": {str(k): int(parsed_counts[k]) for k in sorted(parsed_counts)},
        "inter_judge": inter_judge(df, panel["judges"]),
    }
    options = {"score_range": panel["score_range"]} if "score_range" in panel else None
    out["measures"] = _mode_measures(mode, df, options)
    # Each cell's own: what a panel's figure for one generator (an export's record of it) is.
    out["cells"] = {
        f"{g}/{d}" + (f" vs {o}" if isinstance(o, str) else ""): _mode_measures(mode, cell, options)
        for (g, d, o), cell in df.groupby(["generator", "dataset", "opponent"], sort=False, dropna=False)
    }
    return out


def _mode_measures(mode, df: pd.DataFrame, options: dict | None) -> dict:
    """The mode's headline measures over the panel's verdicts (rates and means only)."""
    g = df.copy()
    for col, default in (("p_correct", None), ("position_consistent", None)):
        if col not in g:
            g[col] = default
    try:
        m = mode.measures(g, options)
    except (KeyError, AttributeError):  # a plugin mode needing columns a panel does not have
        return {}
    return {k: v for k, v in m.items() if isinstance(v, dict) and "value" in v and k != "position_consistency"}
