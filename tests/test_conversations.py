"""Multi-turn conversations (MT-bench's `turns`): generated turn by turn with the generator's own
answers as history, stored and cached per turn, judged per turn, reported per turn."""

import json
import os
import re
import sys

import pandas as pd
import pytest
from conftest import generate_shard
from judges import ROOT
from report_view import report_view

from genjudge.config.specs import spec_for
from genjudge.data.conversation import expand_turns
from genjudge.data.dataset import load_items
from genjudge.data.shard_files import write_shard
from genjudge.errors import InputError
from genjudge.stages.merge import MergeError, merge_generations
from genjudge.store.records import GenerateMeta

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "browser"))
import chromium  # noqa: E402

MT = [
    {
        "question_id": 81,
        "category": "math",
        "turns": ["What is 2 + 3?", "Now multiply that by 4."],
        "reference": ["5", "20"],
    },
    {"question_id": 82, "category": "writing", "turns": ["What is the capital of France?", "And of Peru?"]},
    {"question_id": 83, "category": "writing", "turns": ["Count the letters in cat."]},
]
FIELDS = {"id": "question_id", "prompt": "turns", "reference": "reference", "category": "category"}


def write_jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_a_list_of_turns_is_a_multi_turn_item_with_per_turn_references(tmp_path):
    items = load_items(write_jsonl(tmp_path / "q.jsonl", MT), FIELDS)
    assert items["prompt"].tolist() == ["What is 2 + 3?", "What is the capital of France?", "Count the letters in cat."]
    assert items["reference"][0] == "5" and pd.isna(items["reference"][1])
    assert json.loads(items["turns"][0]) == [
        {"question": "What is 2 + 3?", "reference": "5"},
        {"question": "Now multiply that by 4.", "reference": "20"},
    ]
    assert items["turns"][2] is None  # one turn is a single-turn item
    rows = expand_turns(items)
    refs = [None if pd.isna(r) else r for r in rows["reference"]]
    assert list(zip(rows["id"], rows["turn"], rows["prompt"], refs)) == [
        ("81", 1, "What is 2 + 3?", "5"),
        ("81", 2, "Now multiply that by 4.", "20"),
        ("82", 1, "What is the capital of France?", None),
        ("82", 2, "And of Peru?", None),
        ("83", 1, "Count the letters in cat.", None),
    ]


@pytest.mark.parametrize(
    "row,message",
    [
        ({"question_id": 1, "turns": ["a", " "]}, "line 1: field 'turns', turn 2 is empty"),
        ({"question_id": 1, "turns": ["a", "b"], "reference": ["x", "y", "z"]}, "3 references for 2 turns"),
    ],
)
def test_bad_turns_are_named(tmp_path, row, message):
    with pytest.raises(InputError, match=message):
        load_items(write_jsonl(tmp_path / "q.jsonl", [row]), FIELDS)


def generate(tmp_path, items, store="store", name="out"):
    write_shard(tmp_path / "0.jsonl", items)
    spec = spec_for("generator", model=str(ROOT / "models" / "demo-generator"), max_new_tokens=6, batch_size=4)
    return generate_shard(tmp_path, spec, name=name, store=store)


def test_two_turn_items_give_one_generation_per_turn_with_turn_one_in_the_turn_two_prompt(tmp_path):
    items = load_items(write_jsonl(tmp_path / "q.jsonl", MT), FIELDS)
    out, meta = generate(tmp_path, items)
    assert list(zip(out["id"], out["turn"])) == [("81", 1), ("81", 2), ("82", 1), ("82", 2), ("83", 1)]
    by = out.set_index(["id", "turn"])
    for item in ("81", "82"):
        first, second = by.loc[(item, 1)], by.loc[(item, 2)]
        assert first["output"].strip(), "the demo generator answers turn 1"
        # Turn 2 is sent as the chat so far: question 1, the generator's own answer, question 2.
        sent = second["prompt_sent"]
        q1, q2 = (t["question"] for t in json.loads(items.set_index("id").loc[item, "turns"]))
        at = [sent.index(f"<|user|>\n{q1}"), sent.index(f"<|assistant|>\n{first['output']}"), sent.index(q2)]
        assert at == sorted(at) and sent.endswith("<|assistant|>\n")
        assert first["output"] not in first["prompt_sent"]
    assert meta.computed_items == 5 and meta.resumed_items == 0 and meta.n_items == 5
    assert GenerateMeta.read(tmp_path / "out.meta.json").computed_items == 5

    # Merged: one row per (id, turn) with that turn's question and reference.
    merged = merge_generations(items, [str(tmp_path / "out.parquet")])
    row = merged.set_index(["id", "turn"]).loc[("81", 2)]
    assert row["prompt"] == "Now multiply that by 4." and row["reference"] == "20"

    # Rerun: every (item, turn) comes from the cache.
    again, meta2 = generate(tmp_path, items, name="again")
    assert meta2.computed_items == 0 and meta2.resumed_items == 5
    assert again["output"].tolist() == out["output"].tolist()
    # Nothing was computed, so no model was loaded: no load time, only the tokenizer's and fingerprint's.
    assert meta.load_seconds > 0 and meta2.load_seconds == 0 and meta2.setup_seconds > 0


def test_turns_resume_one_at_a_time(tmp_path):
    """A store holding turn 1 only (the first turns generated as single-turn prompts) computes
    only the second turns."""
    multi = load_items(write_jsonl(tmp_path / "q.jsonl", MT), FIELDS)
    first = load_items(
        write_jsonl(tmp_path / "q1.jsonl", MT), {**FIELDS, "prompt": "turns.0", "reference": "reference.0"}
    )
    one, _ = generate(tmp_path, first, name="first")
    out, meta = generate(tmp_path, multi)
    assert meta.resumed_items == 3 and meta.computed_items == 2
    assert out[out["turn"] == 1]["output"].tolist() == one["output"].tolist()


def test_merge_names_a_missing_turn(tmp_path):
    items = load_items(write_jsonl(tmp_path / "q.jsonl", MT), FIELDS)
    pd.DataFrame({"id": ["81", "82", "82", "83"], "turn": [1, 1, 2, 1], "output": "o"}).to_parquet(tmp_path / "0.pq")
    with pytest.raises(MergeError, match=r"1 missing \(id, turn\) pair\(s\) \[\('81', 2\)\]"):
        merge_generations(items, [str(tmp_path / "0.pq")])


def test_context_overflow_stops_the_job_before_loading_naming_the_item(tmp_path):
    items = load_items(write_jsonl(tmp_path / "q.jsonl", MT), FIELDS)
    write_shard(tmp_path / "0.jsonl", items)
    # The demo generator's context is 2048 tokens (max_position_embeddings).
    spec = spec_for("generator", model=str(ROOT / "models" / "demo-generator"), max_new_tokens=2040, batch_size=4)
    with pytest.raises(InputError) as err:
        generate_shard(tmp_path, spec)
    msg = str(err.value)
    n = int(re.search(r"the prompt as sent is (\d+) tokens", msg).group(1))
    assert n + 2040 > 2048 and f"{n + 2040} tokens, more than" in msg and "context of 2048" in msg
    assert re.search(r"item '8[123]'", msg) and "max_position_embeddings" in msg
    assert not (tmp_path / "out.parquet").exists() and not (tmp_path / "store").exists()


def test_vllm_max_model_len_is_checked_as_the_context_and_keys_every_item(tmp_path):
    items = load_items(write_jsonl(tmp_path / "q.jsonl", MT), FIELDS)
    write_shard(tmp_path / "0.jsonl", items)
    model = str(ROOT / "models" / "demo-generator")
    short = spec_for("generator", model=model, engine="vllm", max_new_tokens=4, vllm={"max_model_len": 15})
    # vLLM would cut every answer at 15 tokens (finish reason `length`): stopped before the engine starts.
    with pytest.raises(InputError, match=r"context of 15 \(the engine setting vllm\.max_model_len\)"):
        generate_shard(tmp_path, short)
    assert not (tmp_path / "out.parquet").exists()
    # An answer made under the limit is never reused without it (or under another one).
    full = spec_for("generator", model=model, engine="vllm", max_new_tokens=4)
    other = spec_for("generator", model=model, engine="vllm", max_new_tokens=4, vllm={"max_model_len": 4096})
    keys = {s.item_params().get("vllm_max_model_len") for s in (short, full, other)}
    assert keys == {15, None, 4096}
    assert short.rerun_params()["vllm_max_model_len"] == 15 and "vllm_max_model_len" not in full.rerun_params()
    # The transformers engine reads no vllm setting.
    hf = spec_for("generator", model=model, max_new_tokens=4, vllm={"max_model_len": 15})
    assert "vllm_max_model_len" not in hf.item_params()


def test_on_too_long_skip_leaves_out_a_turn_and_the_turns_after_it(tmp_path):
    import json
    import shutil

    items = load_items(write_jsonl(tmp_path / "q.jsonl", MT), FIELDS)
    write_shard(tmp_path / "0.jsonl", items)
    model = tmp_path / "small"
    shutil.copytree(ROOT / "models" / "demo-generator", model)
    cfg = json.loads((model / "config.json").read_text())
    # As sent: 81 turn 1 is 12 tokens, turn 2 35; 82 turn 1 16; 83 (one turn) 21; with 8 new tokens, 22 fit.
    (model / "config.json").write_text(json.dumps({**cfg, "max_position_embeddings": 22}))
    spec = spec_for("generator", model=str(model), max_new_tokens=8, batch_size=4)
    with pytest.raises(InputError, match=r"item '8[123]'.*on_too_long: skip"):
        generate_shard(tmp_path, spec, name="fail")
    out, meta = generate_run(tmp_path, spec)
    got = {(i, t): (o, w) for i, t, o, w in zip(out["id"], out["turn"], out["output"], out["skipped"])}
    assert set(got) == {("81", 1), ("81", 2), ("82", 1), ("82", 2), ("83", 1)}  # every row, as merge wants
    assert not pd.isna(got[("81", 1)][0]) and pd.isna(got[("81", 1)][1])
    assert pd.isna(got[("81", 2)][0]) and got[("81", 2)][1].startswith(
        "too long for the generator (turn 2): the prompt"
    )
    assert got[("82", 1)][1].startswith("too long for the generator (turn 1): the prompt as sent is 16 tokens")
    assert got[("82", 2)][1].startswith("an earlier turn was skipped: too long for the generator (turn 1)")
    assert "context of 22" in got[("83", 1)][1]
    assert meta.n_skipped == 4 and meta.computed_items == 1


def generate_run(tmp_path, spec):
    """generate_shard with on_too_long: skip."""
    import io

    from judges import generate_with

    from genjudge.cluster.gpu_lease import Lease

    meta = generate_with(
        shard=0,
        shard_path=tmp_path / "0.jsonl",
        out_path=tmp_path / "skip.parquet",
        meta_path=tmp_path / "skip.meta.json",
        spec=spec,
        store_dir=tmp_path / "store-skip",
        run="t",
        lease=Lease([], "none"),
        log_stream=io.StringIO(),
        on_too_long="skip",
    )
    return pd.read_parquet(tmp_path / "skip.parquet"), meta


TURN2 = """Question 1: {question_1}
Answer 1: {answer_1}
Question 2: {question_2}
Reference 2: {ref_answer_2}
Candidate 2: {answer_2}
VERDICT:"""


@pytest.mark.workflow
def test_a_multi_turn_run_is_judged_and_reported_per_turn(workflow):
    data = workflow.path / "mt.jsonl"
    write_jsonl(
        data,
        [
            MT[0],
            {"question_id": 84, "category": "math", "turns": ["What is 1 + 1?", "Add 3."], "reference": ["2", "5"]},
            MT[1],  # no reference: judged by no one in reference mode
            {"question_id": 85, "category": "math", "turns": ["What is 6 - 2?"], "reference": ["4"]},
        ],
    )
    (workflow.path / "config" / "turn2.txt").write_text(TURN2)
    cfg = workflow.write_config(
        "mt.yaml",
        run="mt",
        shards=2,
        dataset={"path": str(data), "fields": FIELDS},
        generator={"max_new_tokens": 8},
        judge={"max_new_tokens": 6, "templates": [{"turns": [2], "template": "config/turn2.txt"}]},
    )
    workflow.run("--cores", "2", "--configfile", cfg)
    res = workflow.results("mt")
    gens = pd.read_parquet(res / "generations" / "demo-generator" / "mt.parquet").set_index(["id", "turn"])
    assert sorted(gens.index) == [("81", 1), ("81", 2), ("82", 1), ("82", 2), ("84", 1), ("84", 2), ("85", 1)]
    raw = pd.read_parquet(res / "judge" / "demo-judge" / "raw.parquet").set_index(["id", "turn"])
    for item in ("81", "84"):
        prompt = raw.loc[(item, 2), "judge_prompt"]
        q1, a1, a2 = gens.loc[(item, 1), "prompt"], gens.loc[(item, 1), "output"], gens.loc[(item, 2), "output"]
        assert f"Question 1: {q1}\nAnswer 1: {a1}\n" in prompt and f"Candidate 2: {a2}\n" in prompt
        assert f"Reference 2: {gens.loc[(item, 2), 'reference']}" in prompt
        assert "Question 1" not in raw.loc[(item, 1), "judge_prompt"]  # turn 1: the run's own template
    judged = pd.read_parquet(res / "judgments" / "demo-judge.parquet").set_index(["id", "turn"])
    assert judged.loc[("82", 1), "decided_by"] == "no reference" == judged.loc[("82", 2), "unparsed_reason"]
    assert pd.isna(raw.loc[("82", 2), "judge_prompt"])  # never sent to the judge
    summary = json.loads((res / "report" / "summary.json").read_text())
    assert summary["n_items"] == 4 and summary["n_answers"] == 7 and summary["unparsed_reasons"]["no reference"] == 2
    turns = summary["per_turn"]
    assert {t: c["n_items"] for t, c in turns.items()} == {"1": 4, "2": 3}
    assert turns["2"]["n_judged"] + turns["2"]["n_unparsed"] == 3
    report = (res / "report" / "report.md").read_text()
    assert "## By turn" in report and "| 2 | 3 |" in report

    # report.html: a By-turn section, and every n says what it counts (4 items, 7 answers).
    view = report_view(res)
    assert (view.n_items, view.n_answers) == (4, 7) and "by_turn" in [i for i, _ in view.nav]
    by_turn = view.section("by_turn").table
    assert by_turn.column("turn") == ["1", "2"] and by_turn.column("items") == ["4", "3"]
    judged = [int(n) + int(u) for n, u in zip(by_turn.column("judged answers"), by_turn.column("unparsed answers"))]
    assert judged == [4, 3] and view.section("by_turn").plot is not None
    board = view.section("headline").leaderboard
    counts = (board.column("items"), board.column("answers"), board.column("unparsed answers"))
    assert counts == (["4"], ["7"], [str(summary["n_unparsed"])])
    categories = view.section("categories")
    assert categories.counts.startswith("judged answers of the category")
    page = (res / "report" / "report.html").read_text()
    assert (
        "4 items (the datasets' questions) · 7 verdicts (answers judged: items × turns × samples)" in page
        and f"(n = {categories.counts})" not in page
    )
    assert f"n = {categories.counts}" in " ".join(page.split())
    reason = chromium.unavailable_reason()
    if reason:
        pytest.skip(reason)
    png = chromium.section_screenshot(res / "report" / "report.html", "by_turn", workflow.path / "by-turn.png", res)
    assert chromium.ink(png) > 0.02


@pytest.mark.workflow
def test_reference_mode_without_any_reference_is_refused_while_planning(workflow):
    data = workflow.path / "noref.jsonl"
    write_jsonl(data, [{"question_id": i, "turns": [f"q{i}", "more"], "answer": ""} for i in range(4)])
    cfg = workflow.write_config(
        "noref.yaml", run="noref", dataset={"path": str(data), "fields": {**FIELDS, "reference": "answer"}}
    )
    proc = workflow.run("-n", "--configfile", cfg, check=False)
    assert proc.returncode != 0
    assert (
        "judge mode 'reference' grades against a reference answer, and no item has a value in its field 'answer'"
        in (proc.stderr + proc.stdout)
    )
    assert not workflow.results("noref").exists()


def test_a_template_sees_only_the_turns_up_to_its_own(tmp_path):
    from genjudge.data.conversation import with_history
    from genjudge.judging import modes
    from genjudge.judging.templates import load_template

    score = modes.get("score")
    later = tmp_path / "later.txt"
    later.write_text("{question_1} {answer_2} SCORE:")
    text = load_template(later, score)  # a valid template, for turn 2
    items = load_items(write_jsonl(tmp_path / "q.jsonl", MT), FIELDS)
    rows = with_history(expand_turns(items).assign(output="o"))
    spec = spec_for("judge", model="x", mode="score")
    two = score.requests(rows[(rows["id"] == "81") & (rows["turn"] == 2)], spec, text)
    assert two[0].text == "What is 2 + 3? o SCORE:" and two[0].turn == 2
    with pytest.raises(InputError, match=r"item '81': the judge template uses \{answer_2\}.*turn 1 sees turns 1..1"):
        score.requests(rows[(rows["id"] == "81") & (rows["turn"] == 1)], spec, text)
    wrong = tmp_path / "wrong.txt"
    wrong.write_text("{answer_a_1} {answer_2x}")
    with pytest.raises(InputError, match=r"unknown placeholder\(s\) \['answer_2x', 'answer_a_1'\]"):
        load_template(wrong, score)


def test_reference_mode_leaves_items_without_a_reference_to_no_one(tmp_path):
    from genjudge.data.conversation import with_history
    from genjudge.judging import modes

    ref = modes.get("reference")
    items = load_items(write_jsonl(tmp_path / "q.jsonl", MT), FIELDS)
    rows = with_history(expand_turns(items).assign(output="5"))
    spec = spec_for("judge", model="x", mode="reference")
    reqs = ref.requests(rows, spec, "{question} {reference} {candidate}")
    decided = {(r.id, r.turn): r.decided_by for r in reqs}
    assert decided == {
        ("81", 1): "judge",
        ("81", 2): "judge",
        ("82", 1): "no reference",
        ("82", 2): "no reference",
        ("83", 1): "no reference",
    }
    assert all("(none)" not in r.text for r in reqs if r.text)


def test_turns_from_parquet_lists(tmp_path):
    pd.DataFrame(
        {"question_id": [81, 82], "turns": [["a?", "b?"], ["c?", "d?"]], "reference": [["1", "2"], None]}
    ).to_parquet(tmp_path / "q.parquet")
    items = load_items(tmp_path / "q.parquet", {"id": "question_id", "prompt": "turns", "reference": "reference"})
    rows = expand_turns(items)
    assert list(zip(rows["id"], rows["turn"], rows["prompt"])) == [
        ("81", 1, "a?"),
        ("81", 2, "b?"),
        ("82", 1, "c?"),
        ("82", 2, "d?"),
    ]
    assert rows["reference"].tolist()[:2] == ["1", "2"] and rows["reference"][2:].isna().all()


def test_the_plan_sizes_a_conversation_by_its_last_turn(tmp_path):
    from genjudge.config import defaults
    from genjudge.data.dataset import load_items
    from genjudge.planning.workload import generator_workload

    long_turns = [{"question_id": 1, "turns": ["x" * 400, "y" * 400, "z" * 40]}]
    cfg = defaults(
        dataset={"path": str(write_jsonl(tmp_path / "q.jsonl", long_turns)), "fields": FIELDS},
        generator={"model": "m", "max_new_tokens": 100},
    )

    def workload():
        ds = cfg["dataset"]
        return generator_workload({"q": load_items(ds["path"], ds["fields"])}, cfg["generator"])

    wl = workload()
    assert wl.longest == 210 + 2 * 100 and "turn 3 (earlier turns and answers included)" in wl.how
    # One request per turn, each with the questions and answers before it.
    assert [(r.n, r.prompt_tokens) for r in wl.requests["q"]] == [(1, 100), (1, 200 + 100), (1, 210 + 200)]
    cfg["dataset"]["fields"] = {**FIELDS, "prompt": "turns.0"}
    assert workload().longest == 100  # one turn: its own length
