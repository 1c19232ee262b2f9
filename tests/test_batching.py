"""Batching: input order after length sorting, OOM backoff through the real error type, auto batch size."""

import pytest
import torch
from judges import ROOT

from genjudge.config.specs import spec_for
from genjudge.demo.models import build_model
from genjudge.engine.decoding import Generator, GenParams, batch_bucket, length_sorted, run_batches, width_bucket
from genjudge.engine.loading import load_causal_lm, load_tokenizer
from genjudge.engine.prompting import render_prompt
from genjudge.planning.batch_choice import (
    HEADROOM,
    MemoryLine,
    Probe,
    StepLine,
    choose,
    memory_line_from_probes,
    settle,
    step_line_from_probes,
)

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


def test_the_chooser_takes_the_smallest_cap_and_says_which():
    # 80 GB GPU, 20 GB fixed, 0.5 GB a sequence: (0.9 x 80 - 20) / 0.5 = 104 fit, less 5% -> 98.
    mem = MemoryLine(20e9, 0.5e9, 80e9, "test")
    assert choose(mem, None, 10_000, 0.9).batch == int(104 * HEADROOM)
    assert choose(mem, None, 10_000, 0.9).decided_by == "memory"
    # 12 ms a step + 0.1 ms a sequence: 80% of the unbounded tokens/s at 12 / 0.1 x 4 = 480.
    speed = StepLine(12e-3, 0.1e-3, "test")
    assert speed.knee() == 480
    roomy = MemoryLine(20e9, 0.01e9, 80e9, "test")
    c = choose(roomy, speed, 10_000, 0.9)
    assert (c.batch, c.decided_by) == (480, "speed")
    assert 480 / speed.seconds(480) == pytest.approx(0.8 / 0.1e-3)  # 80% of the 10k tokens/s at no limit
    c = choose(roomy, speed, 37, 0.9)
    assert (c.batch, c.decided_by) == (37, "requests") and "37 request(s)" in c.reason
    # Nothing fits beside the weights: batch 1, said so.
    c = choose(MemoryLine(79e9, 1e9, 80e9, "test"), speed, 100, 0.9)
    assert c.batch == 1 and "above the memory margin" in c.reason


def test_a_bigger_batch_is_kept_only_where_it_is_faster_per_token():
    probes = [Probe(8, None, 0.010, 100), Probe(64, None, 0.020, 100)]  # 1.25 and 0.31 ms a token
    c = choose(None, step_line_from_probes(probes), 10_000, 0.9, probes=probes)
    assert c.batch == 192  # 8.57 ms + 0.179 ms a sequence: the knee at 4 x 8.57 / 0.179 = 192
    faster = settle(
        choose(None, step_line_from_probes(probes), 10_000, 0.9, probes=list(probes)), Probe(c.batch, None, 0.05, 100)
    )
    assert faster.batch == c.batch  # 0.05 s over 192 sequences: faster per token than batch 64
    slower = settle(c, Probe(c.batch, None, 0.020 * c.batch / 64, 100))  # the same time per token as 64
    assert (slower.batch, slower.decided_by) == (64, "probe") and "took" in slower.reason
    oom = settle(choose(None, step_line_from_probes(probes), 10_000, 0.9, probes=list(probes)), Probe(500, None, None))
    assert oom.batch == 64 and "ran out of memory" in oom.reason


def test_the_memory_line_is_fitted_through_the_probes_and_grown_to_the_full_context():
    kv = 1000.0  # bytes a token
    probes = [Probe(8, 10e9 + 8 * 2e6, 0.01, 110), Probe(64, 10e9 + 64 * 2e6, 0.02, 110)]
    line = memory_line_from_probes(probes, 80e9, kv, full_context=610)
    assert line.fixed_bytes == pytest.approx(10e9)
    assert line.per_sequence_bytes == pytest.approx(2e6 + 500 * kv)  # 500 more tokens of KV cache each
    # Noise never makes a sequence cheaper than its KV cache.
    flat = [Probe(8, 10e9, 0.01, 110), Probe(64, 10e9, 0.02, 110)]
    assert memory_line_from_probes(flat, 80e9, kv, 610).per_sequence_bytes == pytest.approx(110 * kv + 500 * kv)


def test_the_chooser_on_the_tiny_models_real_probes(generator):
    """Two real probes of the tiny model (CPU): what they measured, and the chooser's arithmetic on it."""
    from genjudge.engine.batch_size import run_probe

    gen, prompts = generator
    longest = max(prompts, key=len)
    width = len(gen.tok(longest, add_special_tokens=False)["input_ids"])
    runs = [run_probe(gen, longest, b, steps=4) for b in (8, 32)]
    for r in runs:
        assert r.step_seconds > 0 and r.peak_bytes is None  # a CPU has no peak-memory counter
        assert r.context_tokens == width + 4 and r.wall_seconds >= r.step_seconds
    probes = [Probe(r.batch, r.peak_bytes, r.step_seconds, r.context_tokens) for r in runs]
    speed = step_line_from_probes(probes)
    slope = (runs[1].step_seconds - runs[0].step_seconds) / (32 - 8)
    assert speed.per_sequence_seconds == pytest.approx(max(slope, 0.0))
    assert speed.overhead_seconds == pytest.approx(max(runs[0].step_seconds - 8 * slope, 0.0))
    # A memory line of a stated GPU beside the measured speed: the batch is the smaller cap.
    mem = MemoryLine(1e9, 50e6, 4e9, "stated")
    c = choose(mem, speed, 10_000, 0.9, probes=probes)
    # The speed cap as the chooser's rules give it for whatever these probes measured (a loaded machine
    # can put the line's knee anywhere): a line with no fixed cost takes the probe fastest per token;
    # otherwise the knee, never below the smallest batch that ran.
    if speed.overhead_seconds <= 0 < speed.per_sequence_seconds:
        speed_cap = min(probes, key=lambda p: (p.seconds_per_token, p.batch)).batch
    elif speed.knee() is None:
        speed_cap = 10_000
    else:
        speed_cap = max(speed.knee(), 8)
    caps = [int((0.9 * 4e9 - 1e9) // 50e6 * HEADROOM), speed_cap, 10_000]
    assert c.batch == min(caps) and c.probes == probes
    assert c.speed_cap == (None if speed.knee() is None else speed_cap)


def test_compiled_decoding_gives_eager_decodings_greedy_text(generator):
    """Static cache + torch.compile (compile: true on the CPU) against eager decoding, fp32, including a
    short last batch (padded to its row bucket): identical tokens for every prompt."""
    gen, prompts = generator
    compiled = Generator(gen.model, gen.tok, gen.params, add_special_tokens=False, compile=True)
    lengths = gen.token_lengths(prompts)
    compiled.cache_tokens = max(lengths) + gen.params.max_new_tokens
    compiled.batch_size = 8
    eager, _ = run_batches(lengths, 8, lambda idx: gen.generate([prompts[i] for i in idx]))
    fast, _ = run_batches(lengths, 8, lambda idx: compiled.generate([prompts[i] for i in idx]))
    assert fast == eager
    assert len(prompts) % 8 and compiled.compile_seconds > 0  # 23 prompts: a last batch of 7, padded to 8
    assert compiled.timing.batches == 3 and compiled.timing.decode_steps > 0


def test_shape_buckets_are_few():
    assert [width_bucket(w) for w in (1, 64, 65, 300, 600, 1000, 5000)] == [64, 64, 128, 320, 640, 1024, 5120]
    buckets = {width_bucket(w) for w in range(100, 4000)}
    assert len(buckets) <= 32  # 100 to 4000 tokens: a few dozen shapes at most
    assert all(w <= width_bucket(w) <= max(w * 1.125, w + 63) for w in range(1, 5000))
    assert [batch_bucket(r, 100) for r in (100, 37, 1, 64, 65, 99)] == [100, 64, 1, 64, 100, 100]


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


def test_odd_probe_timings_never_choose_below_the_probes():
    """8 at 10 ms and 64 at 100 ms: the line's intercept is negative (its knee would be 1); the probe
    fastest per token wins. A knee below the smallest probe is raised to it."""
    odd = [Probe(8, None, 0.010, 100), Probe(64, None, 0.100, 100)]  # 1.25 and 1.56 ms a token
    c = choose(None, step_line_from_probes(odd), 10_000, 0.9, probes=odd)
    assert (c.batch, c.decided_by) == (8, "speed") and "no fixed cost" in c.reason
    low = [Probe(8, None, 0.010, 100), Probe(64, None, 0.075, 100)]  # knee 0.71 / 1.16 x 4 = 3
    speed = step_line_from_probes(low)
    assert speed.knee() == 3
    c = choose(None, speed, 10_000, 0.9, probes=low)
    assert (c.batch, c.decided_by) == (8, "speed") and "raised to the smallest probe" in c.reason


def test_a_compiled_probe_counts_its_whole_static_cache(generator):
    """The static cache is allocated at its full length before the first step: the probe's peak holds all
    of it, so its context is the cache's length and the memory line adds no growth on top."""
    from genjudge.engine.batch_size import run_probe

    gen, prompts = generator
    compiled = Generator(gen.model, gen.tok, gen.params, add_special_tokens=False, compile=True, cache_tokens=200)
    longest = max(prompts, key=len)
    width = len(gen.tok(longest, add_special_tokens=False)["input_ids"])
    run = run_probe(compiled, longest, 2, steps=2)
    assert run.context_tokens == width_bucket(200) != width + 2
    assert compiled.cache_length(width) == run.context_tokens
    probes = [Probe(2, 1e9 + 2 * 5e6, 0.01, run.context_tokens), Probe(8, 1e9 + 8 * 5e6, 0.02, run.context_tokens)]
    line = memory_line_from_probes(probes, 80e9, 1000.0, full_context=width + gen.params.max_new_tokens)
    assert line.per_sequence_bytes == pytest.approx(5e6)  # nothing added for tokens the cache already holds


def test_a_halving_is_reported_before_the_retry():
    sizes = []

    def fn(idx):
        if len(idx) > 3:
            raise torch.cuda.OutOfMemoryError("CUDA out of memory")
        return list(idx)

    _, final = run_batches(list(range(10)), 16, fn, on_resize=sizes.append)
    assert sizes == [8, 4, 2] and final == 2
