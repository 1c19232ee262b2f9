"""engine: vllm through the real snakemake command line: the demo end to end, sampled answers across
shard layouts and a killed job, and a judge split over two leased devices."""

import json

import pandas as pd
import pytest
from conftest import new_workflow
from test_judge_parallel import TWO
from test_resume import complete_lines, kill_job_when, start, write_dataset

pytestmark = [pytest.mark.workflow, pytest.mark.vllm]

FP32 = {"dtype": "float32"}
VLLM = {"engine": "vllm", "dtype": "float32", "vllm": {"enforce_eager": True}}


def generations(workflow, run, dataset="questions"):
    return pd.read_parquet(workflow.results(run) / "generations" / "demo-generator" / f"{dataset}.parquet")


def raw(workflow, run):
    return pd.read_parquet(workflow.results(run) / "judge" / "demo-judge" / "raw.parquet")


def summary(workflow, run):
    return json.loads((workflow.results(run) / "report" / "summary.json").read_text())


@pytest.fixture(scope="module")
def demo_runs(tmp_path_factory, built_models):
    """The demo on one shard, run once on the transformers engine (run hf) and once on vLLM (run vl):
    the demo test compares them; the two-device test judges run vl's generations again in a copy."""
    workflow = new_workflow(tmp_path_factory.mktemp("demo"), built_models)
    hf = workflow.write_config("hf.yaml", run="hf", shards=1, generator=FP32, judge=FP32)
    vl = workflow.write_config("vl.yaml", run="vl", shards=1, generator=VLLM, judge=VLLM)
    workflow.run("--cores", "2", "--configfile", hf)
    workflow.run("--cores", "2", "--configfile", vl)
    return workflow


def test_the_demo_on_vllm_gives_the_transformers_engines_answers_and_verdicts(demo_runs):
    workflow, vl = demo_runs, demo_runs.path / "config" / "vl.yaml"
    cols = ["id", "prompt_sent", "output", "n_prompt_tokens", "n_generated_tokens", "finish_reason"]
    pd.testing.assert_frame_equal(generations(workflow, "vl")[cols], generations(workflow, "hf")[cols])
    assert raw(workflow, "vl")["judge_output"].tolist() == raw(workflow, "hf")["judge_output"].tolist()
    a, b = summary(workflow, "vl"), summary(workflow, "hf")
    assert a["accuracy"] == b["accuracy"] and a["n_judged"] == b["n_judged"] == 44
    metas = workflow.metas("vl")
    assert [m["engine"] for m in metas] == ["vllm"]
    judge_meta = json.loads((workflow.results("vl") / "judge" / "demo-judge" / "raw.meta.json").read_text())
    assert judge_meta["engine"] == "vllm" and judge_meta["model_loads"] == 1
    # The engine is part of what decides a result: switching it back reruns the model jobs.
    dry = workflow.run("-n", "--configfile", vl, "--config", 'generator={"engine": "transformers"}')
    assert "generate" in dry.stdout and "Nothing to be done" not in dry.stdout


SAMPLED = {
    **VLLM,
    "do_sample": True,
    "temperature": 1.2,
    "n_samples": 2,
    "max_new_tokens": 48,
    "vllm": {"enforce_eager": True, "chunk_size": 8},
}
N = 120


def test_sampled_vllm_answers_are_the_same_over_two_shards_and_after_a_kill(workflow):
    write_dataset(workflow.path / "big.jsonl", N)
    target = "results/{run}/generations/demo-generator/big.parquet"
    two = workflow.write_config(
        "two.yaml", run="two", shards=2, dataset={"path": "big.jsonl"}, generator=SAMPLED, cache_dir="results/c2"
    )
    workflow.run("--cores", "2", target.format(run="two"), "--configfile", two)
    one = workflow.write_config(
        "one.yaml", run="one", shards=1, dataset={"path": "big.jsonl"}, generator=SAMPLED, cache_dir="results/c1"
    )
    store = workflow.path / "results/c1/generations"
    proc = start(workflow, one)
    kill_job_when(proc, "generate.py", store, 3 * 8)  # three chunks checkpointed
    proc.communicate(timeout=600)
    assert proc.returncode != 0
    kept = complete_lines(store)
    assert 3 * 8 <= kept < 2 * N
    workflow.run("--cores", "2", target.format(run="one"), "--configfile", one)
    meta = workflow.metas("one")[0]
    assert meta["resumed_items"] == kept and meta["computed_items"] == 2 * N - kept
    layout = ["shard", "key"]  # where each answer came from; everything else is the answer
    pd.testing.assert_frame_equal(
        generations(workflow, "one", "big").drop(columns=layout),
        generations(workflow, "two", "big").drop(columns=layout),
    )


def test_a_vllm_judge_over_two_leased_devices_gives_the_verdicts_of_one(demo_runs, tmp_path):
    # One: run vl's judge, one vLLM engine (no leased device). Two: a copy judges run vl's generations again
    # over TWO's two leased devices. A cache of its own: the layout is not in the item keys, so the
    # shared cache would answer everything; nor is it among the judge's rerun params, hence --forcerun.
    workflow = demo_runs.copy(tmp_path)
    judge = {**VLLM, "parallel": "tensor"}
    leased = {"gpu_inventory": TWO["gpu_inventory"], "resources": TWO["resources"], "cache_dir": "results/c2"}
    two = workflow.write_config("two.yaml", run="vl", shards=1, generator=VLLM, judge=judge, **leased)
    target = "results/vl/judge/demo-judge/raw.parquet"  # up to the judge's verdicts: the report is the demo test's
    workflow.run("--cores", "2", target, "--forcerun", "judge", "--configfile", two)
    metas = {
        run: json.loads((wf.results("vl") / "judge" / "demo-judge" / "raw.meta.json").read_text())
        for run, wf in (("one", demo_runs), ("two", workflow))
    }
    assert metas["two"]["engine_settings"]["tensor_parallel_size"] == 2 and metas["two"]["parallel"] == "tensor"
    assert metas["two"]["cuda_visible_devices"] == "98,99"
    assert metas["two"]["computed_items"] == metas["one"]["computed_items"] == 44  # every verdict its own
    assert metas["one"]["engine_settings"]["tensor_parallel_size"] == 1
    assert raw(workflow, "vl")["judge_output"].tolist() == raw(demo_runs, "vl")["judge_output"].tolist()
