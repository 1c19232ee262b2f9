"""The time plan of a new user's experiment, term by term against a hand computation: two 8B
generators on GSM8K and MT-bench, a 70B judge in 4-bit, 4 x A100-80GB (stand-in config.jsons of
Llama-3.1-8B and -70B, datasets of the same shape and size; nothing is downloaded or loaded)."""

import json
import math
import re
import sys
from pathlib import Path

import pytest
import yaml

from genjudge import config as wfconfig
from genjudge.planning.schedule import Job, Pool, schedule
from genjudge.planning.time_model import GB, GIB, gpu_type

ROOT = Path(__file__).resolve().parents[1]
MT = ROOT / "config" / "examples" / "templates" / "mt_bench"
LLAMA_70B = json.loads((ROOT / "tests" / "data" / "llama-3.1-70b-config" / "config.json").read_text())
# Llama-3.1-8B's config.json differs from 70B's in its dimensions only.
LLAMA_8B = {
    **LLAMA_70B,
    "hidden_size": 4096,
    "intermediate_size": 14336,
    "num_hidden_layers": 32,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
}
CATEGORIES = ["writing", "roleplay", "reasoning", "math", "coding", "extraction", "stem", "humanities"]
REFERENCED = {"math", "reasoning", "coding"}
Q_GSM, REF_GSM = 240, 300  # characters of every GSM8K question and reference
Q1, Q2, REF_MT = 400, 200, 300  # MT-bench: turn 1 and 2 questions, each turn's reference


@pytest.fixture(scope="module")
def scenario(tmp_path_factory):
    from genjudge.stages.plan import make_plan

    d = tmp_path_factory.mktemp("scenario")
    for name, cfg in (("Llama-3.1-8B-Instruct", LLAMA_8B), ("Llama-3.1-70B-Instruct", LLAMA_70B)):
        (d / name).mkdir()
        (d / name / "config.json").write_text(json.dumps(cfg))
    with open(d / "gsm8k.jsonl", "w") as fh:  # the test split's 1,319 items
        for i in range(1319):
            fh.write(json.dumps({"question": f"{i:04d}".ljust(Q_GSM, "q"), "answer": "a" * (REF_GSM - 7) + "#### 72"}))
            fh.write("\n")
    with open(d / "mt.jsonl", "w") as fh:  # 80 two-turn questions, references for 3 of 8 categories
        for i in range(80):
            row = {"question_id": 81 + i, "category": CATEGORIES[i % 8], "turns": ["a" * Q1, "b" * Q2]}
            if CATEGORIES[i % 8] in REFERENCED:
                row["reference"] = ["r" * REF_MT, "s" * REF_MT]
            fh.write(json.dumps(row) + "\n")
    mt_single = yaml.safe_load((ROOT / "config" / "examples" / "mt_bench_single.yaml").read_text())["judge"]
    cfg = {
        "run": "compare",
        "shards": 8,
        "datasets": {
            "gsm8k": {"path": str(d / "gsm8k.jsonl"), "fields": {"id": None, "prompt": "question", "category": None}},
            "mt-bench": {
                "path": str(d / "mt.jsonl"),
                "fields": {"id": "question_id", "prompt": "turns", "reference": "reference", "category": "category"},
                "shards": 4,
            },
        },
        "generator": {"dtype": "bfloat16", "max_new_tokens": 512, "batch_size": 32},
        "generators": {
            "llama8b": {"model": str(d / "Llama-3.1-8B-Instruct")},
            "other8b": {"model": str(d / "Llama-3.1-8B-Instruct")},
        },
        # FastChat's MT-bench judge: its templates by category and turn, a rating after an explanation.
        "judge": {
            **{k: mt_single[k] for k in ("mode", "template", "templates", "verdict_pattern")},
            "model": str(d / "Llama-3.1-70B-Instruct"),
            "quantization": "4bit",
            "parallel": "auto",
            "batch_size": 64,
            "max_new_tokens": 512,
        },
    }
    config = wfconfig.validate(json.loads(json.dumps(cfg)), ROOT)
    lines, plans = make_plan(config, "4xA100-80GB", workflow_dir=ROOT)
    return {"raw": cfg, "config": config, "lines": lines, "plans": {(p["role"], p["name"]): p for p in plans}}


# --- the hand computation: every figure from the config.jsons, the datasets and the datasheet ---

A100_BW, A100_FLOPS = 2039e9 * 0.7, 312e12 * 0.5  # datasheet x the stated efficiencies
# The GPU constants measured on an H100 (planning/gpu_constants.json), used for an A100 that has none:
# transformers' eager step costs 0.76 ms a layer on the H100, scaled by the H100's datasheet bandwidth over
# the A100's (3350 / 2039 GB/s); its KV cache is moved 18 times a step, a job's set-up takes 11.2 s (the
# host's), and a 4-bit step is 2.25x (batch 1) to 2.3x (batch 64) the bf16 step.
STEP_PER_LAYER, KV_PASSES, SETUP = 0.76e-3 * 3350 / 2039, 18, 11.2


def four_bit_factor(rows: float) -> float:
    return 2.25 + (2.3 - 2.25) * (min(rows, 64) - 1) / 63


def llama_parameters(c) -> tuple[int, int]:
    """(all parameters, those bitsandbytes quantizes: the decoder layers' Linear weights)."""
    h, inter, layers, heads, kv = (
        c["hidden_size"],
        c["intermediate_size"],
        c["num_hidden_layers"],
        c["num_attention_heads"],
        c["num_key_value_heads"],
    )
    head = h // heads
    linear = h * h * 2 + h * kv * head * 2 + 3 * h * inter  # q, o; k, v; gate, up, down
    embeddings = 2 * c["vocab_size"] * h  # input and output, not tied
    norms = layers * 2 * h + h
    return embeddings + layers * linear + norms, layers * linear


def template_chars(name: str) -> tuple[int, list[str]]:
    text = (MT / name).read_text()
    names = re.findall(r"\{(\w+)\}", text)
    return len(text) - sum(len(n) + 2 for n in names), names


def test_the_models_numbers_match_the_architecture(scenario):
    p8 = scenario["plans"][("generator", "llama8b")]
    p70 = scenario["plans"][("judge", "Llama-3.1-70B-Instruct")]
    n8, _ = llama_parameters(LLAMA_8B)
    n70, q70 = llama_parameters(LLAMA_70B)
    assert (p8["parameters"], p70["parameters"]) == (n8, n70) == (8_030_261_248, 70_553_706_496)
    assert p70["quantized_parameters"] == q70
    # 4-bit as bitsandbytes stores it: 4 bits a weight, its absmax double-quantized (8 bits per 64
    # weights, one fp32 per 256 blocks), the embeddings, output head and norms left in bf16.
    four_bit = q70 * (0.5 + 1 / 64 + 4 / (64 * 256)) + (n70 - q70) * 2
    assert abs(p70["weights_bytes"]["4bit"] - four_bit) < 1000  # the rotary buffers, 256 bytes
    assert round(p70["weights_bytes"]["4bit"] / GB, 1) == 39.5
    assert p8["weights_bytes"]["bfloat16"] == pytest.approx(2 * n8, rel=1e-6)
    # K and V of every layer, bf16: 2 x layers x kv heads x head size x 2 bytes.
    assert p70["kv_bytes_per_token"] == 2 * 80 * 8 * 128 * 2 == 327_680
    assert p8["kv_bytes_per_token"] == 2 * 32 * 8 * 128 * 2


def test_the_judge_jobs_terms_match_the_hand_computation(scenario):
    p = scenario["plans"][("judge", "Llama-3.1-70B-Instruct")]
    n70, q70 = llama_parameters(LLAMA_70B)
    w = p["weights_bytes"]["4bit"]
    assert p["parallel"]["choice"] == "replicas"  # 39.5 GB fits one 80 GiB GPU: 4 jobs of one GPU
    jobs = 4
    answer = 512  # each answer counted at the generators' max_new_tokens
    # Requests per (item, turn, sample), both generators: GSM8K 1319 x 1 turn, MT-bench 80 x 2 turns.
    single, names_single = template_chars("single-v1.txt")  # {question} {answer}
    math1, _ = template_chars("single-math-v1.txt")  # {question} {ref_answer_1} {answer}
    multi, names_multi = template_chars("single-v1-multi-turn.txt")  # q1 a1 q2 a2
    math2, names_math2 = template_chars("single-math-v1-multi-turn.txt")  # q1 r1 q2 r2 q1 a1 q2 a2
    assert names_single == ["question", "answer"] and names_multi == [
        "question_1",
        "answer_1",
        "question_2",
        "answer_2",
    ]
    assert sorted(names_math2) == sorted(["question_1", "ref_answer_1", "question_2", "ref_answer_2"] * 1 + names_multi)
    groups = [  # (requests, prompt tokens each)
        (2 * 1319, (single + Q_GSM) / 4 + answer),  # GSM8K has no category: the default template
        (2 * 30, (math1 + Q1 + REF_MT) / 4 + answer),  # turn 1, math/reasoning/coding (30 of 80)
        (2 * 50, (single + Q1) / 4 + answer),
        (2 * 30, (math2 + 2 * Q1 + 2 * Q2 + 2 * REF_MT) / 4 + 2 * answer),  # turn 2 holds both answers
        (2 * 50, (multi + Q1 + Q2) / 4 + 2 * answer),
    ]
    assert sum(n for n, _ in groups) == 2958
    per_job = [(n / jobs, tokens) for n, tokens in groups]
    prompt_tokens = sum(n * t for n, t in per_job)
    # The plan batches per dataset and turn: GSM8K 659.5 per job, MT-bench 40 per turn; batches of 64.
    batches = math.ceil(2 * 1319 / jobs / 64) + 1 + 1
    assert batches == 13
    step = 80 * STEP_PER_LAYER
    bf16 = p["weights_bytes"]["bfloat16"]  # a bitsandbytes step is the bf16 step times its measured factor
    steps = batches * (512 - 1)  # the first new token comes from the prefill
    hand = {
        "start-up": SETUP,
        "load": 1.0 + w / 1e9,
        "prefill": 2 * n70 * prompt_tokens / A100_FLOPS + batches * step,
        "decode weights": steps * bf16 / A100_BW,
        "decode KV cache": KV_PASSES * sum(n * 327_680 * (511 * t + 511 * 512 / 2) for n, t in per_job) / A100_BW,
        "decode step overhead": steps * step,
    }
    factor = four_bit_factor(sum(n for n, _ in per_job) / batches)
    hand["quantization"] = (factor - 1) * sum(v for k, v in hand.items() if k.startswith(("prefill", "decode")))
    terms = p["time"]["each job"]["terms"]
    assert set(terms) == set(hand)
    for name, seconds in hand.items():
        assert terms[name] == pytest.approx(seconds, rel=1e-3, abs=0.01), name
    # Decoding is memory bound here: the FLOPs of the steps take less than their bytes.
    assert 2 * n70 * sum(n for n, _ in per_job) * 511 / A100_FLOPS < (steps * bf16) / A100_BW
    assert p["time"]["each job"]["seconds"] == pytest.approx(sum(hand.values()), abs=0.1)


def test_a_generation_jobs_terms_match_the_hand_computation(scenario):
    p = scenario["plans"][("generator", "llama8b")]
    n8, _ = llama_parameters(LLAMA_8B)
    # bf16: 2 bytes a parameter, and the rotary embedding's two buffers of 64 (256 bytes).
    assert p["weights_bytes"]["bfloat16"] == 2 * n8 + 256
    n = 1319 / 8  # a GSM8K shard
    batches = math.ceil(n / 32)
    step = 32 * STEP_PER_LAYER
    hand = {
        "load": 1.0 + p["weights_bytes"]["bfloat16"] / 1e9,
        "prefill": 2 * n8 * n * Q_GSM / 4 / A100_FLOPS + batches * step,
        "decode weights": batches * 511 * p["weights_bytes"]["bfloat16"] / A100_BW,
        "decode KV cache": KV_PASSES * n * 131_072 * (511 * Q_GSM / 4 + 511 * 512 / 2) / A100_BW,
        "decode step overhead": batches * 511 * step,
    }
    terms = p["time"]["gsm8k"]["terms"]
    for name, seconds in hand.items():
        assert terms[name] == pytest.approx(seconds, rel=1e-3), name
    # MT-bench's turn 2 is sent with turn 1 and the generator's own answer to it.
    mt = p["time"]["mt-bench"]["terms"]
    tokens = 20 * Q1 / 4 + 20 * ((Q1 + Q2) / 4 + 512)  # a shard: 20 items, 2 turns
    assert mt["prefill"] == pytest.approx(2 * n8 * tokens / A100_FLOPS + 2 * step, rel=1e-3)


def test_the_plan_prints_the_terms_the_totals_and_the_critical_path(scenario):
    out = "\n".join(scenario["lines"])
    assert "GPUs of the generators and judges (hypothetical): 4 x NVIDIA A100-SXM4-80GB, 80 GiB" in out
    assert "requests (item, turn, sample): 2,958, 740 per job" in out
    assert re.search(r"decode weights: 6.64 k steps x 141.1 GB / ", out)  # the bf16 step, then x the 4-bit factor
    assert re.search(r"quantization: 4bit \(bitsandbytes\): the bf16 prefill and decode above x 2\.2\d - 1", out)
    assert (
        "step_overhead_per_layer: never measured on NVIDIA A100-SXM4-80GB; the figure of NVIDIA H100 80GB HBM3 x1.64 "
        "(scaled by the two GPUs' datasheet memory bandwidth" in out
    )
    # No run measured these models on these GPUs: the runtime's margin says what it assumed
    assert re.search(
        r"resources\.judge\.runtime: about \d+ min \(the longest job's [\d.]+ min x1\.5 x 1\.5 per assumed kind "
        r"of figure = x5\.06; it rests on 3 assumed: compute: .*; load: 1 GB/s read rate assumed \(plan\.load_gb_per_s\); "
        r"engine constants never measured on this device \(kv_passes, quantization_factor, step_overhead_per_layer: "
        r"see constants\)",
        out,
    ), out
    assert "2,039 GB/s x 0.7" in out and "312.0 TFLOP/s x 0.5" in out
    assert re.search(r"wall-clock of the whole run \(4 x NVIDIA A100-SXM4-80GB, --resources gpu=4\): about \d", out)
    # 24 generation jobs share 4 GPUs, then the 4 judge replicas: the path ends in a judge job.
    path = re.search(r"critical path: (.*)", out).group(1).split(" -> ")
    assert path[0].startswith("generate ") and path[-1].startswith("judge Llama-3.1-70B-Instruct/")
    assert re.search(r"resources\.judge\.runtime: about \d+ min \(the longest job's", out)


def test_batch_size_changes_the_time_as_well_as_the_kv_cache(scenario):
    from genjudge.stages.plan import make_plan

    _, plans = make_plan(scenario["config"], "4xA100-80GB", roles=["judge"], batch_size=1, workflow_dir=ROOT)
    one = plans[0]
    assert one["batch_size"] == 1 and one["kv_cache_bytes"] == 327_680 * one["seq_len"]
    big = scenario["plans"][("judge", "Llama-3.1-70B-Instruct")]["time"]["each job"]
    small = one["time"]["each job"]
    # 740 batches of one: 740 x 511 steps, each the bf16 step times the 4-bit factor at batch 1.
    assert small["terms"]["decode weights"] == pytest.approx(
        740 * 511 * one["weights_bytes"]["bfloat16"] / A100_BW, rel=1e-3
    )
    assert small["seconds"] > 3 * big["seconds"]


def test_the_gpu_table_knows_nvidia_smi_names_and_refuses_to_guess():
    assert gpu_type("NVIDIA A100-SXM4-80GB").bandwidth == 2039e9
    assert gpu_type("NVIDIA A100-SXM4-40GB").memory_bytes == 40 * GIB
    assert gpu_type("NVIDIA A100 80GB PCIe").name == "NVIDIA A100 80GB PCIe"
    assert gpu_type("NVIDIA H100 80GB HBM3").flops == 989e12
    assert gpu_type("NVIDIA H100 PCIe").bandwidth == 2000e9
    assert gpu_type("NVIDIA H200").memory_bytes == 141 * GIB
    assert gpu_type("NVIDIA L40S").name == "NVIDIA L40S" and gpu_type("NVIDIA L4").name == "NVIDIA L4"
    assert gpu_type("NVIDIA GeForce RTX 4090").bandwidth == 1008e9
    assert gpu_type("Tesla V100-SXM2-32GB").memory_bytes == 32 * GIB
    assert gpu_type("NVIDIA RTX A6000").name == "NVIDIA RTX A6000" and gpu_type("NVIDIA A10").bandwidth == 600e9
    assert gpu_type("a100") is None  # 40 or 80 GB: the plan asks rather than guesses
    assert gpu_type("NVIDIA A10G") is None  # not an A10's figures


def test_the_schedule_places_jobs_on_free_gpus_and_names_the_critical_path():
    jobs = [
        Job("g0", "p", 1, 10.0),
        Job("g1", "p", 1, 10.0),
        Job("g2", "p", 1, 4.0),
        Job("big", "p", 2, 5.0),  # waits for two free GPUs
        Job("judge", "p", 2, 20.0, after=["g0", "g1", "g2"]),
    ]
    s = schedule(jobs, {"p": Pool("p", [2])})
    start = {n: (p.start, p.end) for n, p in s.placed.items()}
    assert start == {"g0": (0, 10), "g1": (0, 10), "g2": (10, 14), "big": (14, 19), "judge": (19, 39)}
    assert s.total == 39
    # g0 and g1 end together; the later one in the list is the one that freed the GPU.
    assert [p.job.name for p in s.critical_path()] == ["g1", "g2", "big", "judge"]
    assert [p.why for p in s.critical_path()] == ["", "GPUs", "GPUs", "GPUs"]
    # On two nodes of one GPU a 2-GPU job cannot run: it gets a whole node, and the plan says so.
    s = schedule([Job("two", "p", 2, 1.0)], {"p": Pool("p", [1, 1])})
    assert s.total == 1 and "more than a node has (1)" in s.notes[0]


def test_on_slurm_the_plan_lays_the_judge_out_as_the_run_will(scenario):
    """On SLURM the run knows a GPU's size only from judge.gpu_memory: without it `parallel: auto`
    spreads the 4-bit judge over a node (one job), and the plan says so, times it so, and says
    what to set; the sbatch preview agrees."""
    from genjudge.config.job_settings import ModelJobs
    from genjudge.stages.plan import make_plan
    from genjudge.stages.plan_slurm import sbatch_preview

    config = scenario["config"]
    lines, plans = make_plan(config, "4xA100-80GB", roles=["judge"], nodes=["1"], workflow_dir=ROOT)
    out = "\n".join(lines)
    assert (
        plans[0]["parallel"]["choice"] == "device_map" and "requests (item, turn, sample): 2,958, 2,958 per job" in out
    )
    assert "recommendation: set judge.gpu_memory: 80GiB and judge.parallel: auto chooses replicas (4 job(s)" in out
    assert "judge (Llama-3.1-70B-Instruct, 1 job(s)): sbatch" in "\n".join(
        sbatch_preview(ModelJobs.from_config(config))
    )
    raw = json.loads(json.dumps(scenario["raw"]))
    raw["judge"]["gpu_memory"] = "80GiB"
    known = wfconfig.validate(raw, ROOT)
    lines, plans = make_plan(known, "4xA100-80GB", roles=["judge"], nodes=["1"], workflow_dir=ROOT)
    assert plans[0]["parallel"]["choice"] == "replicas" and "740 per job" in "\n".join(lines)
    assert "judge (Llama-3.1-70B-Instruct, 4 job(s)): sbatch" in "\n".join(sbatch_preview(ModelJobs.from_config(known)))


def test_each_role_gets_its_own_gpus_and_nodes():
    from genjudge.errors import InputError
    from genjudge.stages.plan import gpus_by_role, nodes_by_role

    config = wfconfig.defaults(plan={"gpus": {"judge": "4xA100-80GB"}})
    assert gpus_by_role(config, None) == {"generator": None, "judge": "4xA100-80GB"}
    assert gpus_by_role(config, ["generator=8xL4"]) == {"generator": "8xL4", "judge": "4xA100-80GB"}
    assert gpus_by_role(config, ["2xH100", "judge=8xH200"]) == {"generator": "2xH100", "judge": "8xH200"}
    with pytest.raises(InputError, match="--gpus gen=8xL4: the role is generator or judge, not 'gen'"):
        gpus_by_role(config, ["gen=8xL4"])
    assert nodes_by_role(["2"]) == {"generator": 2, "judge": 2}
    assert nodes_by_role(["generator=4", "judge=1"]) == {"generator": 4, "judge": 1}
    with pytest.raises(InputError, match="--nodes: give a count for both roles"):
        nodes_by_role(["judge=1"])


def test_a_vllm_generator_is_planned_with_vllms_terms_and_compared_with_transformers(scenario):
    from genjudge.stages.plan import make_plan

    cfg = json.loads(json.dumps(scenario["raw"]))
    cfg["generator"]["engine"] = "vllm"
    cfg["generator"]["batch_size"] = "auto"
    config = wfconfig.validate(cfg, ROOT)
    lines, plans = make_plan(config, "4xA100-80GB", roles=["generator"], workflow_dir=ROOT)
    p = {(q["role"], q["name"]): q for q in plans}[("generator", "llama8b")]
    w = p["weights_bytes"]["bfloat16"]
    # vLLM's batch: what its KV cache holds of the longest request (0.9 of the GPU, less the weights
    # and ~5% for activations), up to its 256 sequences.
    fits = int((80 * GIB * 0.9 - w * 1.05) // (131_072 * p["seq_len"]))
    assert p["batch_size"] == min(256, fits)
    n = 1319 / 8
    batches = math.ceil(n / p["batch_size"])
    terms = p["time"]["gsm8k"]["terms"]
    assert terms["start-up"] == 40.0  # importing vLLM, profiling, KV cache, CUDA graphs
    # Paged attention reads each step's KV cache once, in place (transformers: three passes); with one
    # batch of all 165 sequences the step's FLOPs outweigh its bytes: decoding turns compute bound.
    n8, _ = llama_parameters(LLAMA_8B)
    kv = n * 131_072 * (511 * Q_GSM / 4 + 511 * 512 / 2)
    memory = (batches * 511 * w + kv) / A100_BW
    compute = 2 * n8 * n * 511 / A100_FLOPS
    assert compute > memory and batches == 1
    assert terms["decode (compute bound)"] == pytest.approx(compute, rel=1e-3)
    assert terms["decode step overhead"] == pytest.approx(batches * 511 * (0.3e-3 + 32 * 0.01e-3), rel=1e-3)
    out = "\n".join(lines)
    # vLLM's own terms only: no accelerate device map; its constants said to be assumed on GPUs.
    gen = out[out.index("generator: ") : out.index("wall-clock")]
    assert "device map" not in gen and "torchrun" not in gen
    assert "vLLM's start-up and per-step figures: never measured on a GPU" in out
    # The advice compares both engines over shard counts on the generators' GPUs.
    advice = out[out.index("advice (") :]
    assert re.search(r"engine vllm, shards \d+: about", advice) and re.search(
        r"engine transformers, shards \d+", advice
    )


def test_the_check_against_a_run_says_when_fixed_costs_dominate_and_the_ratios_mean_little():
    from genjudge.planning import calibration

    def job(load, compute, fixed_load, fixed_compute):
        predicted = {"load": load, "prefill": compute / 4, "decode": compute * 3 / 4, "compute": compute}
        return calibration.JobCheck(
            "generate g/d/0",
            "generator",
            "m",
            "this CPU",
            64,
            16,
            predicted,
            {k: 10 * v for k, v in predicted.items()},
            1e6,
            None,
            {"load": fixed_load, "compute": fixed_compute},
        )

    # The demo's size: 3 s of a 3.01 s load and 95% of the compute are the engine's fixed costs.
    tiny = calibration.summary([job(3.01, 0.2, 3.0, 0.19)])
    assert tiny["fixed_share"] == {"load": pytest.approx(0.997, abs=1e-3), "compute": pytest.approx(0.95)}
    text = calibration.fixed_costs_text(tiny)
    assert text.startswith("Fixed costs dominate these jobs: they are load 100% and compute 95% of the predicted")
    # An 8B model's jobs: reading 16 GB and the decoding steps' traffic are most of it.
    real = calibration.summary([job(45.0, 600.0, 5.0, 200.0)])
    assert real["fixed_share"]["compute"] == pytest.approx(0.333, abs=1e-3)
    assert calibration.fixed_costs_text(real) is None


def test_this_cpu_is_measured_once_per_machine_and_read_back_without_torch(tmp_path):
    """The report and every plan on a machine use the same CPU figures: the first measurement is kept
    under the machine cache, and a later process reads it without importing torch or transformers;
    another thread count is another measurement."""
    import os
    import subprocess

    env = {**os.environ, "GENJUDGE_MACHINE_CACHE": str(tmp_path)}
    probe = (
        "import json, sys\n"
        "from genjudge.engine.devices import measure_cpu\n"
        "d = measure_cpu(int(sys.argv[1]))\n"
        "print(json.dumps([d.name, d.bandwidth, d.flops, list(d.step_overhead), 'torch' in sys.modules]))\n"
    )

    def measured(threads):
        out = subprocess.run([sys.executable, "-c", probe, str(threads)], env=env, capture_output=True, text=True)
        assert out.returncode == 0, out.stderr[-2000:]
        return json.loads(out.stdout.splitlines()[-1])

    first = measured(1)
    assert first[-1] is True and first[1] > 0 and first[2] > 0 and min(first[3]) >= 0
    stored = list((tmp_path / "cpu").glob("*.json"))
    assert len(stored) == 1 and json.loads(stored[0].read_text())["key"]["threads"] == 1
    again = measured(1)
    assert again[:-1] == first[:-1] and again[-1] is False  # read back, torch never imported
    # A stored file whose key does not match this machine is measured over, not trusted.
    data = json.loads(stored[0].read_text())
    data["key"]["host"] = "another-machine"
    data["device"]["bandwidth"] = 1.0
    stored[0].write_text(json.dumps(data))
    assert measured(1)[1] != 1.0


def test_the_suite_measures_into_a_machine_cache_of_its_own_not_the_users(monkeypatch):
    """The suite's processes (here one a test starts, as Snakemake's jobs are) keep what they measure in the
    run's machine cache (tests/conftest.py): figures taken while the suite loads the cores never reach
    the user's ~/.cache/genjudge, and a warm machine takes the paths a fresh one takes."""
    import os
    import subprocess

    from conftest import clean_env

    from genjudge.engine.devices import machine_cache_dir

    run_cache = os.environ.get("GENJUDGE_MACHINE_CACHE")
    if os.environ.get("GENJUDGE_TEST_MACHINE_CACHE") != run_cache:
        pytest.skip(f"GENJUDGE_MACHINE_CACHE={run_cache} was set before the run: the suite uses it as it is")
    probe = "from genjudge.engine.devices import machine_cache_dir; print(machine_cache_dir())"
    out = subprocess.run([sys.executable, "-c", probe], env=clean_env(), capture_output=True, text=True, check=True)
    monkeypatch.delenv("GENJUDGE_MACHINE_CACHE")
    users = machine_cache_dir()  # where it would be without the suite's
    seen = Path(out.stdout.strip())
    assert seen == Path(run_cache) and seen.is_dir() and seen.resolve() != users.resolve()


# --- what a plan does not know ---------------------------------------------------------------------


def test_a_gpu_without_measured_constants_has_its_step_figure_scaled_by_its_datasheet_and_says_so():
    from functools import partial

    from genjudge.planning import gpu_constants
    from genjudge.planning.hardware import datasheet_scale, same_gpu

    lookup = partial(gpu_constants.lookup, scale=datasheet_scale)  # as the engines' time model looks figures up
    h100, a100 = "NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-80GB"
    mine = lookup("step_overhead_per_layer", h100, same=same_gpu, engine="transformers", mode="eager")
    other = lookup("step_overhead_per_layer", a100, same=same_gpu, engine="transformers", mode="eager")
    assert mine[0].exact and not other[0].exact
    assert other[0].value == pytest.approx(mine[0].value * 3350 / 2039)  # H100's bandwidth over the A100's
    assert "x1.64 (scaled by the two GPUs' datasheet memory bandwidth" in other[0].note(a100)
    # the host's seconds and the ratios carry over as they are, and a faster GPU keeps the measured figure
    (setup,) = lookup("setup_seconds", a100, same=same_gpu, engine="transformers")
    assert setup.value == setup.constant.value and "host-side work, not scaled" in setup.note(a100)
    assert all(q.scale == 1 for q in lookup("quantization_factor", a100, same=same_gpu, engine="transformers"))
    assert datasheet_scale(h100, "NVIDIA B200") == 1.0


def test_a_calibration_says_what_it_replaced_and_what_not():
    from genjudge.planning.calibration import RunCalibration
    from genjudge.planning.hardware import Calibration

    cal = RunCalibration("results/pilot", jobs=3)
    cal.by_model[("models/small", "generator")] = Calibration(source="results/pilot", note="load 2.0 s per job")
    first, second = cal.describe([("models/big", "generator")])[:2]
    assert first.startswith("calibrated from results/pilot (3 finished jobs): nothing replaced")
    assert second == (
        "  not replaced, generator models/big: results/pilot ran no generator job of this model "
        "(it ran: generator models/small)"
    )
    lines = cal.describe([("models/small", "generator"), ("models/judge", "judge")])
    assert lines[0].endswith("replace the assumptions of 1 of the 2 planned model(s)")
    assert "  replaced, generator models/small: load 2.0 s per job" in lines
    assert (
        "  not replaced, judge models/judge: results/pilot ran no judge job of this model (it ran: generator "
        "models/small)" in lines
    )


def test_a_calibration_from_another_device_is_an_assumption_of_the_plan():
    """A run on this CPU calibrates a plan for this CPU at any thread count; applied to an H100 its ratios
    are an assumed kind of figure, which the runtime's margin widens for."""
    from types import SimpleNamespace

    from genjudge.planning.hardware import Calibration, gpu_type
    from genjudge.stages.plan_roles import assumptions

    cal = Calibration(source="results/pilot", load_seconds=2.0, devices=("this CPU (1 of 2 cores)",))
    h100 = gpu_type("H100")
    cpu = SimpleNamespace(name="this CPU (2 of 2 cores)", source="measured")
    assert cal.measured_on(cpu) and not cal.measured_on(h100)
    assert Calibration(source="old").measured_on(h100)  # no devices recorded: taken as it was
    entry = SimpleNamespace(calibration=cal, read_rate=2e9, times={}, device=h100)
    (said,) = assumptions(entry)
    assert said.startswith(f"calibrated on another device: measured on this CPU (1 of 2 cores), applied to {h100.name}")
    assert assumptions(SimpleNamespace(calibration=cal, read_rate=2e9, times={}, device=cpu)) == []


def test_the_runtime_margin_grows_with_each_assumed_kind_of_figure():
    from genjudge.stages.plan_roles import margin, margin_text, runtime_minutes

    assert margin(0) == 1.5 and margin(2) == pytest.approx(1.5 * 1.5**2)
    assert runtime_minutes(160, 0) == 4 and runtime_minutes(160, 3) == 14  # 2.7 min: 4 booked measured, 14 not
    text = margin_text(["compute: x", "load: y", "engine constants: z"])
    assert text.startswith("x1.5 x 1.5 per assumed kind of figure = x5.06; it rests on 3 assumed: compute: x;")
    assert margin_text([]) == "x1.5: every figure it rests on was measured"


def test_a_cpu_plan_counts_its_fixed_job_figures_as_assumed():
    """On a CPU the step and bandwidth figures are measured here; a job's start-up and load overhead
    are this project's machines' figures: the plan names them and widens the runtime's margin for them."""
    from types import SimpleNamespace

    from genjudge.planning.engines import Engine, VllmEngine
    from genjudge.stages.plan_roles import assumptions

    cpu = SimpleNamespace(kind="cpu", name="this CPU (2 of 2 cores)", source="measured", step_overhead=None)
    model = SimpleNamespace(layers=2)
    (said,) = Engine().sources(model, cpu)
    assert said.startswith("transformers' job figures: never measured on this CPU (7 s start-up, 3 s load overhead:")
    assert "31 s compiling" in Engine(compiled=True).sources(model, cpu)[0]
    (vllm,) = VllmEngine(eager=True).sources(model, cpu)
    assert vllm.startswith("vLLM's job figures: never measured on this CPU (11 s start-up, 0.40 ms a step:")
    entry = SimpleNamespace(calibration=None, read_rate=2e9, times={"d": SimpleNamespace(sources=[said])}, device=cpu)
    assert (
        assumptions(entry)[-1]
        == "engine constants never measured on this device (transformers' job figures: see constants)"
    )
    # A finished run calibrates them: then they are no longer assumed.
    from genjudge.planning.hardware import Calibration

    calibrated = SimpleNamespace(
        calibration=Calibration(source="pilot", load_seconds=2.0, devices=(cpu.name,)),
        read_rate=2e9,
        times={"d": SimpleNamespace(sources=[said])},
        device=cpu,
    )
    assert assumptions(calibrated) == []


def test_a_judges_prompts_say_which_answers_were_measured_and_which_are_upper_bounds():
    """A calibration that measured one generator's answers and not the other's: the plan says which
    figure is which, never 'measured' for both."""
    import pandas as pd

    from genjudge.config.experiment import Cell
    from genjudge.planning.workload import judge_workload

    items = {"d": pd.DataFrame({"prompt": ["What is 2 + 2?", "Name a colour."], "reference": ["4", "red"]})}
    judge = {"templates": None, "verdict": "text", "max_new_tokens": 16}
    generators = {g: {"max_new_tokens": 256, "n_samples": 1} for g in ("a", "b")}
    template = str(ROOT / "config/demo/judge_template.txt")
    cells = [Cell("a", "d"), Cell("b", "d")]

    def how(answers):
        return judge_workload(items, judge, cells, generators, template, 1, answers).how

    assert "answers of a at their measured mean length, of b at max_new_tokens (an upper bound" in how({"a": 40.0})
    assert "answers at their measured mean length" in how({"a": 40.0, "b": 30.0})
    assert "answers at the generators' max_new_tokens (an upper bound)" in how(None)


def test_the_plan_checks_the_longest_prompt_against_the_models_context(tmp_path):
    """The window comes from the model's config.json (or vLLM's max_model_len where smaller); a prompt
    plus answer past it is named, and a config without one says the check cannot be made."""
    from genjudge.config.specs import spec_for
    from genjudge.stages.plan_roles import context_check

    spec = spec_for("generator", model=str(ROOT / "models/demo-generator"), max_new_tokens=16)
    line, fact = context_check(spec, 100, 16)
    assert fact == {"window": 2048, "source": "max_position_embeddings", "longest_prompt_and_answer": 116, "fits": True}
    assert line.endswith(
        "context: 2048 tokens (max_position_embeddings in its config.json); the longest prompt plus max_new_tokens: about 116"
    )
    line, fact = context_check(spec, 2040, 16)
    assert not fact["fits"] and "is about 2056 tokens, MORE than" in line and "context of 2048" in line
    vllm = spec_for(
        "generator",
        model=str(ROOT / "models/demo-generator"),
        max_new_tokens=16,
        engine="vllm",
        vllm={"max_model_len": 512},
    )
    line, fact = context_check(vllm, 500, 16)
    assert fact["window"] == 512 and not fact["fits"] and "(the engine setting vllm.max_model_len)" in line
    # A config that cannot be read: the plan says the check was not made.
    line, fact = context_check(spec_for("generator", model=str(tmp_path / "missing"), max_new_tokens=16), 100, 16)
    assert fact["window"] is None and fact["fits"] is None and "context: not known" in line
