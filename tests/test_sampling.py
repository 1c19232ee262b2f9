"""Sampling with per-sample seeds and several samples per item.

Seeded sampling: each row's draw is its own (engine/sampling.py), so the same
item gives the same text whatever the batch, shard layout or resume point
(CPU, fp32). n_samples: k rows per item, each judged; the measures over samples
(judging/sampling_stats.py) against hand-computed values.
"""

import json

import pandas as pd
import pytest
import torch
from conftest import generate_shard

from genjudge.judging.sampling_stats import (
    majority_vote,
    pairwise_measures,
    pass_at_k,
    reference_measures,
    reported_ks,
    score_measures,
    vote_key,
)
from genjudge.judging.stats import wilson_bounds

# --- measures over samples: constructed tables -----------------------------------------------


def test_pass_at_k_matches_hand_computed_values():
    # n=5 samples, c=2 correct: pass@1 = 2/5; pass@2 = 1 - C(3,2)/C(5,2) = 1 - 3/10; pass@3 = 1 - 1/10.
    assert pass_at_k(5, 2, 1) == pytest.approx(0.4)
    assert pass_at_k(5, 2, 2) == pytest.approx(0.7)
    assert pass_at_k(5, 2, 3) == pytest.approx(0.9)
    assert pass_at_k(5, 2, 4) == 1.0  # fewer than 4 wrong: any 4 hold a correct one
    assert pass_at_k(5, 0, 5) == 0.0 and pass_at_k(3, 3, 1) == 1.0
    with pytest.raises(ValueError):
        pass_at_k(2, 1, 3)
    assert reported_ks(3) == [1, 2, 3] and reported_ks(8) == [1, 2, 4, 8] and reported_ks(1) == [1]


def _table(rows):
    return pd.DataFrame(rows, columns=["id", "sample", "output", "verdict", "exact_match", "answer_extracted"])


def test_reference_measures_on_a_constructed_table():
    c, w = "correct", "incorrect"
    df = _table(
        [
            # a: 3 of 3 correct, all answer "4"
            ("a", 0, "4", c, True, None),
            ("a", 1, "4.", c, True, None),
            ("a", 2, " 4", c, True, None),
            # b: 1 of 3 correct; the vote "5" (twice, judged incorrect) beats "6"
            ("b", 0, "5", w, False, None),
            ("b", 1, "6", c, True, None),
            ("b", 2, "5", w, False, None),
            # c: one correct, one unparsed (left out: n=2, c=1), one incorrect; the vote ties 1-1-1: first answer
            ("c", 0, "x", c, False, None),
            ("c", 1, "y", None, False, None),
            ("c", 2, "z", w, False, None),
            # d: all wrong
            ("d", 0, "1", w, False, None),
            ("d", 1, "1", w, False, None),
            ("d", 2, "2", w, False, None),
        ]
    )
    m = reference_measures(df)
    assert m["n_items"] == 4 and m["n_samples"] == 3
    per_item = [1.0, 1 / 3, 1 / 2, 0.0]
    assert m["mean_accuracy"]["value"] == pytest.approx(sum(per_item) / 4)
    assert m["pass_at_k"]["1"]["value"] == pytest.approx(m["mean_accuracy"]["value"])
    # pass@2 per item: a 1; b 1 - C(2,2)/C(3,2) = 2/3; c (n=2, c=1) 1 - C(1,2)/C(2,2) = 1; d 0.
    assert m["pass_at_k"]["2"]["value"] == pytest.approx((1 + 2 / 3 + 1 + 0) / 4)
    # pass@3 only over items with 3 parsed samples (c has 2): a 1, b 1, d 0.
    assert m["pass_at_k"]["3"]["value"] == pytest.approx(2 / 3) and m["pass_at_k"]["3"]["n"] == 3
    # majority vote: a "4" correct; b "5" incorrect; c "x" (first of a 1-1-1 tie) correct; d "1" incorrect.
    assert m["majority_vote_accuracy"]["value"] == pytest.approx(0.5)
    assert m["majority_vote_exact_match"]["value"] == pytest.approx(0.25)
    # agreement with the voted answer: a 3/3, b 2/3, c 1/3, d 2/3.
    assert m["answer_agreement"]["value"] == pytest.approx((1 + 2 / 3 + 1 / 3 + 2 / 3) / 4)
    # unanimous parsed verdicts: a and d yes; b and c no.
    assert m["verdict_unanimity"]["value"] == pytest.approx(0.5)
    # The interval is over the 4 items' accuracies, not the 11 parsed samples: Wilson at the effective
    # n, p(1 - p) over the variance of the mean of the items' accuracies.
    p = sum(per_item) / 4
    var = sum((x - p) ** 2 for x in per_item) / 4 / 4
    acc = m["mean_accuracy"]
    assert acc["n"] == 4 and acc["n_answers"] == 11 and acc["n_effective"] == pytest.approx(p * (1 - p) / var, abs=0.01)
    assert acc["ci95"] == pytest.approx(list(wilson_bounds(p, p * (1 - p) / var)))


def test_majority_vote_rules():
    # No sample voted: wrong. A tie of verdicts on the voted answer: the first such sample's verdict.
    assert majority_vote([None, None], ["correct", "correct"]) == (None, None, False)
    assert majority_vote(["a", "a", "b"], ["incorrect", "correct", "correct"])[2] is False
    assert majority_vote(["a", "a", "b"], ["correct", "incorrect", "correct"])[2] is True
    assert majority_vote(["b", "a", "a"], ["correct", None, "correct"]) == ("a", 2 / 3, True)


def test_three_samples_answering_the_choice_a_vote_for_it():
    rows = [type("Row", (), {"output": "A", "answer_extracted": "A", "answer_reason": None})() for _ in range(3)]
    votes = [vote_key(r) for r in rows]
    assert votes == ["a", "a", "a"]
    assert majority_vote(votes, ["correct"] * 3) == ("a", 1.0, True)


def test_extracted_answers_vote_and_items_without_one_lose():
    df = _table(
        [
            ("a", 0, "so 12", "correct", True, "12"),
            ("a", 1, "it is 12!", "correct", True, "12"),
            ("a", 2, "13", "incorrect", False, "13"),
            ("b", 0, "no idea", "incorrect", False, None),
            ("b", 1, "none", "incorrect", False, None),
        ]
    )
    df["answer_reason"] = [None, None, None, "no answer extracted: x", "no answer extracted: x"]
    m = reference_measures(df)
    assert m["majority_vote_accuracy"]["value"] == 0.5 and m["answer_agreement"]["n"] == 1


def test_score_and_pairwise_measures_are_over_items():
    score = pd.DataFrame(
        {"id": ["a"] * 3 + ["b"] * 3, "sample": [0, 1, 2] * 2, "verdict": ["9", "7", "8", "2", None, "4"]}
    )
    score["score"] = pd.to_numeric(score["verdict"])
    m = score_measures(score)
    assert m["mean_score_over_items"]["value"] == pytest.approx((8 + 3) / 2)
    assert m["mean_score_over_items"]["n"] == 2
    pw = pd.DataFrame(
        {"id": ["a"] * 4 + ["b"] * 2, "sample": [0, 1, 2, 3, 0, 1], "verdict": ["win"] * 3 + ["loss"] + ["tie", None]}
    )
    m = pairwise_measures(pw)
    assert m["win_over_items"]["value"] == pytest.approx((0.75 + 0) / 2)
    assert m["tie_over_items"]["value"] == pytest.approx((0 + 1) / 2)
    assert m["loss_over_items"]["n"] == 2


# --- the sampler itself ------------------------------------------------------------------------


def test_per_row_sampler_draws_from_the_softmax_of_the_scores():
    from genjudge.engine.sampling import PerRowSampler, sample_seed

    logits = torch.tensor([2.0, 1.0, 0.0, -1.0, float("-inf")])
    rows = 6000
    sampler = PerRowSampler([sample_seed(0, "item", s) for s in range(rows)])
    out = sampler(None, logits.repeat(rows, 1))
    assert ((out == 0).sum(dim=1) == 1).all() and torch.isinf(out).sum() == rows * 4
    freq = torch.bincount(out.argmax(dim=1), minlength=5).float() / rows
    want = torch.softmax(logits, dim=0)
    assert freq[4] == 0
    assert torch.allclose(freq, want, atol=0.02), (freq, want)


def test_per_row_sampler_draws_do_not_depend_on_the_other_rows():
    from genjudge.engine.sampling import PerRowSampler

    torch.manual_seed(1)
    scores = torch.randn(4, 50)
    scores[0, 10:] = float("-inf")  # rows keep different numbers of tokens (as after top-k / top-p)
    scores[2, ::2] = float("-inf")
    seeds = [11, 22, 33, 44]
    together, alone = PerRowSampler(seeds), [PerRowSampler([s]) for s in seeds]
    for _ in range(20):  # steps: each row's generator advances by its own draws only
        picked = together(None, scores).argmax(dim=1)
        assert picked.tolist() == [a(None, scores[i : i + 1]).argmax(dim=1).item() for i, a in enumerate(alone)]
        assert picked[0] < 10 and picked[2] % 2 == 1
    reordered = PerRowSampler(seeds[::-1])(None, scores.flip(0)).argmax(dim=1).flip(0)
    assert reordered.tolist() == PerRowSampler(seeds)(None, scores).argmax(dim=1).tolist()


@pytest.fixture(scope="module")
def demo_generator(built_models):
    from transformers import AutoModelForCausalLM

    from genjudge.engine.loading import load_tokenizer

    tok = load_tokenizer(str(built_models / "demo-generator"), None)
    model = AutoModelForCausalLM.from_pretrained(built_models / "demo-generator", dtype=torch.float32).eval()
    return model, tok


def _questions():
    from conftest import ROOT

    with open(ROOT / "config/demo/questions.jsonl") as fh:
        return [json.loads(line)["question"] for line in fh]


def test_a_rows_text_does_not_depend_on_its_batch(demo_generator):
    from genjudge.engine.decoding import Generator, GenParams
    from genjudge.engine.sampling import sample_seed

    model, tok = demo_generator
    gen = Generator(model, tok, GenParams(24, True, 1.5, 1.0, 0), add_special_tokens=True)
    qs = _questions()[:12]
    seeds = [sample_seed(0, q, 0) for q in qs]
    whole = [r["output"] for r in gen.generate(qs, seeds)]
    parts = [r["output"] for r in gen.generate(qs[:5], seeds[:5]) + gen.generate(qs[5:], seeds[5:])]
    alone = [gen.generate([q], [s])[0]["output"] for q, s in zip(qs[7:], seeds[7:])]
    assert whole == parts and whole[7:] == alone
    other = [r["output"] for r in gen.generate(qs, [sample_seed(0, q, 1) for q in qs])]
    assert other != whole  # another sample index, other text


def test_warpers_match_what_generate_applies_when_sampling(demo_generator):
    from genjudge.engine.sampling import sampling_warpers

    model, tok = demo_generator
    enc = tok(_questions()[:3], return_tensors="pt", padding=True)
    with torch.inference_mode():
        out = model.generate(
            **enc,
            do_sample=True,
            temperature=1.5,
            top_p=0.9,
            max_new_tokens=1,
            output_scores=True,
            return_dict_in_generate=True,
            pad_token_id=tok.pad_token_id,
        )
        scores = model(**enc).logits[:, -1, :].float()
    warpers = sampling_warpers(model.generation_config, 1.5, 0.9)
    assert [type(w).__name__ for w in warpers] == ["TemperatureLogitsWarper", "TopKLogitsWarper", "TopPLogitsWarper"]
    for w in warpers:
        scores = w(enc["input_ids"], scores)
    assert torch.equal(torch.isinf(scores), torch.isinf(out.scores[0]))
    finite = ~torch.isinf(scores)
    assert torch.allclose(scores[finite], out.scores[0][finite], atol=1e-4)


@pytest.mark.parametrize("n_samples", [1, 3])
def test_plan_counts_every_sample_as_a_sequence(tmp_path, n_samples):
    from conftest import ROOT, genjudge_cli

    data = tmp_path / "d.jsonl"
    data.write_text("".join(json.dumps({"question": f"q {i}?", "answer": str(i)}) + "\n" for i in range(100)))
    cfg = {
        "run": "p",
        "dataset": {"path": str(data), "fields": {"id": None, "category": None}},
        "generator": {
            "model": str(ROOT / "tests/data/llama-3.1-70b-config"),
            "do_sample": True,
            "n_samples": n_samples,
        },
        "judge": {"model": str(ROOT / "tests/data/llama-3.1-70b-config"), "quantization": "4bit"},
        "shards": 2,
    }
    (tmp_path / "c.yaml").write_text(json.dumps(cfg))
    out = {}
    for role in ("generator", "judge"):
        args = ["plan", "--configfile", tmp_path / "c.yaml", "--gpus", "4x80GiB", "--role", role]
        out[role] = genjudge_cli(*args, check=True).stdout
    # 100 items in 2 shards, k samples each: every (item, turn, sample) is a request of its own.
    assert f"requests per job (item, turn, sample): d: {50 * n_samples};" in out["generator"]
    assert f"requests (item, turn, sample): {100 * n_samples:,}, {100 * n_samples:,} per job" in out["judge"]


def test_each_sample_of_a_conversation_follows_its_own_earlier_answers(tmp_path):
    """Samples and turns compose: sample s's turn 2 is sent with sample s's own turn-1 answer."""

    from conftest import ROOT
    from test_conversations import FIELDS, MT, write_jsonl

    from genjudge.config.specs import spec_for
    from genjudge.data.dataset import load_items
    from genjudge.data.shard_files import write_shard
    from genjudge.stages.merge import merge_generations

    items = load_items(write_jsonl(tmp_path / "q.jsonl", MT), FIELDS)
    write_shard(tmp_path / "0.jsonl", items)
    spec = spec_for(
        "generator",
        model=str(ROOT / "models" / "demo-generator"),
        max_new_tokens=6,
        batch_size=4,
        do_sample=True,
        temperature=1.5,
        n_samples=3,
    )

    def run(name):
        return generate_shard(tmp_path, spec, name=name)

    out, meta = run("out")
    assert len(out) == 3 * 5 and meta.computed_items == 15 and meta.n_samples == 3
    assert list(zip(out["id"], out["sample"], out["turn"]))[:4] == [
        ("81", 0, 1),
        ("81", 0, 2),
        ("81", 1, 1),
        ("81", 1, 2),
    ]
    by = out.set_index(["id", "sample", "turn"])
    for item in ("81", "82"):
        for s in range(3):
            sent = by.loc[(item, s, 2), "prompt_sent"]
            assert f"<|assistant|>\n{by.loc[(item, s, 1), 'output']}" in sent
    # Some item's samples answered turn 1 differently, so the check above tells their histories apart.
    assert out[out["turn"] == 1].groupby("id")["output"].nunique().max() > 1
    merged = merge_generations(items, [str(tmp_path / "out.parquet")])
    assert len(merged) == 15 and not merged.duplicated(["id", "turn", "sample"]).any()
    again, meta2 = run("again")  # resumed per (item, sample, turn)
    assert meta2.computed_items == 0 and again["output"].tolist() == out["output"].tolist()


def test_an_opponents_answer_is_its_sample_of_the_same_index_else_its_only_one():
    from genjudge.data.samples import SampleView

    answers = {("a", 1, 0): "a0", ("a", 1, 1): "a1", ("b", 1, 0): "b0"}
    assert SampleView(answers, 1)[("a", 1)] == "a1" and SampleView(answers, 0)[("a", 1)] == "a0"
    assert SampleView(answers, 2)[("b", 1)] == "b0"  # fewer samples (or an outside baseline): its sample 0
    assert ("c", 1) not in SampleView(answers, 0) and SampleView(answers, 0).get(("a", 2)) is None
    assert SampleView({("a", 1): "only"}, 3)[("a", 1)] == "only"  # a map keyed (id, turn)
    with pytest.raises(KeyError):
        SampleView(answers, 0)[("c", 1)]
