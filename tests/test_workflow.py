"""The real snakemake command line on temporary copies of the workflow."""

import json
import os
import re
import shutil
import zipfile
from pathlib import Path

import pandas as pd
import pytest
import yaml
from conftest import ROOT, clean_env, new_workflow, planned_jobs
from snakemake_lint import ALLOWED, lint_advice
from test_job_imports import MODEL_FREE

pytestmark = pytest.mark.workflow


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory, built_models):
    """The demo as `snakemake --cores 2` runs it, once for the module; each of its processes notes the
    heavy libraries it imported (tests/job_probe)."""
    root = tmp_path_factory.mktemp("demo")
    wf = new_workflow(root, built_models)
    (root / "imports").mkdir()
    path = os.pathsep.join(filter(None, [str(ROOT / "tests" / "job_probe"), os.environ.get("PYTHONPATH")]))
    proc = wf.run("--cores", "2", env=clean_env(PYTHONPATH=path, GENJUDGE_TEST_JOB_IMPORTS=str(root / "imports")))
    wf.planned = planned_jobs(proc)  # the run's own Job stats table
    return wf


def test_jobs_that_need_no_model_import_no_torch(demo_run):
    jobs = {}  # script -> each of its job processes' heavy imports, with the functions that made them
    for f in (demo_run.path.parent / "imports").glob("*.json"):
        record = json.loads(f.read_text())
        if "/.snakemake/scripts/" in record["argv"][0]:  # tmpXXXX.<script>.py
            jobs.setdefault(Path(record["argv"][0]).name.split(".")[-2], []).append(record["heavy"])
    assert set(MODEL_FREE) <= set(jobs), jobs
    for script in MODEL_FREE:
        for heavy in jobs[script]:
            # The one exception: the report measures this machine's CPU for its time model check the
            # first time it runs here (remembered after; genjudge.engine.devices.measure_cpu).
            assert all("measure_cpu" in stack for stack in heavy.values()), (script, heavy)
    # The probe sees what a job imports: the model jobs import torch.
    assert jobs["generate"] and all("torch" in heavy for heavy in jobs["generate"] + jobs["judge"])


def test_every_job_process_ends_without_the_interpreters_shutdown(demo_run):
    exits = {}  # script -> how each of its job processes ended (tests/job_probe)
    for f in (demo_run.path.parent / "imports").glob("*.json"):
        record = json.loads(f.read_text())
        if "/.snakemake/scripts/" in record["argv"][0]:
            exits.setdefault(Path(record["argv"][0]).name.split(".")[-2], []).append(record["exit"])
    # genjudge.store.job_log.end: each job's work done, nothing left running, it leaves through os._exit
    assert set(exits) == {"split", "generate", "merge", "judge", "merge_judge", "parse_verdicts", "report"}, exits
    assert {e for ends in exits.values() for e in ends} == {"os._exit"}, exits


META_KEYS = {
    "shard",
    "hostname",
    "cuda_visible_devices",
    "started_at",
    "finished_at",
    "n_items",
    "n_generated_tokens",
    "model",
    "load_seconds",
    "generate_seconds",
    "resumed_items",
    "computed_items",
}


def test_dry_run_plans_one_generation_job_per_shard(demo_run):
    # The demo run's own plan (the Job stats a dry run prints too): the demo's 4 shards, one job each.
    shards = yaml.safe_load((demo_run.path / "config" / "demo.yaml").read_text())["shards"]
    counts = demo_run.planned
    assert shards == 4 and counts["generate"] == str(shards) and counts["judge"] == "1" and counts["merge"] == "1"


def test_demo_runs_end_to_end_and_writes_the_contracted_outputs(demo_run):
    workflow = demo_run
    res = workflow.results()
    s = json.loads((res / "report" / "summary.json").read_text())
    assert s["n_items"] == 44
    judged = pd.read_parquet(res / "judgments" / "demo-judge.parquet")
    assert s["n_judged"] == judged["verdict"].notna().sum() and s["n_unparsed"] == judged["verdict"].isna().sum()
    assert {"accuracy", "accuracy_ci95", "generator", "judge"} <= set(s)
    assert s["generator"]["model"] == "models/demo-generator"
    # The trained demo models give numbers that mean something.
    assert 0.5 <= s["exact_match"]["value"] <= 0.95
    assert s["judge_exact_match_agreement"]["value"] >= 0.9
    assert s["unparsed_rate"] < 0.05
    metas = workflow.metas()
    assert [m["shard"] for m in metas] == [0, 1, 2, 3]
    for m in metas:
        assert set(m) >= META_KEYS
        assert m["finished_at"] >= m["started_at"]
        assert m["n_items"] == 11
        # The demo configures its batch: no probe, said so in the meta.
        assert m["batch_search_seconds"] == 0 and m["batch_choice"]["decided_by"] == "configured"
        assert m["compile"] is False and m["compile_seconds"] == 0
    gens = pd.read_parquet(res / "generations" / "demo-generator" / "questions.parquet")
    assert sorted(gens["id"]) == sorted(pd.read_json(ROOT / "config/demo/questions.jsonl", lines=True)["id"])
    assert set(gens["finish_reason"]) <= {"eos", "length"}
    assert gens["prompt_sent"].str.contains("<|assistant|>", regex=False).all()  # chat template applied
    judge_meta = json.loads((res / "judge" / "demo-judge" / "raw.meta.json").read_text())
    assert judge_meta["placement"] == {"cpu": judge_meta["placement"]["cpu"]} and judge_meta["placement"]["cpu"] > 0
    assert judge_meta["memory_plan"]["parameters"] == judge_meta["placement"]["cpu"]
    assert judge_meta["batch_search_seconds"] == 0 and judge_meta["batch_choice"]["decided_by"] == "configured"
    md = (res / "report" / "report.md").read_text()
    assert "## By category" in md and "arithmetic" in md and "## Throughput" in md
    for log in [
        "split/questions",
        "merge/demo-generator/questions",
        "judge/demo-judge/0-of-1",
        "merge_judge/demo-judge",
        "parse_verdicts/demo-judge",
        "report",
        "generate/demo-generator/questions/0",
    ]:
        assert (workflow.path / "logs" / "demo" / f"{log}.log").exists()
    assert (
        "tok/s" in (workflow.path / "logs" / "demo" / "generate" / "demo-generator" / "questions" / "0.log").read_text()
    )
    # Nothing left to do on a second invocation.
    again = workflow.run("-n")
    assert "Nothing to be done" in again.stdout + again.stderr
    # Snakemake's own report packages the results with their captions.
    workflow.run("--report", "report.zip")
    with zipfile.ZipFile(workflow.path / "report.zip") as zf:
        names = zf.namelist()
        html = zf.read("report/report.html").decode()  # Snakemake's page, not the run's report.html
    assert any(n.endswith("/summary.json") for n in names) and any(n.endswith("/report.md") for n in names)
    assert any(n.endswith("/per_category.csv") for n in names)
    assert "Headline numbers of run" in html and "models/demo-judge" in html  # captions filled from config


BAD_DATASETS = {
    "malformed.jsonl": (
        '{"id": "a", "question": "q", "answer": "1"}\n{"id": "b", "question": \n',
        r"malformed\.jsonl, line 2: malformed JSON",
    ),
    "nofield.jsonl": (
        '{"id": "a", "question": "q"}\n{"id": "b", "prompt": "q"}\n',
        r"nofield\.jsonl, line 2: missing required field 'question'",
    ),
    "dups.jsonl": (
        '{"id": "a", "question": "q"}\n{"id": "a", "question": "r"}\n',
        r"dups\.jsonl, line 2: duplicate id 'a'",
    ),
    "empty.jsonl": ("", r"empty\.jsonl: the dataset is empty"),
}


def test_bad_input_stops_before_any_job_and_keeps_earlier_results(demo_run, tmp_path):
    workflow = demo_run.copy(tmp_path)  # a finished run's results, which no bad input may touch
    summary = workflow.results() / "report" / "summary.json"
    before = {p: p.read_bytes() for p in workflow.results().rglob("*") if p.is_file()}

    (workflow.path / "config-only").mkdir()
    shutil.copy(workflow.path / "models" / "demo-judge" / "config.json", workflow.path / "config-only")
    cases = []
    for name, (content, pattern) in BAD_DATASETS.items():
        path = workflow.path / name
        path.write_text(content)
        cases.append(({"dataset": {"path": name}}, pattern))
    cases += [
        ({"shards": 50}, r"shards = 50 is more than the 44 items"),
        ({"dataset": {"path": "missing.jsonl"}}, r"missing\.jsonl: dataset file not found"),
        (
            {"generator": {"model": "./no/such/model"}},
            r"generator\.model: model directory './no/such/model' does not exist",
        ),
        (
            {"judge": {"model": "/nonexistent/judge"}},
            r"judge\.model: model directory '/nonexistent/judge' does not exist",
        ),
        (
            # Only config.json: a dry run plans, a real run stops before any job (the job could not load it).
            {"judge": {"model": "config-only", "template": None}},
            r"judge\.model: 'config-only' has no tokenizer \(none of tokenizer\.json, .*\), no weights \(no "
            r"\*\.safetensors, no pytorch_model\*\.bin\)",
        ),
        ({"no_such_key": 1}, r"Additional properties are not allowed \('no_such_key' was unexpected\)"),
        ({"shards": "four"}, r"'four' is not of type 'integer'"),
    ]
    for i, (override, pattern) in enumerate(cases):
        bad = workflow.write_config(f"bad{i}.yaml", **{"shards": 2, **override})
        proc = workflow.run("--cores", "2", "--configfile", bad, check=False)
        assert proc.returncode != 0, override
        assert re.search(pattern, proc.stdout + proc.stderr), (override, proc.stderr[-6000:])
        assert "Loading weights" not in proc.stdout + proc.stderr
    after = {p: p.read_bytes() for p in workflow.results().rglob("*") if p.is_file()}
    assert after == before
    assert summary.exists()


def test_lint_only_advises_software_environments():
    advice, output = lint_advice(ROOT, env=clean_env())  # snakemake exits 1 whenever it advises anything
    assert advice, f"lint printed nothing: did it run?\n{output[-2000:]}"
    assert advice == ALLOWED
