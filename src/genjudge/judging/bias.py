"""Bias diagnostics of a judge over its stored judgments (no model is loaded).

- Pairwise: the flip rate when the answers swap places, the first position's win rate over
  every single judgment, and P(prefer longer): the share of decided pairs the longer answer won.
- Score and reference modes: the correlation of the score (reference: correct 1, partial 0.5,
  incorrect 0) with the answer's length.
- Self-preference: a warning when the judge is one of the generators, or of the same family
  (the same `model_type` in config.json and the same leading word of the model's name).

Lengths are counted in characters of the answer with surrounding whitespace stripped
(`LENGTH_MEASURE`), the same for every tokenizer.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pandas as pd

from genjudge.judging import agreement

LENGTH_MEASURE = "characters of the answer, surrounding whitespace stripped"
VERDICT_VALUE = {"correct": 1.0, "partial": 0.5, "incorrect": 0.0}


def answer_length(text) -> int:
    return 0 if text is None or (isinstance(text, float) and pd.isna(text)) else len(str(text).strip())


def pairwise_bias(df: pd.DataFrame) -> dict:
    """Flip rate, first-position win rate and P(prefer longer) over one judge's pairwise rows."""
    o0 = [None if pd.isna(v) else v for v in df["outcome_order0"]]
    o1 = [None if pd.isna(v) else v for v in df["outcome_order1"]]
    out = {
        "flip_rate": agreement.flip_rate(o0, o1),
        "first_position_win_rate": agreement.first_position_win_rate(o0, o1),
        "length_measure": LENGTH_MEASURE,
    }
    if "opponent_output" in df and df["opponent_output"].notna().any():
        out["prefer_longer"] = agreement.prefer_longer(
            list(df["verdict"]),
            [answer_length(t) for t in df["output"]],
            [answer_length(t) for t in df["opponent_output"]],
        )
    return out


def length_correlation(df: pd.DataFrame, mode) -> dict | None:
    """Correlation of the parsed verdict's value with the answer's length (None for modes whose
    verdicts have no order)."""
    parsed = df[df["verdict"].notna()]
    if "score" in parsed:
        values = parsed["score"]
    elif set(parsed["verdict"]) <= set(VERDICT_VALUE):
        values = parsed["verdict"].map(VERDICT_VALUE)
    else:
        return None
    corr = agreement.correlations(
        [answer_length(t) for t in parsed["output"]], values, ("the answer lengths", "the verdicts")
    )
    return {"length_correlation": corr, "length_measure": LENGTH_MEASURE}


def diagnostics(df: pd.DataFrame, mode) -> dict:
    return pairwise_bias(df) if mode.needs_baseline else (length_correlation(df, mode) or {})


# --- self-preference ----------------------------------------------------------------------------


def model_type(model: str, revision: str | None = None) -> str | None:
    """`model_type` of a checkpoint's config.json: a local directory, or the Hugging Face cache."""
    path = Path(os.path.expanduser(model)) / "config.json"
    if not path.exists():
        try:
            from huggingface_hub import try_to_load_from_cache

            hit = try_to_load_from_cache(model, "config.json", revision=revision)
        except (ImportError, ValueError):
            return None
        if not isinstance(hit, str):
            return None
        path = Path(hit)
    try:
        return json.loads(path.read_text(encoding="utf-8")).get("model_type")
    except (OSError, ValueError):
        return None


def family_word(model: str) -> str:
    """`meta-llama/Llama-3.1-8B-Instruct` -> `llama`; `Qwen/Qwen2.5-7B` -> `qwen`."""
    base = str(model).rstrip("/").split("/")[-1].lower()
    m = re.match(r"[a-z]+", base)
    return m.group(0) if m else base


def self_preference(generators: dict, judges: dict) -> list[str]:
    """Warnings for each (judge model, generator) that are the same model or the same family; judges
    sharing one model are named together."""
    by_model: dict = {}
    for jname, j in judges.items():
        by_model.setdefault((os.path.normpath(str(j["model"])), j.get("revision")), []).append(jname)
    out = []
    for (jmodel, jrev), jnames in by_model.items():
        who = f"judge{'s' if len(jnames) > 1 else ''} {', '.join(jnames)} ({jmodel})"
        jtype = model_type(jmodel, jrev)
        for gname, g in generators.items():
            gmodel = os.path.normpath(str(g["model"]))
            if jmodel == gmodel:
                out.append(f"{who}: the model of generator {gname}; judges tend to prefer their own answers")
            elif (
                jtype and jtype == model_type(gmodel, g.get("revision")) and family_word(jmodel) == family_word(gmodel)
            ):
                out.append(
                    f"{who} and generator {gname} ({gmodel}) are of one family (model_type {jtype}, name "
                    f"{family_word(jmodel)!r}): judges tend to prefer answers of their own family"
                )
    return out
