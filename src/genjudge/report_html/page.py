"""The view model of `report/report.html`: what each section of the page shows, as plain data.

`Page` reads the run (summary.json as a dict, the cells with their judgments, the jobs' meta files,
provenance) and `Page.view()` returns a `PageView`: the header, then one dataclass per section, None
where the section has nothing to show. Tables are `Table`s of display strings, figures are `Plot`s
(PNG bytes). No HTML is written here: `render` fills the templates under `templates/`, one per
section, where every word of the page lives.

Sections appear when their data does: the leaderboard always; the category heat map or
intervals, the score distribution, the win / tie / loss bars and the strengths by mode; the
unparsed verdicts when there are any. Top-level fields of summary.json that no section reads are
shown at the end as they are, so a new measure is visible before it has a section of its own.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass, field

import pandas as pd

from genjudge.judging import modes, tables
from genjudge.judging import paired as paired_diffs
from genjudge.judging.headline import headline_rows, truncated_text
from genjudge.judging.modes.base import pct, rate_text
from genjudge.planning import calibration
from genjudge.report_html import modern, plots
from genjudge.report_html import timeline as tl
from genjudge.report_html.table import Table

# summary.json fields the sections below read (the rest go to "More from summary.json").
SHOWN = {
    "validity",
    "schema_version",
    "run",
    "mode",
    "n_items",
    "n_judged",
    "n_unparsed",
    "unparsed_rate",
    "unparsed_reasons",
    "accuracy",
    "accuracy_ci95",
    "exact_match",
    "answers_not_extracted",
    "per_category",
    "placement_warnings",
    "shards",
    "generator",
    "judge",
    "leaderboard",
    "cells",
    "across_cells",
    # the modes' own measures, shown in the leaderboard, the headline and the plots
    "verdict_counts",
    "mean_p_correct",
    "judge_exact_match_agreement",
    "decided_by",
    "mean_score",
    "score_counts",
    "score_range",
    "win",
    "tie",
    "loss",
    "position_consistency",
    # read by the sections below this list's first ones
    "n_answers",
    "answers_per_item",
    "unparsed_examples",
    "n_truncated",
    "truncated_rate",
    "truncated_examples",
    "n_reasoning_unfinished",
    "reasoning_unfinished_rate",
    "n_reasoning_tokens",
    "exact_match_shown",
    "exact_match_note",
    "paired",
    "time_model",
    "table",
    "failed_cells",
}
PLOT_STUDY = "models_by_benchmarks"  # plots/models_by_benchmarks.png
ROW_KEYS = ("generator", "dataset", "judge", "opponent", "mode", "n_items", "n_judged", "n_unparsed", "exact_match")


@dataclass
class Plot:
    name: str  # file name under plots/ without .png, and the image's id on the page (plot-<name>)
    data: bytes  # PNG

    @property
    def base64(self) -> str:
        return base64.b64encode(self.data).decode("ascii")


@dataclass
class Cell:
    key: str
    summary: object  # RunSummary of the cell
    df: pd.DataFrame

    @property
    def row(self) -> dict:
        return self.summary.leaderboard[0]


def measure_text(v) -> str:
    if not isinstance(v, dict):
        return "" if v is None else str(v)
    if plots.is_mean(v):
        if v.get("value") is None:
            return "n/a"
        ci = f" [{v['ci95'][0]:.2f}, {v['ci95'][1]:.2f}]" if v.get("ci95") else ""
        return f"{v['value']:.2f}{ci}"
    return rate_text(v)


def seconds(x) -> str:
    return "" if x is None else f"{x:.1f}"


# --- the sections, in page order; `ident` is the section's HTML id and its template's name ---------------


@dataclass
class Headline:
    summary: Table | None  # (measure, value) of a single-cell run
    leaderboard: Table
    plot: Plot | None
    exact_match_overlay: bool  # some rows' plots carry normalised exact match
    several_modes: bool
    exact_match_notes: list[str] = field(default_factory=list)  # why exact match is not shown for a row
    ident = "headline"


@dataclass
class Categories:
    plot: Plot
    heatmap: bool  # several generators: a heat map; else intervals per category
    ident = "categories"


@dataclass
class Distributions:
    scores: Plot | None
    outcomes: Plot | None
    strengths: Plot | None
    ident = "distributions"


@dataclass
class Confusion:
    plot: Plot | None
    agreement: Table | None
    ident = "confusion"


@dataclass
class Human:
    """Can I trust the judge? Agreement with human labels, bias diagnostics, panels of judges."""

    warnings: list[str]
    agreement: Table | None
    plot: Plot | None
    bias_pairwise: Table | None
    bias_length: Table | None
    length_measure: str | None
    panels: Table | None
    ident = "human"

    @property
    def has_bias(self) -> bool:
        return self.bias_pairwise is not None or self.bias_length is not None


@dataclass
class Unparsed:
    n_unparsed: int
    n_truncated: int
    reasons: Table | None  # None: every verdict was parsed
    plot: Plot | None = None
    examples: Table | None = None
    ident = "unparsed"


@dataclass
class GpuUse:
    n_gpus: int
    span: float
    idle_seconds: float
    mean_busy_fraction: float
    never_used: list[str]


@dataclass
class Wait:
    job: str
    after: str
    seconds: float


@dataclass
class GpuTimeline:
    gpu_use: GpuUse | None
    longest_wait: Wait | None  # the longest wait on the critical path
    load_share: float | None  # model loading's share of the jobs' load + compute time
    plot: Plot | None
    lanes: Table
    stages: Table
    critical_path: Table
    ident = "timeline"


@dataclass
class Throughput:
    jobs: Table
    ident = "throughput"


@dataclass
class Provenance:
    run: Table
    models: Table
    files: Table | None
    packages: Table
    config_yaml: str | None
    ident = "provenance"


@dataclass
class Study:
    """The models x benchmarks table (summary.json's `table`) and its heat map."""

    table: Table
    plot: Plot | None
    note: str
    ident = "study"


@dataclass
class Failed:
    """The cells not judged because a job failed, with their errors and logs."""

    table: Table
    note: str
    ident = "failed"


@dataclass
class Paired:
    table: Table
    note: str
    ident = "paired"


@dataclass
class Truncated:
    """Answers the generator cut at max_new_tokens, per cell, and the first of them."""

    counts: Table
    examples: Table
    ident = "truncated"


@dataclass
class TimeModel:
    """The plan's time model on each finished job's counts against what the job measured."""

    table: Table
    ratio: str
    note: str
    ident = "time_model"


@dataclass
class Extra:
    """A top-level field of summary.json no section reads: a table when it is flat enough, else its JSON."""

    title: str
    table: Table | None
    json: str | None


@dataclass
class More:
    fields: list[Extra]
    ident = "more"


NAV = {
    "failed": "Failed cells",
    "study": "Models × benchmarks",
    "headline": "Leaderboard",
    "paired": "Paired differences",
    "controlled": "Controlled comparisons",
    "categories": "Categories",
    "distributions": "Scores",
    "confusion": "Judge vs exact match",
    "human": "Can I trust the judge?",
    "corrected": "Corrected by labels",
    "unparsed": "Unparsed",
    "truncated": "Truncated answers",
    "timeline": "GPU timeline",
    "throughput": "Throughput",
    "time_model": "Time model",
    "provenance": "Provenance",
    "more": "More",
}


@dataclass
class PageView:
    run: str | None
    mode: str | None
    n_items: int | None
    n_unparsed: int | None
    generators: list[str]
    judges: list[str]
    warnings: list[str]
    sections: list = field(default_factory=list)  # the sections with something to show, in page order
    plots: list[Plot] = field(default_factory=list)  # every figure on the page, also written to plots/

    @property
    def nav(self) -> list[tuple[str, str]]:
        return [(s.ident, NAV[s.ident]) for s in self.sections]

    def section(self, ident: str):
        return next((s for s in self.sections if s.ident == ident), None)


class Page:
    def __init__(self, summary: dict, cells: list[Cell], gen_metas, judge_metas, provenance: dict, inventory=None):
        self.s = summary
        self.cells = cells
        self.rows = summary.get("leaderboard") or [c.row for c in cells]
        self.gen_metas = gen_metas
        self.judge_metas = judge_metas
        self.provenance = provenance
        self.timeline = tl.build(tl.jobs_from_metas(gen_metas, judge_metas), inventory)
        self.n_examples = 3
        self._plots: list[Plot] = []

    # --- pieces ---------------------------------------------------------------------------
    def plot(self, name: str, fig) -> Plot | None:
        if fig is None:
            return None
        p = Plot(name, plots.png(fig))
        self._plots.append(p)
        return p

    def measures(self) -> list[str]:
        out: list[str] = []
        for r in self.rows:
            for k, v in r.items():
                if k not in ROW_KEYS and isinstance(v, dict) and "value" in v and k not in out:
                    out.append(k)
        return out

    def cell_label(self, c: Cell) -> str:
        r = c.row
        vs = f" vs {r['opponent']}" if r.get("opponent") else ""
        return f"{r['generator']}{vs} · {r['dataset']} · {r['judge']}"

    # --- sections -------------------------------------------------------------------------
    def headline(self) -> Headline:
        summary = None
        if len(self.cells) == 1:
            summary = Table(["measure", "value"], [list(r) for r in headline_rows(self.cells[0].summary)], "narrow")
        measures = self.measures()
        pairwise = any(r.get("opponent") for r in self.rows)
        head = [
            "generator",
            *(["vs"] if pairwise else []),
            "dataset",
            "judge",
            *measures,
            "n",
            "unparsed",
            "truncated",
            "exact match",
        ]
        rows = []
        em_notes = []
        for r in self.rows:
            if r.get("exact_match_shown", True) is False and r.get("exact_match_note"):
                em_notes.append(f"{r['generator']} · {r['dataset']} · {r['judge']}: {r['exact_match_note']}")
            rows.append(
                [
                    r["generator"],
                    *([r.get("opponent") or ""] if pairwise else []),
                    r["dataset"],
                    r["judge"],
                    *[measure_text(r.get(m)) for m in measures],
                    r["n_items"],
                    r["n_unparsed"],
                    truncated_text(r.get("n_truncated", 0), r.get("truncated_rate")),
                    pct((r.get("exact_match") or {}).get("value")) if r.get("exact_match_shown", True) else "-",
                ]
            )
        fig = plots.leaderboard(self.rows, measures, lambda mode: not modes.get(mode).needs_baseline)
        return Headline(
            summary,
            Table(head, rows),
            self.plot("leaderboard", fig),
            exact_match_overlay=not all(modes.get(r["mode"]).needs_baseline for r in self.rows),
            several_modes=len({r["mode"] for r in self.rows}) > 1,
            exact_match_notes=list(dict.fromkeys(em_notes)),
        )

    def category_frame(self) -> pd.DataFrame:
        """One row per cell and category: the cell's first leaderboard measure (accuracy, mean score,
        win) as the category has it, with its interval and exact match."""
        rows = []
        for c in self.cells:
            first = next((k for k, v in c.row.items() if k not in ROW_KEYS and isinstance(v, dict)), None)
            for cat, m in c.summary.per_category.items():
                v = m.get(first)
                if not isinstance(v, dict) or "value" not in v:
                    continue
                ci = v.get("ci95") or [None, None]
                em = m.get("exact_match") or {}
                em_ci = em.get("ci95") or [None, None]
                rows.append(
                    {
                        **{k: c.row.get(k) for k in ("generator", "dataset", "judge", "opponent")},
                        "category": cat,
                        "measure": first,
                        "mean": plots.is_mean(v),
                        "value": v.get("value"),
                        "low": ci[0],
                        "high": ci[1],
                        "n": m["n_judged"],
                        "em_value": em.get("value"),
                        "em_low": em_ci[0],
                        "em_high": em_ci[1],
                    }
                )
        frame = pd.DataFrame(rows)
        if not frame.empty:
            frame["opponent"] = frame["opponent"].fillna("")
        return frame

    def categories(self) -> Categories | None:
        frame = self.category_frame()
        if frame.empty or frame["category"].nunique() < 2 and frame["generator"].nunique() < 2:
            return None
        heatmap = frame["generator"].nunique() > 1
        if heatmap:
            ranges = {}
            for c in self.cells:
                r = c.summary.to_dict().get("score_range")
                if r:
                    ranges[c.row["judge"]] = tuple(r)
            fig = plots.category_heatmap(frame, ranges)
        else:
            fig = plots.category_intervals(frame)
        p = self.plot("per_category", fig)
        return Categories(p, heatmap) if p else None

    def distributions(self) -> Distributions | None:
        scores_plot = outcomes_plot = strengths_plot = None
        scores = [(self.cell_label(c), c.summary.to_dict().get("score_counts")) for c in self.cells]
        scores = [(k, d) for k, d in scores if d]
        if scores:
            rng = next((r for c in self.cells if (r := c.summary.to_dict().get("score_range"))), None)
            scores_plot = self.plot(
                "score_distribution", plots.score_distributions(scores, tuple(rng) if rng else None)
            )
        wtl = [(self.cell_label(c), c.row) for c in self.cells if c.row.get("opponent") or "win" in c.row]
        if wtl:
            outcomes_plot = self.plot("outcomes", plots.outcomes(wtl))
        per = []
        for judge, m in (self.s.get("across_cells") or {}).items():
            for dataset, st in (m.get("bradley_terry") or {}).items():
                per.append((f"Bradley-Terry strengths · dataset {dataset} · judge {judge}", st))
        if per:
            strengths_plot = self.plot("strengths", plots.strengths(per))
        if not (scores_plot or outcomes_plot or strengths_plot):
            return None
        return Distributions(scores_plot, outcomes_plot, strengths_plot)

    def confusion(self) -> Confusion | None:
        mats, agree = [], []
        for c in self.cells:
            mode = modes.get(c.summary.mode)
            if mode.needs_baseline or not mode.labels or "exact_match" not in c.df:
                continue
            em = c.df["exact_match"].map({True: "match", False: "no match"}).fillna("no reference")
            verdict = c.df["verdict"].fillna("unparsed")
            m = pd.crosstab(verdict, em)
            order = [v for v in (*mode.labels.values(), "unparsed") if v in m.index]
            order += [v for v in m.index if v not in order]
            cols = [v for v in ("match", "no match", "no reference") if v in m.columns]
            mats.append((self.cell_label(c), m.reindex(index=order, columns=cols, fill_value=0)))
            a = c.summary.to_dict().get("judge_exact_match_agreement")
            if a:
                agree.append([self.cell_label(c), rate_text(a), a.get("n")])
        if not mats:
            return None
        p = self.plot("judge_vs_exact_match", plots.confusions(mats[:12]))
        head = ["generator · dataset · judge", "judge agrees with exact match", "n"]
        agreement = Table(head, agree, "narrow") if agree else None
        return Confusion(p, agreement) if p or agreement else None

    def human(self) -> Human | None:
        """Agreement with human labels, where summary.json has it (`validity`: per judge and panel,
        `human` with `confusion` as {human label: {judge label: count}})."""
        v = self.s.get("validity") or {}
        mats, rows = [], []
        for kind, entries in (("judge", v.get("judges") or {}), ("panel", v.get("panels") or {})):
            for name, e in entries.items():
                h = (e or {}).get("human") or {}
                if not h.get("confusion"):
                    continue
                m = pd.DataFrame(h["confusion"]).fillna(0).astype(int)  # rows: judge labels, columns: human
                m = m.reindex(sorted(m.index, key=str)).reindex(columns=sorted(m.columns, key=str), fill_value=0)
                mats.append((f"{kind} {name}", m))
                kappa = h.get("cohen_kappa")
                rows.append(
                    [
                        f"{kind} {name}",
                        h.get("labels"),
                        h.get("n_labelled"),
                        h.get("n_unparsed"),
                        measure_text(h.get("agreement")),
                        "" if kappa is None else f"{kappa:.2f}",
                    ]
                )
        agreement = plot = None
        if mats:
            head = ["judge", "labels", "labelled", "unparsed", "agreement", "Cohen's kappa"]
            agreement = Table(head, rows, "narrow")
            plot = self.plot("judge_vs_human", plots.confusions(mats[:12], xlabel="human label"))
        pairwise, length = self.bias(v)
        view = Human(
            warnings=list(v.get("self_preference") or []),
            agreement=agreement,
            plot=plot,
            bias_pairwise=pairwise,
            bias_length=length,
            length_measure=v.get("length_measure"),
            panels=self.panels(v),
        )
        if not (view.warnings or view.agreement or view.plot or view.has_bias or view.panels):
            return None
        return view

    @staticmethod
    def bias(v: dict) -> tuple[Table | None, Table | None]:
        """Bias diagnostics per judge (`validity.judges.<name>.bias`): position and length for pairwise
        judges, the correlation of verdicts with the answer's length for the others."""
        pair_rows, single_rows = [], []
        for name, e in (v.get("judges") or {}).items():
            b = (e or {}).get("bias") or {}
            if "flip_rate" in b:
                pair_rows.append(
                    [name] + [measure_text(b.get(k)) for k in ("flip_rate", "first_position_win_rate", "prefer_longer")]
                )
            elif b.get("length_correlation"):
                c = b["length_correlation"]
                single_rows.append(
                    [name] + ["n/a" if c.get(k) is None else f"{c[k]:+.2f}" for k in ("pearson", "spearman")] + [c["n"]]
                )
        pairwise = length = None
        if pair_rows:
            head = ["judge", "flip rate when swapped", "first position wins", "P(prefer longer)"]
            pairwise = Table(head, pair_rows, "narrow")
        if single_rows:
            length = Table(["judge", "Pearson (verdict, length)", "Spearman", "n"], single_rows, "narrow")
        return pairwise, length

    @staticmethod
    def panels(v: dict) -> Table | None:
        """Panels of judges (`validity.panels`): their measures, votes parsed per item and agreement."""
        rows = []
        for name, p in (v.get("panels") or {}).items():
            ij = p.get("inter_judge") or {}
            fleiss = ij.get("fleiss_kappa")
            rows.append(
                [
                    name,
                    f"{p['rule']} of {', '.join(p['judges'])}",
                    "; ".join(f"{k} {measure_text(m)}" for k, m in (p.get("measures") or {}).items()),
                    ", ".join(f"{k}: {c}" for k, c in (p.get("parsed_votes_per_item") or {}).items()),
                    p.get("no_majority"),
                    "n/a" if fleiss is None else f"{fleiss:.2f}",
                ]
            )
        if not rows:
            return None
        head = ["panel", "rule", "measures", "judges parsed per item: items", "no majority", "Fleiss' kappa"]
        return Table(head, rows)

    def unparsed(self) -> Unparsed:
        reasons: dict = {}
        for c in self.cells:
            for k, v in c.summary.unparsed_reasons.items():
                reasons[k] = reasons.get(k, 0) + v
        if not reasons:
            return Unparsed(0, 0, None)
        rows = []
        for c in self.cells:
            bad = c.df[c.df["verdict"].isna()]
            trunc = bad["unparsed_reason"].fillna("").str.contains("truncated")
            for part in (bad[trunc], bad[~trunc]):
                for r in part.head(self.n_examples).itertuples():
                    rows.append(
                        [self.cell_label(c), r.id, r.unparsed_reason, _clip(getattr(r, "judge_output", ""), 300)]
                    )
        return Unparsed(
            n_unparsed=sum(reasons.values()),
            n_truncated=sum(v for k, v in reasons.items() if "truncated" in k),
            reasons=Table(["reason", "verdicts"], sorted(([k, v] for k, v in reasons.items()), key=lambda r: -r[1])),
            plot=self.plot("unparsed_reasons", plots.reasons(reasons)),
            examples=Table(["generator · dataset · judge", "id", "reason", "judge said"], rows, "ex"),
        )

    def gpus(self) -> GpuTimeline | None:
        t = self.timeline
        if not t.bars:
            return None
        gpu_stats = [s for s in t.lane_stats if s.kind == "gpu"]
        lanes = [
            [
                s.lane,
                s.jobs,
                seconds(s.busy_seconds),
                seconds(s.load_seconds),
                seconds(s.compute_seconds),
                seconds(s.idle_seconds) if s.kind == "gpu" else "",
                pct(s.busy_fraction),
            ]
            for s in t.lane_stats
        ]
        stages = [
            [s["stage"], s["jobs"], seconds(s["start"]), seconds(s["end"]), seconds(s["wall"]), seconds(s["load"])]
            for s in t.stages
        ]
        path = [
            [p["job"], p["after"], seconds(p["wait_before"]) if p["wait_before"] is not None else ""]
            + [seconds(p["start"]), seconds(p["end"]), seconds(p["load"]), seconds(p["compute"])]
            for p in t.critical_path
        ]
        gpu_use = None
        if gpu_stats:
            gpu_use = GpuUse(
                n_gpus=len(gpu_stats),
                span=t.span,
                idle_seconds=sum(s.idle_seconds for s in gpu_stats),
                mean_busy_fraction=sum(s.busy_fraction or 0 for s in gpu_stats) / len(gpu_stats),
                never_used=[s.lane for s in gpu_stats if s.jobs == 0],
            )
        waits = [p for p in t.critical_path if p["wait_before"] is not None]
        longest = None
        if waits:
            w = max(waits, key=lambda p: p["wait_before"])
            longest = Wait(w["job"], w["after"], w["wait_before"])
        load = sum(j.load_seconds for j in t.jobs)
        compute = sum(j.compute_seconds for j in t.jobs)
        return GpuTimeline(
            gpu_use=gpu_use,
            longest_wait=longest,
            load_share=load / (load + compute) if load + compute > 0 else None,
            plot=self.plot("gpu_timeline", plots.gantt(t)),
            lanes=Table(["lane", "jobs", "busy s", "load s", "compute s", "idle s", "busy fraction"], lanes, "narrow"),
            stages=Table(
                ["stage", "jobs", "first start s", "last finish s", "wall s", "load s (sum)"], stages, "narrow"
            ),
            critical_path=Table(
                ["job", "waited for", "waited s", "start s", "end s", "load s", "compute s"], path, "narrow"
            ),
        )

    def throughput(self) -> Throughput | None:
        jobs = self.timeline.jobs
        if not jobs:
            return None
        rows = [
            [
                j.name,
                j.host,
                ",".join(j.gpus) or "CPU",
                j.n_items,
                seconds(j.load_seconds),
                seconds(j.compute_seconds),
                seconds(j.wall),
                "" if j.tokens_per_second is None else f"{j.tokens_per_second:.1f}",
                j.resumed,
                j.computed,
                seconds(j.waited_for_gpus_seconds),
            ]
            for j in jobs
        ]
        head = ["job", "host", "GPUs", "items", "load s", "compute s", "wall s", "tokens/s", "resumed", "computed"]
        return Throughput(Table([*head, "waited for GPUs s"], rows))

    def provenance_section(self) -> Provenance:
        p = self.provenance or {}
        git = p.get("git") or {}
        run = Table(
            ["what", "value"],
            [
                ["config sha256", p.get("config_sha256")],
                ["git commit", f"{git.get('commit')}{' (uncommitted changes)' if git.get('dirty') else ''}"],
            ],
            "narrow",
        )
        models = []
        for role, entries in (p.get("models") or {}).items():
            for name, m in entries.items():
                models.append([role.rstrip("s"), name, m.get("model"), m.get("revision"), _join(m.get("fingerprint"))])
        files = [
            [kind.rstrip("s"), name, f["path"], f["sha256"] or "not a local file", f["bytes"]]
            for kind, entries in (p.get("inputs") or {}).items()
            for name, f in entries.items()
        ]
        config_yaml = None
        if p.get("config"):
            import yaml

            config_yaml = yaml.safe_dump(p["config"], sort_keys=False)
        return Provenance(
            run=run,
            models=Table(["role", "name", "model", "revision", "fingerprint"], models, "narrow"),
            files=Table(["input", "name", "path", "sha256", "bytes"], files, "narrow") if files else None,
            packages=Table(
                ["package", "version"],
                [[k, v or "not installed"] for k, v in (p.get("packages") or {}).items()],
                "narrow",
            ),
            config_yaml=config_yaml,
        )

    def study(self) -> Study | None:
        table = self.s.get("table") or {}
        if not tables.study_shown(table):
            return None
        plot = self.plot(PLOT_STUDY, plots.models_by_benchmarks(table))
        return Study(Table(*tables.study_rows(table)), plot, tables.STUDY_NOTE)

    def failed(self) -> Failed | None:
        failed = self.s.get("failed_cells") or []
        return Failed(Table(*tables.failed_rows(failed), "ex"), tables.FAILED_NOTE) if failed else None

    def paired(self) -> Paired | None:
        rows = self.s.get("paired") or []
        return Paired(Table(*paired_diffs.table_rows(rows)), paired_diffs.NOTE) if rows else None

    def truncated(self) -> Truncated | None:
        counts, examples = [], []
        for c in self.cells:
            s = c.summary
            if not s.n_truncated and not s.n_reasoning_unfinished:
                continue
            label = self.cell_label(c)
            cap = s.generator.get("max_new_tokens") if isinstance(s.generator, dict) else None
            think = truncated_text(s.n_reasoning_unfinished, s.reasoning_unfinished_rate)
            counts.append([label, str(s.n_truncated), pct(s.truncated_rate), think, "" if cap is None else str(cap)])
            for e in s.truncated_examples:
                where = e["id"] + "".join(f", {k} {e[k]}" for k in ("turn", "sample") if k in e)
                examples.append([label, where, _clip(e["output_end"], 200)])
        if not counts:
            return None
        return Truncated(
            Table(
                [
                    "generator · dataset · judge",
                    "truncated answers",
                    "share",
                    "reasoning not finished",
                    "max_new_tokens",
                ],
                counts,
                "narrow",
            ),
            Table(["generator · dataset · judge", "item", "the answer ends"], examples, "ex"),
        )

    def time_model(self) -> TimeModel | None:
        check = self.s.get("time_model") or {}
        if not check.get("jobs"):
            return None
        return TimeModel(Table(*calibration.check_rows(check)), calibration.ratio_text(check), calibration.CHECK_NOTE)

    def more(self) -> More | None:
        extra = [_extra(k, v) for k, v in self.s.items() if k not in SHOWN]
        return More(extra) if extra else None

    # --- the page -------------------------------------------------------------------------
    def view(self) -> PageView:
        """The whole page; draws its plots."""
        s = self.s
        self._plots = []
        sections = [
            self.failed(),
            self.study(),
            self.headline(),
            self.paired(),
            modern.controlled(s),
            self.categories(),
            self.distributions(),
            self.confusion(),
            self.human(),
            modern.corrected(s),
            self.unparsed(),
            self.truncated(),
            self.gpus(),
            self.throughput(),
            self.time_model(),
            self.provenance_section(),
            self.more(),
        ]
        return PageView(
            run=s.get("run"),
            mode=s.get("mode"),
            n_items=s.get("n_items"),
            n_unparsed=s.get("n_unparsed"),
            generators=[str(g) for g in dict.fromkeys(r["generator"] for r in self.rows)],
            judges=[str(j) for j in dict.fromkeys(r["judge"] for r in self.rows)],
            warnings=list(s.get("placement_warnings") or []),
            sections=[x for x in sections if x is not None],
            plots=self._plots,
        )


def _clip(text, n: int) -> str:
    text = "" if text is None or (isinstance(text, float) and pd.isna(text)) else " ".join(str(text).split())
    return text if len(text) <= n else text[: n - 1] + "…"


def _join(x) -> str:
    return ", ".join(x) if isinstance(x, list) else ("" if x is None else str(x))


def _extra(key: str, v) -> Extra:
    title = key.replace("_", " ")
    if isinstance(v, list) and v and all(isinstance(r, dict) for r in v):
        head = list(dict.fromkeys(k for r in v for k in r))
        if all(not isinstance(x, dict | list) or _is_measure(x) for r in v for x in r.values()):
            return Extra(title, Table(head, [[_flat(r.get(k)) for k in head] for r in v]), None)
    if isinstance(v, dict) and v and all(not isinstance(x, dict | list) or _is_measure(x) for x in v.values()):
        return Extra(title, Table(["key", "value"], [[k, _flat(x)] for k, x in v.items()], "narrow"), None)
    text = json.dumps(v, indent=1, default=str)
    if len(text) > 20000:
        text = text[:20000] + "\n…"
    return Extra(title, None, text)


def _is_measure(x) -> bool:
    return isinstance(x, dict) and "value" in x


def _flat(x) -> str:
    if _is_measure(x):
        return measure_text(x)
    if isinstance(x, float):
        return f"{x:.4g}"
    return "" if x is None else str(x)
