"""Reading one row's fields: dotted paths into nested values, nulls, texts, chat messages and
multi-turn questions, each checked with the row and field named (genjudge.data.dataset)."""

from __future__ import annotations

import pandas as pd

from genjudge.errors import InputError


def _json_type(obj) -> str:
    return {dict: "an object", list: "an array", str: "a string", bool: "a boolean", type(None): "null"}.get(
        type(obj), "a number"
    )


_MISSING = object()


def _plain(value):
    """Python lists, dicts and scalars for the numpy arrays and scalars Parquet gives."""
    if type(value) is str:  # most values: the checks below cost more than the rest of an item's reading
        return value
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if hasattr(value, "tolist") and not isinstance(value, (str, bytes)):
        return _plain(value.tolist())
    return value


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
    if type(value) is str:
        return False
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


def _text_of(value, where: str, name: str) -> str:
    """A scalar field's text; an object or an array is an error (its Python repr is no question)."""
    if type(value) is str:
        return value
    plain = _plain(value)
    if isinstance(plain, (dict, list)):
        raise InputError(f"{where}: field {name!r} holds {_json_type(plain)}, not text")
    return _as_text(value)


def _optional_text(obj, name, where: str):
    """An optional field's text; absent, null and empty (CSV has no null) are None."""
    if not name:
        return None
    value = _lookup(obj, name)
    if _is_null(value) or _text_of(value, where, name) == "":
        return None
    return _as_text(value)


def _messages(value, where: str, field: str) -> list[dict] | None:
    """A list of `{role, content}` messages as plain dicts, or None when `value` is not one."""
    value = _plain(value)
    if not (isinstance(value, list) and value and all(isinstance(m, dict) for m in value)):
        return None
    if not any("role" in m or "content" in m for m in value):
        return None
    messages = []
    for k, m in enumerate(value):
        for key in ("role", "content"):
            if not isinstance(m.get(key), str):
                got = "is missing" if m.get(key) is None else f"is {_json_type(m[key])}, not text"
                raise InputError(f"{where}: field {field!r}, message {k}: {key!r} {got}")
        if not m["role"].strip():
            raise InputError(f"{where}: field {field!r}, message {k}: the role is empty")
        messages.append({"role": m["role"], "content": m["content"]})
    if not any(m["role"] == "user" for m in messages):
        raise InputError(f"{where}: field {field!r} holds messages but none with the role 'user'")
    return messages


def _user_turns(value, where: str, field: str) -> list[str] | None:
    """A list of user turns (texts), or None when `value` is not a list of texts."""
    value = _plain(value)
    if not (isinstance(value, list) and value and all(isinstance(t, str) for t in value)):
        return None
    for k, t in enumerate(value, start=1):
        if not t.strip():
            raise InputError(f"{where}: field {field!r}, turn {k} is empty")
    return value


def _turn_references(obj, name, n: int, where: str) -> list[str | None]:
    """Per-turn references of an n-turn item: a list field gives one per turn (null or empty:
    none), a single value is turn 1's."""
    value = _plain(_lookup(obj, name)) if name else None
    if isinstance(value, list):
        if len(value) > n:
            raise InputError(f"{where}: field {name!r} holds {len(value)} references for {n} turns")
        refs = []
        for k, v in enumerate(value, start=1):
            if isinstance(v, (dict, list)):  # its Python repr is no reference answer
                raise InputError(f"{where}: field {name!r}, turn {k} holds {_json_type(v)}, not text")
            refs.append(None if _is_null(v) or _as_text(v) == "" else _as_text(v))
        return refs + [None] * (n - len(refs))
    return [_optional_text(obj, name, where)] + [None] * (n - 1)
