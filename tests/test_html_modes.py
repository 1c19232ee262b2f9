"""report.html for score and pairwise judges over several generators (judgments made up here, no
models): the heat map, the score distribution, the win / tie / loss bars and the strengths are drawn,
decode as images, and an unknown summary field still shows."""

import json
import os
import re
import shutil
import subprocess
import sys
import zipfile

import numpy as np
import pandas as pd
import pytest
from judges import ROOT
from PIL import Image

from genjudge.config import defaults
from genjudge.config.experiment import resolve
from genjudge.report_html import Cell, Page, PageView, Table, render, write
from genjudge.report_html.page import Extra, More
from genjudge.stages.report import summarise_experiment
from genjudge.stages.report_table import build
from genjudge.store.records import GenerateMeta, JudgeMeta

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "browser"))
import chromium  # noqa: E402

GENS = ["alpha", "beta", "gamma"]
CATS = ["arithmetic", "capitals", "counting"]


def frame(rng, n, generator, dataset, opponent=None):
    return pd.DataFrame(
        {
            "generator": generator,
            "dataset": dataset,
            "opponent": opponent,
            "id": [f"q{i}" for i in range(n)],
            "category": [CATS[i % 3] for i in range(n)],
            "prompt": "q",
            "reference": "r",
            "output": "o",
            "exact_match": rng.random(n) < 0.5,
            "decided_by": "judge",
            "judge_output": "SCORE: 7",
            "p_correct": np.nan,
        }
    )


def score_judgments(rng, n=60):
    parts = []
    for g in GENS:
        df = frame(rng, n, g, "data")
        scores = rng.integers(1, 11, n).astype(float)
        df["verdict"] = [f"{s:g}" for s in scores]
        df.loc[:2, "verdict"] = None  # three unparsed, one of them truncated
        df["unparsed_reason"] = None
        df.loc[:1, "unparsed_reason"] = "no SCORE: line"
        df.loc[2, "unparsed_reason"] = "truncated: the judge reached max_new_tokens before its verdict"
        df["score"] = pd.to_numeric(df["verdict"], errors="coerce")
        parts.append(df)
    return pd.concat(parts, ignore_index=True)


def pairwise_judgments(rng, n=60):
    parts = []
    for i, g in enumerate(GENS):
        for o in GENS[i + 1 :]:
            df = frame(rng, n, g, "data", o)
            df["verdict"] = rng.choice(["win", "tie", "loss"], n, p=[0.5, 0.2, 0.3])
            df["unparsed_reason"] = None
            df["position_consistent"] = df["verdict"] != "tie"
            parts.append(df)
    return pd.concat(parts, ignore_index=True)


def metas():
    gen = [
        GenerateMeta(generator=g, dataset="data", shard=0, gpus=[str(i)], started_at=100.0, finished_at=110.0 + i)
        for i, g in enumerate(GENS)
    ]
    judges = {
        j: JudgeMeta(gpus=["0", "1", "2"], started_at=115.0 + 10 * k, finished_at=124.0 + 10 * k, cells={})
        for k, j in enumerate(("scorer", "pairs"))
    }
    return gen, judges


# The page's figures, in page order.
PLOTS = [
    "models_by_benchmarks",
    "leaderboard",
    "per_category",
    "score_distribution",
    "outcomes",
    "strengths",
    "judge_vs_human",
    "unparsed_reasons",
    "gpu_timeline",
]
FAILED = {
    "generator": "gamma",
    "dataset": "data",
    "judge": "scorer",
    "opponent": None,
    "stage": "generate",
    "errors": [
        {
            "type": "InputError",
            "message": "item q7: the prompt (900 tokens) | and max_new_tokens exceed the context (512)",
            "log": "logs/modes/generate/gamma/data/0.log",
            "generator": "gamma",
            "dataset": "data",
            "shard": 0,
        }
    ],
}
TIME_MODEL = {
    "jobs": [
        {
            "job": "generate alpha/data/0",
            "device": "this CPU",
            "requests": 60,
            "batch_size": 16,
            "predicted": {"load": 0.1, "prefill": 0.2, "decode": 1.0, "compute": 1.2},
            "measured": {"load": 0.12, "prefill": None, "decode": 1.5, "compute": 1.6},
        }
    ],
    "measured_over_predicted": {"load": 1.2, "prefill": None, "decode": 1.5, "compute": 1.33},
}


@pytest.fixture(scope="module")
def modes_page(tmp_path_factory):
    """The page's directory and its view model."""
    rng = np.random.default_rng(0)
    cfg = defaults(
        run="modes",
        dataset={"path": "data.jsonl"},
        generator={"model": "g"},
        generators={g: {} for g in GENS},
        datasets={"data": {}},
        judge={"model": "j"},
        judges={"scorer": {"mode": "score"}, "pairs": {"mode": "pairwise", "pairs": "all"}},
    )
    exp = resolve(cfg)
    gen_metas, judge_metas = metas()
    judgments = {"scorer": score_judgments(rng), "pairs": pairwise_judgments(rng)}
    run, cells = summarise_experiment(exp, cfg, judgments, gen_metas, judge_metas)
    summary = run.to_dict()
    summary["judge_bias"] = {"position": {"value": 0.1, "ci95": [0.05, 0.2], "n": 180}, "verbosity": 0.03}
    # Agreement with human labels as summary.json holds it: {human label: {judge label: count}}.
    summary["validity"] = {
        "judges": {
            "scorer": {
                "human": {
                    "labels": "labels.jsonl",
                    "n_labelled": 30,
                    "n_unparsed": 1,
                    "agreement": {"value": 0.6, "ci95": [0.4, 0.75], "n": 29},
                    "confusion": {"7": {"7": 10, "8": 4}, "8": {"7": 3, "8": 7}, "9": {"9": 5}},
                }
            },
            "pairs": {
                "bias": {
                    "flip_rate": {"value": 0.125, "ci95": [0.05, 0.25], "n": 40},
                    "first_position_win_rate": {"value": 0.55, "ci95": [0.4, 0.7], "n": 80},
                    "prefer_longer": {"value": 0.68, "ci95": [0.5, 0.8], "n": 30},
                }
            },
        },
        "length_measure": "characters of the answer",
        "self_preference": ["judge pairs and generator g0 are of one family"],
        "panels": {
            "trio": {
                "rule": "majority",
                "judges": ["a", "b", "c"],
                "measures": {"accuracy": {"value": 0.75, "ci95": [0.6, 0.86], "n": 44}},
                "parsed_votes_per_item": {"3": 40, "2": 4},
                "no_majority": 1,
                "inter_judge": {"fleiss_kappa": -0.4},
            }
        },
    }
    # A failed cell, the models x benchmarks table over it, the time model and truncated answers, as the
    # report stage adds them.
    summary["failed_cells"] = [FAILED]
    summary["table"] = build(exp, run.leaderboard, run.across_cells, [FAILED])
    summary["time_model"] = TIME_MODEL
    first = next(iter(cells.values()))[0]
    first.n_truncated, first.truncated_rate = 2, 2 / 60
    first.truncated_examples = [{"id": "q3", "sample": 1, "output_end": "and so the answer is <b>"}]
    summary["leaderboard"][0].update(n_truncated=2, truncated_rate=2 / 60)
    page = Page(summary, [Cell(k, s, df) for k, (s, df) in cells.items()], gen_metas, judge_metas, {}, ["0", "1", "2"])
    out = tmp_path_factory.mktemp("modes")
    view = write(page, out / "report.html", out / "plots")
    return out, view


@pytest.fixture(scope="module")
def rendered(modes_page):
    return modes_page[0]


def test_every_mode_plot_is_drawn_and_decodes(rendered):
    names = sorted(p.stem for p in (rendered / "plots").glob("*.png"))
    assert names == sorted(PLOTS)
    for p in (rendered / "plots").glob("*.png"):
        with Image.open(p) as im:
            im.verify()
    page = (rendered / "report.html").read_text()
    # Several generators: the categories are a heat map (generator x category), one panel per judge.
    assert "measure of each generator in each category" in page
    # An unknown field of summary.json is shown rather than dropped.
    assert "judge bias" in page and "10.0% [5.0, 20.0]" in page
    assert "truncated" in page and "no SCORE: line" in page
    assert "<td>judge scorer</td><td>labels.jsonl</td><td>30</td><td>1</td><td>60.0% [40.0, 75.0]</td>" in page
    # Bias diagnostics, the self-preference warning and panels are shown as such, not as raw JSON.
    assert "Warning: judge pairs and generator g0 are of one family" in page
    assert "<td>pairs</td><td>12.5% [5.0, 25.0]</td><td>55.0% [40.0, 70.0]</td><td>68.0% [50.0, 80.0]</td>" in page
    assert "<td>trio</td><td>majority of a, b, c</td><td>accuracy 75.0% [60.0, 86.0]</td><td>3: 40, 2: 4</td>" in page
    assert "<td>-0.40</td>" in page and "<h3>validity</h3>" not in page


def test_the_view_model_holds_what_each_section_shows(modes_page):
    view = modes_page[1]
    assert [ident for ident, _ in view.nav] == [
        "headlines",
        "failed",
        "study",
        "headline",
        "paired",
        "categories",
        "distributions",
        "human",
        "unparsed",
        "truncated",
        "timeline",
        "throughput",
        "time_model",
        "provenance",
        "more",
    ]
    (failed,) = view.section("failed").table.rows
    assert failed[:3] == ["gamma/data", "scorer", "generate gamma/data/0"]
    assert failed[3] == "InputError: item q7: the prompt (900 tokens) | and max_new_tokens exceed the context (512)"
    study = view.section("study").table
    assert study.head == ["generator", "data · scorer (mean score)", "data · pairs (strength)", "mean rank"]
    assert study.column("generator")[-1] == "gamma" and study.rows[-1][1] == "failed"
    assert [r[2] for r in view.section("paired").table.rows] == ["alpha - beta", "alpha - gamma", "beta - gamma"]
    trunc = view.section("truncated")
    assert trunc.counts.rows[0][1:3] == ["2", "3.3%"] and trunc.examples.rows[0][1:] == [
        "q3, sample 1",
        "and so the answer is <b>",
    ]
    tm = view.section("time_model")
    assert tm.table.rows == [["generate alpha/data/0", "this CPU", "60", "16", "0.1 / 0.12", "0.2 / -", "1 / 1.5"]]
    assert tm.ratio == "Measured over predicted, all jobs: load 1.20x, prefill -, decode 1.50x."
    assert view.section("confusion") is None  # no reference-mode judge
    assert (view.run, view.mode, view.generators, view.judges) == ("modes", "mixed", GENS, ["scorer", "pairs"])
    board = view.section("headline").leaderboard
    assert board.column("truncated")[0] == "2 (3.3%)"
    assert board.column("generator") == ["alpha", "beta", "gamma", "alpha", "alpha", "beta"]
    assert board.column("vs") == ["", "", "", "beta", "gamma", "gamma"]
    assert board.column("unparsed") == ["3", "3", "3", "0", "0", "0"]
    assert view.section("headline").summary is None  # several cells: the leaderboard is the headline
    assert view.section("categories").heatmap
    unparsed = view.section("unparsed")
    assert (unparsed.n_unparsed, unparsed.n_truncated) == (9, 3)
    assert unparsed.reasons.rows == [
        ["no SCORE: line", "6"],
        ["truncated: the judge reached max_new_tokens before its verdict", "3"],
    ]
    assert len(unparsed.examples.rows) == 9  # up to n_examples of each kind per cell
    human = view.section("human")
    assert human.panels.rows == [
        ["trio", "majority of a, b, c", "accuracy 75.0% [60.0, 86.0]", "3: 40, 2: 4", "1", "-0.40"]
    ]
    assert human.bias_pairwise.column("judge") == ["pairs"] and human.bias_length is None
    gpus = view.section("timeline")
    (band,) = gpus.bands  # one snakemake command
    assert band.gpu_use.n_gpus == 3 and band.gpu_use.span == pytest.approx(34.0) and band.label == ""
    assert band.gpu_use.never_used == [] and gpus.load_share is None  # the metas record no load time
    assert band.lanes.column("lane") == ["GPU 0", "GPU 1", "GPU 2"]
    (extra,) = [e for e in view.section("more").fields if e.title == "judge bias"]
    assert extra.title == "judge bias" and extra.json is None
    assert extra.table.rows == [["position", "10.0% [5.0, 20.0]"], ["verbosity", "0.03"]]
    assert [p.name for p in view.plots] == PLOTS


def test_the_leaderboard_says_why_exact_match_is_not_shown_for_long_references(tmp_path):
    """Two generators graded against long references: exact match is left out of each row ('-'), and a
    note under the leaderboard says why, for each row."""
    rng = np.random.default_rng(1)
    cfg = defaults(
        run="em",
        dataset={"path": "data.jsonl"},
        generator={"model": "g"},
        generators={g: {} for g in GENS[:2]},
        datasets={"data": {}},
        judge={"model": "j", "mode": "score"},
    )
    exp = resolve(cfg)
    parts = []
    for g in GENS[:2]:
        df = frame(rng, 12, g, "data")
        df["reference"] = "The tides come from the moon's pull on the oceans and from the turning of the earth."
        df["verdict"], df["unparsed_reason"] = "7", None
        df["score"] = 7.0
        parts.append(df)
    gen_metas = [GenerateMeta(generator=g, dataset="data", started_at=0.0, finished_at=1.0) for g in GENS[:2]]
    judge_metas = {"j": JudgeMeta(started_at=0.0, finished_at=1.0)}
    run, cells = summarise_experiment(exp, cfg, {"j": pd.concat(parts, ignore_index=True)}, gen_metas, judge_metas)
    summary = run.to_dict()
    assert all(r["exact_match_shown"] is False for r in summary["leaderboard"])
    note = summary["leaderboard"][0]["exact_match_note"]
    assert "not short answers" in note
    page = Page(summary, [Cell(k, s, df) for k, (s, df) in cells.items()], gen_metas, judge_metas, {}, ["0"])
    write(page, tmp_path / "report.html", tmp_path / "plots")
    html = (tmp_path / "report.html").read_text().replace("&#39;", "'")
    for g in GENS[:2]:
        assert f"Exact match not shown for {g} · data · j: {note}" in html
    assert html.count("Exact match not shown for") == 2


def test_a_page_of_several_cells_shows_each_cells_headline_as_report_md_does(tmp_path):
    """With several cells the leaderboard is the page's headline, and each cell's headline rows, which
    the leaderboard's columns leave out (how the verdicts were decided, PARTIAL verdicts counted as not
    correct, labels applied to answers that differ), are on the page too: the rows report.md gives."""
    import html as html_lib

    from genjudge.judging.headline import headline_rows
    from genjudge.judging.tables import md_text
    from genjudge.stages.report_markdown import render_experiment

    rng = np.random.default_rng(3)
    cfg = defaults(
        run="cells",
        dataset={"path": "data.jsonl"},
        generator={"model": "g"},
        generators={g: {} for g in GENS[:2]},
        datasets={"data": {}},
        judge={"model": "j"},
    )
    exp = resolve(cfg)
    parts = []
    for k, g in enumerate(GENS[:2]):
        df = frame(rng, 20, g, "data")
        df["verdict"] = rng.choice(["correct", "incorrect", "partial"], 20, p=[0.5, 0.3, 0.2])
        df.loc[: 3 + k, "decided_by"] = "rule"  # the cascade's rules decided some: 4 of alpha's, 5 of beta's
        df["unparsed_reason"] = None
        parts.append(df)
    gen_metas = [GenerateMeta(generator=g, dataset="data", started_at=0.0, finished_at=1.0) for g in GENS[:2]]
    judge_metas = {"j": JudgeMeta(started_at=0.0, finished_at=1.0)}
    run, cells = summarise_experiment(exp, cfg, {"j": pd.concat(parts, ignore_index=True)}, gen_metas, judge_metas)
    differing = {"n_labels": 3, "n_answers": 6, "generators": ["alpha", "beta"]}
    human = {"labels": "labels.jsonl", "n_labelled": 6, "agreement": {"value": 0.5, "ci95": [0.2, 0.8], "n": 6}}
    human.update(
        n_items=20, n_judged=6, n_unparsed=0, kind="reference", confusion={}, labels_on_differing_answers=differing
    )
    summary = run.to_dict()
    summary["validity"] = {"judges": {"j": {"human": human}}}
    page = Page(summary, [Cell(k, s, df) for k, (s, df) in cells.items()], gen_metas, judge_metas, {}, ["0"])
    view = write(page, tmp_path / "report.html", tmp_path / "plots")
    page_html = (tmp_path / "report.html").read_text()
    md = render_experiment(run, cells, 3)
    headline = view.section("headline")
    assert headline.summary is None and [label for label, _ in headline.cells] == [
        "alpha · data · j",
        "beta · data · j",
    ]
    for (label, table), (s, _) in zip(headline.cells, cells.values()):
        rows = [list(r) for r in headline_rows(s)]
        assert table.rows == rows and f"<summary>{html_lib.escape(label)}</summary>" in page_html
        for k, v in rows:  # report.md's cell section has the same rows, and the page shows them
            assert f"| {md_text(k)} | {md_text(v)} |" in md
            assert f"<td>{html_lib.escape(k)}</td><td>{html_lib.escape(v)}</td>" in page_html
    decided = [dict(t.rows)["decided by"] for _, t in headline.cells]
    assert [re.search(r"rule: (\d+)", d).group(1) for d in decided] == ["4", "5"]
    assert all("verdicts (PARTIAL counts as not correct)" in dict(t.rows) for _, t in headline.cells)
    assert page_html.count('<details class="cell-headline" open>') == 2
    # The labels-on-differing-answers warning, as report.md's validity section has it.
    warning = "judge j: 3 labels of labels.jsonl were each applied to answers that differ"
    assert warning in view.section("human").warnings[0]
    assert f"Warning: {warning}" in page_html


def test_the_strengths_plot_says_when_it_was_fitted_without_a_failed_pair(tmp_path):
    """A pairwise judge's cell beta vs gamma failed: the strengths were fitted without its games, and
    the page's plot says so in its panel's title and in a warning beside it, as report.md's table does."""
    from genjudge.stages.report_markdown import strengths_markdown

    rng = np.random.default_rng(4)
    cfg = defaults(
        run="bt",
        dataset={"path": "data.jsonl"},
        generator={"model": "g"},
        generators={g: {} for g in GENS},
        datasets={"data": {}},
        judge={"model": "j"},
        judges={"pairs": {"mode": "pairwise", "pairs": "all"}},
    )
    exp = resolve(cfg)
    judged = pairwise_judgments(rng)
    judged = judged[~((judged["generator"] == "beta") & (judged["opponent"] == "gamma"))]
    gen_metas, judge_metas = metas()
    run, cells = summarise_experiment(exp, cfg, {"pairs": judged}, gen_metas, judge_metas)
    summary = run.to_dict()
    failed = {**FAILED, "generator": "beta", "opponent": "gamma", "judge": "pairs", "stage": "judge"}
    summary["failed_cells"] = [failed]
    page = Page(summary, [Cell(k, s, df) for k, (s, df) in cells.items()], gen_metas, judge_metas, {}, ["0"])
    view = write(page, tmp_path / "report.html", tmp_path / "plots")
    (warning,) = view.section("distributions").strengths_warnings
    assert "judge pairs on dataset data were fitted without the games of the failed cell(s) beta vs gamma" in warning
    assert f"Warning: {warning}" in (tmp_path / "report.html").read_text()
    assert any("beta vs gamma" in line for line in strengths_markdown(run.across_cells, [failed]))
    # With no failed cell the plot has no such warning.
    summary["failed_cells"] = []
    page = Page(summary, [Cell(k, s, df) for k, (s, df) in cells.items()], gen_metas, judge_metas, {}, ["0"])
    assert write(page, tmp_path / "clean.html", tmp_path / "plots2").section("distributions").strengths_warnings == []


def test_the_page_escapes_what_it_shows():
    # Every text on the page comes from the run (names, judge outputs, summary keys): none may become markup.
    view = PageView(
        run="<script>alert(1)</script>",
        mode="reference",
        n_items=1,
        n_answers=1,
        n_unparsed=0,
        generators=['g"1'],
        judges=["j&k"],
        warnings=["<b>warned</b>"],
        sections=[More([Extra("<i>key</i>", Table(["<th>"], [["<td>"], [None]]), None), Extra("j", None, "</pre>")])],
    )
    text = render(view)
    assert "<script>" not in text and "&lt;script&gt;alert(1)&lt;/script&gt;" in text
    for raw in ("<b>", "<i>", "<th><th>", "<td><td>", "</pre></pre>", 'g"1', "j&k"):
        assert raw not in text, raw
    assert "<tr><td></td></tr>" in text  # None shows as an empty cell
    assert '<a href="#more">More</a>' in text


def test_the_templates_ship_in_the_wheel(tmp_path):
    # Built from a copy: setuptools writes build/ and egg-info beside the sources.
    for part in ("src", "pyproject.toml", "README.md"):
        src = ROOT / part
        shutil.copytree(src, tmp_path / part) if src.is_dir() else shutil.copy2(src, tmp_path / part)
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", ".", "--no-deps", "--no-build-isolation", "-q", "-w", "dist"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    (wheel,) = (tmp_path / "dist").glob("genjudge-*.whl")
    with zipfile.ZipFile(wheel) as zf:
        shipped = {n for n in zf.namelist() if "/templates/" in n and n.startswith("genjudge/report_html/")}
    templates = ROOT / "src" / "genjudge" / "report_html" / "templates"
    expected = {
        f"genjudge/report_html/templates/{p.relative_to(templates)}" for p in templates.rglob("*") if p.is_file()
    }
    assert len(expected) >= 12 and shipped == expected


def test_chromium_loads_every_plot_of_the_modes_page(rendered, tmp_path):
    reason = chromium.unavailable_reason()
    if reason:
        pytest.skip(reason)
    state = chromium.probe(rendered / "report.html", tmp_path)
    assert len(state["images"]) == len(PLOTS)
    assert all(i["complete"] and i["width"] > 300 and i["height"] > 100 for i in state["images"]), state["images"]


def test_an_interval_bound_rounded_past_its_value_still_draws():
    from genjudge.report_html import plots

    row = {"generator": "g", "dataset": "d", "judge": "j", "opponent": "", "measure": "accuracy", "mean": False}
    frame = pd.DataFrame(
        [
            {**row, "category": "a", "value": 1.0, "low": 0.8, "high": 1.0 - 1e-16, "n": 9},
            {**row, "category": "b", "value": 0.5, "low": 0.5 + 1e-16, "high": 0.7, "n": 9},
        ]
    ).assign(em_value=[0.5, 1.0], em_low=[0.5 + 1e-16, 0.7], em_high=[0.6, 1.0 - 1e-16])
    assert plots.png(plots.category_intervals(frame))[:4] == b"\x89PNG"
    rows = [{**row, "mode": "reference", "accuracy": {"value": 1.0, "ci95": [0.8, 1.0 - 1e-16], "n": 9}}]
    assert plots.png(plots.leaderboard(rows, ["accuracy"], lambda mode: True))[:4] == b"\x89PNG"


def test_labels_holding_dollar_signs_are_drawn_as_text(tmp_path):
    """`$...$` is matplotlib's mathtext: a category `$\\frac{1$` (or a price `$5 - $10`) crashed the report."""
    rng = np.random.default_rng(1)
    cfg = defaults(
        run="dollars",
        dataset={"path": "data.jsonl"},
        generator={"model": "g"},
        generators={g: {} for g in GENS},
        datasets={"data": {}},
        judge={"model": "j"},
        judges={"scorer": {"mode": "score"}},
    )
    df = score_judgments(rng, n=12)
    df["category"] = [["$\\frac{1$", "$5 - $10", "cost in $"][i % 3] for i in range(len(df))]
    gen_metas, judge_metas = metas()
    run, cells = summarise_experiment(resolve(cfg), cfg, {"scorer": df}, gen_metas, {"scorer": judge_metas["scorer"]})
    page = Page(run.to_dict(), [Cell(k, s, d) for k, (s, d) in cells.items()], gen_metas, {}, {}, None)
    view = write(page, tmp_path / "report.html", tmp_path / "plots")
    assert "per_category" in [p.name for p in view.plots]
    assert Image.open(tmp_path / "plots" / "per_category.png").size[0] > 100


def test_the_human_confusion_matrix_has_one_orientation_in_report_md_and_report_html(modes_page):
    """Rows: the judge's verdicts; columns: the human labels, in report.md's table and report.html's matrix alike
    (summary.json holds {human label: {judge label: count}}: human 7 was judged 8 four times)."""
    from genjudge.stages.validity import _confusion

    _, view = modes_page
    human = next(s for s in view.sections if s.ident == "human")
    ((name, m),) = human.matrices
    assert name == "judge scorer"
    assert m.index.tolist() == ["7", "8", "9"] and m.columns.tolist() == ["7", "8", "9"]
    assert m.loc["8", "7"] == 4 and m.loc["7", "8"] == 3  # judge 8 where the human said 7: 4
    md = _confusion({"7": {"7": 10, "8": 4}, "8": {"7": 3, "8": 7}, "9": {"9": 5}})
    assert md[0] == "| judge \\ human | 7 | 8 | 9 |"
    assert md[2:] == ["| 7 | 10 | 3 | 0 |", "| 8 | 4 | 7 | 0 |", "| 9 | 0 | 0 | 5 |"]


# --- a study of four generators, a reference and a pairwise judge, labels and samples ---------------

STUDY_GENS = ["mistral", "qwen", "gemma", "base"]
UNITS = {"items", "cells", "verdicts", "answers", "wins", "ties", "losses", "samples", "verdict(s", "item(s"}


def study_judgments(rng, n=30, samples=2):
    ref, pw = [], []
    for k, g in enumerate(STUDY_GENS):
        df = pd.concat([frame(rng, n, g, "data").assign(sample=s) for s in range(samples)], ignore_index=True)
        df["turn"] = 1
        df["verdict"] = np.where(rng.random(len(df)) < 0.2 + 0.2 * k, "correct", "incorrect")
        df["unparsed_reason"] = None
        ref.append(df)
        if g == "base":
            continue
        pair = pd.concat([frame(rng, n, g, "data", "base").assign(sample=s) for s in range(samples)], ignore_index=True)
        pair["turn"] = 1
        # mistral ties nearly everything; the others win and lose
        p = [0.02, 0.95, 0.03] if g == "mistral" else [0.45, 0.1, 0.45]
        pair["verdict"] = rng.choice(["win", "tie", "loss"], len(pair), p=p)
        pair["unparsed_reason"] = None
        pair["position_consistent"] = True
        pair["outcome_order0"] = pair["outcome_order1"] = pair["verdict"]
        pw.append(pair)
    return {"ref": pd.concat(ref, ignore_index=True), "pw": pd.concat(pw, ignore_index=True)}


def test_a_studys_page_states_each_judges_headline_with_its_unit_and_interval_and_labels_every_count(tmp_path):
    """Four generators (one the pairwise baseline), a reference judge with human labels of one generator's
    answers and a pairwise judge, two samples per item: the top of report.html, as headless Chromium lays it
    out, states each judge's headline with its unit and interval, and every count there says what it counts."""
    from genjudge.stages.report import summary_of

    reason = chromium.unavailable_reason()
    if reason:
        pytest.skip(reason)
    rng = np.random.default_rng(3)
    labels = tmp_path / "labels.jsonl"
    labels.write_text("".join(json.dumps({"id": f"q{i}", "gen": "qwen", "label": "correct"}) + "\n" for i in range(10)))
    cfg = defaults(
        run="study",
        dataset={"path": "data.jsonl"},
        generator={"model": "g", "do_sample": True, "n_samples": 2},
        generators={g: {} for g in STUDY_GENS},
        datasets={"data": {}},
        judge={"model": "j"},
        judges={
            "ref": {"labels": {"path": str(labels), "fields": {"id": "id", "label": "label", "generator": "gen"}}},
            "pw": {"mode": "pairwise", "baseline": "base"},
        },
    )
    metas = [GenerateMeta(generator=g, dataset="data", shard=0, started_at=0.0, finished_at=1.0) for g in STUDY_GENS]
    jm = {j: JudgeMeta(started_at=1.0, finished_at=2.0, cells={}) for j in ("ref", "pw")}
    run, cells, study = summary_of(cfg, study_judgments(rng), metas, jm)
    summary = run.to_dict()
    page = Page(summary, [Cell(k, s, d) for k, (s, d) in cells.items()], metas, jm, {}, None)
    write(page, tmp_path / "report.html", tmp_path / "plots")
    top = chromium.texts(tmp_path / "report.html", tmp_path, ["header", "#headlines"])
    header, heads = top["header"], top["#headlines"]
    assert "30 items (the datasets' questions) · 7 cells" in header and "420 verdicts (answers judged" in header
    ref_line = next(line for line in heads.splitlines() if line.startswith("judge ref on data"))
    pw_line = next(line for line in heads.splitlines() if line.startswith("judge pw on data"))
    assert "accuracy: the share of parsed verdicts that are correct (%, 95% interval clustered by item)" in ref_line
    assert "win rate against base: wins plus half the ties" in pw_line
    for g in STUDY_GENS:
        assert re.search(rf"{g} \d+\.\d% \[\d+\.\d, \d+\.\d\] over 30 items", ref_line), ref_line
    rows = {r["generator"]: r for r in summary["leaderboard"] if r["judge"] == "pw"}
    for g in ("mistral", "qwen", "gemma"):
        w = rows[g]["win_rate"]
        assert f"{g} {100 * w['value']:.1f}% [" in pw_line
        assert f"({w['wins']} wins, {w['ties']} ties, {w['losses']} losses) over 30 items" in pw_line
    # mistral, which ties nearly everything, is at about half, not last by its few wins
    assert abs(rows["mistral"]["win_rate"]["value"] - 0.5) < 0.1
    # No count unlabelled: every whole number at the top, outside percentages and intervals, has its unit.
    text = re.sub(r"\[[^\]]*\]|\d+\.\d+%|\d+\.\d+", " ", header + "\n" + heads)
    for m in re.finditer(r"(?<![\w.])(\d+)(?![\w.%])\s*(\S*)\s*(\S*)", text):  # a unit, or an adjective and one
        assert {m.group(2).strip("(),;:·"), m.group(3).strip("(),;:·")} & UNITS, (m.group(0), text)
    # The labels' share is of the generator they name: 10 of qwen's 60 answers, not of every generator's.
    human = summary["validity"]["judges"]["ref"]["human"]
    assert (human["n_labelled"], human["n_answers"], human["covers"]) == (20, 60, {"generator": ["qwen"]})


def test_the_judge_against_exact_match_matrix_counts_what_the_agreement_rate_counts(tmp_path):
    """Ten answers that all match: the cascade decided eight by rule, the judge graded two and called both
    incorrect. The rate is 0% over those 2; the matrix counts the same 2 (it showed 8 of 10 on its
    diagonal, the rule's verdicts among them), and report.md and report.html say the same."""
    from genjudge.judging.modes.base import rate_text
    from genjudge.judging.tables import md_text
    from genjudge.stages.report_markdown import render_experiment

    cfg = defaults(
        run="cascade",
        dataset={"path": "data.jsonl"},
        generator={"model": "g"},
        generators={"alpha": {}},
        datasets={"data": {}},
        judge={"model": "j", "cascade": True},
    )
    df = frame(np.random.default_rng(0), 10, "alpha", "data")
    df["exact_match"] = True
    df["decided_by"] = ["rule"] * 8 + ["judge"] * 2
    df["verdict"] = ["correct"] * 8 + ["incorrect"] * 2
    df["unparsed_reason"] = None
    gen_metas = [GenerateMeta(generator="alpha", dataset="data", started_at=0.0, finished_at=1.0)]
    judge_metas = {"j": JudgeMeta(started_at=0.0, finished_at=1.0)}
    run, cells = summarise_experiment(resolve(cfg), cfg, {"j": df}, gen_metas, judge_metas)
    page = Page(run.to_dict(), [Cell(k, s, d) for k, (s, d) in cells.items()], gen_metas, judge_metas, {}, None)
    view = write(page, tmp_path / "report.html", tmp_path / "plots")
    ((summary, _),) = cells.values()
    rate = summary.to_dict()["judge_exact_match_agreement"]
    assert rate["value"] == 0.0 and rate["n"] == 2

    confusion = view.section("confusion")
    ((_, matrix),) = confusion.matrices
    assert matrix.to_dict() == {"match": {"incorrect": 2}}  # the judge's 2, never the rule's 8
    diagonal = matrix.loc["correct", "match"] if "correct" in matrix.index else 0
    assert diagonal / matrix.to_numpy().sum() == rate["value"] and matrix.to_numpy().sum() == rate["n"]
    # report.html's table beside the matrix and report.md's headline give the same rate over the same n.
    assert confusion.agreement.rows == [["alpha · data · j", rate_text(rate), "2"]]
    page_html = (tmp_path / "report.html").read_text()
    assert f"<td>{rate_text(rate)}</td><td>2</td>" in page_html and "judge_vs_exact_match" in page_html
    md = render_experiment(run, cells, 3)
    assert f"| judge agrees with exact match | {md_text(rate_text(rate))} |" in md
    assert "rule: 8" in md and "judge: 2" in md
