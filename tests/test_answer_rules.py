"""Answer extraction by category (`dataset.answer.by_category`): one dataset mixing numeric,
multiple-choice and free-text questions, each item's methods chosen by its category for exact match
and the cascade, and the rules checked while planning, each error naming the key as written."""

import math

import pandas as pd
import pytest
from judges import ROOT

from genjudge import config as wfconfig
from genjudge.config.specs import spec_for
from genjudge.errors import InputError
from genjudge.judging import modes
from genjudge.judging.answer_rules import as_param, extracts, methods_for
from genjudge.stages.report import exact_match_fits

DEMO = str(ROOT / "config/demo/questions.jsonl")  # categories arithmetic, capitals, counting, words
NUMERIC = {"categories": ["arithmetic", "counting"], "reference": "gsm8k", "candidate": "gsm8k"}
CHOICE = {"categories": ["quiz"], "candidate": "choice"}
MIXED = {"reference": None, "candidate": None, "by_category": [NUMERIC, CHOICE]}


def test_each_item_gets_the_first_rule_listing_its_category_and_the_rest_the_plain_methods():
    plain = {"reference": "boxed", "candidate": "boxed"}
    answer = {**plain, "by_category": [NUMERIC, CHOICE, {"categories": ["counting"], "candidate": "last_number"}]}
    assert methods_for(answer, "arithmetic") == {"reference": "gsm8k", "candidate": "gsm8k"}
    assert methods_for(answer, "counting") == {"reference": "gsm8k", "candidate": "gsm8k"}  # the first rule wins
    # A side the rule leaves out is the whole text, never the plain setting's method.
    assert methods_for(answer, "quiz") == {"reference": None, "candidate": "choice"}
    for category in ("essay", None, math.nan, "Arithmetic"):  # no rule lists it (categories match exactly)
        assert methods_for(answer, category) == plain
    assert methods_for(None, "quiz") == {"reference": None, "candidate": None}


def test_extracts_and_the_rerun_param():
    assert not extracts({"reference": None, "candidate": None, "by_category": []})
    assert extracts({"reference": None, "candidate": None, "by_category": [CHOICE]})
    # Runs from before the rules existed keep their parameters; a rule is part of them.
    assert as_param({"reference": "gsm8k", "candidate": None, "by_category": []}) == {
        "reference": "gsm8k",
        "candidate": None,
    }
    assert as_param(MIXED) == MIXED


def test_the_cascade_decides_each_item_by_its_categorys_rule():
    rows = [  # (category, output, reference)
        ("arithmetic", "5 + 7 is 12.\n#### 12", "#### 12"),  # gsm8k both sides: strict, equal
        ("quiz", "The answer is B.", "B"),  # choice: a stated answer against the whole reference
        ("essay", "Paris", "paris"),  # no rule: whole texts, equal after normalising
        ("essay", "#### 12", "#### 13"),  # no rule: whole texts, different
        (None, "The answer is B.", "B"),  # no category: whole texts, different
    ]
    gens = pd.DataFrame(
        {
            "id": [f"q{i}" for i in range(len(rows))],
            "prompt": ["?"] * len(rows),
            "category": [c for c, _, _ in rows],
            "output": [o for _, o, _ in rows],
            "reference": [r for _, _, r in rows],
        }
    )
    spec = spec_for("judge", model="m", cascade=True)
    template = "Question: {question}\nReference: {reference}\nAnswer: {candidate}\nVERDICT:"
    decided = [r.decided_by for r in modes.get("reference").requests(gens, spec, template, answer=MIXED)]
    assert decided == ["rule", "rule", "rule", "judge", "judge"]
    # One rule for all (gsm8k): the quiz and essay items find no `####` and go to the judge.
    one = [r.decided_by for r in modes.get("reference").requests(gens, spec, template, answer=NUMERIC)]
    assert one == ["rule", "judge", "judge", "judge", "judge"]


def test_exact_match_fits_a_dataset_extracting_for_some_categories_only():
    long = pd.DataFrame({"reference": ["a long reference answer of many more words than five"] * 3})
    assert not exact_match_fits(long, {"answer": {"reference": None, "candidate": None, "by_category": []}})[0]
    assert exact_match_fits(long, {"answer": {"reference": None, "candidate": None, "by_category": [CHOICE]}})[0]


# --- planning ----------------------------------------------------------------------------------


def cfg(dataset=None, **sections):
    c = {
        "run": "x",
        "shards": 1,
        "dataset": dataset or {"path": DEMO},
        "generator": {"model": str(ROOT / "models/demo-generator")},
        "judge": {"model": str(ROOT / "models/demo-judge"), "template": str(ROOT / "config/demo/judge_template.txt")},
    }
    for key, value in sections.items():
        c[key] = {**c.get(key, {}), **value} if isinstance(value, dict) and key in c else value
    return wfconfig.validate(c)


def rules(*entries):
    return {"path": DEMO, "answer": {"by_category": list(entries)}}


def test_a_rules_method_is_checked_and_named_by_its_key():
    bad = {"categories": ["capitals"], "candidate": "(a)(b)"}
    with pytest.raises(
        InputError, match=r"^dataset\.answer\.by_category\[1\]\.candidate: extraction pattern '\(a\)\(b\)' has 2"
    ):
        wfconfig.check(cfg(rules(NUMERIC, bad)), data=False)
    with pytest.raises(InputError, match=r"^datasets\.d\.answer\.by_category\[0\]\.candidate: extraction pattern"):
        wfconfig.check(cfg(datasets={"d": rules(bad)}), data=False)
    # Inherited from `dataset`: named there.
    inherited = cfg({"answer": {"by_category": [bad]}}, datasets={"d": {"path": DEMO}})
    with pytest.raises(InputError, match=r"^dataset\.answer\.by_category\[0\]\.candidate: extraction pattern"):
        wfconfig.check(inherited, data=False)


def test_a_misspelt_category_is_refused_with_a_did_you_mean():
    with pytest.raises(
        InputError,
        match=r"^dataset\.answer\.by_category\[0\]\.categories: 'countng' \(did you mean 'counting'\?\): no item of "
        r"'questions' has it as its category \(the items' categories: \['arithmetic', 'capitals', 'counting', "
        r"'words'\]; categories match exactly, case included\)$",
    ):
        wfconfig.check(cfg(rules({**NUMERIC, "categories": ["arithmetic", "countng"]})))
    with pytest.raises(InputError, match=r"^datasets\.d\.answer\.by_category\[0\]\.categories: 'Capitals' \(did you "):
        wfconfig.check(cfg(datasets={"d": rules({"categories": ["Capitals"], "candidate": "choice"})}))
    wfconfig.check(cfg(rules(NUMERIC, {"categories": ["capitals"]})))


def test_a_category_listed_twice_and_a_missing_category_field_are_refused(caplog):
    with pytest.raises(
        InputError,
        match=r"^dataset\.answer\.by_category\[1\]\.categories: 'counting' is listed in "
        r"dataset\.answer\.by_category\[0\] already",
    ):
        wfconfig.check(cfg(rules(NUMERIC, {"categories": ["counting"], "candidate": "last_number"})), data=False)
    typo = {**rules(NUMERIC), "fields": {"category": "categroy"}}
    with pytest.raises(
        InputError,
        match=r"^dataset\.fields\.category: the field 'categroy' is in no row of .*, and "
        r"dataset\.answer\.by_category\[0\]\.categories chooses the answer extraction by category",
    ):
        wfconfig.check(cfg(typo))
    # A category unlike any of the items' (a subset of a benchmark without it) is said, not refused.
    with caplog.at_level("WARNING", logger="genjudge.config"):
        wfconfig.check(cfg(rules(NUMERIC, {"categories": ["geometry"], "candidate": "boxed"})))
    assert any("by_category[1].categories: ['geometry'] match no item" in r.getMessage() for r in caplog.records)
