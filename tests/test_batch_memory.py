"""batch_size auto's remembered choices (store.batch_memory): the key, what a job writes and what a
later job or `genjudge plan` reads back: re-solved at its own lengths, never beyond what was probed
for more requests, lowered after an out-of-memory halving."""

import importlib.metadata as md
import json

import pytest
import torch
from judges import ROOT

from genjudge.config.specs import spec_for
from genjudge.engine.batch_size import entry_of, memory_key, probed_batch_size
from genjudge.engine.completion import PromptSet, gen_params, kv_bytes_per_token, run_batches_remembered
from genjudge.engine.decoding import Generator
from genjudge.engine.loading import load_causal_lm
from genjudge.engine.memory_plan import parse_inventory_spec
from genjudge.planning.batch_choice import (
    HEADROOM,
    Choice,
    Probe,
    choose,
    memory_line_from_probes,
    recalled,
    settle,
    step_line_from_probes,
)
from genjudge.stages.plan_roles import remembered_batch
from genjudge.store.batch_memory import BatchMemory

MODEL = str(ROOT / "models" / "demo-generator")
H100 = [["NVIDIA H100 80GB HBM3", 81559]]  # as torch names a one-GPU job's device
KV = 131_072  # bytes a token: Llama-3.1-8B's KV cache in bf16
PROMPTS = [f"What is {i} + {i * 7 % 13}?" + " Please answer." * (i % 5) for i in range(23)]


@pytest.fixture(scope="module")
def model():
    m, _ = load_causal_lm(spec_for("generator", model=MODEL))
    return m


def h100_probe(batch: int, context: int) -> Probe:
    """What an 8B job's probe measures on an 80 GB GPU: 20 GB fixed, each sequence its KV cache at the
    probe's context; a step of 29 ms + 0.107 ms a sequence (the knee far beyond what fits)."""
    return Probe(batch, 20e9 + batch * KV * context, 0.029 + batch * 0.107e-3, context)


def test_the_key_holds_every_setting_that_changes_memory():
    base = dict(model=MODEL, quantization="4bit", dtype="bfloat16")
    variants = [
        {},
        {"dtype": "float16"},  # quantized: the unquantized layers' dtype (precision reads 4bit for both)
        {"bnb_4bit_compute_dtype": "float16"},
        {"bnb_4bit_quant_type": "fp4"},
        {"device_map": "balanced_low_0"},
        {"max_memory": {0: "70GiB"}},
    ]
    keys = [memory_key(spec_for("judge", **{**base, **v}), "fp", False, 300, H100) for v in variants]
    assert len({json.dumps(k, sort_keys=True) for k in keys}) == len(variants)
    assert keys[0]["versions"] == {"torch": md.version("torch"), "transformers": md.version("transformers")}
    assert memory_key(spec_for("judge", model=MODEL), "fp", False, 300, H100, "logprob")["verdict"] == "logprob"


def test_a_remembered_choice_comes_back_for_its_own_key_only(tmp_path):
    memory = BatchMemory(tmp_path)
    spec = spec_for("generator", model=MODEL, max_memory={0: "70GiB"})  # an int key survives JSON
    key = memory_key(spec, "fp", False, 300, H100)
    memory.remember(key, {"cap": 40, "reason": "test"})
    assert memory.recall(key)["cap"] == 40
    assert memory.recall(memory_key(spec, "fp", False, 3000, H100)) is None  # another length bucket
    (memory.root / "broken.json").write_text("{")
    assert [e["cap"] for e in memory.entries()] == [40]


def test_a_batch_capped_by_a_small_jobs_requests_is_not_reused_by_a_larger_job(model, tmp_path):
    """A 5-request job probes batch 5 only: a later job of 3 reuses it, one of 200 probes again (real
    probes of the tiny model on the CPU; time only, no memory line there)."""
    from genjudge.engine.loading import load_tokenizer
    from genjudge.engine.prompting import render_prompt

    tok = load_tokenizer(MODEL)
    spec = spec_for("generator", model=MODEL, max_new_tokens=8)
    gen = Generator(model, tok, gen_params(spec), False)
    prompt = max((render_prompt(tok, p) for p in PROMPTS), key=len)
    memory = BatchMemory(tmp_path)
    key = memory_key(spec, "fp", False, 40, [["cpu", 0]])
    small = probed_batch_size(gen, prompt, 5, spec, KV, 8, memory, key)
    assert (small.batch, small.decided_by, [p.batch for p in small.probes]) == (5, "requests", [5])
    assert memory.recall(key)["requests_bound"]
    fewer = probed_batch_size(gen, prompt, 3, spec, KV, 8, memory, key)
    assert (fewer.batch, fewer.decided_by) == (3, "remembered")
    more = probed_batch_size(gen, prompt, 200, spec, KV, 8, memory, key)
    assert not more.remembered and {8, 64} <= {p.batch for p in more.probes}


def test_a_remembered_batch_is_solved_again_at_each_jobs_lengths(tmp_path):
    """A 1030 + 1100-token shard chose 176; a 2048 + 2048-token shard shares its key (same length
    buckets) but fits far fewer: it gets the probes' memory line at its own length."""
    probes = [h100_probe(b, 1036) for b in (8, 64)]  # 1030 prompt tokens + 6 probe steps
    mem = memory_line_from_probes(probes, 80e9, KV, 2130)
    first = choose(mem, step_line_from_probes(probes), 10_000, 0.9, probes=probes)
    first = settle(first, h100_probe(first.batch, 1036))  # the third probe, at the chosen batch
    assert (first.batch, first.decided_by, len(first.probes)) == (176, "memory", 3)
    memory = BatchMemory(tmp_path)
    short = spec_for("generator", model=MODEL, max_new_tokens=1100)
    key = memory_key(short, "fp", False, 1030, H100)
    memory.remember(key, entry_of(first, MODEL, 80e9, KV, 2130))
    long_key = memory_key(spec_for("generator", model=MODEL, max_new_tokens=2048), "fp", False, 2048, H100)
    assert long_key == key
    found = memory.recall(long_key)
    assert recalled(found, 10_000, 2130, 0.9).batch == 176
    at_4096 = recalled(found, 10_000, 4096, 0.9)
    fits = int((0.9 * 80e9 - 20e9) // (KV * 4096))
    assert at_4096.batch == int(fits * HEADROOM) < 176 and at_4096.decided_by == "remembered"
    assert recalled(found, 30, 4096, 0.9).batch == 30  # and a job's own requests cap it


def test_an_out_of_memory_halving_lowers_the_remembered_batch_and_pads_to_the_new_size(model, tmp_path):
    """A batch of 12 runs out of memory: the job goes on at 6, its short last batch padded to 6 rows
    (not 8, the old size's bucket), and the remembered batch becomes 6 for the other shards."""
    spec = spec_for("generator", model=MODEL, max_new_tokens=4)
    pset = PromptSet(spec, "generator", cache_dir=tmp_path)
    prompts = pset.render(PROMPTS)
    lengths = [len(pset.tok(p, add_special_tokens=False)["input_ids"]) for p in prompts]
    gen = Generator(model, pset.tok, pset.params, False, compile=True, cache_tokens=max(lengths) + 4)
    chosen = Choice(12, "memory", "batch 12, decided by memory")
    key = memory_key(spec, pset.fp, True, max(lengths), H100)
    pset.memory.remember(key, entry_of(chosen, MODEL, 80e9, KV, 100))
    gen.batch_size = 12

    def compute(idx):
        if len(idx) > 6:  # what too large a batch raises on a GPU
            raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
        return gen.generate([prompts[i] for i in idx])

    results, final = run_batches_remembered(gen, lengths, 12, compute, None, None, pset, chosen, key)
    assert final == 6 and gen.batch_size == 6 and all(results)
    assert {rows for rows, _ in gen._shapes} == {6}  # 23 = 6 + 6 + 6 + 5: the last padded to 6
    found = pset.memory.recall(key)
    assert found["cap"] == 6 and "ran out of memory" in found["reason"] and not found["requests_bound"]
    assert recalled(found, 1000, 100, 0.9).batch == 6


def test_the_plan_finds_what_a_job_remembered_on_gpus_of_the_same_kind_and_count(tmp_path):
    """The job names its GPU as torch does, the plan as its table does (`--gpus 1xH100`); the count, the
    verdict and the 4-bit type must agree too."""
    memory = BatchMemory(tmp_path)
    judge = spec_for("judge", model=MODEL, quantization="4bit", bnb_4bit_quant_type="nf4")
    memory.remember(memory_key(judge, "fp", False, 300, H100, "logprob"), {"cap": 50, "model_path": MODEL})
    one, two = parse_inventory_spec("1xH100"), parse_inventory_spec("2xH100")
    assert one[0].name != H100[0][0]
    logprob = spec_for("judge", model=MODEL, quantization="4bit", bnb_4bit_quant_type="nf4", verdict="logprob")
    assert remembered_batch(tmp_path, logprob, one, False, 300)["cap"] == 50
    assert remembered_batch(tmp_path, logprob, two, False, 300) is None
    assert remembered_batch(tmp_path, judge, one, False, 300) is None  # generated verdicts
    fp4 = spec_for("judge", model=MODEL, quantization="4bit", bnb_4bit_quant_type="fp4", verdict="logprob")
    assert remembered_batch(tmp_path, fp4, one, False, 300) is None
    assert remembered_batch(tmp_path, logprob, one, True, 300) is None  # compiled


def test_a_torchrun_group_counts_its_share_of_the_kv_cache(model, monkeypatch):
    """A rank has no device-map plan (memory_plan.job_plan says so): the KV bytes come from the model's
    config, split over the group's ranks, never 0."""
    from genjudge.engine.memory_plan import job_plan, kv_cache_bytes

    monkeypatch.setenv("GENJUDGE_TENSOR_PARALLEL", "1")
    monkeypatch.setenv("WORLD_SIZE", "2")
    spec = spec_for("judge", model=MODEL)
    pset = PromptSet(spec, "judge")
    pset.info = {"memory_plan": job_plan(spec, "auto", 100, "judge")}
    assert "error" in pset.info["memory_plan"]
    whole = kv_cache_bytes(model.config, 1, 1, 4)  # the demo model is float32
    assert whole > 0 and kv_bytes_per_token(pset, model) == whole / 2
