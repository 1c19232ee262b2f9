"""The run's HTML report: one self-contained page with plots, a GPU timeline, throughput and provenance.

`write_html_report` is called by the report stage after summary.json is written; `timeline` is the
pure-data time line of the jobs (one band per snakemake command), `plots` draws the figures
(`timeline_plot` the GPU timeline's), `page` is the view model (what each section shows, as data: the
dataclasses in `view`, the sections about results in `results`, about the jobs in `runs`), `render`
fills the Jinja2 templates under `templates/` (one per section) with it.

May import: errors, cluster, store, data, judging, planning.
"""

from __future__ import annotations

from genjudge.report_html.page import Cell, Page, PageView, Plot, Table
from genjudge.report_html.render import render, write


def inventory_lanes(inv, gen_metas, judge_metas: dict) -> list[str] | None:
    """The configured GPUs of a local run (`inv`: the config's `gpu_inventory`, a list of ids or a count,
    limited by CUDA_VISIBLE_DEVICES as the jobs' leases were), so that a GPU no job used still gets its
    (idle) lane. None for `auto` (only the GPUs jobs held are known without asking nvidia-smi) and for
    SLURM jobs (ids per node)."""
    metas = [*gen_metas, *(m for jm in judge_metas.values() for m in jm.jobs())]
    if isinstance(inv, bool) or not isinstance(inv, int | list) or any(m.gpu_source == "slurm" for m in metas):
        return None
    from genjudge.cluster.gpu_lease import resolve_inventory

    return resolve_inventory(inv)


def write_html_report(
    run_summary,
    cells: dict,
    gen_metas,
    judge_metas: dict,
    provenance: dict,
    html_path,
    plots_dir,
    attempts=(),
    *,
    gpu_inventory=None,
    n_examples: int,
) -> PageView:
    """`cells`: {key: (cell RunSummary, its judgments frame)} as the report stage builds them; `attempts`:
    the failed attempts of the run's jobs (genjudge.store.failures.attempts_of); `gpu_inventory` and
    `n_examples`: the config's `gpu_inventory` and `report.n_examples`."""
    page = Page(
        run_summary.to_dict(),
        [Cell(k, s, df) for k, (s, df) in cells.items()],
        gen_metas,
        judge_metas,
        provenance,
        inventory_lanes(gpu_inventory, gen_metas, judge_metas),
        attempts,
    )
    page.n_examples = int(n_examples)
    return write(page, html_path, plots_dir)


__all__ = ["Cell", "Page", "PageView", "Plot", "Table", "inventory_lanes", "render", "write", "write_html_report"]
