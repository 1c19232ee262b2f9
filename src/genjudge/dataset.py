"""Load a dataset (JSONL, CSV or Parquet) into the normalised item table.

The item table has the columns `id`, `prompt`, `reference` (may be null) and
`category` (may be null), in the dataset's order. Field names are mapped from
config; a field may be a dotted path into nested values (`turns.0`) and the
prompt may join several fields (Alpaca's `[instruction, input]`).
"""

from __future__ import annotations

import csv
import hashlib
import json
from pathlib import Path

import pandas as pd

from genjudge.errors import InputError

ITEM_COLUMNS = ["id", "prompt", "reference", "category"]

DEFAULT_FIELDS = {"id": "id", "prompt": "prompt", "reference": "reference", "category": "category"}


def detect_format(path: Path, fmt: str = "auto") -> str:
    if fmt != "auto":
        return fmt
    suffix = path.suffix.lower()
    if suffix in (".jsonl", ".ndjson"):
        return "jsonl"
    if suffix in (".csv", ".tsv"):
        return "csv"
    if suffix in (".parquet", ".pq"):
        return "parquet"
    if suffix == ".json":
        return "jsonl"
    raise InputError(f"{path}: cannot tell the format from the suffix {suffix!r}; set dataset.format")


def _read_rows(path: Path, fmt: str) -> tuple[list[dict], str]:
    """Rows as dicts and the word for a row's position ('line' or 'row')."""
    if fmt == "jsonl":
        rows = []
        with open(path, encoding="utf-8") as fh:
            for lineno, line in enumerate(fh, start=1):
                if not line.strip():
                    continue
                try:
                    obj = json.loads(line)
                except json.JSONDecodeError as exc:
                    raise InputError(f"{path}, line {lineno}: malformed JSON ({exc.msg} at column {exc.colno})") from None
                if not isinstance(obj, dict):
                    raise InputError(f"{path}, line {lineno}: expected a JSON object, got {type(obj).__name__}")
                obj["__pos__"] = lineno
                rows.append(obj)
        return rows, "line"
    if fmt == "csv":
        delimiter = "\t" if path.suffix.lower() == ".tsv" else ","
        with open(path, encoding="utf-8", newline="") as fh:
            reader = csv.DictReader(fh, delimiter=delimiter)
            rows = []
            # Line numbers count the header as line 1.
            for obj in reader:
                obj["__pos__"] = reader.line_num
                rows.append(obj)
        return rows, "line"
    if fmt == "parquet":
        df = pd.read_parquet(path)
        rows = df.to_dict(orient="records")
        for i, obj in enumerate(rows):
            obj["__pos__"] = i
        return rows, "row"
    raise InputError(f"{path}: unknown dataset format {fmt!r}")


_MISSING = object()


def _lookup(obj, dotted: str):
    cur = obj
    for part in dotted.split("."):
        if isinstance(cur, dict) and part in cur:
            cur = cur[part]
        elif isinstance(cur, (list, tuple)) and part.isdigit() and int(part) < len(cur):
            cur = cur[int(part)]
        elif hasattr(cur, "tolist") and part.isdigit():  # numpy arrays from parquet
            seq = cur.tolist()
            if int(part) >= len(seq):
                return _MISSING
            cur = seq[int(part)]
        else:
            return _MISSING
    return cur


def _is_null(value) -> bool:
    if value is None or value is _MISSING:
        return True
    try:
        return bool(pd.isna(value))
    except (TypeError, ValueError):
        return False


def _as_text(value) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _optional_text(obj, name):
    """An optional field's text; absent, null and empty (CSV has no null) are None."""
    if not name:
        return None
    value = _lookup(obj, name)
    if _is_null(value) or _as_text(value) == "":
        return None
    return _as_text(value)


def is_missing(value) -> bool:
    """True for None and the NaN that pandas uses for a missing string."""
    return value is None or (isinstance(value, float) and value != value)


def stable_id(prompt: str, reference: str | None) -> str:
    digest = hashlib.sha256(json.dumps([prompt, reference]).encode("utf-8")).hexdigest()
    return digest[:16]


def load_items(path, fields: dict | None = None, fmt: str = "auto") -> pd.DataFrame:
    """Read and validate a dataset; raise InputError naming file, line/row and field."""
    path = Path(path)
    if not path.exists():
        raise InputError(f"{path}: dataset file not found")
    fields = {**DEFAULT_FIELDS, **(fields or {})}
    fmt = detect_format(path, fmt)
    rows, unit = _read_rows(path, fmt)
    if not rows:
        raise InputError(f"{path}: the dataset is empty")

    prompt_fields = fields["prompt"] if isinstance(fields["prompt"], list) else [fields["prompt"]]
    items = []
    seen: dict[str, int] = {}
    for obj in rows:
        pos = obj["__pos__"]
        where = f"{path}, {unit} {pos}"
        parts = []
        for name in prompt_fields:
            value = _lookup(obj, name)
            if value is _MISSING and len(prompt_fields) == 1:
                raise InputError(f"{where}: missing required field {name!r} (the prompt)")
            if not _is_null(value) and _as_text(value).strip():
                parts.append(_as_text(value))
        if not parts:
            raise InputError(f"{where}: the prompt field {' + '.join(map(repr, prompt_fields))} is empty")
        prompt = "\n\n".join(parts)

        reference = _optional_text(obj, fields.get("reference"))
        category = _optional_text(obj, fields.get("category"))

        if fields.get("id"):
            value = _lookup(obj, fields["id"])
            if _is_null(value) or _as_text(value).strip() == "":
                raise InputError(f"{where}: missing required field {fields['id']!r} (the id); "
                                 "set dataset.fields.id to null to derive ids from row content")
            item_id = _as_text(value)
        else:
            item_id = stable_id(prompt, reference)
        if item_id in seen:
            raise InputError(f"{where}: duplicate id {item_id!r} (field {fields.get('id') or '<derived from content>'!r}), "
                             f"first seen at {unit} {seen[item_id]}")
        seen[item_id] = pos
        items.append({"id": item_id, "prompt": prompt, "reference": reference, "category": category})
    return pd.DataFrame(items, columns=ITEM_COLUMNS)
