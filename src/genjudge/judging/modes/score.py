"""score: a rubric grade on a scale (default 1-10; decimals kept: FastChat's judges write [[7.5]]);
the mean with a 95% interval and the distribution. A score outside the scale is unparsed, with
the reason, never averaged in."""

from __future__ import annotations

import pandas as pd

from genjudge.judging.items import item_mean_where
from genjudge.judging.modes.base import JudgeMode, register
from genjudge.judging.verdicts import Verdict

DEFAULT_RANGE = (1, 10)


def _fmt(x: float) -> str:
    """7.0 -> '7', 7.5 -> '7.5': the distribution keeps decimals without inventing them."""
    return f"{float(x):g}"


class Score(JudgeMode):
    name = "score"
    # A full stop after the score ends the sentence (`SCORE: 8.`); `8.5` is a decimal, `8.5.1` no score.
    pattern = r"SCORE:\s*\**\s*\[{0,2}\s*(-?\d+(?:\.\d+)?)(?!\d|\.\d)"
    labels: dict[str, str] = {}  # the captured number is the verdict
    marker = "SCORE"
    paired_measure = "mean_score"
    paired_binary = False
    scored_in_range = True
    headline_rule = "the mean of the parsed scores; a score outside the range is unparsed, never averaged in"

    def parse_text(self, text, rx, custom, options=None):
        v = super().parse_text(text, rx, custom, options)
        if v.verdict is None:
            return v
        lo, hi = (options or {}).get("score_range") or DEFAULT_RANGE
        try:
            score = float(v.verdict)
        except ValueError:
            return Verdict(None, "score is not a number", v.n_markers, f"score {v.verdict!r}")
        if not lo <= score <= hi:
            return Verdict(None, f"score outside {_fmt(lo)}-{_fmt(hi)}", v.n_markers, f"score {_fmt(score)}")
        return Verdict(_fmt(score), None, v.n_markers)

    def withheld_verdict(self, options=None) -> Verdict:
        lo, _ = (options or {}).get("score_range") or DEFAULT_RANGE
        return Verdict(_fmt(lo), None, 0)  # the bottom of the scale

    def parse(self, df, raw, pattern, options=None):
        df = super().parse(df, raw, pattern, options)
        df["score"] = pd.to_numeric(df["verdict"], errors="coerce")
        return df

    def metrics(self, g: pd.DataFrame) -> dict:
        has = g["verdict"].notna().to_numpy()
        score = g["score"][has]  # of the parsed verdicts
        return {
            "mean_score": item_mean_where(g, has, score),
            "score_counts": {_fmt(k): int(v) for k, v in score.value_counts().sort_index().items()},
        }

    def measures(self, g: pd.DataFrame, options: dict | None = None) -> dict:
        """With `score_rescaled`, the mean score also on its other scale, (mean + offset) x factor, under its
        name (WildBench's WB-Score: (score - 5) x 2), the interval mapped alike (the map is increasing)."""
        out = super().measures(g, options)
        r = (options or {}).get("score_rescaled")
        m = out.get("mean_score")
        if r and isinstance(m, dict):

            def scaled(x):
                return None if x is None else (x + r["offset"]) * r["factor"]

            out[r["name"]] = {
                **m,
                "value": scaled(m.get("value")),
                "ci95": [scaled(x) for x in m["ci95"]] if m.get("ci95") else None,
                "rescaled": f"(mean score {r['offset']:+g}) x {r['factor']:g}",
            }
        return out

    def bounds(self, options):
        lo, hi = (options or {}).get("score_range") or DEFAULT_RANGE
        return {"mean_score": (float(lo), float(hi)), "mean_score_over_items": (float(lo), float(hi))}

    def headline(self, s: dict) -> list[tuple[str, str]]:
        m = s["mean_score"]
        ci = f" [{m['ci95'][0]:.2f}, {m['ci95'][1]:.2f}]" if m["ci95"] else ""
        value = "n/a" if m["value"] is None else f"{m['value']:.2f}"
        lo, hi = s.get("score_range") or DEFAULT_RANGE
        rows = [(f"mean score ({_fmt(lo)}-{_fmt(hi)})", f"{value}{ci}")]
        for name, r in s.items():  # the mean score on another scale (score_rescaled)
            if isinstance(r, dict) and r.get("rescaled") and r.get("value") is not None:
                ci = f" [{r['ci95'][0]:.2f}, {r['ci95'][1]:.2f}]" if r.get("ci95") else ""
                rows.append((f"{name.replace('_', ' ')}: {r['rescaled']}", f"{r['value']:.2f}{ci}"))
        return rows

    def summary(self, df, metrics, options=None):
        return {"score_range": list((options or {}).get("score_range") or DEFAULT_RANGE)}

    def leaderboard(self, s: dict) -> dict:
        return {"mean_score": s["mean_score"]}

    def over_samples(self, df):
        from genjudge.judging.sampling_stats import score_measures

        return score_measures(df)

    def per_item(self, df: pd.DataFrame) -> pd.DataFrame:
        scores = pd.to_numeric(df["verdict"], errors="coerce")
        g = df.assign(num=scores)[scores.notna()].groupby("id", sort=False)
        return pd.DataFrame({"num": g["num"].sum().astype(float), "den": g.size().astype(float)})

    def category_column(self):
        return "mean score", lambda c: "n/a" if c["mean_score"]["value"] is None else f"{c['mean_score']['value']:.2f}"


register(Score())
