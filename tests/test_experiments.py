"""Experiments: generators x datasets graded by judges, each judge loaded once."""

import json
import re
import shutil
from types import SimpleNamespace

import pandas as pd
import pytest
from conftest import new_workflow, planned_jobs
from judges import constant_judge

from genjudge import config as wfconfig
from genjudge.errors import InputError

SMALL = 20


def small_dataset(workflow):
    lines = (workflow.path / "config/demo/questions.jsonl").read_text().splitlines()[:SMALL]
    (workflow.path / "small.jsonl").write_text("\n".join(lines) + "\n")


def experiment(workflow, name, generators, judge=None, datasets=None, shards=2, **extra):
    return workflow.write_config(
        f"{name}.yaml",
        run=name,
        shards=shards,
        generator={"max_new_tokens": 6},
        generators=generators,
        datasets=datasets or {"questions": {}, "small": {"path": "small.jsonl", "shards": 1}},
        judge={"max_new_tokens": 6, **(judge or {})},
        **extra,
    )


def counts(workflow, cfg):
    out = workflow.run("-n", "--configfile", cfg, "--quiet", "rules").stdout
    return dict(re.findall(r"^(\w+)\s+(\d+)$", out, re.M))


TWO = {"demo": {}, "terse": {"max_new_tokens": 2}}
THREE = {**TWO, "plain": {"use_chat_template": False}}


@pytest.fixture(scope="module")
def study(tmp_path_factory, built_models):
    """Two generators on two datasets, one judge; then the same with a third generator. The first run's
    results are kept as they were (`first`); the workflow holds the second's, for tests that build on it."""
    root = tmp_path_factory.mktemp("study")
    workflow = new_workflow(root, built_models)
    small_dataset(workflow)
    cfg = experiment(workflow, "exp", TWO, shards=1)
    first_jobs = planned_jobs(workflow.run("--cores", "2", "--configfile", cfg))
    shutil.copytree(workflow.results("exp"), root / "first", symlinks=True)
    cfg3 = experiment(workflow, "exp", THREE, shards=1)
    third_jobs = planned_jobs(workflow.run("--cores", "2", "--configfile", cfg3))
    return SimpleNamespace(workflow=workflow, first=root / "first", first_jobs=first_jobs, third_jobs=third_jobs)


def generation_metas(res) -> list[dict]:
    return [json.loads(p.read_text()) for p in (res / "generations").glob("*/*/*.meta.json")]


@pytest.mark.workflow
def test_two_generators_two_datasets_one_judge_load_then_a_third_generator(study):
    jobs = study.first_jobs
    assert jobs["judge"] == "1" and jobs["split"] == "2" and jobs["generate"] == "4"
    res = study.first  # the first run's results, as it left them
    s = json.loads((res / "report" / "summary.json").read_text())
    cells = {(r["generator"], r["dataset"]) for r in s["leaderboard"]}
    assert cells == {("demo", "questions"), ("terse", "questions"), ("demo", "small"), ("terse", "small")}
    for r in s["leaderboard"]:
        assert r["judge"] == "demo-judge" and r["n_items"] == (44 if r["dataset"] == "questions" else SMALL)
        assert r["accuracy"]["ci95"] and 0 <= r["accuracy"]["value"] <= 1
    judged = pd.read_parquet(res / "judgments" / "demo-judge.parquet")
    assert len(judged) == 2 * (44 + SMALL)
    assert not judged[["generator", "dataset", "id"]].duplicated().any()
    meta = json.loads((res / "judge" / "demo-judge" / "raw.meta.json").read_text())
    assert meta["model_loads"] == 1 and set(meta["cells"]) == {
        "demo/questions",
        "terse/questions",
        "demo/small",
        "terse/small",
    }
    md = (res / "report" / "report.md").read_text()
    assert "## Leaderboard" in md and "| terse | small | demo-judge |" in md
    # A first run resumes nothing: `small` repeats questions of `questions`, so its identical requests are
    # shared with the first one asked in this run (generation and judge alike), never "resumed".
    gen_metas = generation_metas(res)
    assert len(gen_metas) == 4
    assert all(m["resumed_items"] == 0 for m in gen_metas) and sum(m["shared_items"] for m in gen_metas) > 0
    assert meta["resumed_items"] == 0 and all(c["resumed"] == 0 for c in meta["cells"].values())
    assert sum(c["shared"] for c in meta["cells"].values()) > 0
    assert all(c["shared"] + c["computed"] <= c["requests"] for c in meta["cells"].values())
    assert "| from an earlier run | shared in this run | computed |" in md
    # A third generator: only its answers are generated, and only its new judge prompts computed.
    jobs = study.third_jobs
    assert jobs["generate"] == "2" and jobs["judge"] == "1" and "split" not in jobs
    res = study.workflow.results("exp")
    gens = {
        g: {
            d: pd.read_parquet(res / "generations" / g / f"{d}.parquet").set_index("id")["output"]
            for d in ("questions", "small")
        }
        for g in THREE
    }
    # A judge prompt is the question, reference and answer: `small` repeats questions of `questions`,
    # so an answer given to the same question in both is one judge call.
    seen = {(i, out) for g in ("demo", "terse") for d in gens[g] for i, out in gens[g][d].items()}
    new = len({(i, out) for d in gens["plain"] for i, out in gens["plain"][d].items()} - seen)
    meta = json.loads((res / "judge" / "demo-judge" / "raw.meta.json").read_text())
    assert meta["computed_items"] == new and new > 0
    assert {k: v["computed"] for k, v in meta["cells"].items() if not k.startswith("plain")} == {
        "demo/questions": 0,
        "terse/questions": 0,
        "demo/small": 0,
        "terse/small": 0,
    }
    # Their verdicts came from the first run's records: resumed, each counted once, in the cells and the total.
    old = {k: v for k, v in meta["cells"].items() if not k.startswith("plain")}
    assert all(v["resumed"] == v["requests"] > 0 and v["shared"] == 0 for v in old.values())
    assert meta["resumed_items"] >= sum(v["resumed"] for v in old.values())
    s = json.loads((res / "report" / "summary.json").read_text())
    assert len(s["leaderboard"]) == 6


@pytest.mark.workflow
def test_pairwise_all_judges_every_pair_in_both_orders_in_one_load(study, tmp_path):
    # The study's three generators on `small`, now graded by a pairwise judge alone: their answers are
    # the study's, so only the judge and what reads it run.
    workflow = study.workflow.copy(tmp_path)
    constant_judge(workflow.path / "models" / "first-judge", "pairwise", "VERDICT: A")
    cfg = experiment(
        workflow,
        "exp",
        THREE,
        judge={
            "model": "models/first-judge",
            "mode": "pairwise",
            "template": None,
            "pairs": "all",
            "max_new_tokens": 8,
        },
        datasets={"small": {"path": "small.jsonl", "shards": 1}},
    )
    jobs = planned_jobs(workflow.run("--cores", "2", "--configfile", cfg))
    assert jobs["judge"] == "1" and not {"split", "generate", "merge"} & set(jobs), jobs
    res = workflow.results("exp")
    raw = pd.read_parquet(res / "judge" / "first-judge" / "raw.parquet")
    pairs = raw.groupby(["generator", "opponent"]).size().to_dict()
    # Every unordered pair once (in the order the generators are listed; the test config lists them sorted).
    assert pairs == {("demo", "plain"): 2 * SMALL, ("demo", "terse"): 2 * SMALL, ("plain", "terse"): 2 * SMALL}
    orders = raw.groupby(["generator", "opponent", "id"])["order"].apply(lambda o: tuple(sorted(o)))
    assert set(orders) == {(0, 1)}
    meta = json.loads((res / "judge" / "first-judge" / "raw.meta.json").read_text())
    assert meta["model_loads"] == 1
    s = json.loads((res / "report" / "summary.json").read_text())
    assert {(r["generator"], r["opponent"]) for r in s["leaderboard"]} == set(pairs)
    # A judge that always picks the first position: every pair is position-inconsistent, all ties.
    assert all(r["tie"]["value"] == 1.0 and r["position_consistency"]["value"] == 0.0 for r in s["leaderboard"])
    bt = s["across_cells"]["first-judge"]["bradley_terry"]["small"]
    assert set(bt) == {"demo", "terse", "plain"} and all(abs(v["strength"]) < 1e-6 for v in bt.values())
    # Its bias, measured: every pair flips when swapped, the first position wins every single judgment.
    b = s["validity"]["judges"]["first-judge"]["bias"]
    assert b["flip_rate"]["value"] == 1.0 and b["flip_rate"]["n"] == 3 * SMALL
    assert b["first_position_win_rate"]["value"] == 1.0 and b["first_position_win_rate"]["n"] == 6 * SMALL
    judged = pd.read_parquet(res / "judgments" / "first-judge.parquet")
    terse = pd.read_parquet(res / "generations" / "terse" / "small.parquet").set_index("id")["output"]
    vs_terse = judged[(judged["generator"] == "demo") & (judged["opponent"] == "terse")]
    assert vs_terse["opponent_output"].tolist() == terse[vs_terse["id"]].tolist()


def base(**kw):
    cfg = {
        "run": "x",
        "dataset": {"path": "config/demo/questions.jsonl"},
        "generator": {"model": "models/demo-generator"},
        "judge": {"model": "models/demo-judge"},
    }
    cfg.update(kw)
    return cfg


@pytest.mark.parametrize(
    "extra,message",
    [
        ({"generators": {"a/b": {}}}, r"generators\.a/b: a name is letters, digits"),
        ({"generators": {}}, r"generators: an empty map names nothing to run"),
        (
            {"generators": {"a": {"no_such_key": 1}}},
            r"generators\.a: Additional properties are not allowed \('no_such_key'",
        ),
        ({"judges": {"j": {"batch_size": "huge"}}}, r"judges\.j\.batch_size: 'huge' is not valid"),
        (
            {
                "generators": {"a": {}, "b": {}},
                "judge": {"model": "models/demo-judge", "mode": "pairwise", "baseline": "c"},
            },
            r"judge\.baseline: 'c' is not one of the generators \['a', 'b'\]",
        ),
        (
            {"judge": {"model": "models/demo-judge", "mode": "pairwise", "pairs": "all"}},
            r"judge\.pairs: all needs at least two generators",
        ),
        (
            {"datasets": {"a": {}, "b": {}}, "judges": {"j": {"datasets": ["a", "c"]}, "k": {}}},
            r"judges\.j\.datasets: \['c'\] not among the datasets \['a', 'b'\]",
        ),
        (
            {"generators": {"a": {}, "b": {}}, "judges": {"j": {"generators": ["x"]}, "k": {}}},
            r"judges\.j\.generators: \['x'\] not among the generators \['a', 'b'\]",
        ),
        ({"judge": {"model": "models/demo-judge", "datasets": []}}, r"judge\.datasets: \[\] should be non-empty"),
        # One judge, written under `judges:`: the key as written, not `judge.generators`.
        (
            {"generators": {"a": {}, "b": {}}, "judges": {"a": {"generators": ["x"]}}},
            r"^judges\.a\.generators: \['x'\] not among the generators \['a', 'b'\]",
        ),
        ({"judges": {"j": {"mode": "pairwise"}}}, r"^judges\.j\.baseline: pairwise mode needs a baseline"),
        (
            {"judges": {"j": {"mode": "pairwise", "pairs": "all"}}},
            r"^judges\.j\.pairs: all needs at least two generators",
        ),
        (
            {"generators": {"a": {}, "b": {}}, "judges": {"j": {"mode": "pairwise", "baseline": "c"}}},
            r"^judges\.j\.baseline: 'c' is not one of the generators",
        ),
        # Set in the `judge` section every judge starts from: named there.
        (
            {"generators": {"a": {}, "b": {}}, "judge": {"model": "m", "generators": ["x"]}, "judges": {"j": {}}},
            r"^judge\.generators: \['x'\] not among",
        ),
        (
            {"datasets": {"a": {}, "b": {}}, "judges": {"j": {"datasets": ["a"]}, "k": {"datasets": ["a"]}}},
            r"datasets\.b: no judge reads it",
        ),
        (
            {
                "generators": {"a": {}, "b": {}, "c": {}},
                "judges": {"j": {"mode": "pairwise", "baseline": "a", "generators": ["a"]}, "k": {}},
            },
            r"judges\.j\.baseline: 'a' is the only generator",
        ),
        (
            {
                "datasets": {"a": {}, "b": {}},
                "judges": {"j": {}, "k": {"datasets": ["a"]}},
                "panels": {"p": {"judges": ["j", "k"]}},
            },
            r"panels\.p\.judges: the judges do not grade the same",
        ),
    ],
)
def test_bad_experiment_configs_name_the_key(extra, message):
    with pytest.raises(InputError, match=message):
        cfg = wfconfig.validate(base(**extra))
        wfconfig.check(cfg, data=False)


def test_judges_grade_their_own_datasets_and_generators_and_pairs_follow_them():
    from genjudge.config.experiment import resolve

    cfg = wfconfig.validate(
        base(
            generators={"a": {}, "b": {}, "c": {}},
            datasets={"gsm8k": {}, "mtbench": {}},
            judges={
                "ref": {"datasets": ["gsm8k"]},
                "score": {"mode": "score", "datasets": ["mtbench"], "generators": ["a", "b"]},
                # pairs among the judge's generators; a generator baseline may be outside them
                "vs_a": {"mode": "pairwise", "baseline": "a", "generators": ["b", "c"], "datasets": ["mtbench"]},
                "all": {"mode": "pairwise", "pairs": "all", "generators": ["b", "c"], "datasets": ["gsm8k"]},
            },
        )
    )
    exp = resolve(cfg)
    keys = {j: [c.key for c in exp.cells(j)] for j in exp.judges}
    assert keys == {
        "ref": ["a/gsm8k", "b/gsm8k", "c/gsm8k"],
        "score": ["a/mtbench", "b/mtbench"],
        "vs_a": ["b/mtbench vs a", "c/mtbench vs a"],
        "all": ["b/gsm8k vs c"],
    }
    # c answers mtbench only as vs_a's candidate: generated all the same
    assert exp.generated() == [(g, d) for g in "abc" for d in ("gsm8k", "mtbench")]

    # one judge (no `judges:` map) limited to one dataset: the other is read by no judge
    def one(*names):
        return wfconfig.validate(base(datasets={"x": {}, "y": {}}, judge={"model": "m", "datasets": list(names)}))

    assert [c.key for c in resolve(one("y", "x")).cells("m")] == ["demo-generator/x", "demo-generator/y"]
    with pytest.raises(InputError, match=r"datasets\.x: no judge reads it"):
        resolve(one("y"))


def test_null_removes_an_entry_of_every_named_map():
    removed = wfconfig.remove_nulls(
        cfg := {
            "generators": {"a": {}, "b": None},
            "datasets": {"x": None},
            "judges": {"j": {}},
            "panels": {"p": None},
        }
    )
    assert removed == ["generators.b", "datasets.x", "panels.p"]
    # a map whose every entry is removed is as if left out
    assert cfg == {"generators": {"a": {}}, "judges": {"j": {}}}


@pytest.mark.workflow
def test_an_overlay_configfile_removes_a_generator_judge_and_panel_of_the_base(workflow):
    small_dataset(workflow)
    base_cfg = experiment(
        workflow,
        "overlay",
        {"demo": {}, "terse": {"max_new_tokens": 2}},
        judges={"a": {}, "b": {"template": None}},
        panels={"ab": {"judges": ["a", "b"]}},
    )
    overlay = workflow.path / "config" / "overlay-less.yaml"
    overlay.write_text("generators: {terse: null}\njudges: {b: null}\npanels: {ab: null}\n")
    planned = counts(workflow, base_cfg)
    assert planned["generate"] == "6" and planned["merge"] == "4" and planned["judge"] == "2"
    planned = counts_layers(workflow, base_cfg, overlay)
    assert planned["generate"] == "3" and planned["merge"] == "2" and planned["judge"] == "1"
    # without the panel's removal, removing its member is an error that names the panel
    bad = workflow.path / "config" / "overlay-bad.yaml"
    bad.write_text("judges: {b: null}\n")
    out = workflow.run("-n", "--configfile", base_cfg, bad, check=False)
    assert out.returncode != 0 and "panels.ab.judges: ['b'] not among the judges ['a']" in out.stdout + out.stderr


def counts_layers(workflow, *cfgs):
    out = workflow.run("-n", "--configfile", *cfgs, "--quiet", "rules").stdout
    return dict(re.findall(r"^(\w+)\s+(\d+)$", out, re.M))
