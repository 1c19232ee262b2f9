"""The worked examples in config/examples/ plan against small fixtures of the same shape."""

import json
import re
import shutil

import pytest
import yaml
from judges import ROOT

pytestmark = pytest.mark.workflow
CFG70 = ROOT / "tests" / "data" / "llama-3.1-70b-config"


def stand_in_models(workflow, cfg):
    """Hub ids as local directories holding only config.json (nothing is downloaded)."""
    names = [cfg["judge"]["model"]] + [g["model"] for g in cfg.get("generators", {}).values()]
    for name in names:
        (workflow.path / name).mkdir(parents=True, exist_ok=True)
        shutil.copy(CFG70 / "config.json", workflow.path / name / "config.json")


def test_gsm8k_example_plans_with_extraction_and_one_judge_load(workflow):
    cfg = yaml.safe_load((ROOT / "config/examples/gsm8k.yaml").read_text())
    stand_in_models(workflow, cfg)
    data = workflow.path / "gsm8k_test.jsonl"  # the same fields as openai/gsm8k's test split
    data.write_text(
        "".join(
            json.dumps(
                {
                    "question": f"Tom has {i} apples and buys {i}. How many?",
                    "answer": f"He has {i} + {i} = {2 * i}.\n#### {2 * i}",
                }
            )
            + "\n"
            for i in range(40)
        )
    )
    cfg["dataset"].update(path=str(data), format="auto")
    cfg["lock_dir"] = str(workflow.lock_dir)
    path = workflow.path / "config" / "gsm8k-fixture.yaml"
    path.write_text(yaml.safe_dump(cfg))
    out = workflow.run("-n", "--configfile", path, "--quiet", "rules").stdout
    jobs = dict(re.findall(r"^(\w+)\s+(\d+)$", out, re.M))
    assert jobs["generate"] == "16" and jobs["judge"] == "1" and jobs["merge"] == "2"
