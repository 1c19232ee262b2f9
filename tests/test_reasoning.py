"""Reasoning traces: a thinking chat template on the demo generator, outputs planted in the item store
(closed, unclosed and absent traces) beside one the model writes itself, then the real judge job,
parsing and the report. Extraction and the judge see only the answer; an unclosed trace is never judged."""

import io
import json
import shutil

import pandas as pd
import pytest
from conftest import generate_shard
from judges import ROOT, judge_with

from genjudge.cluster.gpu_lease import Lease
from genjudge.config import defaults
from genjudge.config.experiment import Cell
from genjudge.config.specs import spec_for
from genjudge.data.dataset import load_items
from genjudge.data.shard_files import write_shard
from genjudge.judging import reasoning
from genjudge.judging.modes.base import TRUNCATED
from genjudge.stages.merge import merge_generations
from genjudge.stages.parse import parse_judgments
from genjudge.stages.report import summarise
from genjudge.stages.report_markdown import render_markdown
from genjudge.store.item_store import ItemStore
from genjudge.store.records import JudgeMeta

THINK = {"strip": "auto", "open": "<think>", "close": "</think>"}

# Qwen3's switch: thinking opens the trace in the prompt; enable_thinking=false closes an empty one there.
THINKING_TEMPLATE = (
    "{{ bos_token }}{% for m in messages %}<|{{ m['role'] }}|>\n{{ m['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>\n"
    "{% if enable_thinking is defined and enable_thinking is false %}<think>\n\n</think>\n\n"
    "{% else %}<think>\n{% endif %}{% endif %}"
)

QUESTIONS = [
    ("q0", "What is 2 + 3?", "5"),
    ("q1", "What is the capital of Peru?", "Lima"),
    ("q2", "How many legs does a spider have?", "8"),
    ("q3", "What is 7 * 6?", "42"),
]
# What the model "said" (planted in the item store); q3 is left to the model itself.
PLANTED = {
    "q0": "Let me add 2 and 3. Is it 6? No.</think>\n5",  # closed (the prompt opened the trace)
    "q1": "Peru... the capital might be Cusco or Lima, let me",  # unclosed: cut while thinking
    "q2": "8",  # no marker in the text, but the template opened a trace: never closed, so no answer
}


# --- the split itself ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, opened, shows, expected",
    [
        ("<think>plan</think> 42", False, False, reasoning.Split("42", "plan", reasoning.CLOSED)),
        ("  <think>\nplan\n</think>\n\n42", False, False, reasoning.Split("42", "plan", reasoning.CLOSED)),
        ("plan</think>42", True, False, reasoning.Split("42", "plan", reasoning.CLOSED)),
        # R1's template strips earlier traces on "</think>": it shows the markers, and only the close shows here
        ("plan</think>42", False, True, reasoning.Split("42", "plan", reasoning.CLOSED)),
        ("<think>still thinking", False, False, reasoning.Split("", "still thinking", reasoning.UNCLOSED)),
        ("still thinking", True, False, reasoning.Split("", "still thinking", reasoning.UNCLOSED)),
        ("42", False, False, reasoning.Split("42", None, reasoning.ABSENT)),
        ("<think></think>42", False, False, reasoning.Split("42", "", reasoning.CLOSED)),
        # a second trace after a first is trace too: the answer follows the last close marker
        (
            "<think>a</think>mid<think>b</think> final",
            False,
            False,
            reasoning.Split("final", "a</think>mid<think>b", reasoning.CLOSED),
        ),
        # a model whose template and prompt show no trace, writing about the tag: its text, whole
        (
            "The tag </think> closes a block.",
            False,
            False,
            reasoning.Split("The tag </think> closes a block.", None, reasoning.ABSENT),
        ),
    ],
)
def test_a_trace_is_split_from_the_answer(text, opened, shows, expected):
    assert reasoning.split(text, THINK, template_shows_markers=shows, opened=opened) == expected


def test_strip_false_keeps_the_text_and_auto_needs_a_marker_somewhere():
    text = "<think>plan</think>42"
    assert reasoning.split(text, {**THINK, "strip": False}) == reasoning.Split(text, None, reasoning.ABSENT)
    # auto without markers in the template or the text: the whole text is the answer
    assert reasoning.split("plan then 42", THINK).state == reasoning.ABSENT
    # strip: true with markers of its own
    custom = {"strip": True, "open": "[[plan]]", "close": "[[/plan]]"}
    assert reasoning.split("[[plan]]x[[/plan]]y", custom) == reasoning.Split("y", "x", reasoning.CLOSED)
    assert reasoning.template_shows("... <think> ...", THINK) and not reasoning.template_shows("plain", THINK)
    assert reasoning.prompt_opens("<|assistant|>\n<think>\n", THINK)
    assert not reasoning.prompt_opens("<|assistant|>\n<think>\n\n</think>\n\n", THINK)


# --- a thinking generator ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def thinker(tmp_path_factory):
    """The demo generator with a thinking chat template."""
    path = tmp_path_factory.mktemp("thinker") / "demo-thinker"
    shutil.copytree(ROOT / "models" / "demo-generator", path)
    (path / "chat_template.jinja").write_text(THINKING_TEMPLATE)
    return path


def gen_spec(model, **kw):
    return spec_for("generator", model=str(model), max_new_tokens=6, batch_size=4, **kw)


def write_items(tmp_path):
    data = tmp_path / "items.jsonl"
    data.write_text("".join(json.dumps({"id": i, "question": q, "answer": a}) + "\n" for i, q, a in QUESTIONS))
    items = load_items(data, {"id": "id", "prompt": "question", "reference": "answer"})
    write_shard(tmp_path / "0.jsonl", items)
    return items


def plant(tmp_path, spec, outputs: dict):
    """Put `outputs` (id -> the model's raw text) in the generation item store under their real keys."""
    from genjudge.engine.completion import PromptSet

    pset = PromptSet(spec, kind="generate")
    qs = dict((i, q) for i, q, _ in QUESTIONS)
    records = []
    for item_id, text in outputs.items():
        prompt = pset.render([qs[item_id]])[0]
        records.append(
            {
                "key": pset.key(prompt),
                "id": item_id,
                "output": text,
                "n_prompt_tokens": 10,
                "n_generated_tokens": 6,
                "finish_reason": "length" if item_id == "q1" else "stop",
            }
        )
    ItemStore(tmp_path / "store", "planted").append(records)
    return pset


def test_chat_template_kwargs_change_the_prompt_and_the_item_key(thinker):
    from genjudge.engine.completion import PromptSet

    on, off = (
        PromptSet(gen_spec(thinker), "generate"),
        PromptSet(gen_spec(thinker, chat_template_kwargs={"enable_thinking": False}), "generate"),
    )
    p_on, p_off = on.render(["What is 2 + 3?"])[0], off.render(["What is 2 + 3?"])[0]
    assert p_on.endswith("<|assistant|>\n<think>\n") and p_off.endswith("<think>\n\n</think>\n\n")
    assert on.key(p_on) != off.key(p_off)
    # The variables are in the key even where the template ignores them (the demo's own template).
    plain = [
        PromptSet(gen_spec(ROOT / "models" / "demo-generator", chat_template_kwargs=kw), "generate")
        for kw in ({}, {"x": 1})
    ]
    prompts = [p.render(["What is 2 + 3?"])[0] for p in plain]
    assert prompts[0] == prompts[1] and plain[0].key(prompts[0]) != plain[1].key(prompts[1])
    # No variables: the key of every result made before the setting existed.
    assert "chat_template_kwargs" not in plain[0].spec.item_params()


@pytest.fixture(scope="module")
def thought(tmp_path_factory, thinker):
    """One generation shard: three planted outputs and one the model writes (q3), then merged."""
    tmp_path = tmp_path_factory.mktemp("thought")
    items = write_items(tmp_path)
    spec = gen_spec(thinker)
    plant(tmp_path, spec, PLANTED)
    rows, meta = generate_shard(tmp_path, spec)
    merged = merge_generations(items, [tmp_path / "out.parquet"])
    path = tmp_path / "generations.parquet"
    merged.to_parquet(path)
    return rows.set_index("id"), meta, merged, path


def test_the_trace_is_kept_apart_and_an_unclosed_one_leaves_no_answer(thought, thinker):
    from genjudge.engine.loading import load_tokenizer

    rows, meta, _, _ = thought
    assert rows.loc["q0", ["output", "reasoning", "reasoning_state"]].tolist() == [
        "5",
        "Let me add 2 and 3. Is it 6? No.",
        "closed",
    ]
    assert rows.loc["q1", ["output", "reasoning", "reasoning_state"]].tolist() == ["", PLANTED["q1"], "unclosed"]
    assert rows.loc["q2", ["output", "reasoning_state"]].tolist() == ["", "unclosed"]
    # The model's own output from a prompt ending in <think>: a few tokens, never closed.
    assert rows.loc["q3", "reasoning_state"] == "unclosed" and rows.loc["q3", "output"] == ""
    assert meta.n_reasoning_unfinished == 3 and meta.computed_items == 1
    tok = load_tokenizer(str(thinker), None)
    traces = [t for t in rows["reasoning"] if t]
    assert meta.n_reasoning_tokens == sum(len(tok(t, add_special_tokens=False)["input_ids"]) for t in traces) > 0


def test_thinking_off_gives_answers_without_traces(tmp_path, thinker):
    write_items(tmp_path)
    spec = gen_spec(thinker, chat_template_kwargs={"enable_thinking": False})
    plant(tmp_path, spec, {"q0": "5", "q1": "Lima", "q2": "8", "q3": "42"})
    rows, meta = generate_shard(tmp_path, spec)
    assert rows["output"].tolist() == ["5", "Lima", "8", "42"]
    assert set(rows["reasoning_state"]) == {"absent"} and rows["reasoning"].isna().all()
    assert meta.n_reasoning_tokens == 0 and meta.computed_items == 0


@pytest.fixture(scope="module")
def judged(tmp_path_factory, thought):
    _, gen_meta, merged, path = thought
    tmp_path = tmp_path_factory.mktemp("judged")
    spec = spec_for("judge", model=str(ROOT / "models" / "demo-judge"), max_new_tokens=8, batch_size=4)
    meta = judge_with(
        cells=[Cell("g", "d")],
        generations={("g", "d"): path},
        out_path=tmp_path / "raw.parquet",
        meta_path=tmp_path / "raw.meta.json",
        spec=spec,
        template_path=ROOT / "config" / "templates" / "reference.txt",
        store_dir=tmp_path / "store",
        run="t",
        lease=Lease([], "none"),
        log_stream=io.StringIO(),
    )
    raw = pd.read_parquet(tmp_path / "raw.parquet")
    df = parse_judgments(merged, raw, "reference", options={"reasoning": THINK})
    return meta, raw.set_index("id"), df, gen_meta, spec


def test_the_judge_sees_only_answers_and_never_an_unfinished_one(judged):
    meta, raw, df, _, _ = judged
    prompt = raw.loc["q0", "judge_prompt"]
    assert "5" in prompt and "Is it 6" not in prompt and "<think>" not in prompt
    for item in ("q1", "q2", "q3"):
        assert raw.loc[item, "decided_by"] == reasoning.NOT_FINISHED and pd.isna(raw.loc[item, "judge_prompt"])
    assert meta.n_requests == 4 and meta.computed_items == 1
    by_id = df.set_index("id")
    assert by_id.loc["q0", "exact_match"]  # extraction and exact match saw "5", not the trace
    assert (by_id.loc[["q1", "q2", "q3"], "unparsed_reason"] == reasoning.REASONING_UNFINISHED).all()
    assert by_id.loc[["q1", "q2", "q3"], "exact_match"].isna().all()  # no answer: left out, never wrong


def test_the_report_counts_unfinished_reasoning_on_its_own_line(judged):
    _, _, df, gen_meta, spec = judged
    config = defaults(run="t", generator={"model": "g", "max_new_tokens": 6}, judge=spec.as_dict())
    summary = summarise(df, [gen_meta], JudgeMeta(), config)
    assert summary.n_reasoning_unfinished == 3 and summary.reasoning_unfinished_rate == 0.75
    assert summary.n_reasoning_tokens == gen_meta.n_reasoning_tokens
    md = render_markdown(summary, df)
    assert (
        "| reasoning not finished (trace never closed: no answer, not judged) | 3 (75.0%); counted as incorrect "
        "(report.unfinished_reasoning) |" in md
    )
    assert "## Reasoning not finished" in md and "they count as incorrect (report.unfinished_reasoning)" in md
    # q1 (planted) reached the token limit; q2 (planted) and q3 (the model's own) ended by end-of-sequence
    assert df.set_index("id").loc[["q1", "q2", "q3"], "finish_reason"].tolist() == ["length", "stop", "eos"]
    assert summary.reasoning_unfinished_causes == {reasoning.LIMIT: 1, reasoning.ENDED: 2}
    assert "1 reached generator.max_new_tokens inside the trace: raise generator.max_new_tokens" in md
    assert "2 ended by an end-of-sequence token (or a stop string) inside the trace" in md
    assert "more tokens will not help" in md
    # By default an unfinished trace counts as incorrect in the headline (lm-evaluation-harness's rule):
    # a model that never finishes is not rewarded for it.
    q0 = df.set_index("id").loc["q0", "verdict"]
    assert summary.reasoning_unfinished_counted_as == "incorrect" and summary.n_unparsed == 0
    assert summary.n_judged == 4 and summary.metrics["verdict_counts"]["incorrect"] >= 3
    assert summary.accuracy == (1.0 if q0 == "correct" else 0.0) / 4
    # report.unfinished_reasoning: leave_out: not judged, so left out: among the unparsed with their own reason
    config["report"]["unfinished_reasoning"] = "leave_out"
    left = summarise(df, [gen_meta], JudgeMeta(), config)
    assert left.n_unparsed == 3 and left.unparsed_reasons == {reasoning.REASONING_UNFINISHED: 3}
    assert left.reasoning_unfinished_counted_as is None and left.n_judged == 1
    assert "; left out of the measures (report.unfinished_reasoning: leave_out) |" in render_markdown(left, df)


def test_a_judge_verdict_is_read_after_the_judges_own_trace():
    gens = pd.DataFrame({"id": ["a", "b", "c"], "prompt": ["q"] * 3, "reference": ["r"] * 3, "output": ["x"] * 3})
    raw = pd.DataFrame(
        {
            "id": ["a", "b", "c"],
            "order": [0, 0, 0],
            "decided_by": ["judge"] * 3,
            "judge_output": [
                "<think>VERDICT: INCORRECT? no, it is right.</think>VERDICT: CORRECT",
                "<think>VERDICT: CORRECT, but let me check again",
                "VERDICT: INCORRECT",
            ],
            "p_correct": [None] * 3,
            "judge_finish_reason": ["stop", "length", "stop"],
        }
    )
    df = parse_judgments(gens, raw, "reference", options={"reasoning": THINK}).set_index("id")
    assert df.loc["a", "verdict"] == "correct" and df.loc["c", "verdict"] == "incorrect"
    assert pd.isna(df.loc["b", "verdict"]) and df.loc["b", "unparsed_reason"] == reasoning.JUDGE_REASONING_UNFINISHED
    # Without stripping, the unclosed trace's "VERDICT: CORRECT" would have been read as the verdict.
    plain = parse_judgments(gens, raw, "reference", options={"reasoning": {**THINK, "strip": False}})
    assert plain.set_index("id").loc["b", "verdict"] == "correct"
    assert TRUNCATED != reasoning.JUDGE_REASONING_UNFINISHED


def test_a_judge_whose_prompt_opens_its_trace_and_runs_out_of_tokens_is_unparsed_not_read_from_the_trace():
    gens = pd.DataFrame({"id": ["a", "b"], "prompt": ["q"] * 2, "reference": ["r"] * 2, "output": ["x"] * 2})
    raw = pd.DataFrame(
        {
            "id": ["a", "b"],
            "order": [0, 0],
            "decided_by": ["judge"] * 2,
            "judge_prompt": ["Grade it.<|assistant|>\n<think>\n"] * 2,
            "judge_output": [
                "It says x. VERDICT: CORRECT? Let me check again whether",  # cut while thinking
                "It says x, which is wrong.</think>VERDICT: INCORRECT",
            ],
            "p_correct": [None] * 2,
            "judge_finish_reason": ["length", "stop"],
        }
    )
    for strip in ("auto", True):
        df = parse_judgments(gens, raw, "reference", options={"reasoning": {**THINK, "strip": strip}})
        by_id = df.set_index("id")
        assert pd.isna(by_id.loc["a", "verdict"]), strip
        assert by_id.loc["a", "unparsed_reason"] == reasoning.JUDGE_REASONING_UNFINISHED
        assert by_id.loc["b", "verdict"] == "incorrect"
        assert "judge_prompt" not in df


def test_a_conversation_whose_turn_never_finished_thinking_gets_no_later_turn(tmp_path, thinker):
    """Turn 2 would follow an empty reply: it is skipped (left out of every count, listed with the reason),
    never generated, as on_too_long: skip leaves out the turns after one that did not fit."""
    from genjudge.engine.completion import PromptSet

    data = tmp_path / "mt.jsonl"
    rows = [
        {"id": "c1", "turns": ["What is 2 + 3?", "Now multiply that by 4."]},  # turn 1 planted, closed
        {"id": "c2", "turns": ["What is 7 * 6?", "And minus 2?"]},  # turn 1 the model's own: never closed
    ]
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    write_shard(tmp_path / "0.jsonl", load_items(data, {"id": "id", "prompt": "turns"}))
    spec = gen_spec(thinker)
    pset = PromptSet(spec, kind="generate")
    prompt = pset.render(["What is 2 + 3?"])[0]
    record = {"key": pset.key(prompt), "id": "c1", "output": "Add them.</think>\n5", "n_prompt_tokens": 10}
    ItemStore(tmp_path / "store", "planted").append([{**record, "n_generated_tokens": 6, "finish_reason": "stop"}])
    out, meta = generate_shard(tmp_path, spec)
    got = out.set_index(["id", "turn"])
    assert got.loc[("c1", 1), "reasoning_state"] == "closed" and got.loc[("c1", 1), "output"] == "5"
    assert pd.isna(got.loc[("c1", 2), "skipped"])  # followed a real answer: generated
    assert got.loc[("c2", 1), "reasoning_state"] == "unclosed" and pd.isna(got.loc[("c2", 1), "skipped"])
    assert got.loc[("c2", 2), "skipped"] == "the reasoning of turn 1 never closed: no answer to continue from"
    assert pd.isna(got.loc[("c2", 2), "output"]) and pd.isna(got.loc[("c2", 2), "prompt_sent"])
    assert meta.n_skipped == 1 and meta.n_items == 4


def test_a_logprob_verdict_after_a_template_that_opens_a_trace_is_read_after_it_closed(tmp_path):
    """Qwen3's and DeepSeek-R1's templates end the prompt inside `<think>`: a logprob verdict appended there
    would be read inside the trace. The trace is closed empty first, as enable_thinking: false does."""
    from genjudge.engine.completion import PromptSet

    judge = tmp_path / "thinking-judge"
    shutil.copytree(ROOT / "models" / "demo-judge", judge)
    (judge / "chat_template.jinja").write_text(THINKING_TEMPLATE)
    spec = spec_for("judge", model=str(judge), verdict="logprob", max_new_tokens=4)
    (prompt,) = PromptSet(spec, "judge-logprob", suffix="VERDICT:").render(["Is 5 right?"])
    assert prompt.endswith("<|assistant|>\n<think>\n</think>\n\nVERDICT:"), prompt
    # A template that closes it itself (thinking off), or generated verdicts: as before.
    off = spec_for(
        "judge", model=str(judge), verdict="logprob", max_new_tokens=4, chat_template_kwargs={"enable_thinking": False}
    )
    (prompt,) = PromptSet(off, "judge-logprob", suffix="VERDICT:").render(["Is 5 right?"])
    assert prompt.endswith("<think>\n\n</think>\n\nVERDICT:") and prompt.count("</think>") == 1
    (prompt,) = PromptSet(spec_for("judge", model=str(judge), max_new_tokens=4), "judge").render(["Is 5 right?"])
    assert prompt.endswith("<|assistant|>\n<think>\n")
