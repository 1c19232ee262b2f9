"""The report's GPU timeline as a figure: one panel per snakemake command (a band), a lane per GPU (and
the CPU), a bar per job attempt, the critical path outlined and failed attempts marked."""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from genjudge.report_html.plots import CRITICAL, PALETTE, _figure
from genjudge.report_html.timeline import Timeline

FAILED = "#cc3311"  # a failed attempt on the timeline


def gantt(bands: list[Timeline], max_labels: int = 120) -> Figure | None:
    """One panel per snakemake command (`bands`, oldest first), each on its own time axis: one lane per
    GPU (and the CPU), a bar per job on each lane it held: load hatched, compute solid, the rest of the
    job pale, a failed attempt crossed in red; the critical path outlined; each lane's busy fraction at
    the right."""
    bands = [b for b in bands if b.bars]
    if not bands:
        return None
    stages = list(dict.fromkeys(b.job.stage for t in bands for b in t.bars))
    colour = {s: PALETTE[i % len(PALETTE)] for i, s in enumerate(stages)}
    heights = [0.55 * len(t.lanes) + (1.0 if len(bands) > 1 else 0.6) for t in bands]
    fig = _figure(sum(heights) + 1.3)
    axes = np.atleast_1d(fig.subplots(len(bands), 1, squeeze=False, height_ratios=heights)).ravel()
    for i, (ax, t) in enumerate(zip(axes, bands)):
        _gantt_panel(ax, t, colour, max_labels)
        if len(bands) > 1:
            ax.set_title(band_title(t, i, len(bands)), fontsize=10, loc="left")
    handles = [Patch(facecolor=colour[s], label=s) for s in stages]
    handles += [
        Patch(facecolor="white", edgecolor="#444444", hatch="////", label="model load"),
        Patch(facecolor="#444444", label="compute"),
        Patch(facecolor="#444444", alpha=0.3, label="rest of the job"),
        Patch(facecolor="none", edgecolor=CRITICAL, lw=2.2, label="critical path"),
    ]
    if any(t.failed for t in bands):
        handles.append(Patch(facecolor="white", edgecolor=FAILED, hatch="xx", lw=1.5, label="failed attempt"))
    fig.legend(handles=handles, fontsize=8, ncols=min(4, len(handles)), loc="outside lower center")
    return fig


def band_title(t: Timeline, i: int, n: int) -> str:
    """ "command 2 of 3 · started 2026-01-31 10:02:03 · 5 jobs, 1 failed" (local time of the report)."""
    import datetime

    when = datetime.datetime.fromtimestamp(t.command_started or t.t0).strftime("%Y-%m-%d %H:%M:%S")
    failed = f", {len(t.failed)} failed" if t.failed else ""
    return f"snakemake command {i + 1} of {n} · started {when} · {len(t.jobs)} job(s){failed}"


def _gantt_panel(ax, tl: Timeline, colour: dict, max_labels: int) -> None:
    lanes = tl.lanes
    on_path = {step["job"] for step in tl.critical_path}
    ypos = {lane: len(lanes) - 1 - i for i, lane in enumerate(lanes)}
    h = 0.7
    label_bars = len(tl.bars) <= max_labels
    for (lane, stage), group in pd.DataFrame(
        [(b.lane, b.job.stage, b) for b in tl.bars], columns=["lane", "stage", "bar"]
    ).groupby(["lane", "stage"], sort=False):
        y = ypos[lane] - h / 2
        c = colour[stage]
        failed = [(b.start, b.end - b.start) for b in group["bar"] if b.job.failed]
        if failed:
            ax.broken_barh(failed, (y, h), facecolors="white", edgecolor=FAILED, hatch="xx", lw=1.5)
        bars = [b for b in group["bar"] if not b.job.failed]
        ax.broken_barh([(b.start, b.end - b.start) for b in bars], (y, h), facecolors=c, alpha=0.3, edgecolor="none")
        ax.broken_barh(
            [(b.start, b.load_end - b.start) for b in bars], (y, h), facecolors="white", edgecolor=c, hatch="////", lw=0
        )
        ax.broken_barh([(b.load_end, b.compute_end - b.load_end) for b in bars], (y, h), facecolors=c, edgecolor="none")
        # Outlines: one collection per kind, not one per bar (a thousand shards draw as fast as ten).
        ax.broken_barh([(b.start, b.end - b.start) for b in bars], (y, h), facecolors="none", edgecolor=c, lw=0.8)
        crit = [(b.start, b.end - b.start) for b in bars if b.job.name in on_path]
        if crit and label_bars:
            ax.broken_barh(crit, (y, h), facecolors="none", edgecolor=CRITICAL, lw=2.2)
        elif crit:  # many bars: a strip along the top of the lane, which outlines would black out
            ax.broken_barh(crit, (y + h, 0.1), facecolors=CRITICAL, edgecolor="none")
        for b in group["bar"]:
            # "#3" for a generation shard, the judge's name (and shard) for a judge job
            short = b.job.name.removesuffix(" (failed)")
            short = short.rsplit(" ", 1)[-1] if b.job.kind == "generate" else short.removeprefix("judge ")
            short += " failed" if b.job.failed else ""
            # Only where the label fits in the bar (about 0.75% of the axis per character).
            if label_bars and (b.end - b.start) > tl.span * 0.0075 * (len(short) + 2):
                ax.text(
                    (b.start + b.end) / 2,
                    ypos[lane],
                    short,
                    ha="center",
                    va="center",
                    fontsize=8,
                    color=FAILED if b.job.failed else "black",
                    bbox={"facecolor": "white", "alpha": 0.75, "pad": 1, "edgecolor": "none"},
                )
    for s in tl.lane_stats:
        if s.busy_fraction is not None:
            ax.text(
                1.005,
                ypos[s.lane],
                f"busy {100 * s.busy_fraction:.0f}%",
                transform=ax.get_yaxis_transform(),
                va="center",
                fontsize=8,
            )
    ax.set_yticks([ypos[lane] for lane in lanes], lanes, fontsize=9)
    ax.set_ylim(-0.6, len(lanes) - 0.4)
    ax.set_xlim(0, tl.span * 1.01 if tl.span > 0 else 1)
    ax.set_xlabel("seconds since the command's first model job started", fontsize=9)
    ax.grid(axis="x", alpha=0.3)
