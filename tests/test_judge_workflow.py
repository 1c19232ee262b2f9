"""Judge steps through the real snakemake command line: re-parsing without re-judging, pairwise bias."""

import json
import re
import subprocess
import sys

import pandas as pd
import pytest
from conftest import new_workflow, planned_jobs
from judges import constant_judge

pytestmark = pytest.mark.workflow

FAST = {"shards": 1, "generator": {"max_new_tokens": 8}, "judge": {"max_new_tokens": 6}}


@pytest.fixture(scope="module")
def base_run(tmp_path_factory, built_models):
    """One finished run `base` (one shard, short answers and verdicts) the module's tests start from."""
    wf = new_workflow(tmp_path_factory.mktemp("base"), built_models)
    wf.run("--cores", "2", "--configfile", wf.write_config("base.yaml", run="base", **FAST))
    return wf


@pytest.fixture
def base(base_run, tmp_path):
    """A copy of the finished run `base` for a test that changes it."""
    return base_run.copy(tmp_path)


# Answer extraction by category: capitals compare their first letters, counting its numbers, the rest whole texts.
BY_CATEGORY = [
    {"categories": ["capitals"], "reference": r"^\W*(\w)", "candidate": r"^\W*(\w)"},
    {"categories": ["counting"], "reference": "last_number", "candidate": "last_number"},
]


def test_changing_only_parse_settings_reparses_without_the_judge(base):
    """The verdict pattern and the answer extraction by category (no cascade) are read by parsing alone."""
    workflow = base
    judge_meta = workflow.results("base") / "judge" / "demo-judge" / "raw.meta.json"
    before = judge_meta.read_text()
    new = workflow.write_config(
        "base.yaml",
        **{
            **FAST,
            "run": "base",
            "dataset": {"answer": {"by_category": BY_CATEGORY}},
            "judge": {"max_new_tokens": 6, "verdict_pattern": r"(?i)verdict\W*(correct|incorrect)"},
        },
    )
    proc = workflow.run("--cores", "2", "--configfile", new)
    assert planned_jobs(proc) == {"parse_verdicts": "1", "report": "1", "all": "1", "total": "3"}
    assert judge_meta.read_text() == before  # the judge did not run again
    summary = json.loads((workflow.results("base") / "report" / "summary.json").read_text())
    assert summary["n_items"] == 44
    # Each item's exact match by its category's rule, the rest by whole texts.
    df = pd.read_parquet(workflow.results("base") / "judgments" / "demo-judge.parquet")
    category = df["category"]
    capitals, counting, rest = category == "capitals", category == "counting", category.isin(["arithmetic", "words"])
    assert capitals.sum() == 12 and counting.sum() == 8 and rest.sum() == 24
    assert (df.loc[capitals, "reference_extracted"] == df.loc[capitals, "reference"].str[:1]).all()
    initials = [re.match(r"\W*(\w)", o) for o in df.loc[capitals, "output"]]
    same = [bool(m) and m.group(1).lower() == r[0].lower() for m, r in zip(initials, df.loc[capitals, "reference"])]
    assert df.loc[capitals, "exact_match"].tolist() == same
    assert (df.loc[counting, "reference_extracted"] == df.loc[counting, "reference"]).all()  # "3" reads 3
    assert (
        df.loc[rest, "reference_extracted"].isna().all() and (df.loc[rest, "answer_extraction"] == "whole text").all()
    )
    per_category = summary["per_category"]
    for name in ("capitals", "counting", "words"):
        want = df.loc[category == name, "exact_match"].astype(float).mean()
        assert per_category[name]["exact_match"]["value"] == pytest.approx(want)


def test_pairwise_judge_that_always_picks_the_first_answer_is_all_ties(base):
    """The finished run's answers judged against its own answers file by a pairwise judge (its generations
    are up to date: only the judge, its parse and the report run)."""
    workflow = base
    baseline = "results/base/generations/demo-generator/questions.parquet"  # the finished run's answers
    constant_judge(workflow.path / "models" / "first-position-judge", "pairwise", "VERDICT: A")
    pw = workflow.write_config(
        "pw.yaml",
        run="base",
        shards=1,
        generator={"max_new_tokens": 8},
        judge={
            "model": "models/first-position-judge",
            "mode": "pairwise",
            "max_new_tokens": 8,
            "template": None,
            "baseline": baseline,
        },
    )
    workflow.run("--cores", "2", "--configfile", pw)
    s = json.loads((workflow.results("base") / "report" / "summary.json").read_text())
    assert s["mode"] == "pairwise" and s["n_unparsed"] == 0
    assert s["position_consistency"]["value"] == 0.0
    assert s["tie"]["value"] == 1.0 and s["win"]["value"] == 0.0 and s["loss"]["value"] == 0.0
    meta = json.loads((workflow.results("base") / "judge" / "first-position-judge" / "raw.meta.json").read_text())
    assert meta["n_requests"] == 88  # every pair judged in both orders
    md = (workflow.results("base") / "report" / "report.md").read_text()
    assert "| position consistency | 0.0%" in md
    b = s["validity"]["judges"]["first-position-judge"]["bias"]
    assert b["flip_rate"] == {"value": 1.0, "ci95": b["flip_rate"]["ci95"], "n": 44}
    assert b["first_position_win_rate"]["value"] == 1.0 and b["first_position_win_rate"]["n"] == 88
    assert b["prefer_longer"]["n"] == 0  # the baseline file's answers are there; every verdict is a tie
    assert "| first-position-judge | 100.0% [" in md
    # Every pair a tie: the length-controlled win rate is the raw one, 50%, with nothing to fit.
    lc = s["across_cells"]["first-position-judge"]["length_controlled"]["questions"]["demo-generator"]
    assert lc["value"] == lc["raw"] == 0.5 and lc["coefficients"] == {} and lc["n"] == 44
    assert "### Length-controlled win rate" in md and "| first-position-judge | questions | demo-generator |" in md
    # The headline command knows every mode.
    out = subprocess.run(
        [sys.executable, "-m", "genjudge.cli", "summary", str(workflow.results("base"))],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert re.search(r"tie share \(vs baseline\)\s+100\.0%", out) and "position consistency" in out
    # The headline: every pair a tie is a win rate of 50% with ties half, the outcomes beside it.
    assert s["win_rate"]["value"] == 0.5 and (s["win_rate"]["wins"], s["win_rate"]["ties"]) == (0, 44)
    assert re.search(r"win rate \(vs baseline; ties count half\)\s+50\.0% \[", out)
    assert re.search(r"wins / ties / losses \(verdicts\)\s+0 wins, 44 ties, 0 losses", out)


def test_data_parallel_judge_shards_each_lease_their_gpu_and_merge(base):
    """The finished run judged again in two shards (its generations are up to date), with a judge cache of
    its own: each shard computes its items."""
    workflow = base
    cfg = workflow.write_config(
        "jp.yaml",
        **{
            **FAST,
            "run": "base",
            "cache_dir": "results/.cache-jp",
            "gpu_inventory": [0, 1],
            "judge": {"max_new_tokens": 6, "shards": 2},
            "resources": {"generate": {"cpus_per_gpu": 1}, "judge": {"cpus_per_gpu": 1}},
        },
    )
    proc = workflow.run("--cores", "2", "--resources", "gpu=2", "--configfile", cfg)
    assert planned_jobs(proc)["judge"] == "2"
    meta = json.loads((workflow.results("base") / "judge" / "demo-judge" / "raw.meta.json").read_text())
    shards = meta["shards"]
    assert [s["judge_shard"] for s in shards] == [0, 1] and [s["n_items"] for s in shards] == [22, 22]
    assert all(len(s["gpus"]) == 1 and s["gpu_source"] == "lease" for s in shards)
    s = json.loads((workflow.results("base") / "report" / "summary.json").read_text())
    judged = pd.read_parquet(workflow.results("base") / "judgments" / "demo-judge.parquet")
    assert s["n_items"] == 44 == len(judged) and s["n_judged"] == judged["verdict"].notna().sum()
    assert s["judge"]["shards"] == 2
    # GPUs 0 and 1 leased on this CPU machine: each job says in its log that it ran on the CPU despite its
    # lease, and the report shows where it really ran, with a note at the top of the page.
    logs = sorted((workflow.path / "logs" / "base" / "judge" / "demo-judge").glob("*-of-2.log"))
    assert len(logs) == 2 and all("runs on the CPU despite its lease of GPU(s)" in p.read_text() for p in logs)
    assert s["judge"]["ran_on_cpu"] is True
    md = (workflow.results("base") / "report" / "report.md").read_text()
    assert "leased, ran on the CPU: torch saw no CUDA device)" in md
    assert "> **Warning:** judge: leased GPU(s) 0 but ran on the CPU" in md


YESNO_MODE = '''
from genjudge.judging.modes import JudgeMode, register
from genjudge.judging.modes.base import rate_text, share


class YesNo(JudgeMode):
    """A toy grader: does the answer address the question at all?"""

    name = "yesno"
    placeholders = frozenset({"question", "candidate"})
    pattern = r"ANSWER:\\s*(YES|NO)\\b"
    labels = {"YES": "yes", "NO": "no"}
    marker = "ANSWER"

    def metrics(self, g):
        return {"yes_rate": share(g[g["verdict"].notna()], "yes")}

    def headline(self, s):
        return [("answered yes", rate_text(s["yes_rate"]))]

    def category_column(self):
        return "yes", lambda c: rate_text(c["yes_rate"])


register(YesNo())
'''


def test_a_mode_of_ones_own_runs_end_to_end_from_a_plugin_file(base):
    """The finished run's answers judged by a mode from a plugin file (its generations are up to date)."""
    from genjudge.config import load_plugins

    workflow = base

    (workflow.path / "yesno_mode.py").write_text(YESNO_MODE)
    (workflow.path / "yesno.txt").write_text(
        "Question: {question}\nAnswer: {candidate}\n"
        "Does the answer address the question? End with ANSWER: YES or ANSWER: NO.\n"
    )
    load_plugins({"plugins": [str(workflow.path / "yesno_mode.py")]})
    constant_judge(
        workflow.path / "models" / "yesno-judge", "yesno", "ANSWER: YES", template_path=workflow.path / "yesno.txt"
    )
    cfg = workflow.write_config(
        "yn.yaml",
        run="base",
        shards=1,
        generator={"max_new_tokens": 8},
        plugins=["yesno_mode.py"],
        judge={"model": "models/yesno-judge", "mode": "yesno", "template": "yesno.txt", "max_new_tokens": 8},
    )
    workflow.run("--cores", "2", "--configfile", cfg)
    s = json.loads((workflow.results("base") / "report" / "summary.json").read_text())
    assert s["mode"] == "yesno" and s["n_items"] == 44 and s["n_unparsed"] == 0
    assert s["yes_rate"]["value"] == 1.0
    assert sum(c["yes_rate"]["n"] for c in s["per_category"].values()) == 44
    md = (workflow.results("base") / "report" / "report.md").read_text()
    assert "| answered yes | 100.0% [" in md and "| category | items | judged | unparsed | yes |" in md
    raw = pd.read_parquet(workflow.results("base") / "judge" / "yesno-judge" / "raw.parquet")
    assert raw["judge_prompt"].str.contains("End with ANSWER: YES or ANSWER: NO.", regex=False).all()
    # Editing the plugin's label mapping reruns its judge (which resumes every item: the requests are
    # unchanged) and the parse: the new mapping is the one applied.
    (workflow.path / "yesno_mode.py").write_text(YESNO_MODE.replace('{"YES": "yes", "NO": "no"}', '{"YES": "no"}'))
    plan = planned_jobs(workflow.run("--cores", "2", "--configfile", cfg))
    assert plan["judge"] == "1" and plan["parse_verdicts"] == "1" and plan["report"] == "1", plan
    s = json.loads((workflow.results("base") / "report" / "summary.json").read_text())
    assert s["yes_rate"]["value"] == 0.0 and s["n_unparsed"] == 0
    meta = json.loads((workflow.results("base") / "judge" / "yesno-judge" / "raw.meta.json").read_text())
    assert meta["computed_items"] == 0 and meta["resumed_items"] == 44


def test_an_unknown_mode_is_refused_while_planning(workflow):
    cfg = workflow.write_config("bad.yaml", judge={"mode": "yesno", "template": None})
    proc = workflow.run("-n", "--configfile", cfg, check=False)
    assert proc.returncode != 0
    assert (
        "judge.mode: unknown mode 'yesno'; known modes: pairwise, reference, rubric, score" in proc.stdout + proc.stderr
    )


def test_changing_only_the_judge_precision_rejudges_every_item(base):
    workflow = base
    judged = "results/base/judge/demo-judge/raw.parquet"  # the judge's verdicts: the report is other tests'
    meta = workflow.results("base") / "judge" / "demo-judge" / "raw.meta.json"
    assert json.loads(meta.read_text())["computed_items"] == 44
    # One change after the other: 8-bit weights, then float32 named (the default is the checkpoint's dtype).
    for change in ({"quantization": "8bit"}, {"dtype": "float32"}):
        new = workflow.write_config("base.yaml", run="base", **{**FAST, "judge": {**FAST["judge"], **change}})
        proc = workflow.run("--cores", "2", judged, "--configfile", new)
        assert planned_jobs(proc)["judge"] == "1", change
        m = json.loads(meta.read_text())
        assert m["computed_items"] == 44 and m["resumed_items"] == 0, change
