"""Parsing and reporting without a model: truncations named, only the needed columns read."""

import pandas as pd
import pyarrow.parquet as pq

from genjudge import config as wfconfig
from genjudge.judging import modes
from genjudge.stages.parse import parse_judgments
from genjudge.stages.report import REPORT_COLUMNS, read_judgments

GENS = pd.DataFrame({"id": ["a", "b", "c"], "prompt": "q", "reference": "r", "category": None,
                     "output": ["x", "y", "z"]})


def raw(outputs, finish):
    return pd.DataFrame({"id": ["a", "b", "c"], "order": 0, "decided_by": "judge", "judge_output": outputs,
                         "p_correct": float("nan"), "judge_finish_reason": finish})


def test_a_judge_cut_off_before_its_verdict_is_unparsed_as_truncated():
    df = parse_judgments(GENS, raw(["Let me think step by step about", "VERDICT: CORRECT", "I am not sure."],
                                   ["length", "length", "eos"]), "reference")
    assert df["verdict"].isna().tolist() == [True, False, True] and df["verdict"][1] == "correct"
    assert df["unparsed_reason"][0].startswith("truncated: the judge reached max_new_tokens")
    assert df["unparsed_reason"][2] == "no verdict marker"


def test_the_report_reads_only_the_columns_it_needs(tmp_path):
    df = parse_judgments(GENS, raw(["VERDICT: CORRECT"] * 3, ["eos"] * 3), "reference")
    df["prompt_sent"] = "p" * 10_000  # large columns the report has no use for
    df["judge_prompt"] = "j" * 10_000
    path = tmp_path / "judgments.parquet"
    df.to_parquet(path)
    got = read_judgments(path, modes.get("reference"))
    assert set(got.columns) <= set(REPORT_COLUMNS) and "prompt_sent" not in got and "judge_prompt" not in got
    assert {"prompt_sent", "judge_prompt"} <= set(pq.read_schema(path).names)


def test_jobs_check_the_config_without_reading_the_datasets(tmp_path):
    cfg = wfconfig.validate({"run": "x", "dataset": {"path": str(tmp_path / "gone.jsonl")},
                             "generator": {"model": "models/demo-generator"}, "judge": {"model": "models/demo-judge",
                                                                                        "template": None}})
    wfconfig.check(cfg, data=False)  # what a job's re-read of the Snakefile does: no dataset read
    try:
        wfconfig.check(cfg)
    except Exception as exc:  # the main process reads it, once
        assert "gone.jsonl" in str(exc)
    else:
        raise AssertionError("the main process must read the dataset")
