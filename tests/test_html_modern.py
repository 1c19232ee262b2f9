"""report.html's sections of controlled pairwise results and corrected judge figures, from a summary
the report stage builds (planted judgments; no model)."""

import pytest
from test_controlled import planted
from test_ppi import judgments, label_section

from genjudge.config import defaults
from genjudge.config.experiment import resolve
from genjudge.judging import modes
from genjudge.report_html import Cell, Page, modern, write
from genjudge.stages.corrected import corrected_figures
from genjudge.stages.report import summarise_experiment
from genjudge.store.records import GenerateMeta, JudgeMeta


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("modern")
    cfg = defaults(
        run="m",
        dataset={"path": "data.jsonl"},
        generator={"model": "g"},
        generators={"verbose": {}, "base": {}},
        datasets={"d": {}},
        judge={"model": "j", "mode": "pairwise", "baseline": "base"},
    )
    exp = resolve(cfg)
    df = planted("verbose", seed=1, p_longer=0.75).assign(judge=next(iter(exp.judges)), category="c", prompt="q")
    df["reference"], df["unparsed_reason"], df["position_consistent"], df["exact_match"] = "r", None, True, None
    judge = next(iter(exp.judges))
    metas = [
        GenerateMeta(generator=g, dataset="d", shard=0, started_at=0.0, finished_at=1.0) for g in ("verbose", "base")
    ]
    jm = {judge: JudgeMeta(started_at=1.0, finished_at=2.0, cells={})}
    run, cells = summarise_experiment(exp, cfg, {judge: df}, metas, jm)
    summary = run.to_dict()
    rdf, truth = judgments()
    rows = [{"id": f"q{i}", "label": "correct" if truth["g"][i] else "incorrect"} for i in range(1, 400, 4)]
    summary["validity"] = {
        "judges": {
            "ref": {
                "corrected": corrected_figures(rdf, label_section(tmp, rows), modes.get("reference"), "judge.labels")
            }
        },
        "panels": {},
    }
    view = write(
        Page(summary, [Cell(k, s, d) for k, (s, d) in cells.items()], metas, jm, {}, None),
        tmp / "r.html",
        tmp / "plots",
    )
    return summary, view, (tmp / "r.html").read_text()


def test_the_controlled_section_shows_raw_beside_controlled_with_each_coefficient(page):
    summary, view, html = page
    lc = next(iter(summary["across_cells"].values()))["length_controlled"]["d"]["verbose"]
    section = next(s for s in view.sections if s.ident == "controlled")
    assert section.length.head[4:6] == ["raw win rate", "length-controlled"]
    [row] = section.length.rows
    assert (
        row[2] == "verbose"
        and row[5].startswith(f"{100 * lc['value']:.1f}%")
        and row[7] == f"{lc['coefficients']['length']:+.2f}"
    )
    assert '<section id="controlled"><h2>Length- and style-controlled comparisons</h2>' in html
    assert "AlpacaEval 2.0" in html and "Controlled comparisons</a>" in html


def test_the_corrected_section_says_which_items_were_labelled_and_warns(page):
    _, view, html = page
    section = next(s for s in view.sections if s.ident == "corrected")
    [row] = section.table.rows
    assert row[:3] == ["ref", "g/d", "share correct"] and row[7] == "100 of 400"
    assert "cover only 1 of the 2 categories" in section.warnings[0]
    assert section.labelled[0].startswith("ref, g/d: 100 items: q1, q101, q105")
    assert '<section id="corrected">' in html and "Angelopoulos" in html and "Warning:" in html


def test_no_section_without_its_data():
    assert modern.controlled({"across_cells": {"j": {"bradley_terry": {}}}}) is None
    assert modern.corrected({"validity": {"judges": {"j": {"bias": {}}}}}) is None
    refused = {"measure": "win rate", "rate": True, "cells": {}, "refused": "the labels do not say whose answers"}
    c = modern.corrected({"validity": {"judges": {"j": {"corrected": refused}}}})
    assert c.table is None and c.refused == ["j: the labels do not say whose answers"]
