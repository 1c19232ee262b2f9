"""`report/report.html` from the page's view model: Jinja2 templates under `templates/` (autoescaped),
one per section, and the plots as files under `report/plots/`.

The page is self-contained: plots embedded as PNG data URIs, the style inline, no scripts, no network.
"""

from __future__ import annotations

from pathlib import Path

import jinja2

from genjudge.judging.modes.base import pct
from genjudge.report_html.page import Page, PageView, seconds
from genjudge.store import atomic

ENV = jinja2.Environment(
    loader=jinja2.PackageLoader("genjudge.report_html", "templates"),
    autoescape=True,
    undefined=jinja2.StrictUndefined,  # a misspelt field fails the report rather than showing nothing
    trim_blocks=True,
    lstrip_blocks=True,
    keep_trailing_newline=True,
)
ENV.filters["pct"] = pct
ENV.filters["seconds"] = seconds


def render(view: PageView) -> str:
    return ENV.get_template("page.html").render(page=view)


def write(page: Page, html_path, plots_dir) -> PageView:
    """Render the page to `html_path` and its plots to `plots_dir/<name>.png`; the page's view model."""
    import matplotlib

    # Labels are data (categories, ids, errors): `$...$` in one is text, not matplotlib's mathtext,
    # which would fail to parse it and take the whole report down.
    with matplotlib.rc_context({"text.parse_math": False}):
        view = page.view()
    text = render(view)
    plots_dir = Path(plots_dir)
    plots_dir.mkdir(parents=True, exist_ok=True)
    for old in plots_dir.glob("*.png"):
        old.unlink()
    for p in view.plots:
        with atomic.atomic_path(plots_dir / f"{p.name}.png") as tmp:
            Path(tmp).write_bytes(p.data)
    atomic.write_text(html_path, text)
    return view
