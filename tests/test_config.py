"""Config layering as a new user meets it: the documented config, overrides, the demo kept apart."""

import json
import re
import shutil

import pytest
import yaml
from conftest import genjudge_cli
from judges import ROOT

from genjudge import config as wfconfig

CFG70 = ROOT / "tests" / "data" / "llama-3.1-70b-config"


def readme_typical_config() -> dict:
    """The 'typical config' block of docs/configuration.md, as a user would copy it."""
    readme = (ROOT / "docs" / "configuration.md").read_text()
    block = readme[readme.index("A typical config") :]
    block = block[block.index("```yaml") + 7 :]
    return yaml.safe_load(block[: block.index("```")])


@pytest.fixture
def typical(workflow):
    """The documented config in a workflow copy, hub ids standing as local directories with config.json
    (and empty stand-ins for the tokenizer and weights files planning looks for)."""
    cfg = readme_typical_config()
    for role in ("generator", "judge"):
        stand_in = workflow.path / cfg[role]["model"]
        stand_in.mkdir(parents=True)
        shutil.copy(CFG70 / "config.json", stand_in / "config.json")
        for name in ("tokenizer.json", "model.safetensors"):
            (stand_in / name).touch()
    data = workflow.path / cfg["dataset"]["path"]
    data.parent.mkdir(parents=True, exist_ok=True)
    data.write_text(
        "".join(
            json.dumps({"question": f"What is {i} + {i}?", "answer": f"... #### {2 * i}"}) + "\n" for i in range(20)
        )
    )
    cfg["lock_dir"] = str(workflow.lock_dir)
    return workflow, cfg


def write(workflow, cfg, name):
    path = workflow.path / "config" / name
    path.write_text(yaml.safe_dump(cfg))
    return path


@pytest.mark.workflow
def test_the_readme_config_starts_from_the_defaults_not_the_demo(typical):
    workflow, cfg = typical
    out = workflow.run("-n", "--configfile", write(workflow, cfg, "typical.yaml"))
    text = out.stdout + out.stderr
    assert "config/demo" not in text  # neither the demo's template, data nor models
    assert re.search(
        r"input: results/llama8b-gsm8k/generations/Llama-3\.1-8B-Instruct/gsm8k_test\.parquet, config/templates/reference\.txt",
        text,
    )
    judge_resources = text[text.index("rule judge:") :]
    assert "mem_mb=64000" in judge_resources[: judge_resources.index("\n\n")]


@pytest.mark.workflow
def test_a_demo_template_for_a_real_judge_is_refused_with_the_reason(typical):
    workflow, cfg = typical
    cfg["judge"]["template"] = "config/demo/judge_template.txt"
    proc = workflow.run("-n", "--configfile", write(workflow, cfg, "bad.yaml"), check=False)
    assert proc.returncode != 0
    text = proc.stdout + proc.stderr
    assert "bad input: judge.template: config/demo/judge_template.txt is the demo judge's compact template" in text


@pytest.mark.workflow
def test_nested_config_overrides_are_typed_by_the_schema(typical):
    workflow, cfg = typical
    path = write(workflow, cfg, "typical.yaml")
    # Snakemake hands nested values over as strings; the schema types them.
    out = workflow.run(
        "-n", "--configfile", path, "--config", 'judge={"cascade": false, "max_new_tokens": 7}', "--quiet", "rules"
    )
    assert "judge" in out.stdout
    loaded = wfconfig.load([path], ['judge={"cascade": false, "max_new_tokens": 7}'])
    assert loaded["judge"]["cascade"] is False and loaded["judge"]["max_new_tokens"] == 7
    loaded = wfconfig.load([path], ['judge={"cascade": "true", "template": "null"}', "shards=3"])
    assert loaded["judge"]["cascade"] is True and loaded["judge"]["template"] is None and loaded["shards"] == 3


def test_required_keys_are_named_when_missing():
    with pytest.raises(Exception, match=r"run, dataset.path, generator.model, judge.model: not set"):
        wfconfig.check(wfconfig.defaults())


def test_plan_honours_config_overrides():
    out = genjudge_cli(
        "plan",
        "--role",
        "judge",
        "--config",
        f'judge={{"model": "{CFG70}", "max_new_tokens": 100}}',
        "--gpus",
        "1x80GiB",
        "--prompt-tokens",
        "512",
        cwd=ROOT,
        check=True,
    ).stdout
    assert "judge: " + str(CFG70) in out and "x 612 tokens" in out  # 512 assumed prompt + 100 new


def test_a_local_model_directory_must_hold_a_tokenizer_and_every_weight_file(tmp_path):
    from genjudge.errors import InputError
    from genjudge.models.modelref import check_model, missing_files

    model = tmp_path / "m"
    model.mkdir()
    shutil.copy(CFG70 / "config.json", model)
    with pytest.raises(InputError, match=r"judge\.model: .* has no tokenizer .*, no weights .*: the job could not"):
        check_model(str(model), "judge")
    (model / "tokenizer.json").write_text("{}")
    index = {"weight_map": {"a": "model-00001-of-00002.safetensors", "b": "model-00002-of-00002.safetensors"}}
    (model / "model.safetensors.index.json").write_text(json.dumps(index))
    (model / "model-00001-of-00002.safetensors").touch()
    assert missing_files(str(model)) == (
        "1 of the 2 weight files model.safetensors.index.json lists missing (model-00002-of-00002.safetensors)"
    )
    (model / "model-00002-of-00002.safetensors").touch()
    check_model(str(model), "judge")  # complete: no error
    assert missing_files("meta-llama/Llama-3.1-8B") is None  # a hub id: the job resolves it
