"""judge.parallel on CPU: `tensor` as a real torchrun group of 2 gloo ranks, `replicas` as one
job per (leased) device, and the choices of `auto` on hypothetical inventories."""

import json
import shutil
import signal
import time
from types import SimpleNamespace

import pandas as pd
import psutil
import pytest
from conftest import new_workflow
from test_memplan import plan_config
from test_resume import complete_lines, kill_judge_halfway, write_dataset

from genjudge.cluster.job_resources import SlurmSettings
from genjudge.config.specs import spec_for
from genjudge.engine.judge_parallel import decide, layout
from genjudge.engine.memory_plan import empty_model, load_config, parse_inventory_spec

pytestmark = pytest.mark.workflow

TWO = {
    # Two device ids to lease that no machine has: CUDA sees no device through them (on a GPU
    # machine too), so the ranks run on the CPU over gloo.
    "gpu_inventory": [98, 99],
    "shards": 1,
    "generator": {"max_new_tokens": 8},
    "resources": {"generate": {"cpus_per_gpu": 1}, "judge": {"cpus_per_gpu": 1}},
}
N_KILLED = 48  # requests of the killed tensor group: 24 batches of 2 at 32 new tokens each
# big.jsonl (N_KILLED questions), generated once for every test that judges it.
BIG = {**TWO, "dataset": {"path": "big.jsonl"}, "generator": {"max_new_tokens": 4}}
# The demo judge's settings wherever it judges (tensor, replicas, one process): slow enough verdicts to
# kill the tensor group halfway.
DEMO_JUDGE = {"batch_size": 2, "max_new_tokens": 32}


def build_small_llama(path, tokenizer_dir):
    """A Llama of another shape than the demo judge (6 heads, 2 key/value heads, untied head),
    random weights from a fixed seed, with the demo judge's tokenizer."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(1)
    cfg = LlamaConfig(
        vocab_size=512,
        hidden_size=96,
        intermediate_size=160,
        num_hidden_layers=3,
        num_attention_heads=6,
        num_key_value_heads=2,
        max_position_embeddings=2048,
        tie_word_embeddings=False,
        bos_token_id=0,
        eos_token_id=1,
        pad_token_id=2,
    )
    LlamaForCausalLM(cfg).save_pretrained(path)
    for f in tokenizer_dir.iterdir():
        if f.name.startswith("tokenizer") or f.name.endswith(".jinja"):
            shutil.copy(f, path / f.name)
    return path


def judges(small):
    """Generated and logprob verdicts of a model of its own shape (the demo judge's tensor split is
    the test below's)."""
    return {
        "small-gen": {"model": str(small), "template": None},
        "small-logprob": {"model": str(small), "template": None, "verdict": "logprob"},
    }


def raw(workflow, run, judge):
    return pd.read_parquet(workflow.results(run) / "judge" / judge / "raw.parquet")


def judge_meta(workflow, run, judge):
    return json.loads((workflow.results(run) / "judge" / judge / "raw.meta.json").read_text())


def assert_same_judging(a: pd.DataFrame, b: pd.DataFrame):
    """The same verdict text for every request; logprob values equal up to float rounding of
    the sharded matrix products (the all-reduce sums in another order)."""
    keys = ["generator", "dataset", "id", "order"]
    a, b = a.sort_values(keys).reset_index(drop=True), b.sort_values(keys).reset_index(drop=True)
    assert len(a) == len(b) > 0
    assert a["judge_output"].tolist() == b["judge_output"].tolist()
    assert a["judge_prompt"].tolist() == b["judge_prompt"].tolist()
    pa, pb = a["p_correct"].astype(float), b["p_correct"].astype(float)
    assert pa.isna().tolist() == pb.isna().tolist()
    assert (pa - pb).abs().max(skipna=True) < 1e-5 or pa.isna().all()


@pytest.fixture(scope="module")
def small(tmp_path_factory, built_models):
    return build_small_llama(tmp_path_factory.mktemp("small") / "small-llama", built_models / "demo-judge")


GPU2 = ("--cores", "2", "--resources", "gpu=2")


@pytest.fixture(scope="module")
def questions(tmp_path_factory, built_models, small):
    """big.jsonl generated once at BIG's settings (run demo): the tensor, replicas and killed-group tests
    judge copies of it. `one` is another copy judged by one process (device_map), each judge those
    tests compare against, with a judge cache of its own (the layout is not in the item keys)."""
    generated = new_workflow(tmp_path_factory.mktemp("questions"), built_models)
    write_dataset(generated.path / "big.jsonl", N_KILLED)
    cfg = generated.write_config("gen.yaml", **BIG)
    generated.run("results/demo/generations/demo-generator/big.parquet", *GPU2, "--configfile", cfg)
    one = generated.copy(tmp_path_factory.mktemp("one"))
    every = {"demo-judge": DEMO_JUDGE, **judges(small)}
    cfg = one.write_config("one.yaml", **BIG, judges=every, judge={"parallel": "device_map", "max_new_tokens": 8})
    one.run(*(f"results/demo/judgments/{name}.parquet" for name in every), *GPU2, "--configfile", cfg)
    return SimpleNamespace(generated=generated, one=one)


def test_tensor_group_of_two_judges_exactly_as_one_process(questions, small, tmp_path):
    workflow, one = questions.generated.copy(tmp_path), questions.one
    tensor = workflow.write_config(
        "tensor.yaml", **BIG, judges=judges(small), judge={"parallel": "tensor", "max_new_tokens": 8}
    )
    judgments = [f"judgments/{name}.parquet" for name in judges(small)]  # the report is other tests'
    workflow.run(*(f"results/demo/{j}" for j in judgments), *GPU2, "--configfile", tensor)
    for name in judges(small):
        meta = judge_meta(workflow, "demo", name)
        assert meta["parallel"] == "tensor" and meta["tensor_parallel_size"] == 2, name
        assert meta["cuda_visible_devices"] == "98,99" and meta["computed_items"] > 0
        assert judge_meta(one, "demo", name)["parallel"] == "device_map"
        assert_same_judging(raw(workflow, "demo", name), raw(one, "demo", name))
        pd.testing.assert_frame_equal(
            pd.read_parquet(workflow.results() / "judgments" / f"{name}.parquet"),
            pd.read_parquet(one.results() / "judgments" / f"{name}.parquet"),
        )
    logprob = raw(workflow, "demo", "small-logprob")["p_correct"].astype(float)
    assert logprob.between(0, 1).all() and logprob.nunique() > 1
    log = (workflow.path / "logs" / "demo" / "judge" / "small-gen" / "0-of-1.log").read_text()
    assert "[rank 0]" in log and "backend gloo" in log and "torch.distributed.run" in log


KILLED = {**BIG, "judge": {"parallel": "tensor", **DEMO_JUDGE}}


def test_tensor_group_killed_halfway_resumes_from_rank_0s_checkpoint(questions, tmp_path):
    workflow = questions.generated.copy(tmp_path)  # its generations done: the judge is the first job
    cfg = workflow.write_config(**KILLED)
    store = kill_judge_halfway(workflow, cfg, N_KILLED)
    # The group dies with its job: no rank outlives it to write after the kill.
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and ranks_alive(workflow):
        time.sleep(0.2)
    assert not ranks_alive(workflow)
    checkpointed = complete_lines(store)
    assert N_KILLED // 2 <= checkpointed < N_KILLED

    judgments = "judgments/demo-judge.parquet"
    workflow.run("--cores", "2", f"results/demo/{judgments}", "--configfile", cfg)
    meta = judge_meta(workflow, "demo", "demo-judge")
    assert meta["parallel"] == "tensor"
    assert meta["resumed_items"] == checkpointed and meta["computed_items"] == N_KILLED - checkpointed
    assert complete_lines(store) == N_KILLED  # nothing judged twice, every rank-0 record kept
    assert judge_meta(questions.one, "demo", "demo-judge")["parallel"] == "device_map"
    pd.testing.assert_frame_equal(
        pd.read_parquet(workflow.results() / judgments), pd.read_parquet(questions.one.results() / judgments)
    )


def test_a_tensor_judge_job_told_to_stop_stops_its_ranks_before_they_write(questions, tmp_path):
    """SIGTERM to the judge job alone (as a cluster's scancel or a `kill` sends it): the job tells torchrun,
    which stops its ranks, and kills what is left; no rank runs on to write the judgments, which the next
    run would take as done."""
    workflow = questions.generated.copy(tmp_path)
    cfg = workflow.write_config(**KILLED)
    store = kill_judge_halfway(workflow, cfg, N_KILLED, sig=signal.SIGTERM)
    t0 = time.monotonic()
    while time.monotonic() - t0 < 15 and ranks_alive(workflow):
        time.sleep(0.2)
    assert not ranks_alive(workflow), "a rank outlived its stopped job"
    checkpointed = complete_lines(store)
    assert checkpointed < N_KILLED
    time.sleep(2)  # what an orphaned rank would have done by now
    assert complete_lines(store) == checkpointed
    assert not (workflow.results() / "judge/demo-judge/shards/0-of-1.parquet").exists()
    assert not (workflow.results() / "judgments/demo-judge.parquet").exists()
    assert "stopped by SIGTERM" in (workflow.path / "logs/demo/judge/demo-judge/0-of-1.log").read_text()


def ranks_alive(workflow) -> list:
    found = []
    for p in psutil.process_iter(["cmdline", "cwd"]):
        try:
            cmd = " ".join(p.info["cmdline"] or [])
            if "genjudge.stages.tensor_judge" in cmd and p.info["cwd"] == str(workflow.path):
                found.append(p.pid)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return found


def test_replicas_are_one_job_per_device_and_merge_to_the_one_process_result(questions, tmp_path):
    workflow, one = questions.generated.copy(tmp_path), questions.one
    cfg = workflow.write_config(**BIG, judge={"parallel": "replicas", **DEMO_JUDGE})
    judgments = "judgments/demo-judge.parquet"
    workflow.run(f"results/demo/{judgments}", *GPU2, "--configfile", cfg)
    shards = sorted((workflow.results() / "judge" / "demo-judge" / "shards").glob("*.meta.json"))
    assert [p.name for p in shards] == ["0-of-2.meta.json", "1-of-2.meta.json"]
    metas = [json.loads(p.read_text()) for p in shards]
    for m in metas:
        assert m["parallel"] == "replicas" and m["model_loads"] == 1
        assert len(m["gpus"]) == 1 and m["cuda_visible_devices"] == m["gpus"][0]
    merged = judge_meta(workflow, "demo", "demo-judge")
    assert merged["n_items"] == sum(m["n_items"] for m in metas) and all(m["n_items"] for m in metas)
    assert judge_meta(one, "demo", "demo-judge")["cuda_visible_devices"] == "98,99"
    assert judge_meta(one, "demo", "demo-judge")["parallel"] == "device_map"
    pd.testing.assert_frame_equal(
        pd.read_parquet(workflow.results() / judgments), pd.read_parquet(one.results() / judgments)
    )


def test_tensor_on_a_model_without_a_plan_or_quantized_stops_while_planning(workflow, tmp_path):
    from transformers import GPT2Config, GPT2LMHeadModel

    gpt2 = tmp_path / "gpt2"
    config = GPT2Config(n_layer=1, n_embd=32, n_head=2, vocab_size=512, bos_token_id=0, eos_token_id=1)
    GPT2LMHeadModel(config).save_pretrained(gpt2)
    for f in (workflow.path / "models" / "demo-judge").glob("tokenizer*"):
        shutil.copy(f, gpt2 / f.name)
    cases = [
        ({"model": str(gpt2), "template": None}, "GPT2LMHeadModel has no tensor-parallel plan"),
        ({"quantization": "4bit"}, "quantization 4bit: bitsandbytes stores packed weights"),
    ]
    for judge, reason in cases:
        cfg = workflow.write_config(**TWO, judge={"parallel": "tensor", **judge})
        proc = workflow.run("-n", "--configfile", cfg, check=False)
        out = proc.stdout + proc.stderr
        assert proc.returncode != 0 and "bad input" in out and "judge.parallel: tensor is impossible" in out, out
        assert reason in out
        assert not (workflow.results() / "generations").exists()


# --- auto, on hypothetical inventories (config.json alone) ---

CFG70 = "tests/data/llama-3.1-70b-config"
LLAMA_8B = {  # Llama-3.1-8B's architecture
    "model_type": "llama",
    "hidden_size": 4096,
    "intermediate_size": 14336,
    "num_hidden_layers": 32,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "vocab_size": 128256,
    "tie_word_embeddings": False,
}


@pytest.fixture(scope="module")
def llama70b():
    return empty_model(load_config(CFG70))


def auto(model_path, gpus, quantization="none", model=None):
    spec = spec_for("judge", model=model_path, dtype="bfloat16", quantization=quantization, parallel="auto")
    inventory = parse_inventory_spec(gpus)
    cfg = SlurmSettings({"gpus_per_node": 4})
    return layout(spec, cfg, [g.index for g in inventory], on_slurm=False, gpus=inventory, model=model)


def test_auto_70b_bf16_on_four_80gib_gpus_is_tensor(llama70b):
    lay = auto(CFG70, "4x80GiB", model=llama70b)
    assert (lay.parallel, lay.jobs, lay.gpus_per_job) == ("tensor", 1, 4)
    assert "need 2 GPUs of 80 GiB" in lay.reason and "tensor-parallel plan" in lay.reason


def test_auto_70b_4bit_on_four_80gib_gpus_is_four_replicas(llama70b):
    lay = auto(CFG70, "4x80GiB", "4bit", model=llama70b)
    assert (lay.parallel, lay.jobs, lay.gpus_per_job) == ("replicas", 4, 1)
    assert "fit one GPU of 80 GiB" in lay.reason


def test_auto_8b_on_one_24gib_gpu_is_device_map_on_it(tmp_path):
    path = tmp_path / "llama8b.json"
    path.write_text(json.dumps(LLAMA_8B))
    lay = auto(str(path), "1x24GiB")
    assert (lay.parallel, lay.jobs, lay.gpus_per_job) == ("device_map", 1, 1)
    assert "one GPU" in lay.reason


def test_auto_70b_4bit_too_big_for_one_gpu_cannot_shard_so_it_is_device_map(llama70b):
    lay = auto(CFG70, "4x24GiB", "4bit", model=llama70b)
    assert lay.parallel == "device_map" and "bitsandbytes" in lay.reason


def test_explicit_choices_and_uneven_heads():
    spec = spec_for("judge", model=CFG70, parallel="replicas")
    assert decide(spec, 4) == ("replicas", "judge.parallel: replicas: 4 jobs of one GPU each")
    assert decide(spec_for("judge", model=CFG70, parallel="tensor"), 1)[0] == "device_map"
    from genjudge.errors import InputError

    with pytest.raises(InputError, match="64 attention heads do not split evenly over 3 GPUs"):
        decide(spec_for("judge", model=CFG70, parallel="tensor"), 3)


def plan_command(tmp_path, capsys, judge: dict) -> str:
    """What `genjudge plan --gpus 4x80GiB --role judge` prints for test_memplan's plan_config,
    the command's main() run in this process (torch and transformers imported already, by the tests
    above: a process of its own would spend its time importing them again)."""
    import gc

    from genjudge.cli import main

    config = plan_config(tmp_path, judge)
    capsys.readouterr()
    try:
        assert main(["plan", "--configfile", str(config), "--gpus", "4x80GiB", "--role", "judge"]) == 0
    finally:
        gc.enable()  # the command pauses the collector for its short process
    return capsys.readouterr().out


def test_plan_command_prints_the_choice_and_why(tmp_path, capsys):
    out = plan_command(tmp_path, capsys, {"dtype": "bfloat16", "parallel": "auto"})
    assert "judge.parallel: tensor (auto: the weights (141.1 GB at bfloat16) need 2 GPUs of 80 GiB" in out
    assert "jobs: 1 x 4 GPU(s) each (judge" in out
    out = plan_command(tmp_path, capsys, {"quantization": "4bit", "parallel": "auto"})
    assert "judge.parallel: replicas (auto: the weights" in out and "jobs: 4 x 1 GPU(s) each (judge" in out


def test_auto_on_slurm_uses_judge_gpu_memory_or_says_it_is_unknown(llama70b):
    cfg = SlurmSettings({"gpus_per_node": 4})
    known = spec_for("judge", model=CFG70, quantization="4bit", parallel="auto", gpu_memory="80GiB")
    lay = layout(known, cfg, [], on_slurm=True, model=llama70b)
    assert (lay.parallel, lay.jobs, lay.gpus_per_job) == ("replicas", 4, 1)
    unknown = spec_for("judge", model=CFG70, dtype="bfloat16", parallel="auto")
    lay = layout(unknown, cfg, [], on_slurm=True, model=llama70b)
    assert (lay.parallel, lay.jobs, lay.gpus_per_job) == ("tensor", 1, 4)
    assert "GPU memory unknown (set judge.gpu_memory" in lay.reason
