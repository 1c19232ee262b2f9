"""A study: two generators on two datasets, each dataset graded by its own judge, one cell broken on
purpose. The other cells are judged and reported; fixing the cause reruns only that cell."""

import json
import os
import re
import shutil
import sys

import pandas as pd
import pytest
from conftest import planned_jobs
from judges import constant_judge
from report_view import report_view

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "browser"))
import chromium  # noqa: E402

pytestmark = pytest.mark.workflow

N = 8
CONTEXT = 40  # the `short` generator's context: every demo question fits, the long one does not


def write_dataset(path, questions, long=False):
    rows = list(questions)
    if long:  # about 145 tokens as sent: more than `short` can take
        q = dict(rows[0], id="long-1", question=rows[0]["question"] + " Please think about it carefully." * 6)
        rows.insert(3, q)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def raw_cells(res, judge) -> dict:
    raw = pd.read_parquet(res / "judge" / judge / "raw.parquet")
    return raw.groupby(["generator", "dataset"]).size().to_dict()


def meta(path) -> dict:
    return json.loads(path.read_text())


def test_each_judge_grades_its_cells_and_a_failed_cell_is_reported_then_rerun_alone(workflow, capsys):
    from genjudge.cli import main

    wf = workflow.path
    questions = [json.loads(line) for line in (wf / "config/demo/questions.jsonl").read_text().splitlines()]
    write_dataset(wf / "a.jsonl", questions[:N])
    write_dataset(wf / "b.jsonl", questions[N : 2 * N], long=True)
    shutil.copytree(wf / "models" / "demo-generator", wf / "models" / "short")
    cfg_json = json.loads((wf / "models/short/config.json").read_text())
    (wf / "models/short/config.json").write_text(json.dumps({**cfg_json, "max_position_embeddings": CONTEXT}))
    constant_judge(wf / "models" / "score-judge", "score", "SCORE: 7")
    cfg = workflow.write_config(
        "study.yaml",
        run="study",
        shards=1,
        generator={"max_new_tokens": 6},
        generators={"demo": {}, "short": {"model": "models/short", "use_chat_template": False}},
        datasets={"a": {"path": "a.jsonl"}, "b": {"path": "b.jsonl"}},
        judge={"max_new_tokens": 6},
        judges={
            "ref": {"datasets": ["a"]},
            "score": {"model": "models/score-judge", "mode": "score", "template": None, "datasets": ["b"]},
        },
    )
    # `short` cannot take b's long question: that shard fails, everything else is judged and reported.
    first = workflow.run("--cores", "2", "--configfile", cfg, check=False)
    assert first.returncode == 1, first.stderr[-3000:]
    assert "1 cell(s) failed and were not judged: short/b" in first.stdout + first.stderr
    res = workflow.results("study")
    s = json.loads((res / "report" / "summary.json").read_text())
    (failed,) = s["failed_cells"]
    assert {k: failed[k] for k in ("judge", "generator", "dataset", "opponent", "stage")} == {
        "judge": "score",
        "generator": "short",
        "dataset": "b",
        "opponent": None,
        "stage": "generate",
    }
    (error,) = failed["errors"]
    assert (
        error["type"] == "InputError" and f"context of {CONTEXT}" in error["message"] and "'long-1'" in error["message"]
    )
    assert error["log"].endswith("generate/short/b/0.log") and "long-1" in (wf / error["log"]).read_text()
    assert raw_cells(res, "ref") == {("demo", "a"): N, ("short", "a"): N}
    assert meta(res / "judge" / "ref" / "raw.meta.json")["model_loads"] == 1
    assert raw_cells(res, "score") == {("demo", "b"): N + 1}
    score_meta = meta(res / "judge" / "score" / "raw.meta.json")
    assert list(score_meta["skipped_cells"]) == ["short/b"] and score_meta["model_loads"] == 1
    assert {(r["generator"], r["dataset"], r["judge"]) for r in s["leaderboard"]} == {
        ("demo", "a", "ref"),
        ("short", "a", "ref"),
        ("demo", "b", "score"),
    }
    table = {r["generator"]: r["values"] for r in s["table"]["rows"]}
    assert [c["key"] for c in s["table"]["columns"]] == ["a/ref", "b/score"]
    assert table["short"]["b/score"]["status"] == "failed" and table["demo"]["b/score"]["value"] == 7.0
    md = (res / "report" / "report.md").read_text()
    assert "## Models × benchmarks" in md and "## Failed cells" in md
    assert re.search(r"\| short/b \| score \| generate short/b/0 \| InputError: .*'long-1'", md)
    assert (res / "report" / "plots" / "models_by_benchmarks.png").stat().st_size > 1000

    capsys.readouterr()
    assert main(["summary", str(res)]) == 0
    printed = capsys.readouterr().out
    assert "| generator | a · ref (accuracy) | b · score (mean score) | mean rank |" in printed
    assert "FAILED short/b (judge score, generate): InputError: " in printed

    # The same command again reruns the failed shard and what reads it, nothing else.
    dry = workflow.run("-n", "--configfile", cfg)
    again = planned_jobs(dry)
    assert again["generate"] == "1" and again["merge"] == "1" and again["judge"] == "1", again
    reason = re.search(r"rule generate:\n(?:\s+\w+: .*\n)*?\s+reason: (.*)", dry.stdout)
    assert reason[1].endswith("now: 'failed_attempts=1' "), reason[1]  # one line: the setting that changed

    # Fixed (the long question left out): only the failed cell's answers and judgments are computed.
    write_dataset(wf / "b.jsonl", questions[N : 2 * N])
    before = {(m["generator"], m["dataset"], m["shard"]): m for m in workflow.metas("study")}
    ref_meta = (res / "judge" / "ref" / "raw.meta.json").read_text()
    workflow.run("--cores", "2", "--configfile", cfg)
    assert (res / "judge" / "ref" / "raw.meta.json").read_text() == ref_meta  # not rerun
    after = {(m["generator"], m["dataset"], m["shard"]): m for m in workflow.metas("study")}
    assert all(after[k] == m for k, m in before.items() if k[1] == "a")  # not rerun
    assert after[("demo", "b", 0)]["computed_items"] == 0  # rerun (its shard changed), all from the cache
    assert after[("short", "b", 0)]["computed_items"] == N
    score_meta = meta(res / "judge" / "score" / "raw.meta.json")
    assert score_meta["cells"]["demo/b"]["computed"] == 0 and score_meta["cells"]["short/b"]["computed"] > 0
    assert score_meta["model_loads"] == 1 and not score_meta["skipped_cells"]
    assert raw_cells(res, "score") == {("demo", "b"): N, ("short", "b"): N}
    s = json.loads((res / "report" / "summary.json").read_text())
    assert s["failed_cells"] == [] and "## Failed cells" not in (res / "report" / "report.md").read_text()
    ranks = {r["generator"]: r["values"]["b/score"]["rank"] for r in s["table"]["rows"]}
    assert ranks == {"demo": 1.5, "short": 1.5}  # a judge that always says 7: a tie

    # The page after the rerun: each command is a band of its own on the GPU timeline, the first with
    # its failed attempt, and each critical path starts in its own command.
    timeline = report_view(res).section("timeline")
    first_band, second_band = timeline.bands
    assert first_band.label.startswith("snakemake command 1 of 2 · started ")
    assert second_band.label.startswith("snakemake command 2 of 2 · started ")
    (failure,) = first_band.failed
    assert failure.startswith("generate short/b #0: InputError: ") and "'long-1'" in failure
    assert second_band.failed == [] and "judge score" in second_band.critical_path.column("job")
    assert "judge ref" not in second_band.critical_path.column("job")  # it was not rerun
    assert second_band.critical_path.column("waited for")[0] == ""  # its chain starts in this command
    page = (res / "report" / "report.html").read_text()
    assert "ran in 2 <code>snakemake</code> commands" in page and "Failed attempt: generate short/b #0" in page
    reason = chromium.unavailable_reason()
    if reason:
        pytest.skip(reason)
    png = chromium.section_screenshot(res / "report" / "report.html", "timeline", wf / "rerun-timeline.png", res)
    assert chromium.ink(png) > 0.02
