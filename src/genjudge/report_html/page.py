"""`report/report.html`: one self-contained page (plots embedded as PNG data URIs, no scripts,
no network) and the same plots as files under `report/plots/`.

Sections appear when their data does: the leaderboard always; the category heat map or
intervals, the score distribution, the win / tie / loss bars and the strengths by mode; the
unparsed verdicts when there are any. Top-level fields of summary.json that no section reads are
shown at the end as they are, so a new measure is visible before it has a section of its own.
"""

from __future__ import annotations

import base64
import html
import json
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from genjudge import atomic
from genjudge.judging import modes
from genjudge.judging.modes.base import pct, rate_text
from genjudge.report_html import plots
from genjudge.report_html import timeline as tl

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
}
ROW_KEYS = ("generator", "dataset", "judge", "opponent", "mode", "n_items", "n_judged", "n_unparsed", "exact_match")
MAX_TABLE_ROWS = 500


@dataclass
class Plot:
    name: str  # file name under plots/, without .png
    title: str
    caption: str
    data: bytes


@dataclass
class Cell:
    key: str
    summary: object  # RunSummary of the cell
    df: pd.DataFrame

    @property
    def row(self) -> dict:
        return self.summary.leaderboard[0]


def esc(x) -> str:
    return html.escape("" if x is None else str(x))


def table(head: list[str], rows: list[list], cls: str = "", limit: int = MAX_TABLE_ROWS) -> str:
    body = "".join("<tr>" + "".join(f"<td>{esc(c)}</td>" for c in r) + "</tr>" for r in rows[:limit])
    more = (
        f'<p class="note">First {limit} of {len(rows)} rows shown; the files beside this page hold all.</p>'
        if len(rows) > limit
        else ""
    )
    ths = "".join(f"<th>{esc(h)}</th>" for h in head)
    return f'<table class="{cls}"><thead><tr>{ths}</tr></thead><tbody>{body}</tbody></table>{more}'


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


class Page:
    def __init__(self, summary: dict, cells: list[Cell], gen_metas, judge_metas, provenance: dict, inventory=None):
        self.s = summary
        self.cells = cells
        self.rows = summary.get("leaderboard") or [c.row for c in cells]
        self.gen_metas = gen_metas
        self.judge_metas = judge_metas
        self.provenance = provenance
        self.timeline = tl.build(tl.jobs_from_metas(gen_metas, judge_metas), inventory)
        self.plots: list[Plot] = []
        self.n_examples = 3

    # --- pieces ---------------------------------------------------------------------------
    def plot(self, name: str, title: str, caption: str, fig) -> str:
        if fig is None:
            return ""
        p = Plot(name, title, caption, plots.png(fig))
        self.plots.append(p)
        b64 = base64.b64encode(p.data).decode("ascii")
        return (
            f'<figure><img class="plot" id="plot-{name}" alt="{esc(title)}" src="data:image/png;base64,{b64}">'
            f"<figcaption>{esc(caption)}</figcaption></figure>"
        )

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
    def headline(self) -> str:
        out = []
        if len(self.cells) == 1:
            from genjudge.stages.report import headline_rows

            out.append(table(["measure", "value"], [list(r) for r in headline_rows(self.cells[0].summary)], "narrow"))
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
            "exact match",
        ]
        rows = []
        for r in self.rows:
            rows.append(
                [
                    r["generator"],
                    *([r.get("opponent") or ""] if pairwise else []),
                    r["dataset"],
                    r["judge"],
                    *[measure_text(r.get(m)) for m in measures],
                    r["n_items"],
                    r["n_unparsed"],
                    pct((r.get("exact_match") or {}).get("value")),
                ]
            )
        overlay = not all(modes.get(r["mode"]).needs_baseline for r in self.rows)
        fig = plots.leaderboard(self.rows, measures, lambda mode: not modes.get(mode).needs_baseline)
        out.append("<h3>Leaderboard</h3>" + table(head, rows))
        out.append(
            self.plot(
                "leaderboard",
                "Leaderboard",
                "Each generator's result per dataset and judge with its 95% interval (Wilson for rates, normal "
                "for mean scores)"
                + ("; the hollow diamond is normalised exact match with its interval" if overlay else "")
                + ("; one row of panels per judging mode" if len({r["mode"] for r in self.rows}) > 1 else "")
                + ". Unparsed verdicts are excluded, never counted as wrong.",
                fig,
            )
        )
        return self.section("headline", "Headline and leaderboard", "".join(out))

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

    def categories(self) -> str:
        frame = self.category_frame()
        if frame.empty or frame["category"].nunique() < 2 and frame["generator"].nunique() < 2:
            return ""
        if frame["generator"].nunique() > 1:
            ranges = {}
            for c in self.cells:
                r = c.summary.to_dict().get("score_range")
                if r:
                    ranges[c.row["judge"]] = tuple(r)
            fig = plots.category_heatmap(frame, ranges)
            caption = (
                "The headline measure of each generator in each category (n = judged items of the category); "
                "one panel per judge and dataset, each on its own scale (rates 0-100%, mean scores over the "
                "judge's score range)."
            )
        else:
            fig = plots.category_intervals(frame)
            caption = (
                "The headline measure per category with its 95% interval, normalised exact match beside rates; "
                "n = judged items of the category."
            )
        return self.section("categories", "By category", self.plot("per_category", "By category", caption, fig))

    def distributions(self) -> str:
        out = []
        scores = [(self.cell_label(c), c.summary.to_dict().get("score_counts")) for c in self.cells]
        scores = [(k, d) for k, d in scores if d]
        if scores:
            rng = next((r for c in self.cells if (r := c.summary.to_dict().get("score_range"))), None)
            out.append(
                self.plot(
                    "score_distribution",
                    "Score distribution",
                    "How many answers got each score (parsed verdicts only), per generator, dataset and judge.",
                    plots.score_distributions(scores, tuple(rng) if rng else None),
                )
            )
        wtl = [(self.cell_label(c), c.row) for c in self.cells if c.row.get("opponent") or "win" in c.row]
        if wtl:
            out.append(
                self.plot(
                    "outcomes",
                    "Win / tie / loss",
                    "Share of wins, ties and losses of each candidate against its opponent, every pair judged in "
                    "both orders; a verdict that flips with the order is a tie.",
                    plots.outcomes(wtl),
                )
            )
        per = []
        for judge, m in (self.s.get("across_cells") or {}).items():
            for dataset, st in (m.get("bradley_terry") or {}).items():
                per.append((f"Bradley-Terry strengths · dataset {dataset} · judge {judge}", st))
        if per:
            out.append(
                self.plot(
                    "strengths",
                    "Bradley-Terry strengths",
                    "Strengths from every pair judged (ties count half), with 95% intervals from a seeded "
                    "bootstrap over items.",
                    plots.strengths(per),
                )
            )
        if not out:
            return ""
        return self.section("distributions", "Scores and outcomes", "".join(out))

    def confusion(self) -> str:
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
            return ""
        body = self.plot(
            "judge_vs_exact_match",
            "Judge against exact match",
            "Items by the judge's verdict and by normalised exact match of the answer against the reference. "
            "Off-diagonal cells are where they disagree: an answer judged correct that does not match "
            "(a paraphrase, or a lenient judge), or one that matches but was judged incorrect.",
            plots.confusions(mats[:12]),
        )
        if agree:
            body += table(["generator · dataset · judge", "judge agrees with exact match", "n"], agree, "narrow")
        return self.section("confusion", "Judge against exact match", body)

    def human(self) -> str:
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
        body = "".join(f'<p class="warn">Warning: {esc(w)}</p>' for w in v.get("self_preference") or [])
        if mats:
            body += table(["judge", "labels", "labelled", "unparsed", "agreement", "Cohen's kappa"], rows, "narrow")
            body += self.plot(
                "judge_vs_human",
                "Judge against human labels",
                "Labelled items by the judge's verdict and the human label; labelled items the judge left "
                "unparsed are counted apart (the table), never as disagreement.",
                plots.confusions(mats[:12], xlabel="human label"),
            )
        body += self.bias(v) + self.panels(v)
        return self.section("human", "Can I trust the judge?", body)

    @staticmethod
    def bias(v: dict) -> str:
        """Bias diagnostics per judge (`validity.judges.<name>.bias`)."""
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
        body = ""
        if pair_rows:
            head = ["judge", "flip rate when swapped", "first position wins", "P(prefer longer)"]
            body += table(head, pair_rows, "narrow")
        if single_rows:
            body += table(["judge", "Pearson (verdict, length)", "Spearman", "n"], single_rows, "narrow")
            body += "<p>Verdicts as numbers: scores as given; correct 1, partial 0.5, incorrect 0.</p>"
        if body and v.get("length_measure"):
            body += f"<p>Length: {esc(v['length_measure'])}.</p>"
        return "<h3>Bias diagnostics</h3>" + body if body else ""

    @staticmethod
    def panels(v: dict) -> str:
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
            return ""
        head = ["panel", "rule", "measures", "judges parsed per item: items", "no majority", "Fleiss' kappa"]
        return (
            "<h3>Panels of judges</h3>"
            + table(head, rows)
            + "<p>An unparsed vote is never a vote; a majority is a strict majority of the parsed votes.</p>"
        )

    def unparsed(self) -> str:
        reasons: dict = {}
        for c in self.cells:
            for k, v in c.summary.unparsed_reasons.items():
                reasons[k] = reasons.get(k, 0) + v
        if not reasons:
            return self.section("unparsed", "Unparsed and truncated verdicts", "<p>Every verdict was parsed.</p>")
        n_trunc = sum(v for k, v in reasons.items() if "truncated" in k)
        body = (
            f"<p>{sum(reasons.values())} unparsed verdict(s), {n_trunc} of them truncated (the judge reached "
            "<code>max_new_tokens</code> before its verdict). They are excluded from every rate and mean.</p>"
        )
        body += table(["reason", "verdicts"], sorted(([k, v] for k, v in reasons.items()), key=lambda r: -r[1]))
        body += self.plot(
            "unparsed_reasons",
            "Unparsed verdicts by reason",
            "Unparsed verdicts by reason, over every generator, dataset and judge; truncations in red.",
            plots.reasons(reasons),
        )
        rows = []
        for c in self.cells:
            bad = c.df[c.df["verdict"].isna()]
            trunc = bad["unparsed_reason"].fillna("").str.contains("truncated")
            for part in (bad[trunc], bad[~trunc]):
                for r in part.head(self.n_examples).itertuples():
                    rows.append(
                        [self.cell_label(c), r.id, r.unparsed_reason, _clip(getattr(r, "judge_output", ""), 300)]
                    )
        body += "<h3>Examples</h3>" + table(["generator · dataset · judge", "id", "reason", "judge said"], rows, "ex")
        return self.section("unparsed", "Unparsed and truncated verdicts", body)

    def gpus(self) -> str:
        t = self.timeline
        if not t.bars:
            return ""
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
        findings = []
        if gpu_stats:
            idle = sum(s.idle_seconds for s in gpu_stats)
            unused = [s.lane for s in gpu_stats if s.jobs == 0]
            findings.append(
                f"{len(gpu_stats)} GPU(s) over a {t.span:.1f} s window: {idle:.1f} idle GPU-seconds, mean busy "
                f"fraction {pct(sum(s.busy_fraction or 0 for s in gpu_stats) / len(gpu_stats))}"
                + (f"; never used: {', '.join(unused)}" if unused else "")
                + "."
            )
        waits = [p for p in t.critical_path if p["wait_before"] is not None]
        if waits:
            w = max(waits, key=lambda p: p["wait_before"])
            findings.append(
                f"On the critical path, {w['job']} started {w['wait_before']:.1f} s after the {w['after']} job "
                "before it finished (merging, parsing, process start-up, or waiting for a free core)."
            )
        load = sum(j.load_seconds for j in t.jobs)
        compute = sum(j.compute_seconds for j in t.jobs)
        if load + compute > 0:
            findings.append(
                f"Model loading took {pct(load / (load + compute))} of the jobs' load + compute time"
                + ("; fewer, larger shards would pay it less often." if load > compute else ".")
            )
        body = "".join(f"<p>{esc(f)}</p>" for f in findings)
        body += self.plot(
            "gpu_timeline",
            "GPU timeline",
            "One lane per GPU and for the CPU (jobs without GPUs), a bar per model job on every device it held: "
            "the model load hatched (drawn first: the meta records durations, not moments), the compute solid, "
            "the rest of the job (reading, writing) pale. The critical path is outlined in black; each lane's "
            "busy fraction of the window is at the right.",
            plots.gantt(t),
        )
        body += "<h3>Per lane</h3>" + table(
            ["lane", "jobs", "busy s", "load s", "compute s", "idle s", "busy fraction"], lanes, "narrow"
        )
        body += "<h3>Wall time per stage</h3>" + table(
            ["stage", "jobs", "first start s", "last finish s", "wall s", "load s (sum)"], stages, "narrow"
        )
        body += (
            "<h3>Critical path</h3><p>The chain of jobs that decided the run's length: each waited for the one "
            "before it, for its input (a judge for the generations it grades) or for a GPU the job before held.</p>"
            + table(["job", "waited for", "waited s", "start s", "end s", "load s", "compute s"], path, "narrow")
        )
        return self.section("timeline", "GPU timeline", body)

    def throughput(self) -> str:
        jobs = self.timeline.jobs
        if not jobs:
            return ""
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
        body = (
            "<p>Tokens/s counts generated tokens of the computed items over the compute time; resumed items came "
            "from checkpoints or the cache and cost nothing.</p>" + table([*head, "waited for GPUs s"], rows)
        )
        return self.section("throughput", "Throughput per job", body)

    def provenance_section(self) -> str:
        p = self.provenance or {}
        git = p.get("git") or {}
        body = table(
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
                fp = m.get("fingerprint")
                models.append([role.rstrip("s"), name, m.get("model"), m.get("revision"), _join(fp)])
        body += "<h3>Models</h3>" + table(["role", "name", "model", "revision", "fingerprint"], models, "narrow")
        files = [
            [kind.rstrip("s"), name, f["path"], f["sha256"] or "not a local file", f["bytes"]]
            for kind, entries in (p.get("inputs") or {}).items()
            for name, f in entries.items()
        ]
        if files:
            body += "<h3>Input files</h3>" + table(["input", "name", "path", "sha256", "bytes"], files, "narrow")
        body += "<h3>Packages</h3>" + table(
            ["package", "version"], [[k, v or "not installed"] for k, v in (p.get("packages") or {}).items()], "narrow"
        )
        if p.get("config"):
            import yaml

            body += (
                "<details><summary>Resolved config</summary><pre>"
                + esc(yaml.safe_dump(p["config"], sort_keys=False))
                + "</pre></details>"
            )
        return self.section("provenance", "Provenance", body)

    def more(self) -> str:
        extra = {k: v for k, v in self.s.items() if k not in SHOWN}
        if not extra:
            return ""
        body = ""
        for k, v in extra.items():
            body += f"<h3>{esc(k.replace('_', ' '))}</h3>" + _generic(v)
        return self.section("more", "More from summary.json", body)

    @staticmethod
    def section(ident: str, title: str, body: str) -> str:
        return f'<section id="{ident}"><h2>{esc(title)}</h2>{body}</section>' if body else ""

    # --- the page -------------------------------------------------------------------------
    def render(self) -> str:
        s = self.s
        warnings = "".join(f'<p class="warn">Warning: {esc(w)}</p>' for w in s.get("placement_warnings") or [])
        parts = [
            self.headline(),
            self.categories(),
            self.distributions(),
            self.confusion(),
            self.human(),
            self.unparsed(),
            self.gpus(),
            self.throughput(),
            self.provenance_section(),
            self.more(),
        ]
        nav = " · ".join(
            f'<a href="#{i}">{t}</a>'
            for i, t in [
                ("headline", "Leaderboard"),
                ("categories", "Categories"),
                ("distributions", "Scores"),
                ("confusion", "Judge vs exact match"),
                ("human", "Can I trust the judge?"),
                ("unparsed", "Unparsed"),
                ("timeline", "GPU timeline"),
                ("throughput", "Throughput"),
                ("provenance", "Provenance"),
                ("more", "More"),
            ]
            if any(p.startswith(f'<section id="{i}"') for p in parts)
        )
        gens = list(dict.fromkeys(r["generator"] for r in self.rows))
        judges = list(dict.fromkeys(r["judge"] for r in self.rows))
        sub = (
            f"mode {esc(s.get('mode'))} · {s.get('n_items')} judged answers ({s.get('n_unparsed')} unparsed) · "
            f"generator(s): {esc(', '.join(map(str, gens)))} · judge(s): {esc(', '.join(map(str, judges)))}"
        )
        return (
            '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            f"<title>Report: {esc(s.get('run'))}</title><style>{CSS}</style></head><body>"
            f"<header><h1>Report: run <code>{esc(s.get('run'))}</code></h1><p class='sub'>{sub}</p>"
            f"<nav>{nav}</nav></header>{warnings}{''.join(parts)}"
            "<footer>Written by genjudge from summary.json, the judgments and the jobs' meta files.</footer>"
            "</body></html>\n"
        )


def _clip(text, n: int) -> str:
    text = "" if text is None or (isinstance(text, float) and pd.isna(text)) else " ".join(str(text).split())
    return text if len(text) <= n else text[: n - 1] + "…"


def _join(x) -> str:
    return ", ".join(x) if isinstance(x, list) else ("" if x is None else str(x))


def _generic(v) -> str:
    """A value of summary.json no section knows: a table when it is flat enough, else its JSON."""
    if isinstance(v, list) and v and all(isinstance(r, dict) for r in v):
        head = list(dict.fromkeys(k for r in v for k in r))
        if all(not isinstance(x, dict | list) or _is_measure(x) for r in v for x in r.values()):
            return table(head, [[_flat(r.get(k)) for k in head] for r in v])
    if isinstance(v, dict) and v and all(not isinstance(x, dict | list) or _is_measure(x) for x in v.values()):
        return table(["key", "value"], [[k, _flat(x)] for k, x in v.items()], "narrow")
    text = json.dumps(v, indent=1, default=str)
    if len(text) > 20000:
        text = text[:20000] + "\n…"
    return f"<details><summary>JSON</summary><pre>{esc(text)}</pre></details>"


def _is_measure(x) -> bool:
    return isinstance(x, dict) and "value" in x


def _flat(x) -> str:
    if _is_measure(x):
        return measure_text(x)
    if isinstance(x, float):
        return f"{x:.4g}"
    return "" if x is None else str(x)


CSS = """
body{font-family:-apple-system,'Segoe UI',Roboto,'DejaVu Sans',Arial,sans-serif;max-width:1120px;margin:0 auto;
padding:16px 28px;color:#222;line-height:1.45;background:#fff}
h1{font-size:1.6em;margin:.2em 0}h2{border-bottom:2px solid #4477aa;padding-bottom:3px;margin-top:1.8em}
h3{margin:1.2em 0 .4em;font-size:1.05em}.sub{color:#555;margin:.2em 0}nav{margin:.6em 0 1em;font-size:.95em}
nav a{color:#4477aa;text-decoration:none}table{border-collapse:collapse;margin:.5em 0;font-size:.88em;width:100%}
table.narrow{width:auto}th,td{border:1px solid #ddd;padding:3px 8px;text-align:left;vertical-align:top}
th{background:#f3f5f8}tbody tr:nth-child(even){background:#fafafa}table.ex td:last-child{font-family:monospace;
font-size:.92em;white-space:pre-wrap;word-break:break-word}figure{margin:1em 0}img.plot{max-width:100%;height:auto;
display:block;border:1px solid #eee}figcaption{color:#555;font-size:.88em;margin-top:.3em}
.warn{background:#fff3cd;border:1px solid #e0c36a;padding:6px 10px}.note{color:#666;font-size:.85em}
pre{background:#f6f8fa;padding:8px;overflow-x:auto;font-size:.82em}footer{color:#888;font-size:.8em;margin:3em 0 1em}
"""


def write(page: Page, html_path, plots_dir) -> list[Plot]:
    """Render the page to `html_path` and its plots to `plots_dir/<name>.png`."""
    text = page.render()
    plots_dir = Path(plots_dir)
    plots_dir.mkdir(parents=True, exist_ok=True)
    for old in plots_dir.glob("*.png"):
        old.unlink()
    for p in page.plots:
        with atomic.atomic_path(plots_dir / f"{p.name}.png") as tmp:
            Path(tmp).write_bytes(p.data)
    atomic.write_text(html_path, text)
    return page.plots
