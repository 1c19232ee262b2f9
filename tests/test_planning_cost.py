"""What planning costs per job: the rules' settings are computed once per cell, not once per job."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from genjudge.config.rule_params import job_settings


def settings_of(failed=None, **temperatures):
    keys = ["model", "temperature", "system_prompt", "failed_attempts"]

    def params(cell):
        prompt = "Answer {question}" if cell.generator == "b" else "Answer"
        return {"model": "m", "temperature": temperatures[cell.generator], "system_prompt": prompt}

    cells = [{"generator": g} for g in temperatures]
    return job_settings(params, keys, cells, name="generate", failed=failed or {}, job_id=lambda w: w.generator)


def test_a_setting_the_same_for_every_job_is_a_plain_param():
    one = settings_of(a=0.5)
    assert one == {"model": "model=m", "temperature": "temperature=0.5", "system_prompt": "system_prompt=Answer"} | {
        "failed_attempts": None
    }
    two = settings_of(a=0.5, c=0.7)
    assert two["model"] == "model=m"
    assert two["temperature"](SimpleNamespace(generator="c")) == "temperature=0.7"


def test_a_setting_snakemake_would_fill_in_and_a_recorded_failure_stay_functions_of_the_job():
    s = settings_of(failed={"b": 2}, a=0.5, b=0.5)
    assert s["temperature"] == "temperature=0.5"
    assert callable(s["system_prompt"])  # a plain "{question}" would be taken for a wildcard
    assert s["system_prompt"](SimpleNamespace(generator="b")) == "system_prompt=Answer {question}"
    assert s["failed_attempts"](SimpleNamespace(generator="b")) == "failed_attempts=2"
    assert s["failed_attempts"](SimpleNamespace(generator="a")) is None


def test_a_setting_no_param_carries_stops_the_plan():
    from snakemake.exceptions import WorkflowError

    with pytest.raises(WorkflowError, match=r"settings \['top_k'\] are not among their rerun params"):
        job_settings(lambda c: {"top_k": 5}, ["model"], [{"g": "a"}], name="generate", failed={}, job_id=str)
