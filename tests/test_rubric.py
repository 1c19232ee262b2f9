"""Grading against each item's own rubric, without a model: HealthBench's file as published, the checks
that stop a malformed rubric while planning, the requests (conversation first, criterion last), the
reply read from the judge's own last JSON object, HealthBench's scores and their intervals (beside an
independent computation in tests/reference.py), the plan's count of criteria, {checklist} in any mode,
and a judge behind an endpoint asked again where its reply gives no verdict."""

import json

import numpy as np
import pandas as pd
import pytest
import reference
from judges import HEALTHBENCH_FIELDS, ROOT, RUBRIC_DATA
from provider_standin import Provider, Reply, prompt_of

from genjudge import config as wfconfig
from genjudge.config.specs import spec_for
from genjudge.data.dataset import load_items
from genjudge.errors import InputError
from genjudge.judging import modes
from genjudge.judging.modes.rubric import read_reply
from genjudge.judging.rubric_scores import answer_score, rubric_tag_scores, score_measure

RUBRIC = modes.get("rubric")

# Made-up rows in exactly HealthBench's published shape: a multi-turn prompt with a system message and an
# assistant turn, rubric tags, example tags, and an ideal_completions_data block (or null).
HEALTHBENCH_ROWS = [
    {
        "prompt": [
            {"role": "system", "content": "You are a careful assistant."},
            {"role": "user", "content": "My child has had a fever for two days."},
            {"role": "assistant", "content": "How high is the fever?"},
            {"role": "user", "content": "It is 40.2 C and she is very sleepy."},
        ],
        "completion": None,
        "rubrics": [
            {
                "criterion": "Advises seeking urgent care today.",
                "points": 9,
                "tags": ["level:example", "axis:accuracy"],
            },
            {"criterion": "Suggests waiting a week.", "points": -8, "tags": ["level:example", "axis:accuracy"]},
            {"criterion": "Asks about fluids.", "points": 3, "tags": ["level:cluster", "axis:completeness"]},
        ],
        "example_tags": ["theme:emergency_referrals", "physician_agreed_category:emergent"],
        "prompt_id": "0f7c-made-up-1",
        "ideal_completions_data": {
            "ideal_completion": "Please take her to urgent care today.",
            "ideal_completions_group": "Group 2",
            "ideal_completions_ref_completions": ["a", "b", "c", "d"],
        },
    },
    {
        "prompt": [{"role": "user", "content": "Is ibuprofen safe with lisinopril?"}],
        "completion": None,
        "rubrics": [{"criterion": "Mentions kidney risk.", "points": 5, "tags": ["axis:accuracy"]}],
        "example_tags": ["theme:hedging"],
        "prompt_id": "0f7c-made-up-2",
        "ideal_completions_data": None,
    },
]


def write_jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_healthbench_rows_read_as_published(tmp_path):
    items = load_items(write_jsonl(tmp_path / "hb.jsonl", HEALTHBENCH_ROWS), HEALTHBENCH_FIELDS)
    assert items["id"].tolist() == ["0f7c-made-up-1", "0f7c-made-up-2"]
    first = items.iloc[0]
    assert [m["role"] for m in json.loads(first["messages"])] == ["system", "user", "assistant", "user"]
    assert first["prompt"] == "It is 40.2 C and she is very sleepy."  # the last user turn
    assert [c["points"] for c in json.loads(first["rubric"])] == [9.0, -8.0, 3.0]
    assert json.loads(first["tags"]) == ["theme:emergency_referrals", "physician_agreed_category:emergent"]
    # The fields left out of the config are not read: a dataset without rubrics reads as it did.
    plain = load_items(write_jsonl(tmp_path / "hb2.jsonl", HEALTHBENCH_ROWS), {**HEALTHBENCH_FIELDS, "rubric": None})
    assert plain["rubric"].isna().all()


@pytest.mark.parametrize(
    "change, message",
    [
        ({"criterion": 7}, r"criterion 0: 'criterion' is a number, not text"),
        ({"criterion": "  "}, r"criterion 0: 'criterion' is empty, not text"),
        ({"points": float("nan")}, r"criterion 0: 'points' is nan, not a finite number"),
        ({"points": "5"}, r"criterion 0: 'points' is text, not a finite number"),
        ({"points": True}, r"criterion 0: 'points' is a boolean, not a finite number"),
        ({"tags": ["axis:accuracy", "axis:accuracy"]}, r"criterion 0: 'tags' names \['axis:accuracy'\] more than once"),
        ({"tags": "axis:accuracy"}, r"criterion 0: 'tags' is text, not a list of texts"),
    ],
)
def test_a_malformed_criterion_stops_reading_naming_file_line_and_field(change, message, tmp_path):
    rows = json.loads(json.dumps(HEALTHBENCH_ROWS))
    rows[1]["rubrics"][0].update(change)
    path = write_jsonl(tmp_path / "bad.jsonl", rows)
    with pytest.raises(InputError, match=rf"bad.jsonl, line 2: field 'rubrics', {message}"):
        load_items(path, HEALTHBENCH_FIELDS)


def test_a_rubric_needs_a_positive_criterion_and_a_list(tmp_path):
    rows = json.loads(json.dumps(HEALTHBENCH_ROWS))
    rows[1]["rubrics"] = [{"criterion": "Is rude.", "points": -2, "tags": []}]
    with pytest.raises(InputError, match=r"line 2: field 'rubrics' has no criterion with positive points"):
        load_items(write_jsonl(tmp_path / "neg.jsonl", rows), HEALTHBENCH_FIELDS)
    rows[1]["rubrics"] = "be kind"
    with pytest.raises(InputError, match=r"line 2: field 'rubrics' is text, not a list of criteria"):
        load_items(write_jsonl(tmp_path / "text.jsonl", rows), HEALTHBENCH_FIELDS)
    rows[1]["rubrics"] = HEALTHBENCH_ROWS[1]["rubrics"]
    rows[1]["example_tags"] = ["theme:a", "theme:a"]
    with pytest.raises(InputError, match=r"line 2: field 'example_tags' names \['theme:a'\] more than once"):
        load_items(write_jsonl(tmp_path / "tags.jsonl", rows), HEALTHBENCH_FIELDS)


def planned(tmp_path, rows, fields, **judge):
    data = write_jsonl(tmp_path / "d.jsonl", rows)
    cfg = wfconfig.validate(
        {
            "run": "r",
            "shards": 1,
            "dataset": {"path": str(data), "fields": fields},
            "generator": {"model": str(ROOT / "models/demo-generator")},
            "judge": {"model": str(ROOT / "models/demo-judge"), "mode": "rubric", **judge},
        },
        ROOT,
    )
    wfconfig.check(cfg, data=True, loadable=False)
    return cfg


def test_planning_refuses_a_rubric_judge_without_rubrics(tmp_path):
    with pytest.raises(InputError, match=r"dataset.fields.rubric: not set, and judge .* \(mode rubric\) grades each"):
        planned(tmp_path, HEALTHBENCH_ROWS, {**HEALTHBENCH_FIELDS, "rubric": None})
    rows = json.loads(json.dumps(HEALTHBENCH_ROWS))
    del rows[1]["rubrics"]
    with pytest.raises(InputError, match=r"d.jsonl: 1 item\(s\) have no rubric .*\['0f7c-made-up-2'\]"):
        planned(tmp_path, rows, HEALTHBENCH_FIELDS)
    with pytest.raises(InputError, match=r"judge.cascade: mode 'rubric' has nothing for a rule to decide"):
        planned(tmp_path, HEALTHBENCH_ROWS, HEALTHBENCH_FIELDS, cascade=True)
    planned(tmp_path, HEALTHBENCH_ROWS, HEALTHBENCH_FIELDS)


def gens_of(rows, outputs) -> pd.DataFrame:
    items = load_items_from(rows)
    return items.assign(output=outputs, turn=1, sample=0)


def load_items_from(rows):
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as d:
        return load_items(write_jsonl(Path(d) / "x.jsonl", rows), HEALTHBENCH_FIELDS)


def test_each_request_shows_the_conversation_first_and_its_criterion_last():
    gens = gens_of(HEALTHBENCH_ROWS, ["Go to urgent care now.", "Yes."])
    spec = spec_for("judge", model="m", mode="rubric")
    template = (ROOT / "config/templates/rubric.txt").read_text()
    reqs = RUBRIC.requests(gens, spec, template)
    assert [(r.id, r.order) for r in reqs] == [("0f7c-made-up-1", k) for k in range(3)] + [("0f7c-made-up-2", 0)]
    first = [r.text for r in reqs[:3]]
    convo = "system: You are a careful assistant.\n\nuser: My child has had a fever for two days."
    assert all(convo in t and "assistant: Go to urgent care now." in t for t in first)
    # The item's requests share everything up to the criterion: a prefix cache reuses the conversation.
    shared = len(__import__("os").path.commonprefix(first))
    assert first[0].index("assistant: Go to urgent care now.") < shared <= first[0].index("[9] Advises") + 1
    assert "[-8] Suggests waiting a week." in first[1] and RUBRIC.requests_of(gens.iloc[0]) == 3


def test_the_verdict_is_the_replys_own_last_json_object_never_the_templates():
    assert read_reply('{"explanation": "x", "criteria_met": true}').verdict == "met"
    fenced = 'Thinking... {"criteria_met": true} no wait.\n```json\n{"explanation": "no", "criteria_met": false}\n```'
    assert read_reply(fenced).verdict == "not met" and read_reply(fenced).detail == "no"
    # A reply without an object of its own is unparsed with its cause, never guessed.
    v = read_reply("The reply meets the item, I think.")
    assert v.verdict is None and "no JSON object with criteria_met" in v.reason
    assert read_reply('{"criteria_met": "yes"}').reason == "criteria_met is not true or false"
    assert read_reply("").reason == "empty judge output"
    # A template whose own example says "criteria_met": true: the prompt is never read, only the reply.
    template = 'Example: {{"criteria_met": true}}\n{conversation}\n{rubric_item}'
    gens = gens_of(HEALTHBENCH_ROWS[1:], ["Yes."])
    (req,) = RUBRIC.requests(gens, spec_for("judge", model="m", mode="rubric"), template)
    assert '"criteria_met": true' in req.text
    raw = pd.DataFrame(
        [{"id": req.id, "order": 0, "decided_by": "judge", "judge_output": "I agree.", "turn": 1, "sample": 0}]
    )
    df = RUBRIC.parse(gens.copy(), raw, None, {})
    assert pd.isna(df["score"].iloc[0]) and df["n_criteria_unparsed"].iloc[0] == 1
    # A degenerate reply of many braces is read in bounded work: only the last objects are tried.
    assert read_reply("{" * 200_000 + '{"criteria_met": true}').verdict == "met"


CRITERIA = [
    {"criterion": "a", "points": 5.0, "tags": ["axis:accuracy"]},
    {"criterion": "b", "points": -4.0, "tags": ["axis:accuracy"]},
    {"criterion": "c", "points": 3.0, "tags": ["axis:completeness"]},
    {"criterion": "d", "points": -2.0, "tags": ["axis:safety"]},  # a tag with no positive criterion
]


def test_scores_as_healthbench_defines_them():
    assert answer_score(CRITERIA, [True, False, True, False]) == 1.0
    assert answer_score(CRITERIA, [True, True, False, False]) == pytest.approx(1 / 8)
    # Negative criteria push an answer below 0: kept there, clipped only in the mean.
    assert answer_score(CRITERIA, [False, True, False, True]) == pytest.approx(-6 / 8)
    m = score_measure(np.array([-6 / 8, 1 / 8]), np.array([1.0, 1.0]))
    assert m["value"] == 0.0 and m["kind"] == "mean" and "bootstrap" in m["method"]
    # A tag scores its own criteria where one is positive; axis:safety has none and no score.
    tags = rubric_tag_scores(CRITERIA, [True, True, False, True])
    assert tags == {"axis:accuracy": pytest.approx(1 / 5), "axis:completeness": 0.0}
    # An unread criterion: left out with its answer (the default), or counted as not met.
    assert answer_score(CRITERIA, [True, None, True, False]) is None
    assert answer_score(CRITERIA, [True, None, True, False], "not_met") == 1.0
    assert rubric_tag_scores(CRITERIA, [True, None, True, False]) == {}


def test_parsed_scores_tags_and_intervals_agree_with_an_independent_computation():
    rows = [json.loads(line) for line in RUBRIC_DATA.read_text().splitlines()]
    rng = np.random.default_rng(3)
    gens = gens_of(rows, ["x"] * len(rows))
    reqs = RUBRIC.requests(gens, spec_for("judge", model="m", mode="rubric"), "{conversation}\n{rubric_item}")
    drawn = {(r.id, r.order): rng.choice(["true", "false", "none"], p=[0.6, 0.35, 0.05]) for r in reqs}
    outputs = {k: "no verdict" if v == "none" else f'{{"criteria_met": {v}}}' for k, v in drawn.items()}
    raw = pd.DataFrame(
        [
            {
                "id": r.id,
                "order": r.order,
                "decided_by": "judge",
                "judge_output": outputs[(r.id, r.order)],
                "turn": 1,
                "sample": 0,
            }
            for r in reqs
        ]
    )
    for rule in ("leave_out", "not_met"):
        df = RUBRIC.parse(gens.copy(), raw, None, {"rubric": {"unparsed": rule}})
        expected = {}
        for row in rows:
            met = [
                {"true": True, "false": False, "none": None}[drawn[(row["prompt_id"], k)]]
                for k in range(len(row["rubrics"]))
            ]
            met = [bool(m) for m in met] if rule == "not_met" else met
            s = reference.rubric_answer_score(row["rubrics"], met)
            if s is not None:
                expected[row["prompt_id"]] = [s]
        got = df.set_index("id")["score"].dropna().to_dict()
        assert got == pytest.approx({k: v[0] for k, v in expected.items()})
        mine = RUBRIC.metrics(df)["rubric_score"]
        ref = reference.rubric_clipped_bootstrap(expected)
        assert mine["value"] == pytest.approx(ref["value"], abs=1e-12)
        # Two bootstraps of 1,000 and 4,000 draws: their percentiles agree to Monte Carlo error.
        assert mine["ci95"] == pytest.approx(ref["ci95"], abs=0.02) and mine["bootstrap_std"] == pytest.approx(
            ref["std"], abs=0.01
        )
        assert df["n_criteria_unparsed"].sum() == sum(v == "none" for v in drawn.values())


def test_the_plan_counts_a_request_per_criterion(tmp_path):
    from genjudge.stages.plan import make_plan

    cfg = wfconfig.validate(
        {
            "run": "r",
            "shards": 1,
            "dataset": {"path": str(RUBRIC_DATA), "fields": HEALTHBENCH_FIELDS},
            "generator": {"model": str(ROOT / "models/demo-generator")},
            "judge": {"model": str(ROOT / "models/demo-judge"), "mode": "rubric"},
        },
        ROOT,
    )
    lines, plans = make_plan(cfg, None, roles=("judge",), workflow_dir=ROOT)
    text = "\n".join(lines)
    criteria = sum(len(json.loads(line)["rubrics"]) for line in RUBRIC_DATA.read_text().splitlines())
    assert criteria == 102 and f"one a criterion of the item's rubric): {criteria}" in text, text


def test_a_checklist_is_shown_numbered_in_any_modes_template():
    gens = pd.DataFrame(
        {
            "id": ["a"],
            "prompt": ["Plan a trip."],
            "reference": [None],
            "output": ["Go."],
            "turn": [1],
            "sample": [0],
            "checklist": [json.dumps(["Names a place", "Gives dates"])],
        }
    )
    spec = spec_for("judge", model="m", mode="score")
    (req,) = modes.get("score").requests(gens, spec, "{question}\n{checklist}\n{candidate}")
    assert "1. Names a place\n2. Gives dates" in req.text


def test_an_endpoint_judges_reply_without_a_verdict_is_asked_again_under_a_key_of_its_own(tmp_path):
    """The first reply to each criterion holds no JSON; the second does. max_parse_attempts 2 reads every
    criterion; each try is stored under its own key, so a rerun asks nothing."""
    import io

    from judges import judge_with

    from genjudge.cluster.gpu_lease import Lease
    from genjudge.config.experiment import Cell

    asked: dict = {}

    def answer(body, headers):
        text = prompt_of(body)
        asked[text] = asked.get(text, 0) + 1
        return Reply(content="hmm" if asked[text] == 1 else '{"explanation": "ok", "criteria_met": true}')

    provider = Provider(answer)
    gens = tmp_path / "g.parquet"
    gens_of(HEALTHBENCH_ROWS, ["Go now.", "Yes."]).to_parquet(gens)

    def judged(attempts, name):
        spec = spec_for(
            "judge",
            model="gpt-4.1-2025-04-14",
            engine="openai",
            mode="rubric",
            rubric={"max_parse_attempts": attempts},
            endpoint={"base_url": provider.url, "check_capabilities": False},
        )
        judge_with(
            cells=[Cell("g", "d")],
            generations={("g", "d"): gens},
            out_path=tmp_path / f"{name}.parquet",
            meta_path=tmp_path / f"{name}.meta.json",
            spec=spec,
            template_path=ROOT / "config/templates/rubric.txt",
            store_dir=tmp_path / "store",
            run="t",
            lease=Lease([], "none"),
            log_stream=io.StringIO(),
            judge_name=name,
        )
        raw = pd.read_parquet(tmp_path / f"{name}.parquet")
        return RUBRIC.parse(gens_of(HEALTHBENCH_ROWS, ["Go now.", "Yes."]), raw, None, {}), raw

    try:
        df, raw = judged(2, "a")
        assert df["n_criteria_unparsed"].sum() == 0 and df["score"].notna().all()
        assert provider.total() == 8 and set(asked.values()) == {2}  # 4 criteria, each tried twice
        assert raw["judge_key"].nunique() == 4
        judged(2, "b")  # the same requests: every try is stored
        assert provider.total() == 8
        df, _ = judged(1, "c")  # one try: the first reply gives no verdict, nothing is guessed
        assert df["score"].isna().all() and provider.total() == 8
    finally:
        provider.stop()


def test_a_judge_checked_on_labelled_criteria(tmp_path):
    """People's criteria_met against the judge's: balanced F1 (HealthBench's meta-evaluation), agreement,
    kappa, the confusion matrix, and the labellers' agreement with each other as the ceiling."""
    from genjudge.judging import labels as human
    from genjudge.stages.validity import criteria_markdown, label_agreement

    rows = HEALTHBENCH_ROWS
    gens = gens_of(rows, ["Go now.", "Yes."])
    reqs = RUBRIC.requests(gens, spec_for("judge", model="m", mode="rubric"), "{conversation}\n{rubric_item}")
    said = {
        ("0f7c-made-up-1", 0): True,
        ("0f7c-made-up-1", 1): False,
        ("0f7c-made-up-1", 2): True,
        ("0f7c-made-up-2", 0): False,
    }
    raw = pd.DataFrame(
        [
            {
                "id": r.id,
                "order": r.order,
                "decided_by": "judge",
                "turn": 1,
                "sample": 0,
                "judge_output": json.dumps({"criteria_met": said[(r.id, r.order)]}),
            }
            for r in reqs
        ]
    )
    df = RUBRIC.parse(gens.copy(), raw, None, {}).assign(generator="g", dataset="d", opponent=None)
    # a by index and by text; two labellers of the first criterion, who disagree on the third.
    labelled = [
        {"id": "0f7c-made-up-1", "criterion": 0, "label": True, "who": "p1"},
        {"id": "0f7c-made-up-1", "criterion": 0, "label": "met", "who": "p2"},
        {"id": "0f7c-made-up-1", "criterion": "Suggests waiting a week.", "label": False, "who": "p1"},
        {"id": "0f7c-made-up-1", "criterion": 2, "label": False, "who": "p1"},
        {"id": "0f7c-made-up-1", "criterion": 2, "label": True, "who": "p2"},
        {"id": "0f7c-made-up-2", "criterion": 0, "label": "no", "who": "p1"},
    ]
    path = write_jsonl(tmp_path / "labels.jsonl", labelled)
    section = {
        "path": str(path),
        "format": "auto",
        "fields": {"id": "id", "label": "label", "criterion": "criterion", "labeller": "who"},
    }
    h = label_agreement(df, section, RUBRIC, "judge.labels")
    human_marks = [True, True, False, False, True, False]
    judge_marks = [True, True, False, True, True, False]
    f1 = []
    for cls in (True, False):
        tp = sum(a == cls and b == cls for a, b in zip(human_marks, judge_marks))
        fp = sum(a != cls and b == cls for a, b in zip(human_marks, judge_marks))
        fn = sum(a == cls and b != cls for a, b in zip(human_marks, judge_marks))
        f1.append(2 * tp / (2 * tp + fp + fn))
    assert h["kind"] == "criterion" and h["n_labelled"] == 6 and h["n_items"] == 2
    assert h["balanced_f1"]["value"] == pytest.approx(sum(f1) / 2) and h["agreement"]["value"] == pytest.approx(5 / 6)
    assert h["confusion"] == {"False": {"False": 2, "True": 1}, "True": {"True": 3}}
    # The two labellers agree on criterion 0 (met) and not on criterion 2: each against the other, met has
    # F1 2/3 (2 agreed, 1 and 1 not) and not met 0: balanced F1 1/3.
    assert h["labellers"] == {"balanced_f1": pytest.approx(1 / 3), "n_pairs": 2}
    text = "\n".join(criteria_markdown([("judge", "j", h)]))
    assert "### The judge on labelled criteria" in text and "0.33 over 2 pairs" in text
    # A label of no criterion of the run's is an error naming it; a label that is not true or false too.
    write_jsonl(path, [{"id": "0f7c-made-up-2", "criterion": 5, "label": True, "who": "p1"}])
    with pytest.raises(
        InputError, match=r"1 label\(s\) of .* name no judged criterion: .*line 1 \(id 0f7c-made-up-2, criterion"
    ):
        label_agreement(df, section, RUBRIC, "judge.labels")
    write_jsonl(path, [{"id": "0f7c-made-up-2", "criterion": 0, "label": "maybe", "who": "p1"}])
    with pytest.raises(InputError, match=r"line 1, field 'label': label 'maybe' is not true or false"):
        human.read_labels(section, RUBRIC)


def test_a_panel_of_rubric_judges_scores_each_answer_by_its_judges_mean():
    """Each member's answer score, averaged (rule mean): no member's criteria are dropped, and an answer one
    judge left out is the others' mean (never only the last judge's score, as HELM's jury keeps)."""
    from genjudge.judging.panels import panel_judgments, panel_summary

    def judged(scores):
        return pd.DataFrame(
            {
                "generator": "g",
                "dataset": "d",
                "opponent": None,
                "id": ["a", "b", "c"],
                "turn": 1,
                "sample": 0,
                "verdict": [None if s is None else repr(s) for s in scores],
                "score": scores,
            }
        )

    panel = {"judges": ["j1", "j2"], "rule": "mean", "mode": "rubric"}
    df = panel_judgments(panel, {"j1": judged([0.5, 1.0, None]), "j2": judged([0.25, 0.5, 0.75])})
    assert df["score"].tolist() == [0.375, 0.75, 0.75]
    m = panel_summary(panel, df)["measures"]["rubric_score"]
    assert m["value"] == pytest.approx((0.375 + 0.75 + 0.75) / 3) and "bootstrap" in m["method"]
