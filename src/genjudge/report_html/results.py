"""The page's sections about results: leaderboard, per turn and category, scores, the judge's
agreement and bias, unparsed verdicts, truncated answers, the study table, failed cells, paired
differences. A mixin of `Page` (page.py), which holds the run's summary, cells and plots.

Counts say what they count: an item is a question of the dataset, an answer one generated text
graded by the judge (an item has one per turn and per sample).
"""

from __future__ import annotations

import pandas as pd

from genjudge.judging import agreement as human_agreement
from genjudge.judging import modes, tables
from genjudge.judging import paired as paired_diffs
from genjudge.judging.headline import differing_text, headline_rows, labelled_text, truncated_text
from genjudge.judging.modes.base import pct, rate_text
from genjudge.report_html import plots
from genjudge.report_html.view import (
    PLOT_STUDY,
    ROW_KEYS,
    ByTurn,
    Categories,
    Confusion,
    Distributions,
    Failed,
    Headline,
    Headlines,
    Human,
    Paired,
    Study,
    Table,
    Truncated,
    Unparsed,
    clip,
    measure_text,
)


class ResultSections:
    def headline(self) -> Headline:
        summary, per_cell = None, []
        if len(self.cells) == 1:
            summary = Table(["measure", "value"], [list(r) for r in headline_rows(self.cells[0].summary)], "narrow")
        else:  # what the leaderboard's columns leave out (rule-decided counts, PARTIAL verdicts, warnings): as report.md
            for c in self.cells:
                rows = [list(r) for r in headline_rows(c.summary)]
                per_cell.append((self.cell_label(c), Table(["measure", "value"], rows, "narrow")))
        measures = self.measures()
        pairwise = any(r.get("opponent") for r in self.rows)
        answers = self.several_answers()
        head = [
            "generator",
            *(["vs"] if pairwise else []),
            "dataset",
            "judge",
            *measures,
            "items",
            *(["answers"] if answers else []),
            "unparsed answers" if answers else "unparsed",
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
                    *([r.get("n_answers", r["n_items"])] if answers else []),
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
            cells=per_cell,
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
                        "n": m["n_judged"],  # answers: an item's turns and samples each count
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
        counts = "judged items of the category"
        if self.several_answers():
            counts = "judged answers of the category: each turn and sample of an item is an answer of its own"
        return Categories(p, heatmap, counts) if p else None

    def by_turn(self) -> ByTurn | None:
        """Multi-turn items: each cell's measure per turn (summary's `per_turn`, one entry per turn)."""
        rows, per = [], []
        for c in self.cells:
            turns = c.summary.to_dict().get("per_turn") or {}
            if not turns:
                continue
            first = next((k for k, v in c.row.items() if k not in ROW_KEYS and isinstance(v, dict)), None)
            for turn, t in turns.items():
                v = t.get(first) if first else None
                rows.append([self.cell_label(c), turn, t["n_items"], t["n_judged"], t["n_unparsed"], measure_text(v)])
                if isinstance(v, dict) and "value" in v:
                    per.append({"cell": self.cell_label(c), "turn": turn, "measure": first, **v})
        if not rows:
            return None
        head = ["generator · dataset · judge", "turn", "items", "judged answers", "unparsed answers", "measure"]
        return ByTurn(Table(head, rows, "narrow"), self.plot("by_turn", plots.turns(per)))

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
        per, warnings = [], []
        for judge, m in (self.s.get("across_cells") or {}).items():
            for dataset, st in (m.get("bradley_terry") or {}).items():
                title = f"Bradley-Terry strengths · dataset {dataset} · judge {judge}"
                if gone := tables.failed_pairs(self.s.get("failed_cells"), judge, dataset):
                    title += f" · without failed {', '.join(gone)}"
                    warnings.append(
                        f"the Bradley-Terry strengths of judge {judge} on dataset {dataset} were fitted without the "
                        f"games of the failed cell(s) {', '.join(gone)} (see Failed cells): every strength lacks them."
                    )
                per.append((title, st))
        if per:
            strengths_plot = self.plot("strengths", plots.strengths(per))
        if not (scores_plot or outcomes_plot or strengths_plot):
            return None
        return Distributions(scores_plot, outcomes_plot, strengths_plot, warnings)

    def confusion(self) -> Confusion | None:
        mats, agree = [], []
        for c in self.cells:
            mode = modes.get(c.summary.mode)
            if mode.needs_baseline or not mode.labels or "exact_match" not in c.df:
                continue
            # The answers the agreement rate counts: graded by the judge itself (not by the cascade's rule),
            # with a parsed verdict and an exact match to compare it with.
            df = c.df
            judged = df["verdict"].notna() & df["exact_match"].notna()
            if "decided_by" in df:
                judged &= df["decided_by"] == "judge"
            df = df[judged]
            em = df["exact_match"].astype(bool).map({True: "match", False: "no match"})
            m = pd.crosstab(df["verdict"], em)
            order = [v for v in mode.labels.values() if v in m.index]
            order += [v for v in m.index if v not in order]
            cols = [v for v in ("match", "no match") if v in m.columns]
            mats.append((self.cell_label(c), m.reindex(index=order, columns=cols, fill_value=0)))
            a = c.summary.to_dict().get("judge_exact_match_agreement")
            if a:
                agree.append([self.cell_label(c), rate_text(a), a.get("n")])
        if not mats:
            return None
        p = self.plot("judge_vs_exact_match", plots.confusions(mats[:12]))
        head = ["generator · dataset · judge", "judge agrees with exact match", "items"]
        agreement = Table(head, agree, "narrow") if agree else None
        return Confusion(p, agreement, mats) if p or agreement else None

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
                verdicts, humans, counts = human_agreement.confusion_rows(h["confusion"])  # as report.md shows it
                mats.append((f"{kind} {name}", pd.DataFrame(counts, index=verdicts, columns=humans)))
                kappa = h.get("cohen_kappa")
                f1 = (h.get("balanced_f1") or {}).get("value")
                people = (h.get("labellers") or {}).get("balanced_f1")
                rows.append(
                    [
                        f"{kind} {name}",
                        h.get("labels"),
                        labelled_text(h) if h.get("n_items") is not None else h.get("n_labelled"),
                        h.get("n_unparsed"),
                        measure_text(h.get("agreement")),
                        "" if kappa is None else f"{kappa:.2f}",
                        "" if f1 is None else f"{f1:.2f}" + ("" if people is None else f" (labellers: {people:.2f})"),
                    ]
                )
        agreement = plot = None
        matrices = []
        if mats:
            head = [
                "judge",
                "labels",
                "labelled answers",
                "unparsed answers",
                "agreement",
                "Cohen's kappa",
                "balanced F1 (rubric criteria)",
            ]
            agreement = Table(head, rows, "narrow")
            plot = self.plot("judge_vs_human", plots.confusions(mats[:12], xlabel="human label"))
        matrices = mats
        pairwise, length = self.bias(v)
        differing = [
            differing_text(kind, name, e["human"])
            for kind, entries in (("judge", v.get("judges") or {}), ("panel", v.get("panels") or {}))
            for name, e in entries.items()
            if ((e or {}).get("human") or {}).get("labels_on_differing_answers")
        ]
        view = Human(
            warnings=[*(v.get("self_preference") or []), *differing],
            agreement=agreement,
            plot=plot,
            bias_pairwise=pairwise,
            bias_length=length,
            length_measure=v.get("length_measure"),
            panels=self.panels(v),
            matrices=matrices,
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
            length = Table(["judge", "Pearson (verdict, length)", "Spearman", "parsed answers"], single_rows, "narrow")
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
                        [self.cell_label(c), r.id, r.unparsed_reason, clip(getattr(r, "judge_output", ""), 300)]
                    )
        return Unparsed(
            n_unparsed=sum(reasons.values()),
            n_truncated=sum(v for k, v in reasons.items() if "truncated" in k),
            reasons=Table(["reason", "verdicts"], sorted(([k, v] for k, v in reasons.items()), key=lambda r: -r[1])),
            plot=self.plot("unparsed_reasons", plots.reasons(reasons)),
            examples=Table(["generator · dataset · judge", "id", "reason", "judge said"], rows, "ex"),
        )

    def study(self) -> Study | None:
        table = self.s.get("table") or {}
        if not tables.study_shown(table):
            return None
        plot = self.plot(PLOT_STUDY, plots.models_by_benchmarks(table))
        return Study(Table(*tables.study_rows(table)), plot, tables.STUDY_NOTE, table.get("mean_rank_warning"))

    def headlines(self) -> Headlines | None:
        lines = tables.headline_lines(self.s.get("table") or {})
        return Headlines(lines) if lines else None

    def failed(self) -> Failed | None:
        failed = self.s.get("failed_cells") or []
        return Failed(Table(*tables.failed_rows(failed), "ex"), tables.failed_note(failed)) if failed else None

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
                examples.append([label, where, clip(e["output_end"], 200)])
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
