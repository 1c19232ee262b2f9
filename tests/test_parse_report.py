"""Parsing and reporting without a model: truncations named, only the needed columns read."""

import pandas as pd
import pyarrow.parquet as pq

from genjudge import config as wfconfig
from genjudge.judging import modes
from genjudge.stages.parse import parse_judgments
from genjudge.stages.report import SKIPPED_COLUMNS, read_judgments

GENS = pd.DataFrame(
    {"id": ["a", "b", "c"], "prompt": "q", "reference": "r", "category": None, "output": ["x", "y", "z"]}
)


def raw(outputs, finish):
    return pd.DataFrame(
        {
            "id": ["a", "b", "c"],
            "order": 0,
            "decided_by": "judge",
            "judge_output": outputs,
            "p_correct": float("nan"),
            "judge_finish_reason": finish,
        }
    )


def test_a_judge_cut_off_before_its_verdict_is_unparsed_as_truncated():
    df = parse_judgments(
        GENS,
        raw(["Let me think step by step about", "VERDICT: CORRECT", "I am not sure."], ["length", "length", "eos"]),
        "reference",
    )
    assert df["verdict"].isna().tolist() == [True, False, True] and df["verdict"][1] == "correct"
    assert df["unparsed_reason"][0].startswith("truncated: the judge reached max_new_tokens")
    assert df["unparsed_reason"][2] == "no verdict marker"


def test_the_report_reads_only_the_columns_it_needs(tmp_path):
    df = parse_judgments(GENS, raw(["VERDICT: CORRECT"] * 3, ["eos"] * 3), "reference")
    df["prompt_sent"] = "p" * 10_000  # large columns the report has no use for
    df["judge_prompt"] = "j" * 10_000
    path = tmp_path / "judgments.parquet"
    df.to_parquet(path)
    got = read_judgments(path)
    assert not set(got.columns) & SKIPPED_COLUMNS and "prompt_sent" not in got and "judge_prompt" not in got
    assert {"verdict", "output", "reference", "exact_match"} <= set(got.columns)
    assert {"prompt_sent", "judge_prompt"} <= set(pq.read_schema(path).names)


def test_jobs_check_the_config_without_reading_the_datasets(tmp_path):
    cfg = wfconfig.validate(
        {
            "run": "x",
            "dataset": {"path": str(tmp_path / "gone.jsonl")},
            "generator": {"model": "models/demo-generator"},
            "judge": {"model": "models/demo-judge", "template": None},
        }
    )
    wfconfig.check(cfg, data=False)  # what a job's re-read of the Snakefile does: no dataset read
    try:
        wfconfig.check(cfg)
    except Exception as exc:  # the main process reads it, once
        assert "gone.jsonl" in str(exc)
    else:
        raise AssertionError("the main process must read the dataset")


def test_gsm8k_answers_are_extracted_before_exact_match():
    gens = pd.DataFrame(
        {
            "id": ["a", "b", "c", "d"],
            "prompt": "q",
            "category": None,
            "reference": ["Natalia sold 48/2 = 24 clips... #### 72", "... #### 1,000", "#### 5", "#### 9"],
            "output": ["72", "So the answer is 1000.", "I do not know", "The answer is 10"],
        }
    )
    r = pd.DataFrame(
        {
            "id": list("abcd"),
            "order": 0,
            "decided_by": "judge",
            "judge_output": "VERDICT: CORRECT",
            "p_correct": float("nan"),
            "judge_finish_reason": "eos",
        }
    )
    plain = parse_judgments(gens, r, "reference")
    assert plain["exact_match"].tolist() == [False, False, False, False]  # the whole worked solution never matches
    df = parse_judgments(gens, r, "reference", answer={"reference": "gsm8k", "candidate": "last_number"})
    assert df["exact_match"].tolist() == [True, True, False, False]
    assert df["reference_extracted"].tolist() == ["72", "1,000", "5", "9"]
    assert df["answer_reason"][2].startswith("no answer extracted")


def test_score_distribution_keeps_decimals_and_refuses_out_of_range_scores():
    gens = GENS.assign(id=["a", "b", "c"])
    r = raw(["[[5]]", "[[5.5]]", "[[37]]"], ["eos"] * 3)
    df = parse_judgments(gens, r, "score", r"\[\[(\d+\.?\d*)\]\]", options={"score_range": [1, 10]})
    assert df["score"].tolist()[:2] == [5.0, 5.5] and df["unparsed_reason"][2] == "score outside 1-10"
    m = modes.get("score").metrics(df)
    assert m["score_counts"] == {"5": 1, "5.5": 1} and m["mean_score"]["value"] == 5.25


def test_unparsed_reasons_are_causes_and_the_text_ends_are_kept_apart():
    rx = r"RESULT:\s*(CORRECT|INCORRECT)"
    outputs = ["I think it is fine, INCORRECT", "so the final VERDICT", "RESULT: MAYBE"]
    df = parse_judgments(GENS, raw(outputs, ["eos"] * 3), "reference", pattern=rx)
    assert df["unparsed_reason"].nunique() == 1  # one cause, however each text ends
    assert df["unparsed_reason"][0] == f"no match for the verdict pattern {rx}"
    assert df["unparsed_detail"].tolist() == [f"the text ends: ...{t}" for t in outputs]
    score = modes.get("score")
    for text, cause, detail in (
        ("SCORE: 37", "score outside 1-10", "score 37"),
        ("SCORE: 12", "score outside 1-10", "score 12"),
    ):
        v = score.parse_text(text, score.compile(None), False, {"score_range": [1, 10]})
        assert (v.verdict, v.reason, v.detail) == (None, cause, detail)
    ref = modes.get("reference")
    v = ref.parse_text("VERDICT: maybe", ref.compile(r"VERDICT:\s*(\w+)"), True)
    assert v.reason == "label not one of ['CORRECT', 'INCORRECT', 'PARTIAL']" and v.detail == "label 'maybe'"


def test_pairwise_unparsed_reasons_name_each_order_by_cause():
    gens = GENS.assign(opponent_output="o")
    rows = pd.concat([raw(["WINNER: A"] * 3, ["eos"] * 3), raw(["none a", "none b", "VERDICT: B"], ["eos"] * 3)])
    rows["order"] = [0] * 3 + [1] * 3
    df = parse_judgments(gens, rows, "pairwise", pattern=r"WINNER:\s*(A|B|TIE)")
    assert (
        df["unparsed_reason"][0]
        == df["unparsed_reason"][1]
        == "order 1: no match for the verdict pattern " + (r"WINNER:\s*(A|B|TIE)")
    )
    assert df["unparsed_detail"][0] == "order 1: the text ends: ...none a"
