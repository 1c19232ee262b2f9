"""judge.parallel's rules on plain model facts, without torch: what the engine reads from a model's
config.json arrives here as a ModelFacts (tests/test_judge_parallel.py reads real configs)."""

import pytest

from genjudge.cluster.judge_layout import ModelFacts, check_tensor_possible, decide, job_choice, layout, tensor_obstacle
from genjudge.config.specs import spec_for
from genjudge.errors import InputError

GIB = 1024**3
LLAMA_70B = ModelFacts("LlamaForCausalLM", True, 64, 8, 141_107_413_248)  # bf16 weights
NO_PLAN = ModelFacts("OddForCausalLM", False, 16, 16, 10 * GIB)


def judge(**values):
    return spec_for("judge", model="some/judge", dtype="bfloat16", **values)


def never():
    raise AssertionError("the model's facts were read where the choice does not need them")


def unreadable():
    raise InputError("some/judge: config.json is neither in a local directory nor in the local cache")


def test_tensor_obstacles():
    assert tensor_obstacle(LLAMA_70B, 4, "none") is None
    assert "OddForCausalLM has no tensor-parallel plan" in tensor_obstacle(NO_PLAN, 2, "none")
    assert "quantization 4bit: bitsandbytes" in tensor_obstacle(LLAMA_70B, 2, "4bit")
    assert tensor_obstacle(LLAMA_70B, 3, "none") == "its 64 attention heads do not split evenly over 3 GPUs"
    assert tensor_obstacle(LLAMA_70B, 16, "none") == "its 8 key/value heads do not split evenly over 16 GPUs"


def test_auto_fits_one_gpu_replicas_else_tensor_else_device_map():
    lay = layout(judge(parallel="auto"), 4, LLAMA_70B, 80 * GIB)
    assert (lay.parallel, lay.jobs, lay.gpus_per_job) == ("tensor", 1, 4)
    assert "the weights (141.1 GB at bfloat16) need 2 GPUs of 80 GiB" in lay.reason
    small = ModelFacts("LlamaForCausalLM", True, 32, 8, 16 * 10**9)
    lay = layout(judge(parallel="auto", shards=2), 4, small, 80 * GIB)
    assert (lay.parallel, lay.jobs, lay.gpus_per_job) == ("replicas", 8, 1)
    big_no_plan = ModelFacts("OddForCausalLM", False, 16, 16, 200 * 10**9)
    choice, why = decide(judge(parallel="auto"), 4, big_no_plan, 80 * GIB)
    assert choice == "device_map" and "tensor parallelism is not possible (OddForCausalLM has no" in why
    # The GPUs' size unknown (SLURM without judge.gpu_memory): tensor where the model allows it.
    assert decide(judge(parallel="auto"), 4, LLAMA_70B)[0] == "tensor"
    assert decide(judge(parallel="auto"), 4, NO_PLAN)[0] == "device_map"


def test_the_facts_are_read_only_when_the_choice_needs_them():
    assert decide(judge(parallel="device_map"), 4, never) == ("device_map", "judge.parallel: device_map")
    assert decide(judge(parallel="replicas"), 4, never)[0] == "replicas"
    assert decide(judge(parallel="auto"), 1, never)[0] == "device_map"
    assert decide(judge(parallel="tensor"), 1, never)[0] == "device_map"
    assert job_choice(judge(parallel="auto"), 1, never)[0] == "device_map"
    check_tensor_possible(judge(parallel="auto"), never)


def test_a_config_that_cannot_be_read_here_leaves_the_choice_to_the_job():
    choice, why = decide(judge(parallel="auto"), 4, unreadable, 80 * GIB)
    assert choice == "device_map" and why.startswith("auto: the model's config.json cannot be read here (")
    assert decide(judge(parallel="tensor"), 4, unreadable)[0] == "tensor"  # the job checks when it loads
    check_tensor_possible(judge(parallel="tensor"), unreadable)


def test_an_impossible_explicit_tensor_stops_naming_the_model_and_why():
    with pytest.raises(InputError, match="judge some/judge: judge.parallel: tensor is impossible: quantization 8bit"):
        check_tensor_possible(judge(parallel="tensor", quantization="8bit"), LLAMA_70B)
    with pytest.raises(InputError, match="64 attention heads do not split evenly over 3 GPUs"):
        decide(judge(parallel="tensor"), 3, LLAMA_70B)
    with pytest.raises(InputError, match="no tensor-parallel plan"):
        job_choice(judge(parallel="tensor"), 2, NO_PLAN)
    assert job_choice(judge(parallel="auto"), 2, NO_PLAN) == (
        "device_map",
        "auto: OddForCausalLM has no tensor-parallel plan in the installed transformers "
        "(no base_model_tp_plan in its config)",
    )
