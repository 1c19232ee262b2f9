"""Items too long for a model's context, through Snakemake: each failure is blamed on the job that
met it and fails its own cell alone; with `dataset.on_too_long: skip` the items are skipped, counted,
listed in the report and left out of every count, and the rest comes from the cache."""

import json
import re
import shutil

import pytest
from judges import ROOT

pytestmark = pytest.mark.workflow

GEN_CONTEXT = 40  # `short`: every demo question fits, the long one does not
JUDGE_CONTEXT = 120  # `demo-short-judge`: the long question fits no judge request; the others do


def with_context(src, dest, n):
    shutil.copytree(src, dest)
    cfg = json.loads((dest / "config.json").read_text())
    (dest / "config.json").write_text(json.dumps({**cfg, "max_position_embeddings": n}))


def summary(res) -> dict:
    return json.loads((res / "report" / "summary.json").read_text())


def test_too_long_items_fail_their_own_cell_then_are_skipped_counted_and_listed(workflow, capsys):
    from genjudge.cli import main

    wf = workflow.path
    questions = [json.loads(line) for line in (ROOT / "config/demo/questions.jsonl").read_text().splitlines()]
    a = questions[:6]
    # About 140 tokens as sent: more than `short` takes; it fits the demo generator, not the short judge.
    a.insert(2, dict(a[0], id="long-1", question=a[0]["question"] + " Please think about it carefully." * 6))
    (wf / "a.jsonl").write_text("".join(json.dumps(r) + "\n" for r in a))
    (wf / "b.jsonl").write_text("".join(json.dumps(r) + "\n" for r in questions[8:14]))
    with_context(wf / "models" / "demo-generator", wf / "models" / "short", GEN_CONTEXT)
    with_context(wf / "models" / "demo-judge", wf / "models" / "demo-short-judge", JUDGE_CONTEXT)
    cfg = workflow.write_config(
        "long.yaml",
        run="long",
        shards=1,
        generator={"max_new_tokens": 6},
        generators={"demo": {}, "short": {"model": "models/short", "use_chat_template": False}},
        datasets={"a": {"path": "a.jsonl"}, "b": {"path": "b.jsonl"}},
        judge={"model": "models/demo-short-judge", "max_new_tokens": 6},
    )
    first = workflow.run("--cores", "2", "--configfile", cfg, check=False)
    assert first.returncode == 1, first.stderr[-3000:]
    res = workflow.results("long")
    s = summary(res)
    failed = {(f["generator"], f["dataset"]): f for f in s["failed_cells"]}
    assert set(failed) == {("short", "a"), ("demo", "a")}
    # short/a: its generation failed; the judge never saw it (it was blamed on the judge before).
    assert failed[("short", "a")]["stage"] == "generate"
    (gen_error,) = failed[("short", "a")]["errors"]
    assert f"context of {GEN_CONTEXT}" in gen_error["message"] and gen_error["log"].endswith("generate/short/a/0.log")
    # demo/a: the judge could not take long-1; that cell alone failed, named with its item.
    assert failed[("demo", "a")]["stage"] == "judge"
    (judge_error,) = failed[("demo", "a")]["errors"]
    assert judge_error["message"].startswith("cell demo/a: item 'long-1': ")
    assert f"context of {JUDGE_CONTEXT}" in judge_error["message"] and "on_too_long: skip" in judge_error["message"]
    meta = json.loads((res / "judge" / "demo-short-judge" / "raw.meta.json").read_text())
    assert list(meta["skipped_cells"]) == ["short/a"] and list(meta["cell_errors"]) == ["demo/a"]
    assert {(r["generator"], r["dataset"]) for r in s["leaderboard"]} == {("demo", "b"), ("short", "b")}
    assert meta["cells"]["demo/b"]["computed"] == 6 and meta["cells"]["short/b"]["computed"] == 6
    md = (res / "report" / "report.md").read_text()
    assert re.search(
        r"\| demo/a \| demo-short-judge \| judge demo-short-judge \| InputError: cell demo/a: item 'long-1'", md
    )
    assert re.search(r"\| short/a \| demo-short-judge \| generate short/a/0 \| InputError: ", md)
    capsys.readouterr()
    assert main(["summary", str(res)]) == 0
    printed = capsys.readouterr().out
    assert "FAILED short/a (judge demo-short-judge, generate): InputError: " in printed
    assert "FAILED demo/a (judge demo-short-judge, judge): InputError: cell demo/a: item 'long-1'" in printed

    # The same run with the items skipped: nothing fails, and what was done comes from the cache.
    skip = workflow.path / "config" / "skip.yaml"
    skip.write_text("datasets: {a: {on_too_long: skip}}\n")
    second = workflow.run("--cores", "2", "--configfile", cfg, skip)
    assert second.returncode == 0
    s = summary(res)
    assert s["failed_cells"] == [] and s["n_skipped"] == 2
    skipped = {(e["cell"], e["id"]): e["reason"] for e in s["skipped_items"]}
    assert set(skipped) == {("demo/a", "long-1"), ("short/a", "long-1")}
    assert skipped[("demo/a", "long-1")].startswith("too long for the judge: ")
    assert skipped[("short/a", "long-1")].startswith("too long for the generator (turn 1): ")
    # Left out of every count: 6 items in each cell of a, not 7; long-1 is no unparsed verdict.
    for key in ("demo/a", "short/a"):
        cell = s["cells"][key]
        assert (cell["n_items"], cell["n_unparsed"], cell["n_skipped"]) == (6, 0, 1), key
        assert cell["accuracy_rate"]["n"] == 6 and cell["exact_match"]["n"] == 6
        assert cell["per_category"]["arithmetic"]["n_items"] == 6
    (pair,) = [p for p in s["paired"] if p["dataset"] == "a"]
    assert pair["n_items"] == 6
    assert {r["generator"]: r["values"]["a/demo-short-judge"]["n"] for r in s["table"]["rows"]} == {
        "demo": 6,
        "short": 6,
    }
    meta = json.loads((res / "judge" / "demo-short-judge" / "raw.meta.json").read_text())
    assert (
        meta["n_skipped"] == 2 and meta["cells"]["demo/b"]["computed"] == 0 and meta["cells"]["demo/a"]["computed"] == 0
    )
    gen = json.loads((res / "generations" / "short" / "a" / "0.meta.json").read_text())
    assert gen["n_skipped"] == 1 and gen["computed_items"] == 6
    md = (res / "report" / "report.md").read_text()
    assert "## Failed cells" not in md and "2 answer(s) were skipped" in md
    assert md.count("### Skipped items") == 2 and "| long-1 | too long for the judge: the prompt as sent is" in md
    assert "| skipped (too long for a model's context) | 1 answer(s)" in md
