"""score: a rubric grade from 1 to 10; the mean with a 95% interval and the distribution."""

from __future__ import annotations

import pandas as pd

from genjudge.judging.modes.base import JudgeMode, mean_of, register


class Score(JudgeMode):
    name = "score"
    pattern = r"SCORE:\s*\**\s*(10|[1-9])\b"
    labels: dict[str, str] = {}  # the captured number is the verdict
    marker = "SCORE"
    report_columns = ("score",)

    def parse(self, df, raw, pattern):
        df = super().parse(df, raw, pattern)
        df["score"] = pd.to_numeric(df["verdict"], errors="coerce")
        return df

    def metrics(self, g: pd.DataFrame) -> dict:
        parsed = g[g["verdict"].notna()]
        return {"mean_score": mean_of(parsed["score"]),
                "score_counts": {str(int(k)): int(v) for k, v in parsed["score"].value_counts().sort_index().items()}}

    def headline(self, s: dict) -> list[tuple[str, str]]:
        m = s["mean_score"]
        ci = f" [{m['ci95'][0]:.2f}, {m['ci95'][1]:.2f}]" if m["ci95"] else ""
        value = "n/a" if m["value"] is None else f"{m['value']:.2f}"
        return [("mean score (1-10)", f"{value}{ci}")]

    def leaderboard(self, s: dict) -> dict:
        return {"mean_score": s["mean_score"]}

    def category_column(self):
        return "mean score", lambda c: ("n/a" if c["mean_score"]["value"] is None
                                        else f"{c['mean_score']['value']:.2f}")


register(Score())
