"""reference: question + reference answer + candidate -> CORRECT / INCORRECT (/ PARTIAL)."""

from __future__ import annotations

import pandas as pd

from genjudge.data.dataset import is_missing
from genjudge.judging.items import item_rate_where
from genjudge.judging.modes.base import JudgeMode, counts, rate_text, register


class Reference(JudgeMode):
    name = "reference"
    pattern = r"VERDICT:\s*\**\s*(CORRECT|INCORRECT|PARTIAL)\b"
    labels = {"CORRECT": "correct", "INCORRECT": "incorrect", "PARTIAL": "partial"}
    marker = "VERDICT"
    logprob_labels = ("CORRECT", "INCORRECT")
    rule_verdict = "correct"
    unfinished_verdict = "incorrect"
    needs_reference = True  # an item without a reference is "no reference", never graded against "(none)"
    paired_measure = "accuracy"
    headline_rule = (
        "the share of the answers with a parsed verdict that are correct (partial and incorrect count 0; "
        "an exact match the cascade decided counts as correct)"
    )

    def answer_value(self, verdict) -> float | None:
        return None if is_missing(verdict) else float(verdict == "correct")

    def answer_correct(self, verdict) -> bool:
        return verdict == "correct"

    def metrics(self, g: pd.DataFrame) -> dict:
        has = g["verdict"].notna().to_numpy()
        verdict = g["verdict"][has]  # the parsed verdicts
        accuracy = item_rate_where(g, has, verdict == "correct")
        out = {"accuracy": accuracy, "verdict_counts": counts(verdict)}
        p = g["p_correct"].dropna() if "p_correct" in g else []
        if len(p):
            out["mean_p_correct"] = float(p.mean())
        return out

    def summary(self, df: pd.DataFrame, metrics: dict, options: dict | None = None) -> dict:
        both = (df["verdict"].notna() & df["exact_match"].notna() & (df["decided_by"] == "judge")).to_numpy(dtype=bool)
        agree = (df["verdict"][both] == "correct") == df["exact_match"][both].astype(bool)
        return {
            "accuracy": metrics["accuracy"]["value"],
            "accuracy_ci95": metrics["accuracy"]["ci95"],
            "accuracy_rate": metrics["accuracy"],  # with n (items) and, clustered, n_answers and n_effective
            "judge_exact_match_agreement": item_rate_where(df, both, agree.astype(bool)),
            "decided_by": counts(df["decided_by"]),
            # the cascade's rule decisions, by the (strict) extraction that found the answer
            "rule_extraction": counts(df.loc[df["decided_by"] == "rule", "answer_extraction"].fillna("whole text"))
            if "answer_extraction" in df
            else {},
        }

    def headline(self, s: dict) -> list[tuple[str, str]]:
        rows = [("accuracy (judge, over parsed)", rate_text({"value": s["accuracy"], "ci95": s["accuracy_ci95"]}))]
        said = s.get("verdict_counts") or {}
        if said.get("partial"):  # the accuracy counts them as not correct: say how many there are
            rows.append(
                (
                    "verdicts (PARTIAL counts as not correct)",
                    ", ".join(f"{k} {said.get(k, 0)}" for k in ("correct", "partial", "incorrect")),
                )
            )
        if "mean_p_correct" in s:
            rows.append(("mean judge probability of CORRECT (logprob)", f"{s['mean_p_correct']:.3f}"))
        if s.get("exact_match_shown", True):
            rows.append(("judge agrees with exact match", rate_text(s["judge_exact_match_agreement"])))
        decided = ", ".join(f"{k}: {v}" for k, v in s["decided_by"].items())
        if s.get("rule_extraction"):
            decided += " (rule, by extraction: " + ", ".join(f"{k} {v}" for k, v in s["rule_extraction"].items()) + ")"
        rows.append(("decided by", decided))
        return rows

    def over_samples(self, df: pd.DataFrame) -> dict:
        from genjudge.judging.sampling_stats import reference_measures

        return reference_measures(df)

    def per_item(self, df: pd.DataFrame) -> pd.DataFrame:
        parsed = df[df["verdict"].notna()]
        g = parsed.assign(num=parsed["verdict"] == "correct").groupby("id", sort=False)
        return pd.DataFrame({"num": g["num"].sum().astype(float), "den": g.size().astype(float)})

    def category_column(self):
        return "accuracy", lambda c: rate_text(c["accuracy"])

    def leaderboard(self, s: dict) -> dict:
        if s.get("accuracy_rate"):
            return {"accuracy": s["accuracy_rate"]}
        return {"accuracy": {"value": s["accuracy"], "ci95": s["accuracy_ci95"], "n": s["n_judged"]}}


register(Reference())
