"""Load a dataset into the normalised item table.

Sources: JSON Lines, a JSON array of objects, CSV/TSV, Parquet, and Hugging Face
`datasets` (a hub id or a local directory; `genjudge.data.hf_dataset`).

The item table has the columns `id`, `prompt`, `reference` (may be null),
`category` (may be null) and `messages` (may be null), in the dataset's order.
Field names are mapped from config; a field may be a dotted path into nested
values (`turns.0`) and the prompt may join several fields (Alpaca's
`[instruction, input]`).

A prompt field holding a list of `{role, content}` messages (a chat dataset:
system prompt, few-shot turns, the user's question) keeps the whole
conversation in `messages`, as a JSON string of `[{"role": ..., "content": ...}, ...]`;
`prompt` then holds the content of the last user message, the question as a
reader (and a judge template) sees it.

A prompt field holding a list of texts (MT-bench's `turns`) makes the item a multi-turn
conversation, kept in `turns` (`genjudge.data.conversation`); a reference field holding a list
gives each turn its own reference. `prompt` and `reference` are then turn 1's.

Every problem with the input is an InputError naming the file, the line, item
or row, and the field. A row's fields are read in `genjudge.data.fields`.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import json.scanner
import math
import re
import sys
from pathlib import Path

import pandas as pd

from genjudge.data.fields import (
    _MISSING,
    _as_text,
    _is_null,
    _json_type,
    _lookup,
    _messages,
    _optional_text,
    _text_of,
    _turn_references,
    _user_turns,
)
from genjudge.errors import InputError

ITEM_COLUMNS = ["id", "prompt", "reference", "category", "messages", "turns", "rubric", "tags", "checklist"]
# Columns a dataset has only where the config names their field: left out of a shard's records when null,
# so that a dataset without them writes the same shard files as before they existed.
OPTIONAL_COLUMNS = ("rubric", "tags", "checklist")

FORMATS = ("auto", "jsonl", "json", "csv", "tsv", "parquet", "hf")

_SUFFIXES = {
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".json": "json",
    ".csv": "csv",
    ".tsv": "tsv",
    ".parquet": "parquet",
    ".pq": "parquet",
}


def detect_format(path: Path, fmt: str = "auto") -> str:
    if fmt != "auto":
        if fmt not in FORMATS:
            raise InputError(f"dataset.format: unknown format {fmt!r}; one of {', '.join(FORMATS)}")
        return fmt
    if path.is_dir():
        return "hf"
    suffix = path.suffix.lower()
    if suffix in _SUFFIXES:
        return _SUFFIXES[suffix]
    raise InputError(f"{path}: cannot tell the format from the suffix {suffix!r}; set dataset.format")


# --- text files ---------------------------------------------------------------------------------

_BOMS = ((b"\xef\xbb\xbf", "utf-8"), (b"\xff\xfe", "utf-16-le"), (b"\xfe\xff", "utf-16-be"))


def read_text(path: Path) -> str:
    """The file's text: UTF-8 (a byte-order mark is dropped; UTF-16 with a BOM, as Excel's
    "Unicode text" writes it, is read too). Anything else stops with the line named."""
    data = path.read_bytes()
    for bom, encoding in _BOMS:
        if data.startswith(bom):
            data, codec = data[len(bom) :], encoding
            break
    else:
        codec = "utf-8"
    try:
        return data.decode(codec)
    except UnicodeDecodeError as exc:
        if codec != "utf-8":
            raise InputError(
                f"{path}: not valid {codec} text although it starts with a {codec} "
                f"byte-order mark ({exc.reason} at byte {exc.start})"
            ) from None
        line = data.count(b"\n", 0, exc.start) + 1
        column = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        raise InputError(
            f"{path}, line {line}: not UTF-8 text (byte 0x{data[exc.start]:02x} at byte {column} of "
            "the line); save the file as UTF-8, e.g. `iconv -f cp1252 -t utf-8` for a file from "
            "Excel on Windows"
        ) from None


def _object_or_error(obj, where: str) -> dict:
    if not isinstance(obj, dict):
        raise InputError(f"{where}: expected a JSON object, got {_json_type(obj)}")
    return obj


_SCAN = json.scanner.make_scanner(json.JSONDecoder())  # json.loads' own scanner, without its per-call wrapping


def _read_jsonl(path: Path, text: str) -> list[tuple[str, dict]]:
    rows = []
    for lineno, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        try:  # a line of one object, as json.loads reads it: whitespace either side, nothing else
            start = 0 if line[:1] == "{" else len(line) - len(line.lstrip(" \t\r"))
            obj, end = _SCAN(line, start)
            if end != len(line) and line[end:].strip(" \t\r"):
                raise StopIteration(end)
        except (StopIteration, json.JSONDecodeError):
            try:
                obj = json.loads(line)  # for json's own message
            except json.JSONDecodeError as exc:
                if not rows:
                    _explain_single_object(path, text)
                raise InputError(f"{path}, line {lineno}: malformed JSON ({exc.msg} at column {exc.colno})") from None
        if type(obj) is not dict:
            _object_or_error(obj, f"{path}, line {lineno}")
        rows.append((f"line {lineno}", obj))
    return rows


def _explain_single_object(path: Path, text: str) -> None:
    """A `.json` file holding one (pretty-printed) object is neither an array nor JSON Lines: say so."""
    try:
        obj = json.loads(text)
    except json.JSONDecodeError:
        return
    if isinstance(obj, dict):
        lists = [k for k, v in obj.items() if isinstance(v, list) and v and isinstance(v[0], dict)]
        hint = f"; the items may be the array under {lists[0]!r}: extract it into its own file" if lists else ""
        raise InputError(
            f"{path}: holds a single JSON object; a dataset is a JSON array of objects or "
            f"JSON Lines (one object per line){hint}"
        )


_WS = re.compile(r"[ \t\n\r]*")


def _read_json_array(path: Path, text: str) -> list[tuple[str, dict]]:
    """A JSON array of objects; each item's label gives its index in the array and its line."""
    decoder = json.JSONDecoder()
    i = _WS.match(text, 0).end() + 1  # past "["
    line, counted_to = 1, 0
    rows: list[tuple[str, dict]] = []

    def position(at: int) -> tuple[int, int]:
        nonlocal line, counted_to
        line += text.count("\n", counted_to, at)
        counted_to = at
        return line, at - text.rfind("\n", 0, at)

    i = _WS.match(text, i).end()
    if text.startswith("]", i):
        return rows
    while True:
        index = len(rows)
        start_line, _ = position(i)
        try:
            obj, i = decoder.raw_decode(text, i)
        except json.JSONDecodeError as exc:
            raise InputError(
                f"{path}, item {index} (line {exc.lineno}): malformed JSON ({exc.msg} at column {exc.colno})"
            ) from None
        where = f"item {index} (line {start_line})"
        rows.append((where, _object_or_error(obj, f"{path}, {where}")))
        i = _WS.match(text, i).end()
        if text.startswith(",", i):
            i = _WS.match(text, i + 1).end()
            continue
        if text.startswith("]", i):
            break
        at_line, column = position(min(i, len(text)))
        found = "the end of the file" if i >= len(text) else repr(text[i])
        raise InputError(
            f"{path}, line {at_line}: malformed JSON (expected ',' or ']' after item {index} "
            f"at column {column}, found {found})"
        )
    rest = _WS.match(text, i + 1).end()
    if rest < len(text):
        at_line, column = position(rest)
        raise InputError(f"{path}, line {at_line}: malformed JSON (extra data after the array at column {column})")
    return rows


def _read_json(path: Path, text: str) -> list[tuple[str, dict]]:
    """`.json`: a JSON array of objects when the first non-space character is `[`, else JSON Lines."""
    if text.lstrip(" \t\r\n").startswith("["):
        return _read_json_array(path, text)
    return _read_jsonl(path, text)


def _allow_large_csv_fields(size: int) -> None:
    """The csv module refuses fields over 128 KiB by default; no field can exceed the file."""
    wanted = max(csv.field_size_limit(), size + 1)
    while True:
        try:
            csv.field_size_limit(min(wanted, sys.maxsize))
            return
        except OverflowError:  # a C long narrower than sys.maxsize (Windows)
            wanted = min(wanted, sys.maxsize) // 2


def _read_csv(path: Path, text: str, delimiter: str) -> list[tuple[str, dict]]:
    """Rows labelled by the line each record starts on (the header is line 1; a quoted field
    may span lines)."""
    _allow_large_csv_fields(len(text))
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter, strict=True)
    header: list[str] | None = None
    header_line = 0
    rows: list[tuple[str, dict]] = []
    while True:
        start = reader.line_num + 1
        try:
            record = next(reader)
        except StopIteration:
            break
        except csv.Error as exc:
            hint = "; a quote opened in this record is never closed" if "end of data" in str(exc) else ""
            raise InputError(f"{path}, line {start}: malformed CSV ({exc}){hint}") from None
        if not record:  # a blank line
            continue
        if header is None:
            header, header_line = record, start
            seen = set()
            for name in header:
                if name in seen:
                    raise InputError(f"{path}, line {start}: the header names the column {name!r} twice")
                seen.add(name)
            continue
        if len(record) > len(header):
            if any(value != "" for value in record[len(header) :]):
                raise InputError(
                    f"{path}, line {start}: {len(record)} fields but the header (line {header_line}) "
                    f"names {len(header)}; quote fields that contain {delimiter!r}"
                )
            record = record[: len(header)]
        obj = dict(zip(header, record))
        for name in header[len(record) :]:
            obj[name] = None
        rows.append((f"line {start}", obj))
    return rows


def _read_parquet(path: Path) -> list[tuple[str, dict]]:
    try:
        df = pd.read_parquet(path)
    except Exception as exc:  # pyarrow raises several types for a damaged or foreign file
        raise InputError(f"{path}: not a readable Parquet file ({type(exc).__name__}: {exc})") from None
    return [(f"row {i}", obj) for i, obj in enumerate(df.to_dict(orient="records"))]


def read_rows(path, fmt: str = "auto", hf: dict | None = None) -> tuple[str, list[tuple[str, dict]]]:
    """The source's name for messages and its rows, each with its position ('line 3', 'item 3 (line 17)',
    'row 3')."""
    path_text = str(path)
    path = Path(path)
    if fmt == "hf" or (fmt == "auto" and path.is_dir()):
        from genjudge.data.hf_dataset import read_hf_rows

        return read_hf_rows(path_text, hf or {})
    if not path.exists():
        hint = ""
        if fmt == "auto" and not path.suffix and re.fullmatch(r"[\w.-]+/[\w.-]+", path_text):
            hint = " (for a Hugging Face hub id set dataset.format: hf)"
        raise InputError(f"{path}: dataset file not found{hint}")
    fmt = detect_format(path, fmt)
    if path.is_dir():
        raise InputError(f"{path}: is a directory; a Hugging Face dataset directory needs dataset.format hf or auto")
    if fmt == "parquet":
        return path_text, _read_parquet(path)
    text = read_text(path)
    if fmt == "jsonl":
        return path_text, _read_jsonl(path, text)
    if fmt == "json":
        return path_text, _read_json(path, text)
    if fmt in ("csv", "tsv"):
        tab = fmt == "tsv" or path.suffix.lower() == ".tsv"
        return path_text, _read_csv(path, text, "\t" if tab else ",")
    raise InputError(f"{path}: unknown dataset format {fmt!r}")


def item_rubric(obj, fields: dict, where: str) -> dict:
    """The rubric, tags and checklist columns of one row (JSON texts; None where the config names no
    such field, or the row has none), each checked (data.rubrics)."""
    from genjudge.data.rubrics import read_checklist, read_rubric, read_tags

    out = dict.fromkeys(OPTIONAL_COLUMNS)
    readers = {"rubric": read_rubric, "tags": read_tags, "checklist": read_checklist}
    for name, read in readers.items():
        field = fields.get(name)
        if not field:
            continue
        value = _lookup(obj, field)
        if value is _MISSING or _is_null(value):
            continue
        out[name] = json.dumps(read(value, where, field), ensure_ascii=False)
    return out


def is_missing(value) -> bool:
    """True for None and the NaN that pandas uses for a missing string."""
    return value is None or (isinstance(value, float) and math.isnan(value))


def stable_id(prompt: str, reference: str | None) -> str:
    digest = hashlib.sha256(json.dumps([prompt, reference]).encode("utf-8")).hexdigest()
    return digest[:16]


def load_items(
    path,
    fields: dict | None = None,
    fmt: str = "auto",
    hf: dict | None = None,
    keys: dict | None = None,
    report: dict | None = None,
    read: tuple[str, list] | None = None,
) -> pd.DataFrame:
    """Read and validate a dataset; raise InputError naming file, line/item/row and field.

    `fields` is the config's `dataset.fields` (the schema fills in its defaults); a key left out
    is not used. `hf` is `dataset.hf` (config, split, revision, cache_dir) for Hugging Face datasets.
    `keys` names the config key of each field (`prompt` -> `datasets.g.fields.prompt`) as the user
    wrote it, for errors; by default `dataset.fields.<field>`.

    `report`, when given, is filled in: `in_no_row` maps each optional field (`reference`,
    `category`) whose configured name is in no row at all to that name (a misspelt name, or a
    dataset without it), `first_row_fields` lists the first row's fields, for the caller's errors.
    `read`: the (source, rows) read_rows gave for this path already, so a caller that reads the rows
    too reads the file once.
    """
    fields = dict(fields or {})
    keys = {k: (keys or {}).get(k, f"dataset.fields.{k}") for k in ("id", "prompt", "reference", "category")}
    source, rows = read if read is not None else read_rows(path, fmt, hf)
    if not rows:
        raise InputError(f"{source}: the dataset is empty")
    if not fields.get("prompt"):
        raise InputError(f"{keys['prompt']}: not set; it names the field holding the prompt")

    prompt_fields = fields["prompt"] if isinstance(fields["prompt"], list) else [fields["prompt"]]
    columns: dict[str, list] = {c: [] for c in ITEM_COLUMNS}  # a list per column: a dict per item took twice the memory
    rubric = any(fields.get(c) for c in OPTIONAL_COLUMNS)
    seen: dict[str, str] = {}
    present: set = set()  # prompt fields some row has
    optional = {k: fields[k] for k in ("reference", "category") if fields.get(k)}
    seen_optional: set = set()  # optional fields some row has
    for pos, obj in rows:
        for k, name in optional.items():
            if k not in seen_optional and _lookup(obj, name) is not _MISSING:
                seen_optional.add(k)
        where = f"{source}, {pos}"
        prompt, messages, turns, refs = _prompt_of(obj, prompt_fields, fields, keys, where, present)
        if refs is not None:  # a list of turns (one or more): each its reference, or turn 1's alone
            reference = refs[0]
        else:
            reference = _optional_text(obj, fields.get("reference"), where)
        category = _optional_text(obj, fields.get("category"), where)
        item_id = _item_id(obj, fields, keys, where, (prompt, messages, turns, reference))
        if item_id in seen:
            raise InputError(
                f"{where}: duplicate id {item_id!r} (field {fields.get('id') or '<derived from content>'!r}), "
                f"first seen at {seen[item_id]}"
            )
        seen[item_id] = pos
        item = {
            "id": item_id,
            "prompt": prompt,
            "reference": reference,
            "category": category,
            "messages": json.dumps(messages, ensure_ascii=False) if messages else None,
            "turns": json.dumps(turns, ensure_ascii=False) if turns else None,
            **(item_rubric(obj, fields, where) if rubric else dict.fromkeys(OPTIONAL_COLUMNS)),
        }
        for column, value in item.items():
            columns[column].append(value)
    absent = [n for n in prompt_fields if n not in present]
    if absent:  # in no row at all: a misspelt name, not a field some rows leave out
        first = rows[0][1]
        have = sorted(first) if isinstance(first, dict) else []
        raise InputError(
            f"{source}: the prompt field(s) {absent} of {keys['prompt']} {prompt_fields} are in no row "
            f"(the first row's fields: {have})"
        )
    table = _item_table(columns)
    if report is not None:
        first = rows[0][1]
        report["in_no_row"] = {k: name for k, name in optional.items() if k not in seen_optional}
        report["first_row_fields"] = sorted(first) if isinstance(first, dict) else []
    return table


def _prompt_of(obj, prompt_fields: list, fields: dict, keys: dict, where: str, present: set) -> tuple:
    """(prompt, messages, turns, per-turn references) of one row; `present` gains the prompt fields it has.
    messages: a chat's, else None; turns: a multi-turn item's, else None; references: None unless the
    prompt field holds a list of turns."""
    parts = []
    messages = turns = refs = None
    for name in prompt_fields:
        value = _lookup(obj, name)
        if value is _MISSING and len(prompt_fields) == 1:
            raise InputError(f"{where}: missing required field {name!r} (the prompt)")
        found = _messages(value, where, name)
        questions = _user_turns(value, where, name) if len(prompt_fields) == 1 else None
        if questions is not None:
            refs = _turn_references(obj, fields.get("reference"), len(questions), where)
            if len(questions) > 1:
                turns = [{"question": q, "reference": r} for q, r in zip(questions, refs)]
            value = questions[0]
        if found is not None:
            if len(prompt_fields) > 1:
                raise InputError(
                    f"{where}: field {name!r} holds chat messages, which cannot be joined "
                    f"with other prompt fields; set {keys['prompt']} to {name!r} alone"
                )
            messages = found
            value = [m for m in found if m["role"] == "user"][-1]["content"]
        if value is not _MISSING:
            present.add(name)
        if not _is_null(value) and _text_of(value, where, name).strip():
            parts.append(_as_text(value))
    if not parts:
        what = "the last user message of " if messages else ""
        raise InputError(f"{where}: {what}the prompt field {' + '.join(map(repr, prompt_fields))} is empty")
    return "\n\n".join(parts), messages, turns, refs


def _item_id(obj, fields: dict, keys: dict, where: str, content: tuple) -> str:
    """The row's id field, or one derived from its `content`: (prompt, messages, turns, reference)."""
    if fields.get("id"):
        value = _lookup(obj, fields["id"])
        if _is_null(value) or _as_text(value).strip() == "":
            raise InputError(
                f"{where}: missing required field {fields['id']!r} (the id); "
                f"set {keys['id']} to null to derive ids from row content"
            )
        return _text_of(value, where, fields["id"])
    prompt, messages, turns, reference = content
    # A chat item is its whole conversation: the same question after other few-shot turns differs.
    # A multi-turn item is all its turns.
    text = json.dumps(turns) if turns else prompt if messages is None else json.dumps(messages)
    return stable_id(text, reference)


def _item_table(columns: dict[str, list]) -> pd.DataFrame:
    # None (not NaN) for an item without messages, turns or a rubric, so shard files write null.
    plain = {"id", "prompt", "reference", "category"}
    return pd.DataFrame({c: v if c in plain else pd.Series(v, dtype=object) for c, v in columns.items()})
