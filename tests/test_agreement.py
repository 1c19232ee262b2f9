"""Agreement, bias and panel measures against known values (no model, no workflow)."""

import json
from pathlib import Path

import pandas as pd
import pytest

from genjudge.errors import InputError
from genjudge.judging import agreement, modes
from genjudge.judging.bias import LENGTH_MEASURE, length_correlation, pairwise_bias
from genjudge.judging.labels import check_ids, join, read_labels
from genjudge.judging.panels import combine, inter_judge, panel_judgments, panel_summary
from genjudge.judging.stats import wilson_interval

ROOT = Path(__file__).resolve().parents[1]


def table_to_pairs(table: dict) -> tuple[list, list]:
    a, b = [], []
    for (x, y), n in table.items():
        a += [x] * n
        b += [y] * n
    return a, b


@pytest.mark.parametrize(
    "table,kappa",
    [
        # Cohen's kappa (Wikipedia): 20 yes/yes, 5 yes/no, 10 no/yes, 15 no/no -> p_o .7, p_e .5
        ({("y", "y"): 20, ("y", "n"): 5, ("n", "y"): 10, ("n", "n"): 15}, 0.4),
        # "same agreement, different kappa": both p_o = .60
        ({("y", "y"): 45, ("y", "n"): 15, ("n", "y"): 25, ("n", "n"): 15}, 0.1304),
        ({("y", "y"): 25, ("y", "n"): 35, ("n", "y"): 5, ("n", "n"): 35}, 0.2593),
    ],
)
def test_cohen_kappa_on_textbook_tables(table, kappa):
    a, b = table_to_pairs(table)
    assert agreement.cohen_kappa(a, b)[0] == pytest.approx(kappa, abs=5e-5)


def test_fleiss_kappa_on_the_textbook_table():
    # Fleiss (1971) as in Wikipedia: 10 subjects, 14 raters, 5 categories; P = .378, Pe = .213, kappa = .210
    table = [
        [0, 0, 0, 0, 14],
        [0, 2, 6, 4, 2],
        [0, 0, 3, 5, 6],
        [0, 3, 9, 2, 0],
        [2, 2, 8, 1, 1],
        [7, 7, 0, 0, 0],
        [3, 2, 6, 3, 0],
        [2, 5, 3, 2, 2],
        [6, 5, 2, 1, 0],
        [0, 2, 2, 3, 7],
    ]
    assert agreement.fleiss_kappa(table)[0] == pytest.approx(0.2099, abs=5e-4)
    with pytest.raises(ValueError, match="same number"):
        agreement.fleiss_kappa([[1, 1], [2, 1]])


@pytest.mark.parametrize(
    "k,n,low,high",
    # Newcombe (1998), Statistics in Medicine 17:857, table I, method 3 (Wilson score)
    [(81, 263, 0.2553, 0.3662), (15, 148, 0.0624, 0.1605), (0, 20, 0.0, 0.1611), (1, 29, 0.0061, 0.1718)],
)
def test_agreement_intervals_are_wilson_intervals(k, n, low, high):
    lo, hi = wilson_interval(k, n)
    assert (lo, hi) == (pytest.approx(low, abs=1e-4), pytest.approx(high, abs=1e-4))
    human = ["correct"] * n
    judge = ["correct"] * k + ["incorrect"] * (n - k)
    out = agreement.agreement(human, judge)
    assert out["agreement"]["value"] == pytest.approx(k / n)
    assert out["agreement"]["ci95"] == [pytest.approx(low, abs=1e-4), pytest.approx(high, abs=1e-4)]
    assert out["confusion"] == {"correct": {k_: v for k_, v in (("correct", k), ("incorrect", n - k)) if v}}


def test_spearman_and_pearson_on_known_data():
    # Spearman's rho, Wikipedia's IQ / hours of TV example: rho = -29/165
    iq = [106, 100, 86, 101, 99, 103, 97, 113, 112, 110]
    tv = [7, 27, 2, 50, 28, 29, 20, 12, 6, 17]
    c = agreement.correlations(iq, tv)
    assert c["spearman"] == pytest.approx(-29 / 165)
    assert agreement.correlations([1, 2, 3, 4], [3, 5, 7, 9])["pearson"] == pytest.approx(1.0)
    # ties share their average rank: ranks of y are 1, 2, 3.5, 5, 3.5
    assert agreement.correlations([1, 2, 3, 4, 5], [5, 6, 7, 8, 7])["spearman"] == pytest.approx(0.8208, abs=1e-4)
    assert agreement.correlations([1, 1, 1], [1, 2, 3])["pearson"] is None


def pairwise_frame(o0, o1, cand_len=None, opp_len=None):
    verdict = [None if a is None or b is None else (a if a == b else "tie") for a, b in zip(o0, o1)]
    df = pd.DataFrame({"outcome_order0": o0, "outcome_order1": o1, "verdict": verdict})
    if cand_len:
        df["output"] = ["x" * n for n in cand_len]
        df["opponent_output"] = ["y" * n for n in opp_len]
    return df


def test_flip_rate_and_first_position_win_rate_on_a_judge_that_always_picks_the_first_answer():
    # Always "A": the candidate wins shown first (order 0) and loses shown second (order 1).
    o0, o1 = ["win"] * 10, ["loss"] * 10
    b = pairwise_bias(pairwise_frame(o0, o1))
    assert b["flip_rate"]["value"] == 1.0 and b["flip_rate"]["n"] == 10
    assert b["first_position_win_rate"]["value"] == 1.0 and b["first_position_win_rate"]["n"] == 20
    assert b["length_measure"] == LENGTH_MEASURE


def test_flip_rate_and_first_position_win_rate_on_constructed_data():
    # 6 consistent pairs (4 wins, 2 losses), 2 flips toward the first answer, 1 flip toward the
    # second, 1 tie in both orders, 1 pair with an unparsed order (left out).
    o0 = ["win"] * 4 + ["loss"] * 2 + ["win", "win"] + ["loss"] + ["tie"] + [None]
    o1 = ["win"] * 4 + ["loss"] * 2 + ["loss", "loss"] + ["win"] + ["tie"] + ["win"]
    b = pairwise_bias(pairwise_frame(o0, o1))
    assert b["flip_rate"]["n"] == 10 and b["flip_rate"]["value"] == pytest.approx(3 / 10)
    # Decided single judgments: order 0: 4 + 2 + 2 + 1 = 9, first won 4 + 2 = 6; order 1: 9 (+1 from the
    # pair unparsed in order 0), first won (outcome "loss" in order 1) 2 + 2 = 4.
    assert b["first_position_win_rate"]["n"] == 19
    assert b["first_position_win_rate"]["value"] == pytest.approx(10 / 19)


def test_prefer_longer_on_data_built_to_have_it():
    # 10 decided pairs of different lengths, the longer answer wins 7; a tie and a pair of
    # equal lengths do not count.
    o = ["win"] * 5 + ["loss"] * 5 + ["tie", "win"]
    cand = [20] * 5 + [5] * 3 + [30] * 2 + [10, 8]
    opp = [10] * 5 + [9] * 3 + [10] * 2 + [12, 8]
    b = pairwise_bias(pairwise_frame(o, o, cand, opp))
    assert b["prefer_longer"]["n"] == 10
    assert b["prefer_longer"]["value"] == pytest.approx(0.8)  # 5 longer wins + 3 shorter losses
    o = ["win"] * 3 + ["loss"] * 7
    b = pairwise_bias(pairwise_frame(o, o, [10] * 10, [5] * 10))
    assert b["prefer_longer"]["value"] == pytest.approx(0.3)


def test_length_correlation_of_reference_verdicts():
    df = pd.DataFrame(
        {"verdict": ["correct", "correct", "incorrect", "incorrect", None], "output": ["aaaa", "aaa", "a", "aa", "b"]}
    )
    c = length_correlation(df, modes.get("reference"))["length_correlation"]
    assert c["n"] == 4 and c["spearman"] == pytest.approx(0.8944, abs=1e-4)


@pytest.mark.parametrize(
    "votes,rule,pairwise,expected",
    [
        (["correct", "correct", "incorrect"], "majority", False, ("correct", None, True)),
        (["correct", "incorrect", None], "majority", False, (None, "no majority", False)),
        (["correct", None, None], "majority", False, ("correct", None, True)),  # one parsed vote of one
        ([None, None, None], "majority", False, (None, "no judge of the panel parsed", False)),
        (["win", "loss", "tie"], "majority", True, ("tie", None, False)),
        (["win", "win", "loss"], "unanimous", True, ("tie", None, False)),
        (["win", "win", None], "unanimous", True, ("win", None, True)),
        (["7", "8", None], "mean", False, ("7.5", None, True)),
    ],
)
def test_panel_rule_counts_only_parsed_votes(votes, rule, pairwise, expected):
    assert combine(votes, rule, pairwise) == expected


def judged(verdicts, generator="g", dataset="d"):
    n = len(verdicts)
    return pd.DataFrame(
        {
            "generator": [generator] * n,
            "dataset": [dataset] * n,
            "opponent": [None] * n,
            "id": [f"q{i}" for i in range(n)],
            "category": ["c"] * n,
            "output": ["x"] * n,
            "verdict": verdicts,
            "unparsed_reason": [None if v else "no verdict marker" for v in verdicts],
        }
    )


def test_a_panel_with_one_judge_unparsed_decides_by_the_other_two():
    a = judged(["correct", "correct", "incorrect", "incorrect", None])
    b = judged(["correct", "incorrect", "incorrect", None, None])
    never = judged([None] * 5)
    panel = {"judges": ["a", "b", "never"], "rule": "majority", "mode": "reference"}
    df = panel_judgments(panel, {"a": a, "b": b, "never": never})
    assert df["n_parsed_votes"].tolist() == [2, 2, 2, 1, 0]
    assert df["verdict"].tolist() == ["correct", None, "incorrect", "incorrect", None]
    s = panel_summary(panel, df)
    assert s["no_majority"] == 1 and s["none_parsed"] == 1 and s["n_decided"] == 3
    assert s["parsed_votes_per_item"] == {"0": 1, "1": 1, "2": 3}
    assert s["measures"]["accuracy"]["value"] == pytest.approx(1 / 3)
    ij = inter_judge(df, panel["judges"])
    assert ij["n_all_parsed"] == 0 and ij["fleiss_kappa"] is None
    assert ij["pairs"]["a / b"]["n"] == 3


def test_fleiss_kappa_of_a_panel_over_items_all_judges_parsed():
    a = judged(["correct", "correct", "incorrect", "incorrect"])
    b = judged(["correct", "correct", "incorrect", "incorrect"])
    c = judged(["correct", "incorrect", "incorrect", None])
    df = panel_judgments({"judges": ["a", "b", "c"], "rule": "majority", "mode": "reference"}, {"a": a, "b": b, "c": c})
    ij = inter_judge(df, ["a", "b", "c"])
    assert ij["n_all_parsed"] == 3
    table = [[3, 0], [2, 1], [0, 3]]
    assert ij["fleiss_kappa"] == pytest.approx(agreement.fleiss_kappa(table)[0])
    assert ij["pairs"]["a / b"]["cohen_kappa"] == 1.0


def write_labels(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return {"path": str(path), "format": "auto", "fields": {"id": "id", "label": "label"}}


def test_labels_name_unknown_ids_and_leave_unlabelled_items_out(tmp_path):
    mode = modes.get("reference")
    df = judged(["correct", "incorrect", None, "correct"])
    section = write_labels(
        tmp_path / "l.jsonl",
        [{"id": "q0", "label": "CORRECT"}, {"id": "q1", "label": "correct"}, {"id": "q2", "label": False}],
    )
    labels = read_labels(section, mode)
    assert labels["label"].tolist() == ["correct", "correct", "incorrect"]
    j = join(df, labels, mode, "l.jsonl", "judge.labels")
    assert j["id"].tolist() == ["q0", "q1", "q2"]  # q3 has no label: not part of it
    bad = write_labels(tmp_path / "bad.jsonl", [{"id": "q0", "label": "correct"}, {"id": "nope-9", "label": "correct"}])
    with pytest.raises(InputError, match=r"judge.labels: .*bad.jsonl labels 1 id\(s\) not in the dataset d.*'nope-9'"):
        check_ids(read_labels(bad, mode), {"d": set(df["id"])}, {"g"}, bad["path"], "judge.labels")
    wrong = write_labels(tmp_path / "w.jsonl", [{"id": "q0", "label": "maybe"}])
    with pytest.raises(InputError, match=r"w.jsonl, line 1, field 'label': label 'maybe' is not one of"):
        read_labels(wrong, mode)
    twice = write_labels(tmp_path / "t.jsonl", [{"id": "q0", "label": "correct"}, {"id": "q0", "label": "incorrect"}])
    with pytest.raises(InputError, match="label the same item twice"):
        read_labels(twice, mode)


def test_pairwise_labels_per_item_and_pair_from_csv_and_parquet(tmp_path):
    mode = modes.get("pairwise")
    # Two pairs on the same items: a vs base and b vs base.
    df = pd.concat([judged(["win", "loss", "tie"], generator="a"), judged(["loss", "loss", "win"], generator="b")])
    df["opponent"] = "base"
    rows = pd.DataFrame(
        {
            "question_id": ["q0", "q1", "q2", "q0", "q2"],
            "model_a": ["a", "a", "a", "b", "b"],
            "model_b": ["base"] * 5,
            "winner": ["a", "base", "tie", "base", "win"],
        }
    )
    fields = {"id": "question_id", "label": "winner", "generator": "model_a", "opponent": "model_b"}
    rows.to_csv(tmp_path / "pw.csv", index=False)
    rows.to_parquet(tmp_path / "pw.parquet")
    for name in ("pw.csv", "pw.parquet"):
        section = {"path": str(tmp_path / name), "format": "auto", "fields": {**fields, "dataset": None}}
        j = join(df, read_labels(section, mode), mode, name, "judge.labels")
        got = {(r.generator, r.id): r.human for r in j.itertuples()}
        assert got == {
            ("a", "q0"): "win",
            ("a", "q1"): "loss",
            ("a", "q2"): "tie",
            ("b", "q0"): "loss",
            ("b", "q2"): "win",
        }
    stray = rows.assign(model_a=["a", "a", "a", "b", "c"])
    stray.to_csv(tmp_path / "stray.csv", index=False)
    section = {"path": str(tmp_path / "stray.csv"), "format": "auto", "fields": {**fields, "dataset": None}}
    with pytest.raises(InputError, match=r"stray.csv names generator\(s\) \['c'\] not in the run"):
        check_ids(read_labels(section, mode), {"d": {"q0", "q1", "q2"}}, {"a", "b", "base"}, "stray.csv", "x", mode)


def test_the_demo_labels_are_the_generators_known_wrong_answers():
    from genjudge.demo.labels import LABELS, demo_labels
    from genjudge.demo.training import WRONG_FRACTION

    root = ROOT
    committed = [json.loads(line) for line in (root / LABELS).read_text().splitlines()]
    assert committed == demo_labels(root)
    wrong = sum(r["label"] == "incorrect" for r in committed)
    assert wrong == round(WRONG_FRACTION * len(committed)) and wrong > 0


def test_pairwise_labels_naming_no_winner_of_the_run_are_refused(tmp_path):
    mode = modes.get("pairwise")
    section = write_labels(tmp_path / "pw.jsonl", [{"id": "q0", "label": "g"}, {"id": "q1", "label": "correct"}])
    with pytest.raises(InputError, match=r"line 2: winner 'correct' is neither win, tie or loss nor a generator"):
        check_ids(read_labels(section, mode), {"d": {"q0", "q1"}}, {"g", "base"}, section["path"], "judge.labels", mode)


def test_self_preference_names_the_same_model_and_the_same_family(tmp_path):
    from genjudge.judging.bias import self_preference

    for name, model_type in (("Llama-3.1-8B", "llama"), ("Llama-3.1-70B", "llama"), ("Qwen2.5-7B", "qwen2")):
        (tmp_path / name).mkdir()
        (tmp_path / name / "config.json").write_text(json.dumps({"model_type": model_type}))
    m = {n: {"model": str(tmp_path / n), "revision": None} for n in ("Llama-3.1-8B", "Llama-3.1-70B", "Qwen2.5-7B")}
    assert self_preference({"qwen": m["Qwen2.5-7B"]}, {"big": m["Llama-3.1-70B"]}) == []
    family = self_preference({"small": m["Llama-3.1-8B"], "qwen": m["Qwen2.5-7B"]}, {"big": m["Llama-3.1-70B"]})
    assert len(family) == 1 and "generator small" in family[0] and "model_type llama, name 'llama'" in family[0]
    same = self_preference({"qwen": m["Qwen2.5-7B"]}, {"a": m["Qwen2.5-7B"], "b": m["Qwen2.5-7B"]})
    assert len(same) == 1 and same[0].startswith("judges a, b (") and "the model of generator qwen" in same[0]


def test_score_labels_give_correlations_and_a_mean_panel(tmp_path):
    from genjudge.stages.validity import label_agreement

    mode = modes.get("score")
    a = judged(["7", "3", "9", None, "5"])
    a["score"] = pd.to_numeric(a["verdict"])
    b = judged(["8", "2", None, None, "5"])
    section = write_labels(
        tmp_path / "s.jsonl",
        [{"id": f"q{i}", "label": x} for i, x in enumerate([7, 4, 10, 6])],  # q4 unlabelled
    )
    h = label_agreement(a, section, mode, "judge.labels")
    assert (h["n_items"], h["n_labelled"], h["n_judged"], h["n_unparsed"]) == (5, 4, 3, 1)
    assert h["agreement"]["value"] == pytest.approx(1 / 3)  # only q0 exactly equal
    assert h["correlation"]["pearson"] == pytest.approx(agreement.correlations([7, 3, 9], [7, 4, 10])["pearson"])
    assert h["correlation"]["spearman"] == pytest.approx(1.0)
    assert "cohen_kappa" not in h
    df = panel_judgments({"judges": ["a", "b"], "rule": "mean", "mode": "score"}, {"a": a, "b": b})
    assert df["verdict"].tolist() == ["7.5", "2.5", "9", None, "5"]
    assert df["score"].tolist()[:3] == [7.5, 2.5, 9.0]


def demo_config(**kw):
    cfg = {
        "run": "x",
        "dataset": {"path": str(ROOT / "config/demo/questions.jsonl")},
        "generator": {"model": str(ROOT / "models/demo-generator")},
        "judge": {"model": str(ROOT / "models/demo-judge"), "template": str(ROOT / "config/demo/judge_template.txt")},
        "judges": {"a": {}, "b": {}, "s": {"mode": "score", "template": None}},
    }
    cfg.update(kw)
    return cfg


@pytest.mark.parametrize(
    "panels,message",
    [
        ({"p": {"judges": ["a"]}}, r"panels\.p\.judges: \['a'\] is too short"),
        ({"p": {"judges": ["a", "zz"]}}, r"panels\.p\.judges: \['zz'\] not among the judges"),
        ({"p": {"judges": ["a", "s"]}}, r"panels\.p\.judges: the judges grade in different modes"),
        ({"p": {"judges": ["a", "b"], "rule": "mean"}}, r"panels\.p\.rule: 'mean' does not fit mode 'reference'"),
        ({"p": {"judges": ["a", "b"], "rule": "vote"}}, r"panels\.p\.rule: 'vote' is not one of"),
    ],
)
def test_bad_panels_are_refused_while_planning_naming_the_key(panels, message):
    from genjudge import config as wfconfig

    with pytest.raises(InputError, match=message):
        wfconfig.check(wfconfig.validate(demo_config(panels=panels)), data=False)


def test_labels_with_unknown_ids_are_refused_while_planning(tmp_path):
    from genjudge import config as wfconfig

    section = write_labels(tmp_path / "l.jsonl", [{"id": "arith-001", "label": "correct"}, {"id": "zz", "label": "x"}])
    raw = demo_config(judge={**demo_config()["judge"], "labels": section})
    del raw["judges"]
    cfg = wfconfig.validate(raw)
    with pytest.raises(InputError, match=r"l.jsonl, line 2, field 'label': label 'x' is not one of"):
        wfconfig.check(cfg)
    write_labels(tmp_path / "l.jsonl", [{"id": "arith-001", "label": "correct"}, {"id": "zz", "label": "correct"}])
    with pytest.raises(
        InputError, match=r"^judge\.labels: .*l.jsonl labels 1 id\(s\) not in the dataset questions: 'zz'$"
    ):
        wfconfig.check(cfg)


def test_labels_per_turn_of_a_conversation(tmp_path):
    mode = modes.get("reference")
    turn1, turn2 = judged(["correct", "incorrect"]).assign(turn=1), judged(["incorrect", "correct"]).assign(turn=2)
    df = pd.concat([turn1, turn2], ignore_index=True)
    section = write_labels(
        tmp_path / "mt.jsonl",
        [{"id": "q0", "turn": 2, "label": "incorrect"}, {"id": "q1", "turn": "1", "label": "correct"}],
    )
    section["fields"]["turn"] = "turn"
    j = join(df, read_labels(section, mode), mode, "mt.jsonl", "judge.labels")
    assert [(r.id, r.turn, r.verdict, r.human) for r in j.itertuples()] == [
        ("q1", 1, "incorrect", "correct"),
        ("q0", 2, "incorrect", "incorrect"),
    ]
    # Without a turn field a label could be any turn's: refused, not applied to both.
    plain = write_labels(tmp_path / "plain.jsonl", [{"id": "q0", "label": "correct"}])
    with pytest.raises(InputError, match=r"grades 2 turns per conversation .*labels.fields.turn"):
        join(df, read_labels(plain, mode), mode, "plain.jsonl", "judge.labels")
    # A turn the conversation does not have matches no judged row.
    stray = write_labels(tmp_path / "stray.jsonl", [{"id": "q0", "turn": 3, "label": "correct"}])
    stray["fields"]["turn"] = "turn"
    with pytest.raises(InputError, match=r"1 label\(s\) of stray.jsonl match no judged item: .*turn=3"):
        join(df, read_labels(stray, mode), mode, "stray.jsonl", "judge.labels")
    bad = write_labels(tmp_path / "bad.jsonl", [{"id": "q0", "turn": "two", "label": "correct"}])
    bad["fields"]["turn"] = "turn"
    with pytest.raises(InputError, match=r"bad.jsonl, line 1: field 'turn': turn 'two' is not a number"):
        read_labels(bad, mode)


def test_panel_votes_are_matched_per_turn():
    a = pd.concat([judged(["correct", "correct"]).assign(turn=1), judged(["incorrect", "incorrect"]).assign(turn=2)])
    b = a.iloc[::-1].reset_index(drop=True)  # the same votes in another row order
    df = panel_judgments({"judges": ["a", "b"], "rule": "unanimous", "mode": "reference"}, {"a": a, "b": b})
    assert [(r.id, r.turn, r.verdict) for r in df.itertuples()] == [
        ("q0", 1, "correct"),
        ("q1", 1, "correct"),
        ("q0", 2, "incorrect"),
        ("q1", 2, "incorrect"),
    ]


def test_cohen_kappa_edges():
    assert agreement.cohen_kappa([], []) == (None, "no items rated by both")
    assert agreement.cohen_kappa(list("abab"), list("baba"))[0] == pytest.approx(-1.0)
    assert agreement.cohen_kappa(list("abab"), list("abab")) == (1.0, None)


@pytest.mark.parametrize("label", ["correct", "incorrect"])
def test_cohen_kappa_of_one_label_throughout_is_not_defined_never_one(label):
    # Four labels all `correct` and a judge that said `correct` to all four: agreement 100%, but
    # the expected agreement is 1 as well, so kappa is 0/0.
    value, why = agreement.cohen_kappa([label] * 4, [label] * 4)
    assert value is None and f"every label is {label!r} on both sides" in why and "expected agreement is 1" in why
    out = agreement.agreement([label] * 4, [label] * 4)
    assert out["agreement"]["value"] == 1.0 and out["cohen_kappa"] is None
    assert out["cohen_kappa_undefined"] == why


def test_fleiss_kappa_of_one_category_throughout_is_not_defined():
    value, why = agreement.fleiss_kappa([[3, 0], [3, 0], [3, 0]])
    assert value is None and "expected agreement is 1" in why
    assert agreement.fleiss_kappa([]) == (None, "no item rated by every rater")


def test_a_panel_incorrect_throughout_reports_its_kappas_as_not_defined():
    from genjudge.stages.validity import render

    a, b = judged(["incorrect"] * 4), judged(["incorrect"] * 4)
    panel = {"judges": ["a", "b"], "rule": "majority", "mode": "reference"}
    df = panel_judgments(panel, {"a": a, "b": b})
    s = panel_summary(panel, df)
    ij = s["inter_judge"]
    assert ij["fleiss_kappa"] is None and "expected agreement is 1" in ij["fleiss_kappa_undefined"]
    pair = ij["pairs"]["a / b"]
    assert pair["cohen_kappa"] is None and "every label is 'incorrect' on both sides" in pair["cohen_kappa_undefined"]
    md = "\n".join(render({"judges": {}, "panels": {"p": s}, "self_preference": [], "length_measure": "x"}))
    assert "1.00" not in md
    assert "Fleiss' kappa not defined (" in md and "a / b not defined (every label is 'incorrect'" in md


def test_agreement_with_human_labels_all_correct_says_kappa_is_not_defined(tmp_path):
    from genjudge.judging.headline import validity_rows
    from genjudge.stages.validity import label_agreement, render

    mode = modes.get("reference")
    df = judged(["correct"] * 4)
    section = write_labels(tmp_path / "l.jsonl", [{"id": f"q{i}", "label": "correct"} for i in range(4)])
    h = label_agreement(df, section, mode, "judge.labels")
    assert h["agreement"]["value"] == 1.0 and h["cohen_kappa"] is None
    assert "expected agreement is 1" in h["cohen_kappa_undefined"]
    v = {"judges": {"j": {"human": h, "bias": {}}}, "panels": {}, "self_preference": [], "length_measure": "x"}
    md = "\n".join(render(v))
    assert "1.00" not in md and "not defined (every label is 'correct' on both sides" in md
    (row,) = validity_rows(v)
    assert "Cohen's kappa not defined (every label is 'correct'" in row[1]


@pytest.mark.parametrize(
    "x,y,why",
    [
        ([1, 1, 1], [1, 2, 3], "the first variable is constant: every value is 1"),
        ([1, 2, 3], [5, 5, 5], "the second variable is constant: every value is 5"),
        ([1, 2], [1, 2], "fewer than 3 pairs (2)"),
    ],
)
def test_correlations_of_constant_inputs_are_not_defined_with_the_reason(x, y, why):
    c = agreement.correlations(x, y)
    assert c["pearson"] is None and c["spearman"] is None and c["undefined"] == why


def test_length_correlation_of_answers_all_the_same_length_names_the_lengths():
    df = pd.DataFrame({"verdict": ["correct", "incorrect", "correct"], "output": ["ab", "cd", "ef"]})
    c = length_correlation(df, modes.get("reference"))["length_correlation"]
    assert c["pearson"] is None and c["undefined"] == "the answer lengths are constant: every value is 2"


def test_labels_naming_no_generator_applied_to_differing_answers_are_warned_about(tmp_path):
    from genjudge.stages.validity import label_agreement, render

    mode = modes.get("reference")
    a, b = judged(["correct"] * 4, generator="a"), judged(["incorrect"] * 4, generator="b")
    b["output"] = ["y", "x", "z", "w"]  # q1 is the same answer as a's; q0, q2, q3 differ
    section = write_labels(tmp_path / "l.jsonl", [{"id": f"q{i}", "label": "correct"} for i in range(4)])
    h = label_agreement(pd.concat([a, b], ignore_index=True), section, mode, "judge.labels")
    assert h["n_labelled"] == 8
    d = h["labels_on_differing_answers"]
    assert (d["n_labels"], d["n_answers"], d["generators"]) == (3, 6, ["a", "b"])
    v = {"judges": {"j": {"human": h, "bias": {}}}, "panels": {}, "self_preference": [], "length_measure": "x"}
    md = "\n".join(render(v))
    assert "3 labels of" in md and "were each applied to answers that differ (6 answers" in md
    assert "labels.fields.generator" in md
    same = label_agreement(pd.concat([a, a.assign(generator="b")], ignore_index=True), section, mode, "judge.labels")
    assert "labels_on_differing_answers" not in same


def test_a_labels_error_at_report_time_names_the_key_as_written(tmp_path):
    from genjudge import config as wfconfig
    from genjudge.config.experiment import entry_keys, resolve
    from genjudge.stages.validity import summarise_validity

    bad = write_labels(tmp_path / "bad.jsonl", [{"id": "nope-9", "label": "correct"}])
    cfg = wfconfig.validate(
        {
            "run": "t",
            "dataset": {"path": "d.jsonl"},
            "generator": {"model": "g"},
            "judge": {"model": "j"},
            "datasets": {"d": {}},
            "generators": {"g": {}},
            "judges": {"only": {"labels": bad}},
        }
    )
    df = judged(["correct", "incorrect"])
    exp = resolve(cfg)
    with pytest.raises(InputError, match=r"^judges\.only\.labels: "):
        summarise_validity(exp, {"only": df}, panels={}, labels_keys=entry_keys(cfg, "judge", exp.judges, "labels"))


def test_labels_of_one_generator_are_a_share_of_its_answers_not_of_every_generators(tmp_path):
    """3 labels of generator a's 4 answers, in a judge that grades a and b: 3 of 4 answers, of generator a."""
    from genjudge.judging.headline import labelled_text
    from genjudge.stages.validity import label_agreement

    mode = modes.get("reference")
    df = pd.concat([judged(["correct"] * 4, generator="a"), judged(["correct"] * 4, generator="b")], ignore_index=True)
    section = write_labels(tmp_path / "l.jsonl", [{"id": f"q{i}", "gen": "a", "label": "correct"} for i in range(3)])
    section["fields"]["generator"] = "gen"
    h = label_agreement(df, section, mode, "judge.labels")
    assert (h["n_labelled"], h["n_answers"], h["n_items"]) == (3, 4, 4)
    assert labelled_text(h) == "3 of 4 answers (75.0%) of generator a"
    everyone = label_agreement(df, write_labels(tmp_path / "all.jsonl", [{"id": "q0", "label": "correct"}]), mode, "x")
    assert labelled_text(everyone) == "2 of 8 answers (25.0%)"  # a label naming no generator: every answer of q0
