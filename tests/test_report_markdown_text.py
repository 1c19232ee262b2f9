"""Text from outputs, datasets, errors and the config is text in report.md: rendered by Python-Markdown
(mkdocs) and by a CommonMark renderer (markdown-it) it makes no link, image, script, heading or extra
table cell, and shows exactly its own characters (whitespace as one space). And a models x benchmarks
column whose cells all failed is headed by its mode's headline measure, as the others are."""

from html.parser import HTMLParser

import markdown
import pytest
from markdown_it import MarkdownIt
from test_report_numbers import C, W, judgments, summarise
from test_report_table import LEADERBOARD, STRENGTHS, study

from genjudge.judging.tables import markdown_table, md_code, md_line, md_text
from genjudge.stages import report_table
from genjudge.stages.report_markdown import _category_table, _cell

INJECTED = [
    "[x](javascript:alert(1))",
    "[x](data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==)",
    "![t](http://evil.example/p.png)",
    "![t][r] [a][r] [b] [r]",
    "<script>alert(1)</script>",
    '<iframe src="javascript:alert(2)"></iframe>',
    "<http://evil.example/> <a@evil.example> <!-- hidden -->",
    "arith $\\frac{1$ ^_ \n## Owned",
    "line one\n\n# Owned\n---\n| a | b |\n|---|---|\n| c | d |",
    "[a\\](javascript:alert(1)) a\\\\](x) \\[b](y)",
    "*em* _em_ **strong** __strong__ `code` ``co`de`` ~~del~~ ~sub~",
    '{: onclick="alert(1)" } cell {#id .cls}',
    "&lt;b&gt; &amp; &#36; &copy; \\&lt;",
    "1. one\n2) two\n- dash\n+ plus\n* star\n> quote\n    indented\n===\n[r]: http://evil.example/",
    "snake_case_name mean_score a__b _lead trail_ x_ _y",
    "pipes | in \\| cells || here",
]
BAD_TAGS = {"a", "img", "script", "iframe", "em", "strong", "code", "del", "s", "blockquote", "hr", "pre"}
BAD_TAGS |= {"ul", "ol", "li", "h1", "h2", "h3", "h4", "h5", "h6", "table", "style"}


def python_markdown(text: str) -> str:
    # mkdocs.yml's extensions, and attr_list (Material sites often add it: `{: onclick=...}` sets attributes)
    return markdown.markdown(text, extensions=["tables", "admonition", "toc", "attr_list"])


RENDERERS = {
    "python-markdown": python_markdown,
    "markdown-it": MarkdownIt("commonmark").enable(["table", "strikethrough"]).render,
}


VOID = {"img", "hr", "br", "input"}


class Html(HTMLParser):
    """The tags (with their attributes), the tables (rows of cell texts), the text of each tag and all text."""

    def __init__(self, html: str):
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict]] = []
        self.tables: list[list[list[str]]] = []
        self.text: dict[str, list[str]] = {}
        self.all = ""
        self._open: list[str] = []
        self.feed(html)
        self.close()

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))
        if tag in VOID:
            return
        self._open.append(tag)
        if tag == "table":
            self.tables.append([])
        elif tag == "tr":
            self.tables[-1].append([])
        elif tag in ("td", "th"):
            self.tables[-1][-1].append("")
        self.text.setdefault(tag, []).append("")

    def handle_endtag(self, tag):
        if tag in self._open:
            while self._open.pop() != tag:
                pass

    def handle_data(self, data):
        self.all += data
        for tag in self._open:
            self.text[tag][-1] += data
        if {"td", "th"} & set(self._open):
            self.tables[-1][-1][-1] += data

    def names(self) -> list[str]:
        return [t for t, _ in self.tags]


def shown(text: str) -> str:
    return " ".join(text.split())


@pytest.mark.parametrize("renderer", RENDERERS)
@pytest.mark.parametrize("value", INJECTED)
def test_data_in_a_table_cell_is_that_cell_text_and_nothing_else(renderer, value):
    md = "\n".join(markdown_table(["id", "value", "n"], [["q1", value, "3"], ["q2", "plain", "4"]]))
    html = Html(RENDERERS[renderer](md))
    assert not (set(html.names()) - {"table", "thead", "tbody", "tr", "th", "td"}), (md, html.names())
    assert all(set(attrs) <= {"align"} for _, attrs in html.tags), html.tags  # no attribute from the data
    (table,) = html.tables
    assert [len(r) for r in table] == [3, 3, 3], table
    assert table[1] == ["q1", shown(value), "3"], md
    # the report's own cells for a value as `_cell` shows it (one line, cut at its width)
    assert Html(RENDERERS[renderer]("\n".join(markdown_table(["v"], [[value]])))).tables[0][1] == [shown(value)]
    row = f"| {_cell(value, 500)} | 3 |"
    html = Html(RENDERERS[renderer]("\n".join(["| value | n |", "|---|---|", row])))
    assert html.tables[0][1] == [shown(value), "3"] and "a" not in html.names() and "img" not in html.names()


@pytest.mark.parametrize("renderer", RENDERERS)
@pytest.mark.parametrize("value", INJECTED)
def test_data_in_running_text_and_headings_is_one_line_of_text(renderer, value):
    render = RENDERERS[renderer]
    for line in ("{}", "> **Warning:** {}", "- Judge: {} (mode x)"):
        md = f"Before.\n\n{line.format(md_line(value))}\n\nAfter."
        html = Html(render(md))
        # the tags of the same line with plain text: no heading, list, link, code or table of the data's own
        assert html.names() == Html(render(md.replace(md_line(value), "plain text"))).names(), md
        assert shown(value) in shown(html.all), md
    html = Html(render(f"### {md_line(value)}\n\nAfter."))
    assert html.names() == ["h3", "p"] and html.text["h3"] == [shown(value)], html.names()
    html = Html(render(f"- Generator: {md_code(value)}"))
    assert html.names() == ["ul", "li", "code"] and html.text["code"] == [shown(value)]


def test_the_reviewers_values_exactly():
    assert _cell("[x](javascript:alert(1))") != "[x](javascript:alert(1))"
    html = python_markdown(_cell("[x](javascript:alert(1))") + " " + _cell("![t](http://evil.example/p.png)"))
    assert "<a" not in html and "<img" not in html and "javascript:alert(1)" in html
    # intervals, signs and ranks of the report's own cells are as they were
    for own in ("90.0% [80.0, 100.0] (1)", "-0.20 [-1.20, +0.80] (2; 1 by intervals)", "1.33 (3 columns)", "a - b"):
        assert md_text(own) == own


class _Summary:
    mode = "reference"
    exact_match_shown = True
    per_category = {
        "arith $\\frac{1$ ^_ \n## Owned": {"n_items": 2, "n_judged": 2, "n_unparsed": 0, "exact_match": {"value": 0.5}},
        "plain": {"n_items": 1, "n_judged": 1, "n_unparsed": 0, "exact_match": {"value": 1.0}},
    }


def test_a_category_with_a_line_break_stays_in_its_row():
    s = _Summary()
    for c in s.per_category.values():
        c["accuracy"] = {"value": 0.5, "ci95": [0.1, 0.9], "n": 2}
    md = "\n".join(["## By category", "", *_category_table(s), "", "After."])
    for render in RENDERERS.values():
        html = Html(render(md))
        assert html.names().count("h2") == 1 and "Owned" not in "".join(html.text["h2"])
        (table,) = html.tables
        assert [len(r) for r in table] == [6, 6, 6]
        assert table[1][0] == "arith $\\frac{1$ ^_ ## Owned" and table[2][0] == "plain"


def report(outputs, categories, ids, reasons):
    a = judgments(
        "a",
        [C, W, None],
        output=outputs,
        reference=outputs[::-1],
        prompt=outputs[1:] + outputs[:1],
        category=categories,
        id=ids,
        finish_reason=["length", "stop", "stop"],
        judge_output=outputs,
    )
    a.loc[2, "unparsed_reason"] = reasons
    a["unparsed_detail"] = [None, None, outputs[0]]
    return summarise(a, ["a"])[2]


def structure(html: Html) -> tuple:
    heads = [(t, html.text[t][i]) for t in ("h1", "h2", "h3", "h4") for i in range(len(html.text.get(t, [])))]
    return html.names(), [[len(r) for r in t] for t in html.tables], heads


@pytest.mark.parametrize("renderer", RENDERERS)
def test_a_report_of_injected_outputs_categories_ids_and_errors_has_the_structure_of_a_plain_one(renderer):
    """The same report with plain text and with injected text: the same tags, headings and tables."""
    plain = report(["one", "two", "three"], ["c1", "c2", "c2"], ["q0", "q1", "q2"], "no verdict marker")
    injected = report(
        [INJECTED[0], INJECTED[2], INJECTED[9]],
        [INJECTED[7], INJECTED[8], INJECTED[8]],
        ["<q0>", "[q1](javascript:x)", "q2\n# Owned"],
        INJECTED[13],
    )
    a, b = Html(RENDERERS[renderer](plain)), Html(RENDERERS[renderer](injected))
    assert structure(b) == structure(a)
    assert not any(attrs.get("href") or attrs.get("src") for _, attrs in b.tags)
    cells = {c for t in b.tables for r in t for c in r}
    assert shown(INJECTED[7]) in cells and shown(INJECTED[8]) in cells  # the categories, as written
    assert shown(INJECTED[13]) in cells  # the unparsed reason


# --- a column whose cells all failed ------------------------------------------------------------------


def test_a_column_whose_cells_all_failed_is_headed_by_its_modes_headline():
    rows = [r for r in LEADERBOARD if r["judge"] not in ("vs_a", "score")]
    failed = [
        {"judge": j, "generator": g, "dataset": "mtbench", "opponent": o, "stage": "judge", "errors": []}
        for j, g, o in (("vs_a", "b", "a"), ("vs_a", "c", "a"), ("score", "a", None), ("score", "b", None))
    ]
    t = report_table.build(study(), rows, STRENGTHS, failed)
    cols = {c["key"]: (c["measure"], c["kind"]) for c in t["columns"]}
    assert cols["mtbench/vs_a"] == ("win_rate", "rate") and cols["mtbench/score"] == ("mean_score", "mean")
    head = report_table.markdown(t)[0]
    assert "mtbench · vs_a (win rate)" in head and "mtbench · score (mean score)" in head and "(-)" not in head
    assert report_table.summary_lines(t, [])[0] == head  # `genjudge summary` prints the same table
    # a reference judge whose cells all failed: accuracy
    rows = [r for r in LEADERBOARD if r["judge"] != "ref"]
    failed = [
        {"judge": "ref", "generator": g, "dataset": "gsm8k", "opponent": None, "stage": "judge", "errors": []}
        for g in "abc"
    ]
    t = report_table.build(study(), rows, STRENGTHS, failed)
    assert "gsm8k · ref (accuracy)" in report_table.markdown(t)[0]


@pytest.mark.parametrize("renderer", RENDERERS)
def test_the_corrected_figures_list_shows_ids_warnings_and_refusals_as_text(renderer):
    """The PPI section's lines under its table: labelled ids, warnings naming categories, a refusal
    quoting ids."""
    from genjudge.stages import corrected

    link, image, tag = "[x](javascript:alert(1))", "![t](http://evil.example/p.png)", "<img src=x onerror=alert(1)>"
    cell = {
        "n_labelled": 3,
        "n_unlabelled": 10,
        "labels_only": {"value": 0.5, "ci95": [0.1, 0.9], "n": 3},
        "judge": {"value": 0.5, "ci95": [0.1, 0.9], "n": 13},
        "agreement": 1.0,
        "ppi": None,
        "why_not": "x",
        "n_answers": 13,
        "n_labelled_unparsed": 0,
        "n_labelled_items": 2,
        "labelled_ids": [link, tag],
        "warnings": [f"the labels cover only 1 of the 2 categories ({image}; none of b)"],
    }
    entries = {
        "j": {"measure": "share correct", "rate": True, "labels": "l.csv", "cells": {"g/d": cell}},
        "k": {"refused": f"ids repeat (e.g. '{link}')", "cells": {}},
    }
    html = Html(RENDERERS[renderer]("\n".join(corrected.markdown(entries))))
    assert not {"a", "img", "script"} & set(html.names())
    for value in (link, image, tag):
        assert value in html.all
