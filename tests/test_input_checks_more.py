"""Bad input caught while planning, each error naming the key as the user wrote it: the categories
of template rules one by one, objects in a per-turn reference list, settings inherited from the
shared sections, and a pairwise judge's baseline file lacking an answer."""

import json
import re

import pandas as pd
import pytest
from judges import ROOT

from genjudge import config as wfconfig
from genjudge.config.experiment import entry_key
from genjudge.data.dataset import load_items
from genjudge.errors import InputError

DEMO = str(ROOT / "config/demo/questions.jsonl")
DEMO_TEMPLATE = str(ROOT / "config/demo/judge_template.txt")


def cfg(dataset=None, **sections):
    c = {
        "run": "x",
        "shards": 1,
        "dataset": dataset or {"path": DEMO},
        "generator": {"model": str(ROOT / "models/demo-generator")},
        "judge": {"model": str(ROOT / "models/demo-judge"), "template": DEMO_TEMPLATE},
    }
    for key, value in sections.items():
        c[key] = {**c.get(key, {}), **value} if isinstance(value, dict) and key in c else value
    return wfconfig.validate(c)


def write_jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


def demo_ids() -> list[str]:
    return [json.loads(line)["id"] for line in (ROOT / "config/demo/questions.jsonl").read_text().splitlines()]


# --- 1. categories of template rules ------------------------------------------------------------


def test_each_category_of_a_rule_is_checked_on_its_own():
    rule = {"categories": ["arithmetic", "captals"], "template": DEMO_TEMPLATE}
    with pytest.raises(
        InputError,
        match=r"^judge\.templates\[0\]\.categories: 'captals' \(did you mean 'capitals'\?\): no item this judge "
        r"grades has it as its category \(the items' categories: \['arithmetic', 'capitals', 'counting', 'words'\]",
    ):
        wfconfig.check(cfg(judge={"templates": [rule]}))
    with pytest.raises(InputError, match=r"^judges\.j\.templates\[0\]\.categories: 'captals' \(did you mean"):
        wfconfig.check(cfg(judges={"j": {"templates": [rule]}}))
    wfconfig.check(cfg(judge={"templates": [{**rule, "categories": ["arithmetic", "capitals"]}]}))


def test_a_category_near_one_the_rule_already_lists_is_a_subset_not_a_typo(tmp_path, caplog):
    """A MATH subset without Algebra: a rule for Algebra, Intermediate Algebra and Prealgebra applies to
    the Prealgebra items, and 'Algebra' is no typo of 'Prealgebra' (the rule lists both): said, not refused."""
    rows = [
        {"id": f"q{i}", "question": f"{i} + 1?", "answer": str(i + 1), "category": c}
        for i, c in enumerate(["Prealgebra", "Geometry", "Prealgebra"])
    ]
    rule = {"categories": ["Algebra", "Intermediate Algebra", "Prealgebra"], "template": DEMO_TEMPLATE}
    with caplog.at_level("WARNING", logger="genjudge.config"):
        wfconfig.check(cfg({"path": write_jsonl(tmp_path / "math.jsonl", rows)}, judge={"templates": [rule]}))
    assert any("['Algebra', 'Intermediate Algebra'] match no item" in r.getMessage() for r in caplog.records)


def test_a_shared_rule_is_not_refused_for_a_judge_whose_dataset_has_no_categories(tmp_path, caplog):
    """judge.templates inherited by two judges; b's dataset has no category column (fields.category at
    its default): the rule applies to a's items, so b's lack of categories is said, not refused."""
    rows = [{"id": f"n{i}", "question": f"{i} + 2?", "answer": str(i + 2)} for i in range(4)]
    plain = write_jsonl(tmp_path / "plain.jsonl", rows)
    shared = cfg(
        judge={"templates": [{"categories": ["capitals"], "template": DEMO_TEMPLATE}]},
        datasets={"demo": {"path": DEMO}, "plain": {"path": plain}},
        judges={"a": {"datasets": ["demo"]}, "b": {"datasets": ["plain"]}},
    )
    with caplog.at_level("WARNING", logger="genjudge.config"):
        wfconfig.check(shared)
    assert any("judge.templates[0] matches no item" in r.getMessage() for r in caplog.records)


def test_a_category_differing_in_case_is_refused_with_the_items_spelling(tmp_path):
    rows = [{"id": "1", "category": "math", "question": "2+2?", "answer": "4"}, {"id": "2", "question": "Hi?"}]
    data = {"path": write_jsonl(tmp_path / "m.jsonl", rows)}
    rule = {"categories": ["Math"], "template": DEMO_TEMPLATE}
    with pytest.raises(
        InputError,
        match=r"^judge\.templates\[0\]\.categories: 'Math' \(did you mean 'math'\? the case differs\): .*"
        r"categories match exactly, case included\)$",
    ):
        wfconfig.check(cfg(dataset=data, judge={"templates": [rule]}))


def test_a_category_field_in_no_row_is_refused_when_a_rule_chooses_by_category(tmp_path):
    rule = {"categories": ["arithmetic"], "template": DEMO_TEMPLATE}
    typo = {"path": DEMO, "fields": {"category": "categroy"}}
    with pytest.raises(
        InputError,
        match=r"^dataset\.fields\.category: the field 'categroy' is in no row of .*questions\.jsonl \(the first row's "
        r"fields: \['answer', 'category', 'id', 'question'\]\), and judge\.templates\[0\]\.categories chooses",
    ):
        wfconfig.check(cfg(dataset=typo, judge={"templates": [rule]}))
    with pytest.raises(InputError, match=r"^datasets\.d\.fields\.category: the field 'categroy' is in no row"):
        wfconfig.check(cfg(datasets={"d": typo}, judges={"j": {"templates": [rule]}}))
    # No rule by category: the field is the report's grouping only, and a dataset without it is fine.
    wfconfig.check(cfg(dataset=typo, judge={"templates": [{"turns": [1], "template": DEMO_TEMPLATE}]}))


# --- 2. per-turn references ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "answers,what", [([{"x": 1}, "r2"], "an object"), ([["a"], "r2"], "an array"), (["r1", {"x": 1}], "an object")]
)
def test_a_per_turn_reference_holding_an_object_is_refused(tmp_path, answers, what):
    path = write_jsonl(
        tmp_path / "t.jsonl", [{"question": ["q1", "q2"], "answer": "r"}, {"question": ["q1", "q2"], "answer": answers}]
    )
    turn = 1 + next(i for i, a in enumerate(answers) if not isinstance(a, str))
    fields = {"id": None, "prompt": "question", "reference": "answer", "category": None}
    with pytest.raises(
        InputError, match=rf"^{re.escape(path)}, line 2: field 'answer', turn {turn} holds {what}, not text$"
    ):
        load_items(path, fields)
    # texts, numbers and nulls are still references
    write_jsonl(tmp_path / "ok.jsonl", [{"question": ["q1", "q2"], "answer": [5, None]}])
    turns = json.loads(load_items(tmp_path / "ok.jsonl", fields)["turns"][0])
    assert [t["reference"] for t in turns] == ["5", None]


# --- 3. keys where the user wrote them ----------------------------------------------------------


def test_entry_key_of_a_nested_setting():
    config = {"datasets": {"d": {"answer": {"reference": "gsm8k"}, "fields": {}}}}
    assert entry_key(config, "dataset", "d", "answer.reference") == "datasets.d.answer.reference"
    assert entry_key(config, "dataset", "d", "answer.candidate") == "dataset.answer.candidate"
    assert entry_key(config, "dataset", "d", "fields.prompt") == "dataset.fields.prompt"
    assert entry_key(config, "dataset", "e", "answer.reference") == "dataset.answer.reference"


def test_n_samples_without_do_sample_names_the_keys_as_written():
    with pytest.raises(InputError, match=r"^generators\.g\.n_samples = 3 needs generators\.g\.do_sample: true"):
        wfconfig.check(cfg(generators={"g": {"n_samples": 3}}), data=False)
    with pytest.raises(InputError, match=r"^generator\.n_samples = 3 needs generator\.do_sample: true"):
        wfconfig.check(cfg(generator={"n_samples": 3}, generators={"g": {}}), data=False)
    with pytest.raises(InputError, match=r"^generator\.n_samples = 3 needs generator\.do_sample: true"):
        wfconfig.check(cfg(generator={"n_samples": 3}), data=False)
    # the entry turns sampling off itself: that is the key to change
    off = cfg(generator={"n_samples": 3, "do_sample": True}, generators={"g": {"do_sample": False}})
    with pytest.raises(InputError, match=r"^generator\.n_samples = 3 needs generators\.g\.do_sample: true"):
        wfconfig.check(off, data=False)


def test_inherited_judge_shards_are_named_in_the_shared_section():
    with pytest.raises(InputError, match=r"^judge\.shards = 1000 is more than the 44 answers judge 'a' grades"):
        wfconfig.check(cfg(judge={"shards": 1000}, judges={"a": {}}))
    with pytest.raises(InputError, match=r"^judges\.a\.shards = 1000 is more than the 44 answers"):
        wfconfig.check(cfg(judges={"a": {"shards": 1000}}))


def test_inherited_answer_extraction_is_named_in_the_shared_section():
    with pytest.raises(InputError, match=r"^dataset\.answer\.reference: extraction pattern 'nonsense'"):
        wfconfig.check(cfg(dataset={"answer": {"reference": "nonsense"}}, datasets={"d": {"path": DEMO}}), data=False)
    with pytest.raises(InputError, match=r"^datasets\.d\.answer\.candidate: extraction pattern 'nonsense'"):
        wfconfig.check(cfg(datasets={"d": {"path": DEMO, "answer": {"candidate": "nonsense"}}}), data=False)


def test_a_prompt_field_in_no_row_names_the_datasets_key():
    with pytest.raises(
        InputError,
        match=r"questions\.jsonl: the prompt field\(s\) \['inptu'\] of datasets\.g\.fields\.prompt "
        r"\['question', 'inptu'\] are in no row",
    ):
        wfconfig.check(cfg(datasets={"g": {"path": DEMO, "fields": {"prompt": ["question", "inptu"]}}}))
    with pytest.raises(InputError, match=r"of dataset\.fields\.prompt \['question', 'inptu'\] are in no row"):
        wfconfig.check(cfg(dataset={"path": DEMO, "fields": {"prompt": ["question", "inptu"]}}, datasets={"g": {}}))


def test_the_reference_field_of_a_reference_judge_is_named_as_written(tmp_path):
    data = write_jsonl(tmp_path / "q.jsonl", [{"id": "1", "question": "q?"}])
    with pytest.raises(
        InputError, match=r"no item has a value in its field 'answer' \(datasets\.d\.fields\.reference\)"
    ):
        wfconfig.check(cfg(datasets={"d": {"path": data, "fields": {"reference": "answer"}}}))


# --- 4. a pairwise judge's baseline file ----------------------------------------------------------


def pairwise(baseline, named=True):
    judge = {"mode": "pairwise", "template": None, "baseline": str(baseline)}
    return cfg(judges={"pw": judge}) if named else cfg(judge=judge)


def test_a_baseline_file_missing_an_id_is_refused_while_planning(tmp_path):
    ids = demo_ids()
    base = tmp_path / "base.parquet"
    pd.DataFrame({"id": [i for i in ids if i != "arith-006"], "turn": 1, "output": "x"}).to_parquet(base)
    with pytest.raises(
        InputError,
        match=r"^judges\.pw\.baseline: .*base\.parquet has no answer for 1 id\(s\) of the dataset .*questions\.jsonl, "
        r"e\.g\. \['arith-006'\]",
    ):
        wfconfig.check(pairwise(base))
    with pytest.raises(InputError, match=r"^judge\.baseline: .*base\.parquet has no answer for 1 id\(s\)"):
        wfconfig.check(pairwise(base, named=False))
    wfconfig.check(pairwise(base), data=False)  # a job's own check reads no data
    pd.DataFrame({"id": ids, "output": "x"}).to_parquet(base)  # no turn column: turn 1
    wfconfig.check(pairwise(base))
    # only sample 0 of a baseline is ever its answer
    pd.DataFrame({"id": ids, "sample": [1] + [0] * (len(ids) - 1), "output": "x"}).to_parquet(base)
    with pytest.raises(InputError, match=rf"has no answer for 1 id\(s\) .* e\.g\. \['{ids[0]}'\]"):
        wfconfig.check(pairwise(base))


def test_a_baseline_file_that_is_no_generations_parquet_is_refused(tmp_path):
    text = tmp_path / "base.parquet"
    text.write_text('{"id": "arith-001", "output": "x"}\n')
    with pytest.raises(InputError, match=r"^judges\.pw\.baseline: .*base\.parquet is not a readable Parquet file"):
        wfconfig.check(pairwise(text))
    nameless = tmp_path / "nameless.parquet"
    pd.DataFrame({"question_id": demo_ids(), "output": "x"}).to_parquet(nameless)
    with pytest.raises(InputError, match=r"^judges\.pw\.baseline: .*nameless\.parquet has no column 'id'"):
        wfconfig.check(pairwise(nameless))


def test_a_baseline_file_needs_every_turn_of_a_conversation(tmp_path):
    rows = [
        {"id": "a", "question": ["q1", "q2"], "answer": ["r1", "r2"]},
        {"id": "b", "question": ["q"], "answer": "r"},
    ]
    data = {"path": write_jsonl(tmp_path / "mt.jsonl", rows)}
    base = tmp_path / "base.parquet"
    pd.DataFrame({"id": ["a", "b"], "turn": [1, 1], "output": "x"}).to_parquet(base)
    judge = {"mode": "pairwise", "template": None, "baseline": str(base)}
    with pytest.raises(
        InputError, match=r"^judge\.baseline: .* has no answer for 1 turn\(s\) .* e\.g\. \[\('a', 2\)\]"
    ):
        wfconfig.check(cfg(dataset=data, judge=judge))
    pd.DataFrame({"id": ["a", "a", "b"], "turn": [1, 2, 1], "output": "x"}).to_parquet(base)
    wfconfig.check(cfg(dataset=data, judge=judge))


def test_a_baseline_file_with_numeric_ids_says_so(tmp_path):
    data = {"path": write_jsonl(tmp_path / "q.jsonl", [{"id": 1, "question": "q1?", "answer": "a"}])}
    base = tmp_path / "base.parquet"
    pd.DataFrame({"id": [1], "output": "x"}).to_parquet(base)  # the items' id is the text '1'
    judge = {"mode": "pairwise", "template": None, "baseline": str(base)}
    with pytest.raises(InputError, match=r"e\.g\. \['1'\] \(its ids are int64, the items' are text\)"):
        wfconfig.check(cfg(dataset=data, judge=judge))


# --- repeated questions ---------------------------------------------------------------------------


def test_items_that_repeat_a_question_are_said_while_planning(tmp_path, caplog):
    rows = [{"id": f"q{i}", "question": q, "answer": "1"} for i, q in enumerate(["1 + 0?", "2 - 1?", "1 + 0?", "x?"])]
    with caplog.at_level("WARNING", logger="genjudge.config"):
        wfconfig.check(cfg({"path": write_jsonl(tmp_path / "rep.jsonl", rows)}))
    (said,) = [r.getMessage() for r in caplog.records if "repeat" in r.getMessage()]
    assert said.startswith("dataset.path: 1 item(s) repeat another item's question ('q2' repeats 'q0'): each is")
    assert "counted as shared in this run, not resumed" in said
    caplog.clear()
    with caplog.at_level("WARNING", logger="genjudge.config"):
        wfconfig.check(cfg())  # the demo's 44 questions are all different
    assert not [r for r in caplog.records if "repeat" in r.getMessage()]
