"""Items that carry their own rubric (HealthBench's `rubrics`, a checklist of WildBench's): each
criterion with signed points and its tags, read and checked where the dataset is read, so that a
malformed rubric stops planning with the file, line and field named.

A rubric is a list of `{criterion, points, tags}`:
- `criterion`: text, not empty;
- `points`: a finite number; negative points describe what a good answer must not do;
- `tags`: a list of texts (`axis:accuracy`), none twice; left out: none.
An item's rubric needs at least one criterion with positive points (its score divides by their sum).
Its own tags (`example_tags`, such as `theme:emergency_referrals`) are a list of texts.

The item table keeps a rubric as a JSON text (`rubric`) and the item's tags likewise (`tags`); a
checklist (a list of texts, or one text) as a JSON list (`checklist`).
"""

from __future__ import annotations

import json
import math

from genjudge.data.fields import _plain
from genjudge.errors import InputError


def _kind(value) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "text"
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return "a list"
    return type(value).__name__


def _texts(value, where: str, what: str) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise InputError(f"{where}: {what} is {_kind(value)}, not a list of texts")
    for k, t in enumerate(value):
        if not isinstance(t, str):
            raise InputError(f"{where}: {what}[{k}] is {_kind(t)}, not text")
    return list(value)


def read_rubric(value, where: str, field: str) -> list[dict]:
    """A row's rubric as [{criterion, points, tags}], checked (`where`: the file and line; `field`: the
    field's name as the config names it)."""
    value = _plain(value)
    if not isinstance(value, list) or not value:
        raise InputError(
            f"{where}: field {field!r} is {_kind(value)}, not a list of criteria ({{criterion, points, tags}})"
        )
    out = []
    for k, c in enumerate(value):
        at = f"{where}: field {field!r}, criterion {k}"
        if not isinstance(c, dict):
            raise InputError(f"{at} is {_kind(c)}, not an object {{criterion, points, tags}}")
        text = c.get("criterion")
        if not isinstance(text, str) or not text.strip():
            raise InputError(f"{at}: 'criterion' is {'empty' if isinstance(text, str) else _kind(text)}, not text")
        points = c.get("points")
        if isinstance(points, bool) or not isinstance(points, (int, float)) or not math.isfinite(points):
            shown = points if isinstance(points, (int, float)) and not isinstance(points, bool) else _kind(points)
            raise InputError(f"{at}: 'points' is {shown}, not a finite number")
        tags = _texts(c.get("tags"), at, "'tags'")
        twice = sorted({t for t in tags if tags.count(t) > 1})
        if twice:
            raise InputError(f"{at}: 'tags' names {twice} more than once")
        out.append({"criterion": text, "points": float(points), "tags": tags})
    if not any(c["points"] > 0 for c in out):
        raise InputError(
            f"{where}: field {field!r} has no criterion with positive points: the item's score divides by their sum"
        )
    return out


def read_tags(value, where: str, field: str) -> list[str]:
    """An item's own tags (HealthBench's `example_tags`), checked."""
    tags = _texts(_plain(value), where, f"field {field!r}")
    twice = sorted({t for t in tags if tags.count(t) > 1})
    if twice:
        raise InputError(f"{where}: field {field!r} names {twice} more than once")
    return tags


def read_checklist(value, where: str, field: str) -> list[str]:
    """A checklist (WildBench's): a list of texts, or one text (one item)."""
    value = _plain(value)
    if isinstance(value, str):
        return [value] if value.strip() else []
    return [t for t in _texts(value, where, f"field {field!r}") if t.strip()]


def rubric_of(text) -> list[dict] | None:
    """The rubric an item table's `rubric` column holds (None where the item has none)."""
    return json.loads(text) if isinstance(text, str) and text else None


def list_of(text) -> list[str]:
    """The list an item table's `tags` or `checklist` column holds ([] where there is none)."""
    return json.loads(text) if isinstance(text, str) and text else []


def numbered(items: list[str]) -> str:
    """A checklist as a template shows it: `1. ...` a line."""
    return "\n".join(f"{k}. {t}" for k, t in enumerate(items, start=1))
