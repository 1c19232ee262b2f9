"""Rubric grading through the real snakemake command line: the demo generator's answers to a committed
set of 20 items with 4-8 criteria each (tests/data/rubric_demo.jsonl, HealthBench's shape, written for
the demo's questions), graded by a tiny judge trained to answer each criterion (tests/judges.py,
rubric_judge). One run is shared: the judge job is killed with SIGKILL part-way and resumed; the run's
figures are HealthBench's, recomputed from the judgments; adding a generator asks only its criteria."""

import json
import signal

import pandas as pd
import pytest
import reference
import yaml
from conftest import new_workflow
from judges import HEALTHBENCH_FIELDS, RUBRIC_DATA, RUBRIC_TEMPLATE, UNSURE, rubric_judge
from test_resume import complete_lines, kill_job_when, start

from genjudge.store.item_store import ItemStore

pytestmark = pytest.mark.workflow

ROWS = [json.loads(line) for line in RUBRIC_DATA.read_text().splitlines()]
CRITERIA = sum(len(r["rubrics"]) for r in ROWS)  # 102


def config(wf, name="rubric", **generators):
    return wf.write_config(
        f"{name}.yaml",
        run=name,
        shards=2,
        dataset={"path": str(RUBRIC_DATA), "fields": HEALTHBENCH_FIELDS},
        generator={"max_new_tokens": 16, "batch_size": 4},
        generators=generators or {"demo-generator": {"model": "models/demo-generator"}},
        judge={
            "model": "models/rubric-judge",
            "mode": "rubric",
            "template": str(RUBRIC_TEMPLATE),
            "max_new_tokens": 40,
            "batch_size": 2,  # slow enough to kill the job part-way
        },
    )


@pytest.fixture(scope="module")
def run(tmp_path_factory, built_models):
    wf = new_workflow(tmp_path_factory.mktemp("rubric"), built_models)
    rubric_judge(wf.path / "models" / "rubric-judge")
    cfg = config(wf)
    wf.run("--cores", "2", "results/rubric/generations/demo-generator/rubric_demo.parquet", "--configfile", cfg)
    store = wf.path / "results/.cache/judge"
    proc = start(wf, cfg)
    kill_job_when(proc, "judge.py", store, CRITERIA // 3, sig=signal.SIGKILL)
    killed_out = proc.communicate(timeout=600)[0]
    killed_at = complete_lines(store)
    out = wf.run("--cores", "2", "--configfile", cfg, "--rerun-incomplete")
    return wf, cfg, proc.returncode, killed_at, killed_out, out


def judgments(wf, name="rubric") -> pd.DataFrame:
    return pd.read_parquet(wf.results(name) / "judgments" / "rubric-judge.parquet")


def test_a_killed_judge_resumes_criterion_by_criterion_asking_none_twice(run):
    wf, _, killed_rc, killed_at, killed_out, _ = run
    assert killed_rc != 0 and 0 < killed_at < CRITERIA, killed_out[-2000:]
    meta = json.loads((wf.results("rubric") / "judge" / "rubric-judge" / "raw.meta.json").read_text())
    assert meta["resumed_items"] == killed_at and meta["computed_items"] == CRITERIA - killed_at
    records = ItemStore(wf.path / "results/.cache/judge", "t").load()
    assert len(records) == CRITERIA  # each criterion's reply stored once, under its own key
    raw = pd.read_parquet(wf.results("rubric") / "judge" / "rubric-judge" / "raw.parquet")
    assert len(raw) == CRITERIA and raw.groupby("id")["order"].nunique().sum() == CRITERIA


def test_the_figures_are_healthbenchs_from_the_judges_replies(run):
    wf = run[0]
    df = judgments(wf).set_index("id")
    summary = json.loads((wf.results("rubric") / "report" / "summary.json").read_text())
    expected = {}
    for r in ROWS:
        met = []
        for c in json.loads(df.loc[r["prompt_id"], "criteria"]):
            met.append(c["criteria_met"])
        assert [c["criterion"] for c in json.loads(df.loc[r["prompt_id"], "criteria"])] == [
            c["criterion"] for c in r["rubrics"]
        ]
        score = reference.rubric_answer_score(r["rubrics"], met)
        if score is not None:
            expected[r["prompt_id"]] = [score]
    # The judge learnt: unsure of the UNSURE criteria (no JSON), met where points are positive, else not.
    unsure = {r["prompt_id"] for r in ROWS if any(c["criterion"].startswith(UNSURE) for c in r["rubrics"])}
    assert set(df.index[df["score"].isna()]) == unsure and summary["n_unparsed"] == len(unsure)
    ref = reference.rubric_clipped_bootstrap(expected)
    assert summary["rubric_score"]["value"] == pytest.approx(ref["value"], abs=1e-12)
    assert summary["rubric_score"]["ci95"] == pytest.approx(ref["ci95"], abs=0.03)
    assert set(summary["tags"]) >= {"theme:arithmetic", "theme:capitals", "axis:accuracy", "axis:completeness"}
    md = (wf.results("rubric") / "report" / "report.md").read_text()
    assert "## Rubric scores by tag" in md and "| theme:capitals |" in md and "rubric score (HealthBench's" in md
    html = (wf.results("rubric") / "report" / "report.html").read_text()
    assert '<section id="rubric">' in html and "Criteria of each answer" in html and "[not met] [-5]" in html
    assert (wf.results("rubric") / "report" / "plots" / "rubric_tags.png").exists()


PHYSICIANS = {"model": None, "answers_from": "ideal_completions_data.ideal_completion"}


def test_adding_generators_asks_only_their_criteria_and_the_physicians_answers_are_a_row(run, tmp_path):
    """A second model and the physicians' answers (a field of the dataset, as simple-evals'
    physician_completions mode grades them): only their criteria are asked; the physicians' row has no
    generation job, and the items without a physician's answer are skipped, listed."""
    wf = run[0].copy(tmp_path)
    before = len(ItemStore(wf.path / "results/.cache/judge", "t").load())
    generators = {
        "demo-generator": {"model": "models/demo-generator"},
        "terse": {"model": "models/demo-generator", "max_new_tokens": 4},
        "physicians": PHYSICIANS,
    }
    out = wf.run("--cores", "2", "--configfile", config(wf, "rubric", **generators))
    assert "generations/physicians/rubric_demo/0" not in out.stdout + out.stderr  # no generation job for it
    cells = json.loads((wf.results("rubric") / "judge" / "rubric-judge" / "raw.meta.json").read_text())["cells"]
    answered = [r for r in ROWS if r["ideal_completions_data"]]
    physician_criteria = sum(len(r["rubrics"]) for r in answered)
    assert cells["demo-generator/rubric_demo"]["computed"] == 0
    assert cells["terse/rubric_demo"]["requests"] == CRITERIA
    assert cells["physicians/rubric_demo"]["computed"] == physician_criteria
    after = len(ItemStore(wf.path / "results/.cache/judge", "t").load())
    assert after - before == cells["terse/rubric_demo"]["computed"] + physician_criteria
    gens = pd.read_parquet(wf.results("rubric") / "generations" / "physicians" / "rubric_demo.parquet")
    assert gens["output"].notna().sum() == len(answered) and gens["skipped"].notna().sum() == len(ROWS) - len(answered)
    summary = json.loads((wf.results("rubric") / "report" / "summary.json").read_text())
    rows = {r["generator"]: r for r in summary["leaderboard"]}
    assert set(rows) == {"demo-generator", "terse", "physicians"}
    assert rows["physicians"]["rubric_score"]["value"] is not None


def test_labels_of_criteria_check_the_judge_without_judging_again(run, tmp_path):
    """Two people's labels of some criteria (one disagreeing with the other on a few): the report checks
    the judge against them (balanced F1, the labellers' own agreement beside it) and no judge job runs."""
    wf = run[0].copy(tmp_path)
    df = judgments(wf)
    labels = []
    for row in df.head(6).itertuples():
        for k, c in enumerate(json.loads(row.criteria)):
            if c["criteria_met"] is None:
                continue
            labels.append({"id": row.id, "criterion": k, "met": c["criteria_met"], "by": "p1"})
            labels.append(
                {"id": row.id, "criterion": k, "met": c["criteria_met"] if k % 3 else not c["criteria_met"], "by": "p2"}
            )
    path = tmp_path / "criteria_labels.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in labels))
    fields = {"id": "id", "label": "met", "criterion": "criterion", "labeller": "by"}
    cfg = config(wf)
    overlay = wf.path / "config" / "labels.yaml"
    overlay.write_text(yaml.safe_dump({"judge": {"labels": {"path": str(path), "fields": fields}}}))
    out = wf.run("--cores", "2", "--configfile", cfg, overlay)
    assert "rule judge:" not in out.stdout + out.stderr and "rule generate:" not in out.stdout + out.stderr
    h = json.loads((wf.results("rubric") / "report" / "summary.json").read_text())["validity"]["judges"][
        "rubric-judge"
    ]["human"]
    assert h["kind"] == "criterion" and h["n_labelled"] == len(labels)
    assert h["balanced_f1"]["value"] < 1.0 and h["labellers"]["n_pairs"] == len(labels) // 2
    md = (wf.results("rubric") / "report" / "report.md").read_text()
    assert "### The judge on labelled criteria" in md


@pytest.mark.vllm
@pytest.mark.servers
def test_an_endpoint_judge_on_vllms_server_asks_each_criterion_and_bounds_its_tries(tmp_path, built_models):
    """The demo judge behind vLLM's OpenAI server grades the physicians' answers of four items, one request
    a criterion (counted by a proxy in front of the server). It was not trained on the rubric template and
    never replies with a verdict: each criterion is asked once more (max_parse_attempts 2), never more,
    nothing is guessed, and the cell fails saying why; the judge rerun asks the server nothing."""
    from endpoints import FaultProxy, shared_servers

    (server,) = shared_servers("models/demo-judge")
    proxy = FaultProxy(server.url)
    wf = new_workflow(tmp_path, built_models)
    rows = [r for r in ROWS if r["ideal_completions_data"]][:4]
    criteria = sum(len(r["rubrics"]) for r in rows)
    data = wf.path / "rubric_four.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    cfg = wf.write_config(
        "endpoint.yaml",
        run="endpoint",
        shards=1,
        dataset={"path": str(data), "fields": HEALTHBENCH_FIELDS},
        generators={"physicians": PHYSICIANS},
        judge={
            "model": "models/demo-judge",
            "engine": "openai",
            "mode": "rubric",
            "template": str(RUBRIC_TEMPLATE),
            "max_new_tokens": 24,
            "rubric": {"max_parse_attempts": 2},
            "endpoint": {"base_url": proxy.url, "check_capabilities": False},
        },
    )
    try:
        out = wf.run("--cores", "2", "--configfile", cfg, check=False)
        assert out.returncode != 0 and "1 cell(s) failed" in out.stdout + out.stderr
        raw = pd.read_parquet(wf.results("endpoint") / "judge" / "demo-judge" / "raw.parquet")
        assert len(raw) == criteria and raw.groupby("id")["order"].nunique().sum() == criteria
        # One request body per criterion, each asked exactly twice: the reply gave no verdict both times.
        assert len(proxy.requests) == criteria and set(proxy.requests.values()) == {2}
        summary = json.loads((wf.results("endpoint") / "report" / "summary.json").read_text())
        (failed,) = summary["failed_cells"]
        assert failed["stage"] == "parse" and "a criterion's reply gave no verdict" in failed["errors"][0]["message"]
        assert summary["rubric_score"]["value"] is None
        proxy.reset()
        out = wf.run("--cores", "2", "--configfile", cfg, "--forcerun", "judge", check=False)
        assert "rule judge:" in out.stdout + out.stderr and sum(proxy.requests.values()) == 0
    finally:
        proxy.stop()
