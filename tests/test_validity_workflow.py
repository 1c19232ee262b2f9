"""Can the judge be trusted, through the real snakemake command line: human labels, a panel of
three demo judges, a judge whose votes are all unparsed, and panel rules changed without a judge."""

import json
import subprocess
import sys

import pandas as pd
import pytest
from conftest import planned_jobs

pytestmark = pytest.mark.workflow

LABELS = "config/demo/labels.jsonl"
# The demo panel example as its comment layers it: three demo judges as a panel, with the demo's labels.
EXAMPLE = ["config/demo.yaml", "config/demo/labels.yaml", "config/examples/demo_panel.yaml"]


def labels_file(workflow, name, drop: int, unknown: bool):
    rows = [json.loads(line) for line in (workflow.path / LABELS).read_text().splitlines()]
    rows = rows[drop:]  # the first `drop` items are left unlabelled
    if unknown:
        rows.append({"id": "no-such-question", "label": "correct"})
    (workflow.path / name).write_text("".join(json.dumps(r) + "\n" for r in rows))
    return name


def panel_config(workflow, labels, lenient_pattern="(CORRECT)", rule="majority"):
    """The config files of a run of the demo panel example (judges demo; plain, the demo judge with the
    mode's own template, which it was not trained on; lenient, whose "(CORRECT)" also matches inside
    INCORRECT) under a layer of its own: one shard, short answers, `labels`, the lenient judge's pattern
    and the panel's rule."""
    layer = workflow.write_config(
        "panel.yaml",
        run="panel",
        shards=1,
        generator={"max_new_tokens": 8},
        judge={"max_new_tokens": 12, "labels": {"path": labels}},
        judges={"lenient": {"verdict_pattern": lenient_pattern}},
        panels={"trio": {"rule": rule}},
    )
    return [*EXAMPLE, layer]


def expected_panel(votes: pd.DataFrame, rule: str) -> list:
    out = []
    for row in votes.itertuples(index=False):
        parsed = [v for v in row if isinstance(v, str)]
        top = max(set(parsed), key=parsed.count) if parsed else None
        need = len(parsed) if rule == "unanimous" else len(parsed) // 2 + 1
        out.append(top if parsed and parsed.count(top) >= need else None)
    return out


def judge_files(workflow):
    res = workflow.results("panel")
    return {p: p.read_bytes() for p in sorted((res / "judge").rglob("*")) if p.is_file()}


def test_the_demo_panel_example_with_labels_and_rule_changes_that_rejudge_nothing(workflow):
    # The example reads the demo's labels: one with an id the dataset does not have is refused while
    # planning, naming it.
    labels = labels_file(workflow, "labels.jsonl", drop=4, unknown=False)
    demo_labels = (workflow.path / LABELS).read_text()
    labels_file(workflow, LABELS, drop=4, unknown=True)
    proc = workflow.run("-n", "--configfile", *EXAMPLE, check=False)
    assert proc.returncode != 0
    assert "'no-such-question'" in proc.stdout + proc.stderr
    assert (
        "judges.demo.labels: config/demo/labels.jsonl labels 1 id(s) not in the dataset questions: 'no-such-question'"
        in (proc.stdout + proc.stderr)
    )
    assert not workflow.results("demo-panel").exists() and not workflow.results("panel").exists()
    (workflow.path / LABELS).write_text(demo_labels)

    # 4 of the 44 ids (9%) unlabelled: it runs, over the 40 labelled. The example plans one judge job and
    # one parse per judge, and one report.
    cfg = panel_config(workflow, labels)
    planned = planned_jobs(workflow.run("--cores", "2", "--configfile", *cfg))
    assert planned["judge"] == "3" and planned["parse_verdicts"] == "3" and planned["report"] == "1"
    res = workflow.results("panel")
    s = json.loads((res / "report" / "summary.json").read_text())
    v = s["validity"]
    demo = v["judges"]["demo"]["human"]
    assert (demo["n_items"], demo["n_labelled"]) == (44, 40)
    assert demo["n_judged"] + demo["n_unparsed"] == 40 and demo["agreement"]["n"] == demo["n_judged"]
    judged = {
        j: pd.read_parquet(res / "judgments" / f"{j}.parquet").set_index("id") for j in ("demo", "plain", "lenient")
    }
    truth = pd.read_json(workflow.path / "labels.jsonl", lines=True).set_index("id")["label"]
    d = judged["demo"].loc[truth.index]
    d = d[d["verdict"].notna()]
    assert demo["agreement"]["value"] == pytest.approx((d["verdict"] == truth[d.index]).mean())
    assert sum(sum(r.values()) for r in demo["confusion"].values()) == demo["n_judged"]
    assert "cohen_kappa" in demo and demo["cohen_kappa"] is not None
    assert "length_correlation" in v["judges"]["demo"]["bias"]
    # The demo generator and judge are one family (both model_type llama, both named demo-*); the judges
    # in the example's order.
    assert v["self_preference"] == [
        "judges demo, plain, lenient (models/demo-judge) and generator demo-generator (models/demo-generator) are "
        "of one family (model_type llama, name 'demo'): judges tend to prefer answers of their own family"
    ]

    trio = v["panels"]["trio"]
    votes = pd.DataFrame({j: judged[j]["verdict"] for j in ("demo", "plain", "lenient")})
    panel = pd.Series(expected_panel(votes, "majority"), index=votes.index)
    assert trio["n_items"] == 44 and trio["n_decided"] == int(panel.notna().sum())
    parsed_per_item = votes.notna().sum(axis=1).value_counts()
    assert trio["parsed_votes_per_item"] == {str(k): int(n) for k, n in sorted(parsed_per_item.items())}
    md = (res / "report" / "report.md").read_text()
    assert "## Can I trust the judge?" in md and "**trio** (majority of demo, plain, lenient" in md
    # The judge's share correct corrected by the labels (one generator: its labels), beside its own.
    [fig] = v["judges"]["demo"]["corrected"]["cells"].values()
    assert fig["n_labelled"] + fig["n_labelled_unparsed"] == 40 and fig["n_labelled_items"] == 40
    assert fig["labels_only"]["value"] == pytest.approx((truth[d.index] == "correct").mean())
    assert "### Judge figures corrected by human labels (PPI++)" in md and "| demo | demo-generator/" in md
    out = subprocess.run(
        [sys.executable, "-m", "genjudge.cli", "summary", str(res)], capture_output=True, text=True, check=True
    ).stdout
    assert "agreement with human labels (judge demo)" in out and "agreement with human labels (panel trio)" in out

    # One judge's votes all unparsed (a pattern that never matches): only that judge re-parses, and the
    # panel decides by strict majority of the two parsed votes, never counting the unparsed one.
    before = judge_files(workflow)
    never = panel_config(workflow, "labels.jsonl", lenient_pattern="NEVER-(X)")
    # A judge that parses nothing fails its cell (exit status 1); the report and the panel go on without it.
    failed = workflow.run("--cores", "2", "--configfile", *never, check=False)
    assert planned_jobs(failed) == {"parse_verdicts": "1", "report": "1", "all": "1", "total": "3"}
    assert failed.returncode == 1 and "1 cell(s) failed and were not judged" in failed.stderr
    assert judge_files(workflow) == before
    # The same command again redoes only the report (which lists the failed cell), and still says it failed.
    again = workflow.run("--cores", "2", "--configfile", *never, check=False)
    assert planned_jobs(again) == {"report": "1", "all": "1", "total": "2"}
    assert again.returncode == 1 and "1 cell(s) failed and were not judged" in again.stderr
    s = json.loads((res / "report" / "summary.json").read_text())
    assert [(f["judge"], f["stage"]) for f in s["failed_cells"]] == [("lenient", "parse")]
    trio = s["validity"]["panels"]["trio"]
    lenient = s["validity"]["judges"]["lenient"]["human"]
    assert (lenient["n_labelled"], lenient["n_unparsed"], lenient["n_judged"]) == (40, 40, 0)
    assert lenient["agreement"]["value"] is None  # unparsed is never disagreement
    votes["lenient"] = None
    panel = pd.Series(expected_panel(votes, "majority"), index=votes.index)
    two = votes[["demo", "plain"]]
    disagree = int((two.notna().all(axis=1) & (two["demo"] != two["plain"])).sum())
    assert trio["no_majority"] == disagree
    assert trio["n_decided"] == int(panel.notna().sum())
    assert set(trio["parsed_votes_per_item"]) <= {"0", "1", "2"}
    assert trio["inter_judge"]["n_all_parsed"] == 0 and trio["inter_judge"]["fleiss_kappa"] is None
    assert trio["inter_judge"]["pairs"]["demo / plain"]["n"] == int(two.notna().all(axis=1).sum())

    # The panel rule changed: only the report runs again; no judge job, no parsing.
    unanimous = panel_config(workflow, "labels.jsonl", lenient_pattern="NEVER-(X)", rule="unanimous")
    again = workflow.run("--cores", "2", "--configfile", *unanimous, check=False)
    assert planned_jobs(again) == {"report": "1", "all": "1", "total": "2"}
    assert again.returncode == 1  # lenient still
    assert judge_files(workflow) == before
    s = json.loads((res / "report" / "summary.json").read_text())
    trio = s["validity"]["panels"]["trio"]
    assert trio["rule"] == "unanimous"
    assert trio["n_decided"] == sum(v is not None for v in expected_panel(votes, "unanimous"))
    # Snakemake's own summary: the judge outputs were last made by the first run's jobs.
    summary = workflow.run("--summary", "--configfile", *unanimous).stdout
    judge_rows = [line for line in summary.splitlines() if "/judge/" in line and "shards/" in line]
    assert len(judge_rows) == 6  # 3 judges x (table, meta)
    assert all(row.split("\t")[2] == "judge" and row.split("\t")[-1] == "no update" for row in judge_rows)
