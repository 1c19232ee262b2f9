"""Mistakes that must stop a run while planning, naming the file and the key the user wrote:
judge templates that never show what they grade or use turns they do not see, errors of one
judge of several, and a misspelt demo model."""

import json

import pytest
from judges import ROOT

from genjudge import config as wfconfig
from genjudge.errors import InputError

DEMO_TEMPLATE = str(ROOT / "config/demo/judge_template.txt")
MT_FIELDS = {"id": "question_id", "prompt": "turns", "reference": "reference", "category": "category"}


def cfg(tmp_path, dataset=None, **sections):
    c = {
        "run": "x",
        "shards": 1,
        "dataset": dataset or {"path": str(ROOT / "config/demo/questions.jsonl")},
        "generator": {"model": str(ROOT / "models/demo-generator")},
        "judge": {"model": str(ROOT / "models/demo-judge"), "template": DEMO_TEMPLATE},
    }
    for key, value in sections.items():
        c[key] = {**c.get(key, {}), **value} if isinstance(value, dict) and key in c else value
    return wfconfig.validate(c)


def template(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def multi_turn(tmp_path):
    rows = [
        {"question_id": 1, "category": "math", "turns": ["What is 2 + 3?", "Double it."], "reference": ["5", "10"]},
        {"question_id": 2, "category": "writing", "turns": ["Name a colour.", "Another one."]},
        {"question_id": 3, "category": "writing", "turns": ["Name a fruit."]},
    ]
    path = tmp_path / "mt.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return {"path": str(path), "fields": MT_FIELDS}


@pytest.mark.parametrize(
    "mode,text,needs",
    [
        ("reference", "Q: {question}\nReference: {reference}\nVERDICT:", r"\{candidate\}, \{answer\} or \{answer_1\}"),
        ("score", "Rate the answer to {question}.\nSCORE:", r"\{candidate\}, \{answer\} or \{answer_1\}"),
        ("pairwise", "{question}\nA: {answer_a}\nVERDICT:", r"\{answer_b\} or \{answer_b_1\}"),
        ("pairwise", "{question}\nVERDICT:", r"\{answer_a\} or \{answer_a_1\} and \{answer_b\} or \{answer_b_1\}"),
    ],
)
def test_a_template_that_never_shows_the_answer_is_refused(tmp_path, mode, text, needs):
    bad = template(tmp_path, "bad.txt", text)
    pair = {"generators": {"a": {}, "b": {}}} if mode == "pairwise" else {}
    judge = {"mode": mode, "template": bad, **({"baseline": "a"} if pair else {})}
    with pytest.raises(
        InputError,
        match=rf"^judge\.template: .*bad\.txt never shows the answer it grades: mode "
        rf"'{mode}' needs {needs}",
    ):
        wfconfig.check(cfg(tmp_path, judge=judge, **pair))


def test_a_rule_template_of_one_judge_is_named_by_its_key(tmp_path):
    bad = template(tmp_path, "math.txt", "{question} {reference} VERDICT:")
    judges = {"a": {}, "b": {"templates": [{"categories": ["arithmetic"], "template": bad}]}}
    with pytest.raises(InputError, match=r"^judges\.b\.templates\[0\]\.template: .*math\.txt never shows the answer"):
        wfconfig.check(cfg(tmp_path, judges=judges))
    # the same rule written once for every judge: the key is judge.templates
    with pytest.raises(InputError, match=r"^judge\.templates\[0\]\.template: .*math\.txt never shows the answer"):
        wfconfig.check(cfg(tmp_path, judge={"templates": [{"turns": [1], "template": bad}]}, judges={"a": {}, "b": {}}))
    missing = {"a": {}, "b": {"templates": [{"turns": [2], "template": str(tmp_path / "nope.txt")}]}}
    with pytest.raises(InputError, match=r"^judges\.b\.templates\[0\]\.template: template file .*nope\.txt' not found"):
        wfconfig.check(cfg(tmp_path, judges=missing))


def test_the_template_for_turn_2_must_show_turn_2s_answer(tmp_path):
    # FastChat's multi-turn prompts show {answer_2}; one showing only turn 1's answer grades nothing of turn 2.
    stale = template(tmp_path, "t2.txt", "{question_1} {answer_1} {question_2} SCORE:")
    judge = {"mode": "score", "template": None, "templates": [{"turns": [2], "template": stale}]}
    with pytest.raises(
        InputError,
        match=r"^judge\.templates\[0\]\.template: .*t2\.txt never shows the answer it grades: mode 'score' needs "
        r"\{candidate\}, \{answer\} or \{answer_2\} \(it is the template for turn 2\)",
    ):
        wfconfig.check(cfg(tmp_path, dataset=multi_turn(tmp_path), judge=judge))
    good = template(tmp_path, "t2ok.txt", "{question_1} {answer_1} {question_2} {answer_2} SCORE:")
    wfconfig.check(
        cfg(tmp_path, dataset=multi_turn(tmp_path), judge={**judge, "templates": [{"turns": [2], "template": good}]})
    )


def test_a_template_using_a_later_turn_is_refused_for_the_turns_before_it(tmp_path):
    early = template(tmp_path, "all.txt", "{question_1} {question_2} {answer} SCORE:")
    judge = {"mode": "score", "template": early}
    with pytest.raises(
        InputError,
        match=r"^judge\.template: .*all\.txt uses \{question_2\}, which turn 1 does not have: the template for turn k "
        r"sees turns 1\.\.k; choose templates per turn with judge\.templates",
    ):
        wfconfig.check(cfg(tmp_path, dataset=multi_turn(tmp_path), judge=judge))
    # Used for turn 2 only (a rule), the same template is fine.
    ok = {"mode": "score", "template": None, "templates": [{"turns": [2], "template": early}]}
    wfconfig.check(cfg(tmp_path, dataset=multi_turn(tmp_path), judge=ok))


def test_a_template_rule_that_never_applies_is_refused(tmp_path, caplog):
    t = template(tmp_path, "arith.txt", (ROOT / "config/demo/judge_template.txt").read_text())
    misspelt = {"a": {}, "b": {"templates": [{"categories": ["arithmetc"], "template": t}]}}
    with pytest.raises(
        InputError,
        match=r"^judges\.b\.templates\[0\]\.categories: 'arithmetc' \(did you mean 'arithmetic'\?\): no item this "
        r"judge grades has it as its category \(the items' categories: \['arithmetic', .*\]",
    ):
        wfconfig.check(cfg(tmp_path, judges=misspelt))
    single_turn = {"templates": [{"turns": [2], "template": t}]}
    with pytest.raises(InputError, match=r"^judge\.templates\[0\]: matches no item .* one turn each\)$"):
        wfconfig.check(cfg(tmp_path, judge=single_turn))
    shadowed = {
        "templates": [
            {"categories": ["arithmetic", "capitals"], "template": t},
            {"categories": ["arithmetic"], "turns": [1], "template": t},
        ]
    }
    with pytest.raises(InputError, match=r"^judge\.templates\[1\]: judge\.templates\[0\] matches every item it would"):
        wfconfig.check(cfg(tmp_path, judge=shadowed))
    wfconfig.check(cfg(tmp_path, judge={"templates": [{"categories": ["arithmetic"], "template": t}]}))
    # A category the items lack, not a near miss of theirs (a subset of a benchmark): said, not refused.
    with caplog.at_level("WARNING", logger="genjudge.config"):
        wfconfig.check(cfg(tmp_path, judge={"templates": [{"categories": ["coding"], "template": t}]}))
    assert any("judge.templates[0] matches no item" in r.getMessage() for r in caplog.records)
    caplog.clear()
    # ... also beside a category they have (the rule applies to those; 'coding' is said).
    with caplog.at_level("WARNING", logger="genjudge.config"):
        wfconfig.check(cfg(tmp_path, judge={"templates": [{"categories": ["arithmetic", "coding"], "template": t}]}))
    assert any("judge.templates[0].categories: ['coding'] match no item" in r.getMessage() for r in caplog.records)
    caplog.clear()
    # A rule every judge inherits (judge.templates), matching the items of another judge only: said, not refused.
    only_arith = tmp_path / "arith.jsonl"
    only_arith.write_text(
        "".join(
            line + "\n"
            for line in (ROOT / "config/demo/questions.jsonl").read_text().splitlines()
            if '"arithmetic"' in line
        )
    )
    demo = str(ROOT / "config/demo/questions.jsonl")
    shared = cfg(
        tmp_path,
        judge={"templates": [{"categories": ["capitals"], "template": t}]},
        datasets={"all": {"path": demo}, "arith": {"path": str(only_arith)}},
        judges={"a": {"datasets": ["all"]}, "b": {"datasets": ["arith"]}},
    )
    with caplog.at_level("WARNING", logger="genjudge.config"):
        wfconfig.check(shared)
    assert any("judge.templates[0] matches no item" in r.getMessage() for r in caplog.records)


def test_a_reversed_score_range_is_refused(tmp_path):
    with pytest.raises(
        InputError, match=r"^judge\.score_range: \[10, 1\] is \[low, high\] with low < high .* e\.g\. \[1, 10\]"
    ):
        wfconfig.check(cfg(tmp_path, judge={"mode": "score", "template": None, "score_range": [10, 1]}), data=False)
    with pytest.raises(InputError, match=r"^judges\.s\.score_range: \[5, 5\]"):
        wfconfig.check(
            cfg(tmp_path, judges={"s": {"mode": "score", "template": None, "score_range": [5, 5]}}), data=False
        )


def test_a_pattern_error_of_one_judge_names_its_key(tmp_path):
    with pytest.raises(InputError, match=r"^judges\.b\.verdict_pattern: "):
        wfconfig.check(cfg(tmp_path, judges={"a": {}, "b": {"verdict_pattern": "VERDICT: ("}}), data=False)
    with pytest.raises(InputError, match=r"^judge\.verdict_pattern: "):
        wfconfig.check(cfg(tmp_path, judge={"verdict_pattern": "("}, judges={"a": {}, "b": {}}), data=False)
    with pytest.raises(InputError, match=r"^judges\.s\.verdict: logprob is not available in mode 'score'"):
        wfconfig.check(cfg(tmp_path, judges={"a": {}, "s": {"mode": "score", "verdict": "logprob"}}), data=False)


def test_a_misspelt_demo_model_is_named_while_planning(tmp_path):
    with pytest.raises(
        InputError,
        match=r"^judge\.model: 'models/demo-judge2' does not exist \(the workflow builds only models/demo-generator "
        r"and models/demo-judge\)",
    ):
        wfconfig.check(cfg(tmp_path, judge={"model": "models/demo-judge2"}), data=False)


@pytest.mark.workflow
def test_snakemake_stops_while_planning_with_the_key(workflow):
    typo = workflow.write_config("typo.yaml", judge={"model": "models/demo-judge2"})
    proc = workflow.run("-n", "--configfile", typo, check=False)
    text = proc.stdout + proc.stderr
    assert proc.returncode != 0 and "MissingInputException" not in text
    assert "bad input: judge.model: 'models/demo-judge2' does not exist" in text
    (workflow.path / "config" / "no_answer.txt").write_text("Question: {question}\nReference: {reference}\nVERDICT:")
    blind = workflow.write_config("blind.yaml", judge={"template": "config/no_answer.txt"})
    proc = workflow.run("-n", "--configfile", blind, check=False)
    assert proc.returncode != 0
    assert (
        "bad input: judge.template: config/no_answer.txt never shows the answer it grades: mode 'reference' needs "
        "{candidate}, {answer} or {answer_1}" in proc.stdout + proc.stderr
    )
