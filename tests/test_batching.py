"""Batching: input order after length sorting, OOM backoff through the real error type, auto batch size."""

import pytest
import torch
from judges import ROOT

from genjudge.config.specs import spec_for
from genjudge.demo.models import build_model
from genjudge.engine.batch_size import HEADROOM, search_batch_size
from genjudge.engine.decoding import Generator, GenParams, length_sorted, run_batches
from genjudge.engine.loading import load_causal_lm, load_tokenizer
from genjudge.engine.prompting import render_prompt

PROMPTS = [f"What is {i} + {i * 7 % 13}?" + " Please answer." * (i % 5) for i in range(23)]


@pytest.fixture(scope="module")
def generator(tmp_path_factory):
    path = build_model(tmp_path_factory.mktemp("m") / "gen", [ROOT / "config/demo/questions.jsonl"], seed=2)
    tok = load_tokenizer(str(path))
    model, _ = load_causal_lm(spec_for("generator", model=str(path)))
    gen = Generator(model, tok, GenParams(max_new_tokens=6), add_special_tokens=False)
    prompts = [render_prompt(tok, p) for p in PROMPTS]
    return gen, prompts


def test_results_come_back_in_input_order_after_length_sorting():
    lengths = [3, 9, 1, 9, 4]
    assert length_sorted(lengths) == [1, 3, 4, 0, 2]
    seen = []
    results, _ = run_batches(
        lengths, 2, lambda idx: [f"item{i}" for i in idx], on_batch=lambda idx, out: seen.append(list(idx))
    )
    assert results == [f"item{i}" for i in range(5)]
    assert seen == [[1, 3], [4, 0], [2]]  # longest first, two per batch


def test_real_model_outputs_map_back_to_their_own_prompts(generator):
    gen, prompts = generator
    lengths = gen.token_lengths(prompts)
    results, _ = run_batches(lengths, 5, lambda idx: gen.generate([prompts[i] for i in idx]))
    assert [r["n_prompt_tokens"] for r in results] == lengths
    single = [gen.generate([p])[0]["output"] for p in prompts[:4]]
    assert [r["output"] for r in results[:4]] == single


def test_out_of_memory_halves_the_batch_and_keeps_every_item_exactly_once(generator):
    gen, prompts = generator
    lengths = gen.token_lengths(prompts)
    attempts, done = [], []

    def fn(idx):
        attempts.append(len(idx))
        if len(idx) > 3:  # what a too-large batch raises on a GPU
            raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
        return gen.generate([prompts[i] for i in idx])

    results, final_bs = run_batches(lengths, 16, fn, on_batch=lambda idx, out: done.extend(idx))
    assert attempts[:3] == [16, 8, 4] and final_bs == 2
    assert sorted(done) == list(range(len(prompts)))  # each item once, none dropped
    reference, _ = run_batches(lengths, 2, lambda idx: gen.generate([prompts[i] for i in idx]))
    assert results == reference


def test_other_errors_are_not_mistaken_for_out_of_memory():
    def fn(idx):
        raise ValueError("bad input")

    with pytest.raises(ValueError):
        run_batches([1, 2], 2, fn)


def simulated_gpu(capacity_bytes, fixed, per_item, calls):
    def trial(bs):
        calls.append(bs)
        used = fixed + per_item * bs
        if used > capacity_bytes:
            raise torch.cuda.OutOfMemoryError(f"tried {used}")
        return used / capacity_bytes

    return trial


def test_auto_batch_size_stops_at_the_memory_margin():
    calls = []
    # 80 GB device, 20 GB of weights, 0.5 GB per sequence: margin 0.9 -> 72 GB -> 104 sequences.
    bs = search_batch_size(simulated_gpu(80e9, 20e9, 0.5e9, calls), margin=0.9)
    assert bs == int(104 * HEADROOM)
    assert calls[:8] == [1, 2, 4, 8, 16, 32, 64, 128]  # doubling, then binary search
    assert len(calls) < 16


def test_auto_batch_size_when_out_of_memory_comes_before_the_margin():
    calls = []

    # A hard OOM at 37 sequences (e.g. fragmentation) while reported use stays low.
    def trial(bs):
        calls.append(bs)
        if bs > 37:
            raise torch.cuda.OutOfMemoryError("fragmented")
        return 0.1

    assert search_batch_size(trial) == int(37 * HEADROOM)
    with pytest.raises(RuntimeError, match="even a batch of 1"):
        search_batch_size(simulated_gpu(10e9, 20e9, 1e9, []))


def test_auto_batch_size_falls_back_to_a_batch_that_ran_above_the_margin():
    # 80 GB device, 74 GB of weights: batch 1 peaks at 94% (above the 90% margin) but runs;
    # batch 2 runs out of memory. Batch 1 is usable and must be chosen, not refused.
    calls = []
    assert search_batch_size(simulated_gpu(80e9, 74e9, 1.5e9, calls), margin=0.9) == 1
    assert calls[0] == 1
    # Every size runs, all above the margin: still the smallest, never an error.
    assert search_batch_size(lambda bs: 0.95, margin=0.9) == 1


def test_token_lengths_are_computed_a_chunk_at_a_time(generator):
    from genjudge.engine.decoding import token_lengths

    gen, prompts = generator
    calls = []

    class Counting:
        def __call__(self, texts, **kw):
            calls.append(len(texts))
            return gen.tok(texts, **kw)

    whole = gen.tok(prompts, add_special_tokens=False)["input_ids"]
    assert token_lengths(Counting(), prompts, False, chunk=5) == [len(x) for x in whole]
    assert max(calls) == 5 and sum(calls) == len(prompts)
