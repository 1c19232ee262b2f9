import json

import pandas as pd
import pytest

from genjudge.dataset import load_items
from genjudge.errors import InputError
from genjudge.sharding import shard_bounds, split_items


def write_jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_gsm8k_style_jsonl_loads_with_field_mapping_and_derived_ids(tmp_path):
    p = write_jsonl(tmp_path / "gsm8k.jsonl", [
        {"question": "Natalia sold 48 clips...", "answer": "She sold 24 in May.\n#### 72"},
        {"question": "Weng earns $12 an hour...", "answer": "#### 10"},
    ])
    items = load_items(p, {"id": None, "prompt": "question", "reference": "answer", "category": None})
    assert list(items.columns) == ["id", "prompt", "reference", "category"]
    assert items["prompt"][0].startswith("Natalia")
    assert items["reference"][1] == "#### 10"
    assert items["id"].is_unique and len(items["id"][0]) == 16
    # Stable: the same content gives the same ids on every load.
    assert items["id"].tolist() == load_items(p, {"id": None, "prompt": "question", "reference": "answer"})["id"].tolist()


def test_mt_bench_question_jsonl_uses_first_turn(tmp_path):
    p = write_jsonl(tmp_path / "question.jsonl", [
        {"question_id": 81, "category": "writing", "turns": ["Compose a blog post.", "Rewrite it."]},
        {"question_id": 101, "category": "reasoning", "turns": ["Who is second?", "And now?"],
         "reference": ["You are in second place.", "First."]},
    ])
    items = load_items(p, {"id": "question_id", "prompt": "turns.0", "reference": "reference.0", "category": "category"})
    assert items["id"].tolist() == ["81", "101"]
    assert items["prompt"].tolist() == ["Compose a blog post.", "Who is second?"]
    assert items["reference"].isna().tolist() == [True, False]
    assert items["reference"][1] == "You are in second place."
    assert items["category"].tolist() == ["writing", "reasoning"]


def test_alpaca_style_joins_instruction_and_input(tmp_path):
    p = tmp_path / "alpaca.json"
    write_jsonl(p, [
        {"instruction": "Translate to French.", "input": "Good morning", "output": "Bonjour"},
        {"instruction": "Name a colour.", "input": "", "output": "Blue"},
    ])
    items = load_items(p, {"id": None, "prompt": ["instruction", "input"], "reference": "output", "category": None})
    assert items["prompt"].tolist() == ["Translate to French.\n\nGood morning", "Name a colour."]
    assert items["reference"].tolist() == ["Bonjour", "Blue"]


def test_csv_and_parquet(tmp_path):
    df = pd.DataFrame({"qid": [1, 2, 3], "q": ["a?", "b?", "c?"], "a": ["x", "y", None]})
    df.to_csv(tmp_path / "d.csv", index=False)
    df.to_parquet(tmp_path / "d.parquet")
    fields = {"id": "qid", "prompt": "q", "reference": "a", "category": None}
    for name in ("d.csv", "d.parquet"):
        items = load_items(tmp_path / name, fields)
        assert items["id"].tolist() == ["1", "2", "3"]
        assert items["reference"][:2].tolist() == ["x", "y"] and pd.isna(items["reference"][2])


@pytest.mark.parametrize("content,fields,message", [
    ('{"id": 1, "question": "q"}\n{"id": 2, "question": \n', {}, "line 2: malformed JSON"),
    ('{"id": 1, "question": "q"}\n{"id": 2, "text": "q"}\n', {}, "line 2: missing required field 'question'"),
    ('{"id": 1, "question": "q"}\n{"id": 1, "question": "r"}\n', {}, "line 2: duplicate id '1'"),
    ('{"question": "q"}\n', {}, "line 1: missing required field 'id'"),
    ("\n\n", {}, "the dataset is empty"),
    ('{"id": 1, "question": ""}\n', {}, "line 1: the prompt field 'question' is empty"),
])
def test_bad_input_names_file_line_and_field(tmp_path, content, fields, message):
    p = tmp_path / "bad.jsonl"
    p.write_text(content)
    with pytest.raises(InputError) as err:
        load_items(p, {"id": "id", "prompt": "question", "reference": None, "category": None, **fields})
    assert str(p) in str(err.value)
    assert message in str(err.value)


def test_csv_errors_count_header_as_line_one(tmp_path):
    p = tmp_path / "d.csv"
    p.write_text("id,q\n1,a\n1,b\n")
    with pytest.raises(InputError, match=r"line 3: duplicate id '1'"):
        load_items(p, {"id": "id", "prompt": "q", "reference": None, "category": None})


def test_missing_file(tmp_path):
    with pytest.raises(InputError, match="not found"):
        load_items(tmp_path / "nope.jsonl")


def test_split_is_deterministic_balanced_and_complete():
    items = pd.DataFrame({"id": [str(i) for i in range(10)], "prompt": ["p"] * 10, "reference": None, "category": None})
    shards = split_items(items, 4)
    assert [len(s) for s in shards] == [3, 3, 2, 2]
    assert sum((s["id"].tolist() for s in shards), []) == items["id"].tolist()
    assert [s["id"].tolist() for s in split_items(items, 4)] == [s["id"].tolist() for s in shards]


def test_more_shards_than_items_is_an_error():
    with pytest.raises(InputError, match="more than the 3 items"):
        shard_bounds(3, 4)
