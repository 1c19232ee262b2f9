"""Memory plans from config.json alone: the public Llama-3.1-70B architecture and the demo models."""

import json
import re
from pathlib import Path

import pytest
from conftest import genjudge_cli

from genjudge.config.specs import spec_for
from genjudge.engine.memory_plan import GB, empty_model, load_config, parse_inventory_spec, plan, render
from genjudge.errors import InputError

CFG70 = str(Path(__file__).parent / "data" / "llama-3.1-70b-config")


@pytest.fixture(scope="module")
def llama70b():
    return empty_model(load_config(CFG70))


def plan70(model, gpus, quant="none"):
    return plan(
        spec_for("judge", model=CFG70, dtype="bfloat16", quantization=quant, device_map="auto"),
        parse_inventory_spec(gpus),
        8,
        4096,
        "judge",
        model=model,
    )


def test_parameter_count_and_weight_memory(llama70b):
    p = plan70(llama70b, "4x80GiB")
    assert 70.4e9 < p["parameters"] < 70.7e9
    assert 140 * GB < p["weights_bytes"]["bfloat16"] < 142 * GB
    assert 280 * GB < p["weights_bytes"]["float32"] < 284 * GB
    assert 70 * GB < p["weights_bytes"]["8bit"] < 75 * GB
    assert 35 * GB < p["weights_bytes"]["4bit"] < 45 * GB
    # KV cache: 2 (k, v) x 80 layers x 8 heads x 128 dims x 4096 tokens x 8 sequences x 2 bytes
    assert p["kv_cache_bytes"] == 2 * 80 * 8 * 128 * 4096 * 8 * 2


def test_four_80gib_gpus_hold_fp16_with_a_quarter_of_the_layers_each(llama70b):
    p = plan70(llama70b, "4x80GiB")
    assert p["fits"] and p["offloaded_to"] == []
    layers = p["device_map_layers"]
    assert sum(layers.values()) == 80 and set(layers) == {"cuda:0", "cuda:1", "cuda:2", "cuda:3"}
    assert all(15 <= n <= 25 for n in layers.values()), layers


def test_one_80gib_gpu_needs_quantization(llama70b):
    fp16 = plan70(llama70b, "1x80GiB")
    assert not fp16["fits"] and "cpu" in fp16["offloaded_to"]
    assert "8bit" in fp16["recommendation"]
    int8 = plan70(llama70b, "1x80GiB", "8bit")
    assert int8["fits"] and int8["device_map_layers"] == {"cuda:0": 80}
    assert 5 * GB < int8["headroom_bytes"] < 20 * GB  # little room for activations and KV cache
    assert "left for activations and KV cache: 1" in render(int8)
    int4 = plan70(llama70b, "1x80GiB", "4bit")
    assert int4["fits"] and int4["headroom_bytes"] > int8["headroom_bytes"] + 20 * GB


def test_four_24gib_gpus_would_offload_fp16_and_the_command_warns(tmp_path):
    (tmp_path / "c.yaml").write_text(f"judge: {{model: {CFG70}, dtype: bfloat16}}\n")
    root = Path(__file__).resolve().parents[1]
    out = genjudge_cli(
        "plan",
        "--configfile",
        tmp_path / "c.yaml",
        "--gpus",
        "4x24GiB",
        "--role",
        "judge",
        "--directory",
        root,
        check=True,
    ).stdout
    assert "weights DO NOT FIT" in out
    assert "WARNING: layers would be offloaded to cpu" in out
    assert "recommendation: quantization 8bit" in out


def test_missing_config_is_a_clear_error(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path))
    with pytest.raises(InputError, match="neither in a local directory nor in the local Hugging Face cache"):
        load_config("no-such-org/no-such-model")


def test_demo_model_plan_matches_the_loaded_model(tmp_path):
    from genjudge.demo.models import build_model
    from genjudge.engine.loading import load_causal_lm

    corpus = tmp_path / "c.txt"
    corpus.write_text("What is 2 + 3? 5\n")
    path = build_model(tmp_path / "m", [corpus])
    spec = spec_for("generator", model=str(path))
    p = plan(spec, [], 4, 64, "generator")
    model, placement = load_causal_lm(spec)
    assert p["parameters"] == sum(x.numel() for x in model.parameters()) == sum(placement.values())
    assert p["fits"] is None and "CPU" in render(p)
    gpu = plan(spec, parse_inventory_spec("2x1GiB"), 4, 64, "generator")
    assert gpu["fits"] and sum(gpu["device_map_params"].values()) == p["parameters"]


def plan_config(tmp_path, judge: dict):
    """A config of 100 long GSM8K-style questions, the 70B config as generator and judge (`judge` on top)."""
    data = tmp_path / "gsm.jsonl"
    data.write_text(
        "".join(f'{{"question": "{"How many apples? " * 20}{i}", "answer": "#### {i}"}}\n' for i in range(100))
    )
    cfg = {
        "run": "p",
        "dataset": {"path": str(data), "fields": {"id": None, "category": None}},
        "generator": {"model": CFG70, "max_new_tokens": 256},
        "judge": {"model": CFG70, **judge},
    }
    (tmp_path / "c.yaml").write_text(json.dumps(cfg))
    return tmp_path / "c.yaml"


def plan_cli(tmp_path, judge: dict, gpus="4x80GiB"):
    plan_config(tmp_path, judge)
    return genjudge_cli(
        "plan", "--configfile", tmp_path / "c.yaml", "--gpus", gpus, "--role", "judge", check=True
    ).stdout


def test_plan_recommends_one_replica_per_gpu_for_a_judge_that_fits_one(tmp_path):
    out = plan_cli(tmp_path, {"quantization": "4bit"})
    assert "jobs: 1 x 4 GPU(s) each" in out
    assert "recommendation: the judge fits one GPU at 4bit" in out and "set judge.parallel: replicas" in out
    # batch_size auto: the chooser the jobs call on their probes, on the memory plan's and time model's lines.
    assert re.search(r"batch: \d+ \(batch_size auto: batch \d+, decided by (memory|speed|requests): memory fits", out)
    assert re.search(r"resources\.judge\.mem_mb: about \d+ .*an estimate", out)
    assert re.search(r"resources\.judge\.runtime: about \d+ min .*an estimate", out)
    # The KV cache is sized for the real judge prompt: the template's text with the question, the
    # reference and a full answer in its placeholders ({question}, {reference}, {candidate}).
    template = (Path(__file__).resolve().parents[1] / "config/templates/reference.txt").read_text()
    text = len(template) - len("{question}{reference}{candidate}")
    longest = len("How many apples? " * 20 + "99") + len("#### 99")
    expected = -(-(text + longest) // 4) + 256
    assert f"prompt: {expected} tokens (longest prompt: " in out and "the template with the question" in out
    assert f"x {expected + 512} tokens" in out


def test_plan_gives_each_judge_shard_its_share_of_the_gpus(tmp_path):
    out = plan_cli(tmp_path, {"quantization": "4bit", "shards": 4})
    assert "jobs: 4 x 1 GPU(s) each" in out and "on 1 GPU(s) of 80 GiB" in out


def test_quantized_layers_that_would_go_to_cpu_are_refused_before_loading(llama70b):
    from genjudge.engine.memory_plan import refuse_quantized_offload

    p = plan70(llama70b, "1x24GiB", "4bit")
    assert p["offloaded_to"] and "4bit weights of bitsandbytes cannot be offloaded to cpu" in p["quantized_offload"]
    assert "!!! ERROR: 4bit weights of bitsandbytes cannot be offloaded" in render(p)
    with pytest.raises(
        InputError, match="cannot be offloaded to cpu: the job would fail while loading; 2 GPUs of this size at 4bit"
    ):
        refuse_quantized_offload(p)
    refuse_quantized_offload(plan70(llama70b, "1x80GiB", "4bit"))  # fits: no error


FACTS_PROBE = """
import json, sys
from genjudge.config.specs import spec_for
from genjudge.engine.judge_parallel import model_facts
f = model_facts(spec_for("judge", model=sys.argv[1], dtype="bfloat16"))
print(json.dumps({"facts": f.__dict__, "torch": "torch" in sys.modules}))
"""


def test_a_models_facts_are_remembered_per_machine_and_read_back_without_torch(tmp_path, monkeypatch):
    """Planning a tensor or auto judge builds the model on the meta device (torch and transformers:
    about 5 CPU-s a process, in every Snakemake process that plans); the facts are remembered by the
    config's bytes, the precision and the library versions, and a later process reads them without
    importing torch. A changed config, another precision or a damaged file computes them again."""
    import dataclasses
    import os
    import shutil
    import subprocess
    import sys

    from genjudge.engine.judge_parallel import model_facts

    monkeypatch.setenv("GENJUDGE_MACHINE_CACHE", str(tmp_path / "cache"))
    model = tmp_path / "cfg70"
    shutil.copytree(CFG70, model)
    stored = tmp_path / "cache" / "model_facts"

    def facts(quant="none"):
        return dataclasses.asdict(
            model_facts(spec_for("judge", model=str(model), dtype="bfloat16", quantization=quant))
        )

    first = facts()
    assert first["model_class"] == "LlamaForCausalLM" and first["has_tp_plan"]
    assert (first["attention_heads"], first["kv_heads"]) == (64, 8)
    assert first["weight_bytes"] == 141_107_413_248  # bf16, as the memory plan weighs it
    (path,) = stored.glob("*.json")
    # Another process reads them back, without torch.
    out = subprocess.run(
        [sys.executable, "-c", FACTS_PROBE, str(model)],
        env=dict(os.environ),
        capture_output=True,
        text=True,
        check=True,
    )
    again = json.loads(out.stdout.strip().splitlines()[-1])
    assert again == {"facts": first, "torch": False}

    four = facts("4bit")
    assert four["weight_bytes"] < first["weight_bytes"] / 3 and len(list(stored.glob("*.json"))) == 2

    good = json.loads(path.read_text())
    bad_type = {**good, "facts": {**good["facts"], "weight_bytes": "141 GB"}}
    for damaged in ("{not json", "null", "[]", json.dumps(bad_type), json.dumps({**good, "facts": None})):
        path.write_text(damaged)  # computed and written again
        assert facts() == first and json.loads(path.read_text()) == good, damaged

    config = json.loads((model / "config.json").read_text())
    config["num_key_value_heads"] = 16
    (model / "config.json").write_text(json.dumps(config))
    changed = facts()
    assert changed["kv_heads"] == 16 and changed["weight_bytes"] > first["weight_bytes"]
    assert len(list(stored.glob("*.json"))) == 3
