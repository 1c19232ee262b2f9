import csv
import json
import os
import re
import subprocess
import sys

import pandas as pd
import pytest

from genjudge.data.dataset import load_items
from genjudge.data.sharding import shard_bounds, split_items
from genjudge.errors import InputError


def write_jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_gsm8k_style_jsonl_loads_with_field_mapping_and_derived_ids(tmp_path):
    p = write_jsonl(
        tmp_path / "gsm8k.jsonl",
        [
            {"question": "Natalia sold 48 clips...", "answer": "She sold 24 in May.\n#### 72"},
            {"question": "Weng earns $12 an hour...", "answer": "#### 10"},
        ],
    )
    items = load_items(p, {"id": None, "prompt": "question", "reference": "answer", "category": None})
    assert list(items.columns) == [
        "id",
        "prompt",
        "reference",
        "category",
        "messages",
        "turns",
        "rubric",
        "tags",
        "checklist",
    ]
    assert items[["rubric", "tags", "checklist"]].isna().all().all()  # no such field named: none
    assert items["prompt"][0].startswith("Natalia")
    assert items["reference"][1] == "#### 10"
    assert items["id"].is_unique and len(items["id"][0]) == 16
    # Stable: the same content gives the same ids on every load.
    assert (
        items["id"].tolist() == load_items(p, {"id": None, "prompt": "question", "reference": "answer"})["id"].tolist()
    )


def test_mt_bench_question_jsonl_uses_first_turn(tmp_path):
    p = write_jsonl(
        tmp_path / "question.jsonl",
        [
            {"question_id": 81, "category": "writing", "turns": ["Compose a blog post.", "Rewrite it."]},
            {
                "question_id": 101,
                "category": "reasoning",
                "turns": ["Who is second?", "And now?"],
                "reference": ["You are in second place.", "First."],
            },
        ],
    )
    items = load_items(
        p, {"id": "question_id", "prompt": "turns.0", "reference": "reference.0", "category": "category"}
    )
    assert items["id"].tolist() == ["81", "101"]
    assert items["prompt"].tolist() == ["Compose a blog post.", "Who is second?"]
    assert items["reference"].isna().tolist() == [True, False]
    assert items["reference"][1] == "You are in second place."
    assert items["category"].tolist() == ["writing", "reasoning"]


def test_alpaca_style_joins_instruction_and_input(tmp_path):
    p = tmp_path / "alpaca.json"  # as Alpaca ships it: one JSON array
    p.write_text(
        json.dumps(
            [
                {"instruction": "Translate to French.", "input": "Good morning", "output": "Bonjour"},
                {"instruction": "Name a colour.", "input": "", "output": "Blue"},
            ],
            indent=2,
        )
    )
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


@pytest.mark.parametrize(
    "content,fields,message",
    [
        ('{"id": 1, "question": "q"}\n{"id": 2, "question": \n', {}, "line 2: malformed JSON"),
        ('{"id": 1, "question": "q"}\n{"id": 2, "text": "q"}\n', {}, "line 2: missing required field 'question'"),
        ('{"id": 1, "question": "q"}\n{"id": 1, "question": "r"}\n', {}, "line 2: duplicate id '1'"),
        ('{"question": "q"}\n', {}, "line 1: missing required field 'id'"),
        ("\n\n", {}, "the dataset is empty"),
        ('{"id": 1, "question": ""}\n', {}, "line 1: the prompt field 'question' is empty"),
        # an object is no question: its Python repr was sent as the prompt
        (
            '{"id": 1, "question": "q"}\n{"id": 2, "question": {"x": 1}}\n',
            {},
            "line 2: field 'question' holds an object",
        ),
        ('{"id": 1, "question": [1, 2]}\n', {}, "line 1: field 'question' holds an array, not text"),
        ('{"id": 1, "question": "q", "answer": {"a": 1}}\n', {"reference": "answer"}, "field 'answer' holds an object"),
        (
            '{"id": 1, "question": "q", "category": ["x"]}\n',
            {"category": "category"},
            "field 'category' holds an array",
        ),
        ('{"id": {"n": 1}, "question": "q"}\n', {}, "line 1: field 'id' holds an object"),
        # a misspelt field of a prompt list is in no row: not a field some rows leave out
        (
            '{"id": 1, "question": "q", "input": "i"}\n{"id": 2, "question": "r"}\n',
            {"prompt": ["question", "inptu"]},
            "the prompt field(s) ['inptu'] of dataset.fields.prompt ['question', 'inptu'] are in no row "
            "(the first row's fields: ['id', 'input', 'question'])",
        ),
    ],
)
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
    assert [i for s in shards for i in s["id"].tolist()] == items["id"].tolist()
    assert [s["id"].tolist() for s in split_items(items, 4)] == [s["id"].tolist() for s in shards]


def test_more_shards_than_items_is_an_error():
    with pytest.raises(InputError, match="more than the 3 items"):
        shard_bounds(3, 4)


# --- JSON arrays ---------------------------------------------------------------------------------

ALPACA_FIELDS = {"id": None, "prompt": ["instruction", "input"], "reference": "output", "category": "dataset"}


def test_json_array_of_objects_as_alpaca_eval_ships_it(tmp_path):
    rows = [
        {"instruction": "Name a colour.", "output": "Blue", "generator": "gpt4", "dataset": "helpful_base"},
        {"instruction": "Translate: bonjour", "input": "", "output": "hello", "dataset": "koala"},
    ]
    p = tmp_path / "alpaca_eval.json"
    p.write_text("\n  " + json.dumps(rows, indent=4, ensure_ascii=False))  # pretty-printed, leading space
    items = load_items(p, ALPACA_FIELDS)
    assert items["prompt"].tolist() == ["Name a colour.", "Translate: bonjour"]
    assert items["reference"].tolist() == ["Blue", "hello"]
    assert items["category"].tolist() == ["helpful_base", "koala"]
    # The same rows as JSON Lines in a .json file give the same items.
    write_jsonl(tmp_path / "lines.json", rows)
    pd.testing.assert_frame_equal(load_items(tmp_path / "lines.json", ALPACA_FIELDS), items)


def test_json_array_ids_and_nested_fields_come_out_as_in_the_file(tmp_path):
    p = tmp_path / "question.json"
    p.write_text(
        json.dumps(
            [
                {"question_id": 81, "turns": ["Compose.", "Rewrite."], "meta": {"cat": "writing"}},
                {"question_id": "q-2", "turns": ["Who?"], "meta": {"cat": None}},
            ]
        )
    )
    items = load_items(p, {"id": "question_id", "prompt": "turns.0", "reference": "turns.1", "category": "meta.cat"})
    assert items["id"].tolist() == ["81", "q-2"]
    assert items["prompt"].tolist() == ["Compose.", "Who?"]
    assert items["reference"][0] == "Rewrite." and pd.isna(items["reference"][1])
    assert items["category"][0] == "writing" and pd.isna(items["category"][1])


def _array_text(rows):
    """One item per line after the opening bracket: item i is on line i + 2."""
    return "[\n" + ",\n".join(rows) + "\n]\n"


@pytest.mark.parametrize(
    "rows,message",
    [
        (
            ['{"id": 1, "q": "a"}', '{"id": 2, "q": "b"}', '{"id": 3, "q": "c"}', '["not", "an", "object"]'],
            "alpaca_eval.json, item 3 (line 5): expected a JSON object, got an array",
        ),
        (['{"id": 1, "q": "a"}', '{"id": 2, "q": }'], "alpaca_eval.json, item 1 (line 3): malformed JSON"),
        (
            ['{"id": 1, "q": "a"}', '{"id": 2, "text": "b"}'],
            "alpaca_eval.json, item 1 (line 3): missing required field 'q'",
        ),
        (
            ['{"id": 1, "q": "a"}', '{"id": 1, "q": "b"}'],
            "alpaca_eval.json, item 1 (line 3): duplicate id '1' (field 'id'), first seen at item 0 (line 2)",
        ),
        (['{"id": 1, "q": "a"}', '{"id": 2, "q": "b"},'], "item 2 (line 4): malformed JSON (Expecting value"),
        (['{"id": 1, "q": "a"} {"id": 2, "q": "b"}'], "line 2: malformed JSON (expected ',' or ']' after item 0"),
        ([], "alpaca_eval.json: the dataset is empty"),
    ],
)
def test_json_array_errors_name_the_item_and_its_line(tmp_path, rows, message):
    p = tmp_path / "alpaca_eval.json"
    p.write_text(_array_text(rows))
    before = p.read_bytes()
    with pytest.raises(InputError) as err:
        load_items(p, {"id": "id", "prompt": "q", "reference": None, "category": None})
    assert message in str(err.value) and str(p) in str(err.value)
    assert p.read_bytes() == before  # nothing is rewritten


@pytest.mark.parametrize(
    "text,message",
    [
        ('[{"id": 1, "q": "a"}', "expected ',' or ']' after item 0 at column 21, found the end of the file"),
        ('[{"id": 1, "q": "a"}]\n[]', "line 2: malformed JSON (extra data after the array at column 1)"),
        (
            '{\n  "id": 1,\n  "q": "a"\n}\n',
            "holds a single JSON object; a dataset is a JSON array of objects or JSON Lines",
        ),
        ('{"data": [{"id": 1, "q": "a"}],\n "version": 2}', "the items may be the array under 'data'"),
        ("[1, 2]", "item 0 (line 1): expected a JSON object, got a number"),
    ],
)
def test_json_shapes_that_are_not_a_dataset(tmp_path, text, message):
    p = tmp_path / "d.json"
    p.write_text(text)
    with pytest.raises(InputError, match=re.escape(message)):
        load_items(p, {"id": "id", "prompt": "q"})


def test_json_lines_in_a_json_file_keep_their_line_numbers(tmp_path):
    p = tmp_path / "d.json"
    p.write_text('{"id": 1, "q": "a"}\n\n{"id": 2}\n')
    with pytest.raises(InputError, match=r"d.json, line 3: missing required field 'q'"):
        load_items(p, {"id": "id", "prompt": "q"})


def test_explicit_format_overrides_the_suffix(tmp_path):
    p = tmp_path / "data.txt"
    p.write_text(json.dumps([{"id": "a", "q": "x"}]))
    assert load_items(p, {"id": "id", "prompt": "q"}, "json")["id"].tolist() == ["a"]
    with pytest.raises(InputError, match="line 1: expected a JSON object, got an array"):
        load_items(p, {"id": "id", "prompt": "q"}, "jsonl")
    with pytest.raises(InputError, match="cannot tell the format from the suffix '.txt'"):
        load_items(p, {"id": "id", "prompt": "q"})
    with pytest.raises(InputError, match="dataset.format: unknown format 'xml'"):
        load_items(p, {"id": "id", "prompt": "q"}, "xml")


# --- CSV and TSV ---------------------------------------------------------------------------------

CSV_FIELDS = {"id": "id", "prompt": "question", "reference": "answer", "category": None}


def test_csv_with_a_byte_order_mark_as_excel_saves_it(tmp_path):
    df = pd.DataFrame({"id": ["a1", "a2"], "question": ["Où est Paris ?", "2+2?"], "answer": ["France", "4"]})
    df.to_csv(tmp_path / "excel.csv", index=False, encoding="utf-8-sig")
    assert (tmp_path / "excel.csv").read_bytes().startswith(b"\xef\xbb\xbf")
    items = load_items(tmp_path / "excel.csv", CSV_FIELDS)
    assert items["id"].tolist() == ["a1", "a2"]
    assert items["prompt"].tolist() == ["Où est Paris ?", "2+2?"]


def test_tsv_with_a_bom_and_excel_unicode_text(tmp_path):
    text = "id\tquestion\tanswer\r\n7\tWhat, if anything?\tnothing\r\n"
    (tmp_path / "bom.tsv").write_bytes(b"\xef\xbb\xbf" + text.encode("utf-8"))
    (tmp_path / "unicode.txt").write_bytes(b"\xff\xfe" + text.encode("utf-16-le"))  # Excel's "Unicode text"
    for path, fmt in ((tmp_path / "bom.tsv", "auto"), (tmp_path / "unicode.txt", "tsv")):
        items = load_items(path, CSV_FIELDS, fmt)
        assert items[["id", "prompt", "reference"]].values.tolist() == [["7", "What, if anything?", "nothing"]]


def test_csv_quoted_multiline_fields_and_their_line_numbers(tmp_path):
    p = tmp_path / "d.csv"
    with open(p, "w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(["id", "question", "answer"])
        w.writerow(["1", "line one\nline two\n\nline four", 'say "yes", then\nstop'])  # lines 2-6
        w.writerow(["2", "short", "x"])  # line 7
        w.writerow(["1", "again", "y"])  # line 8
    with pytest.raises(InputError, match=r"d.csv, line 8: duplicate id '1' \(field 'id'\), first seen at line 2"):
        load_items(p, CSV_FIELDS)
    p.write_text(p.read_text().rsplit("1,again", 1)[0])
    items = load_items(p, CSV_FIELDS)
    assert items["prompt"][0] == "line one\nline two\n\nline four"
    assert items["reference"][0] == 'say "yes", then\nstop'
    p.write_text(p.read_text() + "\n3,,z\n")  # a blank line 8, then an empty prompt on line 9
    with pytest.raises(InputError, match=r"d.csv, line 9: the prompt field 'question' is empty"):
        load_items(p, CSV_FIELDS)


def test_csv_field_over_128_kib(tmp_path):
    big = "word " * 60_000  # 300 KB; the csv module's default limit is 128 KiB
    pd.DataFrame({"id": [1, 2], "question": [big, "small"], "answer": ["a", big]}).to_csv(
        tmp_path / "big.csv", index=False
    )
    items = load_items(tmp_path / "big.csv", CSV_FIELDS)
    assert items["prompt"][0] == big and items["reference"][1] == big


@pytest.mark.parametrize(
    "text,message",
    [
        (
            'id,question\n1,"never closed\n2,b\n',
            "line 2: malformed CSV (unexpected end of data); a quote opened in this record is never closed",
        ),
        ('id,question\n1,"a"b\n', "line 2: malformed CSV"),
        ("id,question\n1,a,b\n", "line 2: 3 fields but the header (line 1) names 2; quote fields that contain ','"),
        ("id,question,id\n1,a,2\n", "line 1: the header names the column 'id' twice"),
        ("\n\nid,question\n1,a\n1,b\n", "line 5: duplicate id '1'"),
        ("id,question\n", "the dataset is empty"),
    ],
)
def test_bad_csv_names_file_and_line(tmp_path, text, message):
    p = tmp_path / "bad.csv"
    p.write_text(text)
    with pytest.raises(InputError) as err:
        load_items(p, {"id": "id", "prompt": "question"})
    assert str(p) in str(err.value) and message in str(err.value)


def test_csv_trailing_empty_fields_and_short_rows(tmp_path):
    p = tmp_path / "d.csv"
    p.write_text("id,question,answer\n1,a,x,,\n2,b\n")
    items = load_items(p, CSV_FIELDS)
    assert items["reference"][0] == "x" and pd.isna(items["reference"][1])


# --- encodings -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name,content",
    [
        ("d.jsonl", '{"id": 1, "q": "a"}\n{"id": 2, "q": "b"}\n{"id": 3, "q": "caf\xe9"}\n'),
        ("d.json", '[{"id": 1, "q": "a"},\n {"id": 2, "q": "b"},\n {"id": 3, "q": "caf\xe9"}]'),
        ("d.csv", "id,q\n1,a\n3,caf\xe9\n"),
    ],
)
def test_non_utf8_input_names_file_and_line(tmp_path, name, content):
    p = tmp_path / name
    p.write_bytes(content.encode("latin-1"))  # é as the single byte 0xe9
    with pytest.raises(InputError) as err:
        load_items(p, {"id": "id", "prompt": "q"})
    assert f"{p}, line 3: not UTF-8 text (byte 0xe9 at byte " in str(err.value)
    assert "save the file as UTF-8" in str(err.value)


def test_jsonl_with_a_byte_order_mark(tmp_path):
    p = tmp_path / "d.jsonl"
    p.write_bytes(b"\xef\xbb\xbf" + b'{"id": 1, "q": "a"}\n')
    assert load_items(p, {"id": "id", "prompt": "q"})["id"].tolist() == ["1"]


def test_damaged_parquet_is_named(tmp_path):
    p = tmp_path / "d.parquet"
    p.write_bytes(b"PAR1 not really")
    with pytest.raises(InputError, match=r"d.parquet: not a readable Parquet file"):
        load_items(p, {"id": "id", "prompt": "q"})


# --- chat messages -------------------------------------------------------------------------------

CONVERSATION = [
    {"role": "system", "content": "Answer with a number."},
    {"role": "user", "content": "2+2?"},
    {"role": "assistant", "content": "4"},
    {"role": "user", "content": "3+3?"},
]


def test_chat_messages_survive_loading_as_a_conversation(tmp_path):
    p = write_jsonl(
        tmp_path / "chat.jsonl",
        [
            {"id": "c1", "messages": CONVERSATION, "answer": "6"},
            {"id": "c2", "messages": [{"role": "user", "content": "Hi", "name": "bob"}], "answer": None},
            {"id": "p3", "messages": "a plain prompt", "answer": "x"},
        ],
    )
    items = load_items(p, {"id": "id", "prompt": "messages", "reference": "answer", "category": None})
    assert json.loads(items["messages"][0]) == CONVERSATION
    assert items["prompt"][0] == "3+3?"  # the last user message, as a judge template shows the question
    assert json.loads(items["messages"][1]) == [{"role": "user", "content": "Hi"}]  # role and content only
    assert items["prompt"][2] == "a plain prompt" and items["messages"][2] is None


def test_chat_messages_from_parquet(tmp_path):
    pd.DataFrame({"id": [1, 2], "messages": [CONVERSATION, CONVERSATION[1:2]]}).to_parquet(tmp_path / "c.parquet")
    items = load_items(tmp_path / "c.parquet", {"id": "id", "prompt": "messages"})
    assert [json.loads(m) for m in items["messages"]] == [CONVERSATION, CONVERSATION[1:2]]
    assert items["prompt"].tolist() == ["3+3?", "2+2?"]


def test_derived_ids_of_chat_items_cover_the_whole_conversation(tmp_path):
    other = [{"role": "system", "content": "Be brief."}, CONVERSATION[-1]]
    p = write_jsonl(tmp_path / "chat.jsonl", [{"messages": CONVERSATION}, {"messages": other}])
    items = load_items(p, {"id": None, "prompt": "messages"})
    assert items["prompt"].tolist() == ["3+3?", "3+3?"] and items["id"].is_unique


@pytest.mark.parametrize(
    "messages,fields,message",
    [
        ([{"role": "user"}], {}, "line 1: field 'messages', message 0: 'content' is missing"),
        (
            [{"role": "user", "content": "a"}, {"role": None, "content": "b"}],
            {},
            "line 1: field 'messages', message 1: 'role' is missing",
        ),
        ([{"role": "user", "content": ["a"]}], {}, "message 0: 'content' is an array, not text"),
        (
            [{"role": "system", "content": "x"}],
            {},
            "line 1: field 'messages' holds messages but none with the role 'user'",
        ),
        (
            [{"role": "user", "content": " "}],
            {},
            "line 1: the last user message of the prompt field 'messages' is empty",
        ),
        (
            CONVERSATION,
            {"prompt": ["messages", "extra"]},
            "field 'messages' holds chat messages, which cannot be joined",
        ),
    ],
)
def test_bad_chat_messages(tmp_path, messages, fields, message):
    p = write_jsonl(tmp_path / "chat.jsonl", [{"id": 1, "messages": messages, "extra": "e"}])
    with pytest.raises(InputError) as err:
        load_items(p, {"id": "id", "prompt": "messages", **fields})
    assert message in str(err.value) and str(p) in str(err.value)


# --- Hugging Face datasets -----------------------------------------------------------------------

MT_BENCH_ROWS = [
    {"question_id": 81, "category": "writing", "turns": ["Compose a blog post.", "Rewrite it."], "reference": None},
    {
        "question_id": 101,
        "category": "reasoning",
        "turns": ["Who is second?", "And now?"],
        "reference": ["You are in second place.", "First."],
    },
]
MT_BENCH_FIELDS = {"id": "question_id", "prompt": "turns.0", "reference": "reference.0", "category": "category"}


def test_hf_save_to_disk_dataset_loads_with_ids_and_nested_fields_as_in_the_source(tmp_path):
    import datasets

    datasets.Dataset.from_list(MT_BENCH_ROWS).save_to_disk(str(tmp_path / "mt_bench"))
    items = load_items(tmp_path / "mt_bench", MT_BENCH_FIELDS)  # auto: a directory is a Hugging Face dataset
    assert items["id"].tolist() == ["81", "101"]
    assert items["prompt"].tolist() == ["Compose a blog post.", "Who is second?"]
    assert pd.isna(items["reference"][0]) and items["reference"][1] == "You are in second place."
    assert items["category"].tolist() == ["writing", "reasoning"]
    # The same rows from a JSON Lines file give the same item table.
    jsonl = load_items(write_jsonl(tmp_path / "q.jsonl", MT_BENCH_ROWS), MT_BENCH_FIELDS)
    pd.testing.assert_frame_equal(items, jsonl)
    pd.testing.assert_frame_equal(load_items(tmp_path / "mt_bench", MT_BENCH_FIELDS, "hf", {"split": None}), items)


def test_hf_dataset_dict_splits(tmp_path):
    import datasets

    path = tmp_path / "gsm8k"
    datasets.DatasetDict(
        {
            "train": datasets.Dataset.from_list([{"question": "t?", "answer": "#### 1"}]),
            "test": datasets.Dataset.from_list(
                [{"question": "a?", "answer": "#### 2"}, {"question": "b?", "answer": "#### 3"}]
            ),
        }
    ).save_to_disk(str(path))
    fields = {"id": None, "prompt": "question", "reference": "answer"}
    items = load_items(path, fields, "hf", {"split": "test"})
    assert items["prompt"].tolist() == ["a?", "b?"] and items["reference"].tolist() == ["#### 2", "#### 3"]
    with pytest.raises(InputError, match=r"gsm8k: has the splits train, test; choose one with dataset.hf.split"):
        load_items(path, fields, "hf")
    with pytest.raises(InputError, match=r"gsm8k \(split 'dev'\): no split 'dev'; it has train, test"):
        load_items(path, fields, "hf", {"split": "dev"})
    with pytest.raises(InputError, match=r"dataset.hf.config: .*gsm8k is a directory written by save_to_disk"):
        load_items(path, fields, "hf", {"config": "main", "split": "test"})


def test_hf_rows_are_named_by_source_split_and_row(tmp_path):
    import datasets

    datasets.Dataset.from_list([{"id": 1, "q": "a"}, {"id": 2, "q": ""}]).save_to_disk(str(tmp_path / "d"))
    with pytest.raises(InputError, match=r"/d, row 1: the prompt field 'q' is empty"):
        load_items(tmp_path / "d", {"id": "id", "prompt": "q"})


def test_hf_chat_messages(tmp_path):
    import datasets

    rows = [
        {"id": "a", "messages": CONVERSATION},
        {"id": "b", "messages": [{"role": "user", "content": "Hi", "name": "bob"}]},
    ]
    datasets.Dataset.from_list(rows).save_to_disk(str(tmp_path / "chat"))
    items = load_items(tmp_path / "chat", {"id": "id", "prompt": "messages"})
    # The library fills a key missing from some messages with None; only role and content are kept.
    assert [json.loads(m) for m in items["messages"]] == [CONVERSATION, [{"role": "user", "content": "Hi"}]]
    assert items["prompt"].tolist() == ["3+3?", "Hi"]


def test_hf_directory_of_data_files(tmp_path):
    (tmp_path / "repo").mkdir()
    write_jsonl(tmp_path / "repo" / "test.jsonl", [{"id": 5, "q": "x"}, {"id": 6, "q": "y"}])
    items = load_items(
        tmp_path / "repo", {"id": "id", "prompt": "q"}, "hf", {"split": "test", "cache_dir": str(tmp_path / "cache")}
    )
    assert items["id"].tolist() == ["5", "6"]


def test_hf_paths_that_are_not_a_dataset(tmp_path):
    fields = {"id": "id", "prompt": "q"}
    with pytest.raises(
        InputError,
        match=r"nope/deeper/dir: dataset not found \(no such directory, and not a Hugging "
        r"Face hub id",
    ):
        load_items(tmp_path / "nope" / "deeper" / "dir", fields, "hf")
    p = write_jsonl(tmp_path / "d.jsonl", [{"id": 1, "q": "a"}])
    with pytest.raises(InputError, match=r"d.jsonl: a Hugging Face dataset is a hub id or a directory, not a file"):
        load_items(p, fields, "hf")
    with pytest.raises(
        InputError,
        match=r"openai/gsm8k: dataset file not found \(for a Hugging Face hub id set "
        r"dataset.format: hf\)",
    ):
        load_items("openai/gsm8k", fields)
    with pytest.raises(InputError, match=r"d.jsonl: is a directory|not found"):
        load_items(tmp_path / "nope", fields, "jsonl")


HUB_SCRIPT = r"""
import glob, json, os, shutil, sys
from genjudge.data.dataset import load_items
from genjudge.errors import InputError

cache, data = sys.argv[1], sys.argv[2]

def build_cache(repo, config, splits):
    # Lay out the library's cache of a hub dataset as a download leaves it:
    # <cache>/<owner>___<name>/<config>/<version>/<commit>/{dataset_info.json, <name>-<split>.arrow}
    from datasets.packaged_modules.json.json import Json
    owner, name = repo.split("/")
    build = os.path.join(cache, "_build")
    Json(cache_dir=build, dataset_name=name, config_name=config, data_files=splits).download_and_prepare()
    [built] = glob.glob(os.path.join(build, name, "*", "0.0.0"))
    target = os.path.join(cache, f"{owner}___{name}", config, "0.0.0", "0123456789abcdef")
    os.makedirs(os.path.dirname(target))
    shutil.move(built, target)
    shutil.rmtree(build)

build_cache("someone/tinybench", "main", {"train": os.path.join(data, "train.jsonl"),
                                          "test": os.path.join(data, "test.jsonl")})
fields = {"id": "question_id", "prompt": "turns.0", "reference": "reference.0", "category": "category"}
out = {}
for case, path, hf in [
    ("cached", "someone/tinybench", {"config": "main", "split": "test"}),
    ("cached_slice", "someone/tinybench", {"config": "main", "split": "test[:1]"}),
    ("missing", "someone/not-there", {"split": "test"}),
    ("other_config", "someone/tinybench", {"config": "socratic", "split": "test"}),
    ("other_split", "someone/tinybench", {"config": "main", "split": "validation"}),
]:
    try:
        out[case] = load_items(path, fields, "hf", hf).to_dict(orient="records")
    except InputError as exc:
        out[case] = str(exc)
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def hub_results(tmp_path_factory):
    """A hub id read offline from the library's cache (HF_HOME), run as a job would: a fresh process with
    HF_HUB_OFFLINE=1. The cache is built by the test; nothing is downloaded."""
    tmp = tmp_path_factory.mktemp("hub")
    write_jsonl(tmp / "test.jsonl", MT_BENCH_ROWS)
    write_jsonl(tmp / "train.jsonl", [{"question_id": 1, "category": "x", "turns": ["t"], "reference": ["r"]}])
    home = tmp / "hf_home"
    env = {**os.environ, "HF_HOME": str(home), "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    env.pop("HF_DATASETS_CACHE", None)
    proc = subprocess.run(
        [sys.executable, "-c", HUB_SCRIPT, str(home / "datasets"), str(tmp)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_hf_hub_id_with_config_and_split_reads_the_local_cache_offline(hub_results):
    items = hub_results["cached"]
    assert [i["id"] for i in items] == ["81", "101"]
    assert [i["prompt"] for i in items] == ["Compose a blog post.", "Who is second?"]
    assert items[1]["reference"] == "You are in second place." and items[1]["category"] == "reasoning"
    assert [i["id"] for i in hub_results["cached_slice"]] == ["81"]


def test_hf_hub_id_that_is_not_there_stops_with_the_id_named(hub_results):
    message = hub_results["missing"]
    assert message.startswith("someone/not-there (split 'test'): cannot load the Hugging Face dataset")
    assert "not in the local Hugging Face cache and the Hub cannot be reached" in message
    assert hub_results["other_config"].startswith("someone/tinybench (config 'socratic', split 'test'): cannot load")
    assert "main" in hub_results["other_config"]  # the library lists the configs it has
    assert hub_results["other_split"].startswith("someone/tinybench (config 'main', split 'validation'): cannot load")


def test_a_prompt_field_some_rows_leave_out_is_joined_where_it_is_there(tmp_path):
    p = tmp_path / "d.jsonl"
    p.write_text('{"id": 1, "instruction": "do", "input": "this"}\n{"id": 2, "instruction": "go"}\n')
    items = load_items(p, {"id": "id", "prompt": ["instruction", "input"], "reference": None, "category": None})
    assert items["prompt"].tolist() == ["do\n\nthis", "go"]


@pytest.mark.workflow
def test_a_hf_dataset_saved_again_in_place_is_split_again(workflow):
    """save_to_disk over the same directory rewrites the same file names, so the directory's mtime holds:
    the split is keyed on the digest of its files, and a changed dataset is split again."""
    import datasets

    path = workflow.path / "hfq"
    rows = [{"id": f"q{i}", "question": f"What is {i} + 1?", "answer": str(i + 1)} for i in range(4)]
    datasets.Dataset.from_list(rows).save_to_disk(str(path))
    fields = {"id": "id", "prompt": "question", "reference": "answer", "category": None}
    cfg = workflow.write_config(
        "hf.yaml", run="hf", shards=1, dataset={"path": "hfq", "format": "hf", "fields": fields}
    )
    target = "results/hf/items/hfq.parquet"
    workflow.run("--cores", "1", target, "--configfile", cfg)
    before = os.stat(path).st_mtime_ns
    rows[0]["answer"] = "changed"
    datasets.Dataset.from_list(rows).save_to_disk(str(path))
    assert os.stat(path).st_mtime_ns == before  # what Snakemake alone would look at
    plan = workflow.run("-n", target, "--configfile", cfg, "--quiet", "rules").stdout
    assert re.search(r"^split\s+1$", plan, re.M), plan
    workflow.run("--cores", "1", target, "--configfile", cfg)
    assert pd.read_parquet(workflow.path / target).set_index("id").loc["q0", "reference"] == "changed"
    # Unchanged since: nothing to do (the digest is read from the index, not recomputed into a new value).
    assert "Nothing to be done" in workflow.run("-n", target, "--configfile", cfg).stdout + ""
