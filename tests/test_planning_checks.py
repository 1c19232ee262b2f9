"""Mistakes that must stop a run while planning, naming the file and the key the user wrote."""

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
