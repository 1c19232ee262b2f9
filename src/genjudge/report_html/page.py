"""The view model of `report/report.html`: what each section of the page shows, as plain data.

`Page` reads the run (summary.json as a dict, the cells with their judgments, the jobs' meta files,
the failed attempts, provenance) and `Page.view()` returns a `PageView`: the header, then one
dataclass per section (view.py), None where the section has nothing to show. The sections about
results are made in results.py, those about the jobs in runs.py. No HTML is written here: `render`
fills the templates under `templates/`, one per section, where every word of the page lives.

Sections appear when their data does: the leaderboard always; by turn for multi-turn items; the
category heat map or intervals, the score distribution, the win / tie / loss bars and the strengths
by mode; the unparsed verdicts when there are any. Top-level fields of summary.json that no section
reads are shown at the end as they are, so a new measure is visible before it has a section of its own.
"""

from __future__ import annotations

from genjudge.report_html import modern, plots
from genjudge.report_html import timeline as tl
from genjudge.report_html.results import ResultSections
from genjudge.report_html.rubric import rubric_section
from genjudge.report_html.runs import RunSections
from genjudge.report_html.view import (  # noqa: F401 - the view model's names, importable from here
    NAV,
    ROW_KEYS,
    SHOWN,
    Band,
    ByTurn,
    Cell,
    Extra,
    GpuTimeline,
    More,
    PageView,
    Plot,
    Table,
    measure_text,
    seconds,
)


class Page(ResultSections, RunSections):
    def __init__(
        self,
        summary: dict,
        cells: list[Cell],
        gen_metas,
        judge_metas,
        provenance: dict,
        inventory=None,
        attempts=(),
    ):
        """`attempts`: the run's failed attempts (genjudge.store.failures.attempts_of), drawn in the
        timeline of the command that ran them."""
        self.s = summary
        self.cells = cells
        self.rows = summary.get("leaderboard") or [c.row for c in cells]
        self.gen_metas = gen_metas
        self.judge_metas = judge_metas
        self.provenance = provenance
        self.bands = tl.bands(tl.jobs_from_metas(gen_metas, judge_metas, attempts), inventory)
        self.n_examples = 3
        self._plots: list[Plot] = []

    @property
    def jobs(self) -> list[tl.Job]:
        """Every job that succeeded, of every command, in start order."""
        return sorted((j for b in self.bands for j in b.jobs if not j.failed), key=lambda j: (j.start, j.name))

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

    def several_answers(self) -> bool:
        """Whether some item has several answers (turns, samples): counts of items and answers differ."""
        return any(r.get("n_answers", r["n_items"]) != r["n_items"] for r in self.rows)

    # --- the page -------------------------------------------------------------------------
    def view(self) -> PageView:
        """The whole page; draws its plots."""
        s = self.s
        self._plots = []
        sections = [
            self.headlines(),
            self.failed(),
            self.study(),
            self.headline(),
            self.paired(),
            modern.controlled(s),
            self.by_turn(),
            self.categories(),
            rubric_section(self),
            self.distributions(),
            self.confusion(),
            self.human(),
            modern.corrected(s),
            self.unparsed(),
            self.truncated(),
            self.gpus(),
            self.throughput(),
            self.endpoints(),
            self.time_model(),
            self.provenance_section(),
            self.more(),
        ]
        return PageView(
            run=s.get("run"),
            mode=s.get("mode"),
            n_items=s.get("n_items"),
            n_answers=s.get("n_answers", s.get("n_items")),
            n_cells=s.get("n_cells") or len(self.rows),
            n_unparsed=s.get("n_unparsed"),
            generators=[str(g) for g in dict.fromkeys(r["generator"] for r in self.rows)],
            judges=[str(j) for j in dict.fromkeys(r["judge"] for r in self.rows)],
            warnings=[*(s.get("warnings") or []), *(s.get("placement_warnings") or [])],
            sections=[x for x in sections if x is not None],
            plots=self._plots,
        )
