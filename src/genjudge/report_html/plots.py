"""The report's figures, drawn with matplotlib (Agg, no display) and returned as PNG bytes.

Every function takes plain data (summary dicts, small frames, a Timeline) and returns a Figure,
or None when there is nothing to draw.
"""

from __future__ import annotations

import io
import textwrap

import numpy as np
import pandas as pd
from matplotlib import colormaps
from matplotlib.figure import Figure
from matplotlib.ticker import PercentFormatter

DPI = 110
WIDTH = 9.5  # inches: about 1,050 pixels
# Paul Tol's colour-blind safe colours, without grey (grey is "the rest of the job" on the timeline).
PALETTE = [
    "#4477aa",
    "#ee6677",
    "#228833",
    "#ccbb44",
    "#66ccee",
    "#aa3377",
    "#332288",
    "#ee7733",
    "#882255",
    "#44aa99",
    "#999933",
    "#dd7788",
]
CRITICAL = "#111111"  # outline of the jobs on the critical path
OUTCOME_COLOURS = {"win": "#228833", "tie": "#bbbbbb", "loss": "#ee6677"}
# The judge's point with its interval, the same in every chart.
JUDGE_POINT = {"fmt": "o", "color": PALETTE[0], "ms": 7, "capsize": 4, "lw": 2, "label": "judge"}


def png(fig: Figure) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI, bbox_inches="tight", facecolor="white")
    return buf.getvalue()


def _figure(height: float, width: float = WIDTH) -> Figure:
    fig = Figure(figsize=(width, max(1.6, height)), dpi=DPI, layout="constrained")
    fig.set_facecolor("white")
    return fig


def _wrap(text: str, width: int = 38) -> str:
    return "\n".join(textwrap.wrap(str(text), width)) or str(text)


def is_mean(v: dict) -> bool:
    return v.get("kind") == "mean"


def _nonneg(x):
    """Interval half-widths for errorbar, which refuses a negative one (a bound rounded past its value)."""
    return np.clip(x, 0, None)


def _interval(v: dict, scale: float) -> tuple[float, float, float] | None:
    if not isinstance(v, dict) or v.get("value") is None:
        return None
    lo, hi = v.get("ci95") or (v["value"], v["value"])
    # Rounding can put a bound a hair past the value (a rate of 1.0 with its upper bound 0.9999...).
    return v["value"] * scale, max(0.0, v["value"] - lo) * scale, max(0.0, hi - v["value"]) * scale


def row_labels(rows: list[dict]) -> list[str]:
    """Each leaderboard row's label from the parts that differ between rows (the generator at least)."""
    parts = ["generator", "opponent", "dataset", "judge"]
    varying = [p for p in parts if len({r.get(p) for r in rows}) > 1] or ["generator"]
    if "opponent" not in varying and any(r.get("opponent") for r in rows):
        varying.insert(1, "opponent")
    if "generator" not in varying:
        varying.insert(0, "generator")
    out = []
    for r in rows:
        bits = []
        for p in varying:
            if p == "opponent":
                if r.get("opponent"):
                    bits[-1] = f"{bits[-1]} vs {r['opponent']}" if bits else f"vs {r['opponent']}"
            else:
                bits.append(str(r.get(p)))
        out.append(" · ".join(bits))
    return out


def _panel(ax, rows: list[dict], m: str, y, overlay_exact_match: bool) -> bool:
    """One measure of every row as a point with its interval; True when exact match was drawn beside it."""
    vals = [r.get(m) if isinstance(r.get(m), dict) else None for r in rows]
    mean = any(v and is_mean(v) for v in vals)
    scale = 1 if mean else 100
    offset = 0.0
    if overlay_exact_match and not mean:
        em = [_interval(r.get("exact_match") or {}, 100) for r in rows]
        if any(em):
            offset = 0.14
            e = [(yy, x) for yy, x in zip(y, em) if x]
            ax.errorbar(
                [x[0] for _, x in e],
                [yy - offset for yy, _ in e],
                xerr=[[x[1] for _, x in e], [x[2] for _, x in e]],
                fmt="D",
                mfc="white",
                color="#666666",
                ms=6,
                capsize=3,
                lw=1.2,
                label="exact match",
            )
    pts = [(yy, iv) for yy, v in zip(y, vals) if (iv := _interval(v or {}, scale))]
    if pts:
        ax.errorbar(
            [p[1][0] for p in pts],
            [p[0] + offset for p in pts],
            xerr=[[p[1][1] for p in pts], [p[1][2] for p in pts]],
            **JUDGE_POINT,
        )
        for yy, iv in pts:
            ax.annotate(
                f"{iv[0]:.2f}" if mean else f"{iv[0]:.1f}%",
                (iv[0], yy + offset),
                xytext=(0, 7),
                textcoords="offset points",
                ha="center",
                fontsize=8,
            )
    if not mean:
        ax.set_xlim(-2, 102)
    ax.set_title(m.replace("_", " ") + (" (mean, 95% CI)" if mean else " (%, 95% CI)"), fontsize=10)
    ax.grid(axis="x", alpha=0.3)
    ax.set_ylim(-0.7, len(rows) - 0.3)
    return bool(offset)


def leaderboard(rows: list[dict], measures: list[str], overlay_exact_match) -> Figure | None:
    """Per judging mode, one panel per measure: each row's value with its 95% interval; normalised exact
    match beside the first rate where `overlay_exact_match(mode)`."""
    if not rows or not measures:
        return None
    groups: dict[str, list[dict]] = {}
    for r in rows:
        groups.setdefault(r.get("mode") or "", []).append(r)
    plan = []
    for mode, group in groups.items():
        own = [m for m in measures if any(isinstance(r.get(m), dict) for r in group)]
        if own:
            ncols = min(len(own), 4)
            nrows = -(-len(own) // ncols)
            plan.append((mode, group, own, ncols, nrows, nrows * (0.42 * len(group) + 1.0)))
    if not plan:
        return None
    fig = _figure(sum(p[-1] for p in plan) + 0.3 * len(plan) + 0.3)
    subs = fig.subfigures(len(plan), 1, height_ratios=[p[-1] for p in plan], squeeze=False).ravel()
    em_drawn = None
    for sub, (mode, group, own, ncols, nrows, _) in zip(subs, plan):
        axes = np.atleast_1d(sub.subplots(nrows, ncols, sharey=True, squeeze=False)).ravel()
        y = np.arange(len(group))[::-1]
        overlay = overlay_exact_match(mode)
        for ax, m in zip(axes, own):
            if _panel(ax, group, m, y, overlay):
                overlay, em_drawn = False, ax  # beside the first rate only
        axes[0].set_yticks(y, row_labels(group), fontsize=9)
        for ax in axes[len(own) :]:
            ax.set_visible(False)
        if len(plan) > 1:
            judges = sorted({str(r.get("judge")) for r in group})
            sub.suptitle(f"mode {mode} · judge {', '.join(judges)}", fontsize=10, fontweight="bold")
    if em_drawn is not None:
        fig.legend(*em_drawn.get_legend_handles_labels(), loc="outside lower center", ncols=2, fontsize=8)
    return fig


def category_heatmap(frame: pd.DataFrame, vranges: dict) -> Figure | None:
    """Generator (or generator vs opponent) × category, one panel per (judge, dataset), each with its
    own measure and colour scale; frame columns: generator, opponent, dataset, judge, category, measure,
    mean, value, n. `vranges`: judge -> (low, high) of mean measures (the score range)."""
    if frame.empty:
        return None
    frame = frame.assign(row=[g + (f" vs {o}" if o else "") for g, o in zip(frame["generator"], frame["opponent"])])
    facets = list(frame.groupby(["judge", "dataset"], sort=True))
    cats = max(g["category"].nunique() for _, g in facets)
    heights = [0.42 * g["row"].nunique() + 1.0 for _, g in facets]
    fig = _figure(sum(heights) + 0.2, width=min(WIDTH, 3.6 + 1.1 * cats))
    axes = np.atleast_1d(fig.subplots(len(facets), 1, squeeze=False, height_ratios=heights)).ravel()
    for ax, ((judge, dataset), g) in zip(axes, facets):
        measure, mean = g["measure"].iloc[0], bool(g["mean"].iloc[0])
        lo, hi = vranges.get(judge) or (g["value"].min(), g["value"].max()) if mean else (0.0, 1.0)
        table = g.pivot_table(index="row", columns="category", values="value", aggfunc="first", sort=True)
        counts = g.pivot_table(index="row", columns="category", values="n", aggfunc="first", sort=True)
        im = ax.imshow(table.to_numpy(dtype=float), cmap="RdYlGn", vmin=lo, vmax=hi, aspect="auto")
        ax.set_xticks(range(table.shape[1]), table.columns, fontsize=9, rotation=30 if table.shape[1] > 6 else 0)
        ax.set_yticks(range(table.shape[0]), table.index, fontsize=9)
        for (i, j), v in np.ndenumerate(table.to_numpy(dtype=float)):
            if np.isnan(v):
                continue
            n = counts.iat[i, j]
            text = f"{v:.2f}" if mean else f"{100 * v:.0f}%"
            ax.text(j, i, f"{text}\nn={int(n)}" if pd.notna(n) else text, ha="center", va="center", fontsize=8)
        ax.set_title(f"{measure.replace('_', ' ')} · dataset {dataset} · judge {judge}", fontsize=10)
        fig.colorbar(im, ax=ax, shrink=0.9, format=None if mean else PercentFormatter(1.0, decimals=0))
    return fig


def category_intervals(frame: pd.DataFrame) -> Figure | None:
    """One generator: each category's value with its interval, exact match beside it (rates); one panel
    per (generator, dataset, judge[, opponent]), each with its own measure."""
    if frame.empty:
        return None
    facets = list(frame.groupby(["generator", "dataset", "judge", "opponent"], dropna=False, sort=True))
    cats = max(len(g) for _, g in facets)
    fig = _figure(len(facets) * (0.42 * cats + 1.0) + 0.3)
    axes = np.atleast_1d(fig.subplots(len(facets), 1, squeeze=False)).ravel()
    for ax, ((gen, dataset, judge, opponent), g) in zip(axes, facets):
        g = g.sort_values("category")
        measure, mean = g["measure"].iloc[0], bool(g["mean"].iloc[0])
        scale = 1 if mean else 100
        y = np.arange(len(g))[::-1]
        has_em = not mean and "em_value" in g and g["em_value"].notna().any()
        off = 0.14 if has_em else 0.0
        if has_em:
            ax.errorbar(
                g["em_value"] * 100,
                y - off,
                xerr=[_nonneg(g["em_value"] - g["em_low"]) * 100, _nonneg(g["em_high"] - g["em_value"]) * 100],
                fmt="D",
                mfc="white",
                color="#666666",
                capsize=3,
                label="exact match",
            )
        ok = g["value"].notna()
        ax.errorbar(
            g["value"][ok] * scale,
            y[ok.to_numpy()] + off,
            xerr=[_nonneg(g["value"] - g["low"])[ok] * scale, _nonneg(g["high"] - g["value"])[ok] * scale],
            **JUDGE_POINT,
        )
        ax.set_yticks(y, [f"{c} (n={n})" for c, n in zip(g["category"], g["n"])], fontsize=9)
        if not mean:
            ax.set_xlim(-2, 102)
        ax.grid(axis="x", alpha=0.3)
        vs = f" vs {opponent}" if isinstance(opponent, str) and opponent else ""
        ax.set_title(
            f"{measure.replace('_', ' ')}{'' if mean else ' (%)'} by category · {gen}{vs} · {dataset} · {judge}",
            fontsize=10,
        )
    handles = axes[0].get_legend_handles_labels()
    if len(handles[0]) > 1:
        fig.legend(*handles, loc="outside lower center", ncols=2, fontsize=8)
    return fig


def turns(per: list[dict]) -> Figure | None:
    """Each cell's measure per turn with its 95% interval; one panel per measure. `per`: {cell, turn,
    measure, value, ci95, kind} (a measure of summary.json with its cell and turn)."""
    per = [p for p in per if p.get("value") is not None]
    if not per:
        return None
    frame = pd.DataFrame(per)
    facets = list(frame.groupby("measure", sort=True))
    heights = [0.38 * len(g) + 1.0 for _, g in facets]
    fig = _figure(sum(heights) + 0.3)
    axes = np.atleast_1d(fig.subplots(len(facets), 1, squeeze=False, height_ratios=heights)).ravel()
    for ax, (measure, g) in zip(axes, facets):
        mean = is_mean(g.iloc[0].to_dict())
        scale = 1 if mean else 100
        y = np.arange(len(g))[::-1]
        points = [_interval(r, scale) for r in g.to_dict("records")]
        ax.errorbar([p[0] for p in points], y, xerr=[[p[1] for p in points], [p[2] for p in points]], **JUDGE_POINT)
        ax.set_yticks(y, [f"{_wrap(c, 44)} · turn {t}" for c, t in zip(g["cell"], g["turn"])], fontsize=9)
        if not mean:
            ax.set_xlim(-2, 102)
        ax.grid(axis="x", alpha=0.3)
        ax.set_title(f"{measure.replace('_', ' ')}{'' if mean else ' (%)'} by turn", fontsize=10)
    return fig


def score_distributions(dists: list[tuple[str, dict]], score_range: tuple | None) -> Figure | None:
    """Counts of each score, one panel per cell (label, {score: count})."""
    dists = [(k, d) for k, d in dists if d]
    if not dists:
        return None
    ncols = 2 if len(dists) > 1 else 1
    nrows = -(-len(dists) // ncols)
    fig = _figure(2.4 * nrows + 0.3)
    axes = np.atleast_1d(fig.subplots(nrows, ncols, squeeze=False, sharex=True)).ravel()
    for ax, (label, d) in zip(axes, dists):
        xs = [float(k) for k in d]
        ax.bar(xs, list(d.values()), width=0.8 if all(x.is_integer() for x in xs) else 0.4, color=PALETTE[0])
        if score_range:
            ax.set_xlim(score_range[0] - 0.7, score_range[1] + 0.7)
            ax.set_xticks(range(int(score_range[0]), int(score_range[1]) + 1))
        ax.set_title(label, fontsize=10)
        ax.set_ylabel("items", fontsize=9)
        ax.grid(axis="y", alpha=0.3)
    for ax in axes[len(dists) :]:
        ax.set_visible(False)
    axes[min(len(dists), len(axes)) - 1].set_xlabel("score", fontsize=9)
    return fig


def outcomes(rows: list[tuple[str, dict]]) -> Figure | None:
    """Win / tie / loss shares as stacked bars, one per (candidate vs opponent, dataset, judge)."""
    rows = [(k, r) for k, r in rows if all(isinstance(r.get(o), dict) for o in OUTCOME_COLOURS)]
    if not rows:
        return None
    fig = _figure(0.5 * len(rows) + 1.2)
    ax = fig.subplots()
    y = np.arange(len(rows))[::-1]
    left = np.zeros(len(rows))
    for o, colour in OUTCOME_COLOURS.items():
        vals = np.array([100 * (r[o]["value"] or 0.0) for _, r in rows])
        ax.barh(y, vals, left=left, color=colour, label=o, edgecolor="white")
        for yy, lft, v in zip(y, left, vals):
            if v >= 6:
                ax.text(lft + v / 2, yy, f"{v:.0f}%", ha="center", va="center", fontsize=8)
        left += vals
    ax.set_yticks(y, [k for k, _ in rows], fontsize=9)
    ax.set_xlim(0, 100)
    ax.set_xlabel("% of parsed pairs (a verdict that flips with the order counts as a tie)", fontsize=9)
    fig.legend(*ax.get_legend_handles_labels(), loc="outside lower center", ncols=3, fontsize=8)
    return fig


def strengths(per: list[tuple[str, dict]]) -> Figure | None:
    """Bradley-Terry strengths with intervals, one panel per (judge, dataset)."""
    if not per:
        return None
    fig = _figure(sum(0.4 * len(s) + 1.0 for _, s in per))
    axes = np.atleast_1d(fig.subplots(len(per), 1, squeeze=False)).ravel()
    for ax, (title, s) in zip(axes, per):
        items = sorted(s.items(), key=lambda kv: kv[1]["strength"])
        y = np.arange(len(items))
        v = np.array([x["strength"] for _, x in items])
        lo = np.array([x["ci95"][0] for _, x in items])
        hi = np.array([x["ci95"][1] for _, x in items])
        ax.errorbar(v, y, xerr=[_nonneg(v - lo), _nonneg(hi - v)], fmt="o", color=PALETTE[0], capsize=4, lw=2)
        ax.axvline(0, color="#999999", lw=0.8)
        ax.set_yticks(y, [k for k, _ in items], fontsize=9)
        ax.set_title(title, fontsize=10)
        ax.grid(axis="x", alpha=0.3)
    axes[-1].set_xlabel("strength (log scale, centred at 0; 95% bootstrap interval)", fontsize=9)
    return fig


def confusions(mats: list[tuple[str, pd.DataFrame]], xlabel: str = "exact match") -> Figure | None:
    """Count matrices (judge verdict × another reading), one panel per cell."""
    mats = [(k, m) for k, m in mats if m.size]
    if not mats:
        return None
    ncols = min(len(mats), 3)
    nrows = -(-len(mats) // ncols)
    rows_max = max(m.shape[0] for _, m in mats)
    fig = _figure(nrows * (0.45 * rows_max + 1.4), width=min(WIDTH, 3.4 * ncols + 0.6))
    axes = np.atleast_1d(fig.subplots(nrows, ncols, squeeze=False)).ravel()
    for ax, (label, m) in zip(axes, mats):
        a = m.to_numpy(dtype=float)
        ax.imshow(a, cmap="Blues", vmin=0, vmax=max(a.max(), 1), aspect="auto")
        for (i, j), v in np.ndenumerate(a):
            ax.text(
                j, i, f"{int(v)}", ha="center", va="center", fontsize=9, color="white" if v > a.max() * 0.6 else "black"
            )
        ax.set_xticks(range(m.shape[1]), m.columns, fontsize=8)
        ax.set_yticks(range(m.shape[0]), m.index, fontsize=8)
        ax.set_xlabel(xlabel, fontsize=9)
        ax.set_ylabel("judge verdict", fontsize=9)
        ax.set_title(_wrap(label, 44), fontsize=9)
    for ax in axes[len(mats) :]:
        ax.set_visible(False)
    return fig


def reasons(counts: dict) -> Figure | None:
    """How many verdicts went unparsed, by reason."""
    if not counts:
        return None
    items = sorted(counts.items(), key=lambda kv: kv[1])[-12:]
    fig = _figure(0.5 * len(items) + 1.0)
    ax = fig.subplots()
    y = np.arange(len(items))
    ax.barh(y, [v for _, v in items], color=[PALETTE[1] if k.startswith("truncated") else PALETTE[3] for k, _ in items])
    ax.set_yticks(y, [_wrap(k, 60) for k, _ in items], fontsize=8)
    for yy, (_, v) in zip(y, items):
        ax.text(v, yy, f" {v}", va="center", fontsize=8)
    ax.set_xlabel("verdicts", fontsize=9)
    ax.margins(x=0.12)
    return fig


def models_by_benchmarks(table: dict) -> Figure | None:
    """The report's models x benchmarks table (summary.json's `table`, stages.report_table) as a heat map: one row per
    generator, one column per (dataset, judge) and the mean rank; each cell shows its value and
    interval, coloured by the generator's rank in its column (green best, red worst), since the
    columns' measures have scales of their own."""
    from genjudge.judging.headline import value_text
    from genjudge.judging.tables import columns_text

    cols, rows = table.get("columns") or [], table.get("rows") or []
    if not cols or not rows:
        return None
    n = len(rows)
    shade = np.full((n, len(cols) + 1), np.nan)
    texts = [[""] * (len(cols) + 1) for _ in rows]
    for i, r in enumerate(rows):
        for j, c in enumerate(cols):
            v = r["values"][c["key"]]
            ranked = sum(x["values"][c["key"]]["rank"] is not None for x in rows)
            if v["rank"] is not None:
                shade[i, j] = (ranked - v["rank"]) / (ranked - 1) if ranked > 1 else 0.5
            text = value_text(v, c["kind"])
            texts[i][j] = text.replace(" [", "\n[") if v["status"] == "ok" else text
        if r["mean_rank"] is not None:
            shade[i, -1] = (n - r["mean_rank"]) / (n - 1) if n > 1 else 0.5
            texts[i][-1] = f"{r['mean_rank']:.2f}\n({columns_text(r['n_ranked'])})"
    fig = _figure(0.62 * n + 1.4, width=min(WIDTH, 2.6 + 1.75 * (len(cols) + 1)))
    ax = fig.subplots()
    cmap = colormaps["RdYlGn"].with_extremes(bad="#eeeeee")
    # Past 0 and 1 on both sides: the colours stay light enough for the text on them.
    ax.imshow(np.ma.masked_invalid(shade), cmap=cmap, vmin=-0.35, vmax=1.35, aspect="auto")
    ax.axvline(len(cols) - 0.5, color="white", lw=4)
    for (i, j), text in np.ndenumerate(np.array(texts, dtype=object)):
        ax.text(j, i, text, ha="center", va="center", fontsize=8)
    labels = [f"{c['dataset']}\n{c['judge']}\n({(c['measure'] or '-').replace('_', ' ')})" for c in cols]
    ax.set_xticks(range(len(cols) + 1), [*labels, "mean rank"], fontsize=8)
    ax.set_yticks(range(n), [r["generator"] for r in rows], fontsize=9)
    ax.xaxis.tick_top()
    ax.set_title("models × benchmarks: value [95% CI], coloured by rank within each column", fontsize=10)
    return fig
