"""Chat templates that stamp today's date (Llama 3.1-3.3, SmolLM3: `strftime_now`): a run renders every
prompt with one date, pinned once per run, so that a rerun on another day resumes every item."""

import datetime
import json
import os
import shutil
import subprocess
import sys

import pandas as pd
import pytest
from conftest import clean_env
from judges import ROOT

from genjudge import config as wfconfig
from genjudge.config.specs import spec_for
from genjudge.errors import InputError
from genjudge.store import chat_date

# The date block of Meta's Llama 3.1-3.3 chat templates, around the demo models' own turns.
DATED_TEMPLATE = """{%- if not date_string is defined %}
    {%- if strftime_now is defined %}
        {%- set date_string = strftime_now("%d %b %Y") %}
    {%- else %}
        {%- set date_string = "26 Jul 2024" %}
    {%- endif %}
{%- endif %}
{{ bos_token }}<|system|>
Cutting Knowledge Date: December 2023
Today Date: {{ date_string }}
{% for m in messages %}<|{{ m['role'] }}|>
{{ m['content'] }}
{% endfor %}{% if add_generation_prompt %}<|assistant|>
{% endif %}"""
FAKE_CLOCK = ROOT / "tests" / "fake_clock"  # its sitecustomize.py moves the clock of prompts' dates


def with_fake_clock() -> str:
    """PYTHONPATH with the fake clock first, the caller's after it (a checkout that puts its own src there)."""
    return os.pathsep.join(filter(None, [str(FAKE_CLOCK), os.environ.get("PYTHONPATH")]))


def dated_copy(model: str, dest):
    """A demo model whose chat template stamps today's date, as Llama 3.2's does."""
    shutil.copytree(ROOT / "models" / model, dest)
    (dest / "chat_template.jinja").write_text(DATED_TEMPLATE)
    return dest


def day(offset: int = 0) -> datetime.date:
    return datetime.date.today() + datetime.timedelta(days=offset)


def stamp(d: datetime.date) -> str:
    return f"Today Date: {d.strftime('%d %b %Y')}"


@pytest.fixture(scope="module")
def dated(tmp_path_factory):
    return dated_copy("demo-generator", tmp_path_factory.mktemp("models") / "dated-generator")


def test_a_pinned_date_is_in_every_prompt_on_both_engines(dated):
    from genjudge.engine.completion import PromptSet

    for engine in ("transformers", "vllm"):  # vLLM completes the prompts this same call renders
        spec = spec_for("generator", model=str(dated), engine=engine)
        pinned = PromptSet(spec, "generate", chat_date="2024-11-26")
        (prompt,) = pinned.render(["What is 2 + 2?"])
        assert "Today Date: 26 Nov 2024\n" in prompt and pinned.stamped_date == "2024-11-26"
        (unpinned,) = PromptSet(spec, "generate").render(["What is 2 + 2?"])
        assert stamp(day()) in unpinned  # transformers' own clock, as before
        assert pinned.key(prompt) != pinned.key(unpinned)
    # A template that stamps no date renders as it did, and records none.
    plain = PromptSet(
        spec_for("generator", model=str(ROOT / "models" / "demo-generator")), "generate", chat_date="2024-11-26"
    )
    assert plain.render(["Q"]) == PromptSet(plain.spec, "generate").render(["Q"]) and plain.stamped_date is None


def test_the_first_job_pins_the_run_date_and_jobs_started_together_agree(tmp_path):
    # Eight jobs start at once, each on its own clock (0 to 7 days ahead): one date wins, and all read it.
    code = "from genjudge.store import chat_date; print(chat_date.pin(__import__('sys').argv[1]).date)"
    env = {**os.environ, "PYTHONPATH": with_fake_clock()}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", code, str(tmp_path)],
            env={**env, "FAKE_CLOCK_DAYS_AHEAD": str(k)},
            stdout=subprocess.PIPE,
            text=True,
        )
        for k in range(8)
    ]
    dates = {p.communicate(timeout=60)[0].strip() for p in procs}
    (pinned,) = dates
    assert pinned in {day(k).isoformat() for k in range(8)}
    assert json.loads((tmp_path / "chat_date.json").read_text())["date"] == pinned
    assert not list(tmp_path.glob(".*.tmp"))
    assert chat_date.pin(tmp_path).date == pinned and chat_date.peek(tmp_path).date == pinned
    # The config's date wins over the pinned one; the pin stays for when it is unset again.
    assert chat_date.pin(tmp_path, "2024-11-26") == chat_date.Pin("2024-11-26", "chat_date in the config")
    assert chat_date.peek(tmp_path).date == pinned
    # A pin that cannot be read stops the job, naming the file; it is never replaced.
    (tmp_path / "chat_date.json").write_text("{}")
    with pytest.raises(InputError, match=r"chat_date\.json: the run's pinned chat date cannot be read"):
        chat_date.pin(tmp_path)
    assert (tmp_path / "chat_date.json").read_text() == "{}"
    assert chat_date.peek(tmp_path / "none") is None


def test_chat_date_in_the_config_is_a_date():
    # YAML reads an unquoted 2024-11-26 as a date: it stands as the string.
    assert wfconfig.defaults(chat_date=datetime.date(2024, 11, 26))["chat_date"] == "2024-11-26"
    with pytest.raises(InputError, match=r"chat_date: .*does not match"):
        wfconfig.defaults(chat_date="26 Nov 2024")
    cfg = wfconfig.load(overrides=["chat_date=2024-02-30"], root=ROOT)
    with pytest.raises(InputError, match=r"chat_date: '2024-02-30' is not a date"):
        wfconfig.check(cfg, data=False, loadable=False)


def test_merge_refuses_shards_whose_prompts_carry_different_dates(tmp_path):
    from genjudge.stages.merge import MergeError, check_one_model
    from genjudge.store.records import GenerateMeta

    paths = []
    for shard, d in enumerate(["2024-11-26", "2024-11-27", "2024-11-26"]):
        meta = GenerateMeta(run="r", shard=shard, model_fingerprint="f", chat_date=d)
        paths.append(tmp_path / f"{shard}.meta.json")
        paths[-1].write_text(json.dumps(meta.to_dict()))
    with pytest.raises(
        MergeError, match=r"different dates .*2024-11-26: shard\(s\) \[0, 2\]; 2024-11-27: shard\(s\) \[1\]"
    ):
        check_one_model(paths)
    check_one_model(paths[::2])


def test_the_plan_says_which_templates_stamp_the_date_and_that_an_endpoint_dates_its_own(dated, tmp_path, monkeypatch):
    from genjudge.stages.plan import make_plan

    monkeypatch.chdir(tmp_path)
    data = tmp_path / "q.jsonl"
    data.write_text(
        "".join(json.dumps({"id": f"q{i}", "question": f"{i}?", "answer": str(i)}) + "\n" for i in range(4))
    )
    cfg = {
        "run": "dates",
        "dataset": {"path": str(data), "fields": {"prompt": "question", "reference": "answer", "category": None}},
        "generators": {
            "dated": {"model": str(dated)},
            "served": {
                "model": "gpt-4o-2024-08-06",
                "engine": "openai",
                "endpoint": {"base_url": "http://127.0.0.1:9/v1"},
            },
        },
        "judge": {"model": str(ROOT / "models" / "demo-judge")},
    }
    config = wfconfig.validate(json.loads(json.dumps(cfg)), ROOT)
    before = day()
    lines, _ = make_plan(config, "1x80GiB", workflow_dir=ROOT)
    (note,) = [line for line in lines if "stamps today's date (strftime_now)" in line]
    assert "generator dated (" in note and "demo-judge" not in note
    assert any(
        f"(today: {d.isoformat()}), pinned then in results/dates/chat_date.json" in note for d in (before, day())
    )
    (served,) = [line for line in lines if "the server renders the chat template" in line]
    assert "generator served (gpt-4o-2024-08-06)" in served and "cannot be pinned here" in served
    pinned = chat_date.pin(tmp_path / "results" / "dates", None)
    assert pinned.date in (before.isoformat(), day().isoformat())
    lines, _ = make_plan(config, "1x80GiB", workflow_dir=ROOT)
    assert any(f"renders it with {pinned.date} (pinned in results/dates/chat_date.json)" in line for line in lines)
    config["chat_date"] = "2024-11-26"
    lines, _ = make_plan(config, "1x80GiB", workflow_dir=ROOT)
    assert any("renders it with 2024-11-26 (chat_date in the config)" in line for line in lines)


@pytest.mark.workflow
def test_a_rerun_on_the_next_day_resumes_every_item(workflow, tmp_path):
    """Generator and judge stamp the date. The next day (the prompts' clock one day ahead, tests/fake_clock)
    a rerun of the same run resumes every item: the date pinned by the first run's first job holds."""
    # Copies of the demo models (models/demo-*: the demo judge's compact template suits them).
    dated_copy("demo-generator", workflow.path / "models" / "demo-dated-generator")
    dated_copy("demo-judge", workflow.path / "models" / "demo-dated-judge")
    data = tmp_path / "q.jsonl"
    data.write_text(
        "".join(
            json.dumps({"id": f"q{i}", "question": f"What is {i} + 1?", "answer": str(i + 1)}) + "\n" for i in range(6)
        )
    )
    cfg = workflow.write_config(
        run="dates",
        shards=1,
        dataset={"path": str(data), "fields": {"category": None}},
        generator={"model": "models/demo-dated-generator", "max_new_tokens": 8},
        judge={"model": "models/demo-dated-judge", "max_new_tokens": 8},
    )
    res = workflow.results("dates")
    target = "results/dates/judge/demo-dated-judge/raw.parquet"
    args = ["--configfile", cfg, "--cores", "2"]

    def run(days_ahead, *extra):
        env = clean_env(PYTHONPATH=with_fake_clock(), FAKE_CLOCK_DAYS_AHEAD=str(days_ahead))
        return workflow.run(*args, target, *extra, env=env)

    before = day()
    first = run(0)
    assert "stamps today's date" in first.stderr and "generator demo-dated-generator" in first.stderr
    pinned = datetime.date.fromisoformat(json.loads((res / "chat_date.json").read_text())["date"])
    assert pinned in (before, day())  # the day the first job started: a run may cross midnight
    gen_meta = res / "generations" / "demo-dated-generator" / "q" / "0.meta.json"
    judge_meta = res / "judge" / "demo-dated-judge" / "shards" / "0-of-1.meta.json"
    assert json.loads(gen_meta.read_text())["computed_items"] == 6
    assert json.loads(judge_meta.read_text())["computed_items"] == 6

    second = run(1, "--forcerun", "generate", "judge")  # the next day
    assert f"renders it with {pinned.isoformat()} (pinned in" in second.stderr
    for path in (gen_meta, judge_meta):
        meta = json.loads(path.read_text())
        assert (meta["resumed_items"], meta["computed_items"], meta["chat_date"]) == (6, 0, pinned.isoformat()), path
    gens = pd.read_parquet(res / "generations" / "demo-dated-generator" / "q.parquet")
    raw = pd.read_parquet(res / "judge" / "demo-dated-judge" / "raw.parquet")
    for prompts in (gens["prompt_sent"], raw["judge_prompt"]):
        assert all(stamp(pinned) in p for p in prompts)
        assert not any(stamp(pinned + datetime.timedelta(days=1)) in p for p in prompts)

    # Setting chat_date reruns the jobs of models that render locally (their prompts change).
    dry = workflow.run(*args, target, "-n", "--config", "chat_date=2024-11-26")
    assert "chat_date" in dry.stdout + dry.stderr and "rule generate" in dry.stdout and "rule judge" in dry.stdout
