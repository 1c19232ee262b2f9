"""Parse stored judge outputs into one judgment per item; no model is loaded here."""

from __future__ import annotations

import pandas as pd

from genjudge import atomic
from genjudge.judging.textnorm import exact_match
from genjudge.judging.verdicts import MODES, compile_pattern, parse_verdict

# Pairwise verdicts from the candidate's side: order 0 shows it as A, order 1 as B.
PAIR_OUTCOME = {0: {"a": "win", "b": "loss", "tie": "tie"}, 1: {"a": "loss", "b": "win", "tie": "tie"}}


def _first(raw: pd.DataFrame, order: int) -> pd.DataFrame:
    return raw[raw["order"] == order].set_index("id")


def parse_judgments(gens: pd.DataFrame, raw: pd.DataFrame, mode: str, pattern: str | None = None) -> pd.DataFrame:
    default_pattern, labels, marker = MODES[mode]
    rx = compile_pattern(pattern or default_pattern)
    df = gens.copy()
    df["exact_match"] = [exact_match(c, r) for c, r in zip(df["output"], df["reference"])]
    first = _first(raw, 0).reindex(df["id"])
    if first["decided_by"].isna().any():
        missing = df["id"][first["decided_by"].isna().to_numpy()].tolist()
        raise ValueError(f"judge outputs missing for {len(missing)} item(s), e.g. {missing[:5]}")
    df["decided_by"] = first["decided_by"].to_numpy()
    df["judge_output"] = first["judge_output"].to_numpy()
    df["p_correct"] = first["p_correct"].to_numpy()

    def parse(text):
        return parse_verdict(text, rx, labels, marker)

    if mode == "pairwise":
        second = _first(raw, 1).reindex(df["id"])
        df["judge_output_swapped"] = second["judge_output"].to_numpy()
        verdicts, reasons, o0s, o1s, consistent = [], [], [], [], []
        for t0, t1 in zip(df["judge_output"], df["judge_output_swapped"]):
            p0, p1 = parse(t0), parse(t1)
            o0 = PAIR_OUTCOME[0].get(p0.verdict) if p0.verdict else None
            o1 = PAIR_OUTCOME[1].get(p1.verdict) if p1.verdict else None
            o0s.append(o0)
            o1s.append(o1)
            if o0 is None or o1 is None:
                verdicts.append(None)
                reasons.append("; ".join(f"order {i}: {p.reason}" for i, p in enumerate((p0, p1)) if p.reason))
                consistent.append(None)
            else:
                # A verdict that flips with the order is position bias, not a preference: a tie.
                consistent.append(o0 == o1)
                verdicts.append(o0 if o0 == o1 else "tie")
                reasons.append(None)
        df["verdict"], df["unparsed_reason"] = verdicts, reasons
        df["outcome_order0"], df["outcome_order1"], df["position_consistent"] = o0s, o1s, consistent
        return df

    parsed = [None if d == "rule" else parse(t) for d, t in zip(df["decided_by"], df["judge_output"])]
    df["verdict"] = ["correct" if p is None else p.verdict for p in parsed]
    df["unparsed_reason"] = [None if p is None else p.reason for p in parsed]
    df["n_verdict_markers"] = [0 if p is None else p.n_markers for p in parsed]
    if mode == "score":
        df["score"] = pd.to_numeric(df["verdict"], errors="coerce")
    return df


def run_parse(generations_path, raw_path, out_path, mode: str, pattern: str | None) -> pd.DataFrame:
    df = parse_judgments(pd.read_parquet(generations_path), pd.read_parquet(raw_path), mode, pattern)
    atomic.write_parquet(out_path, df)
    return df
