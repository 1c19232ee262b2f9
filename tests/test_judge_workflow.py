"""Judge steps through the real snakemake command line: re-parsing without re-judging, pairwise bias."""

import json
import re

import pytest

from judges import constant_judge

pytestmark = pytest.mark.workflow

FAST = {"shards": 2, "generator": {"max_new_tokens": 8}, "judge": {"max_new_tokens": 6}}


def plan_counts(workflow, cfg):
    out = workflow.run("-n", "--configfile", cfg, "--quiet", "rules").stdout
    return dict(re.findall(r"^(\w+)\s+(\d+)$", out, re.M))


def test_changing_only_the_verdict_pattern_reparses_without_the_judge(workflow):
    cfg = workflow.write_config("base.yaml", run="base", **FAST)
    workflow.run("--cores", "2", "--configfile", cfg)
    judge_meta = workflow.results("base") / "judge" / "raw.meta.json"
    before = judge_meta.read_text()
    new = workflow.write_config("base.yaml", **{**FAST, "run": "base", "judge": {
        "max_new_tokens": 6, "verdict_pattern": r"(?i)verdict\W*(correct|incorrect)"}})
    assert plan_counts(workflow, new) == {"parse_verdicts": "1", "report": "1", "all": "1", "total": "3"}
    workflow.run("--cores", "2", "--configfile", new)
    assert judge_meta.read_text() == before  # the judge did not run again
    summary = json.loads((workflow.results("base") / "report" / "summary.json").read_text())
    assert summary["n_items"] == 44


def test_pairwise_judge_that_always_picks_the_first_answer_is_all_ties(workflow):
    cfg = workflow.write_config("base.yaml", run="base", **FAST)
    workflow.run("--cores", "2", "--configfile", cfg)
    constant_judge(workflow.path / "models" / "first-position-judge", "pairwise", "VERDICT: A")
    pw = workflow.write_config(
        "pw.yaml", run="pw", shards=2, generator={"max_new_tokens": 8},
        judge={"model": "models/first-position-judge", "mode": "pairwise", "max_new_tokens": 8, "template": None,
               "baseline": "results/base/generations.parquet"})
    workflow.run("--cores", "2", "--configfile", pw)
    s = json.loads((workflow.results("pw") / "report" / "summary.json").read_text())
    assert s["mode"] == "pairwise" and s["n_unparsed"] == 0
    assert s["position_consistency"]["value"] == 0.0
    assert s["tie"]["value"] == 1.0 and s["win"]["value"] == 0.0 and s["loss"]["value"] == 0.0
    meta = json.loads((workflow.results("pw") / "judge" / "raw.meta.json").read_text())
    assert meta["n_requests"] == 88  # every pair judged in both orders
    md = (workflow.results("pw") / "report" / "report.md").read_text()
    assert "| position consistency | 0.0%" in md


def test_data_parallel_judge_shards_each_lease_their_gpu_and_merge(workflow):
    cfg = workflow.write_config("jp.yaml", **{**FAST, "run": "jp", "gpu_inventory": [0, 1],
                                              "judge": {"max_new_tokens": 6, "shards": 2},
                                              "resources": {"generate": {"cpus_per_gpu": 1},
                                                            "judge": {"cpus_per_gpu": 1}}})
    assert plan_counts(workflow, cfg)["judge"] == "2"
    workflow.run("--cores", "2", "--resources", "gpu=2", "--configfile", cfg)
    meta = json.loads((workflow.results("jp") / "judge" / "raw.meta.json").read_text())
    shards = meta["shards"]
    assert [s["judge_shard"] for s in shards] == [0, 1] and [s["n_items"] for s in shards] == [22, 22]
    assert all(len(s["gpus"]) == 1 and s["gpu_source"] == "lease" for s in shards)
    s = json.loads((workflow.results("jp") / "report" / "summary.json").read_text())
    assert s["n_items"] == 44 and s["n_judged"] + s["n_unparsed"] == 44
    assert s["judge"]["shards"] == 2
