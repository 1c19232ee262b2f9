"""Shard files: one JSON object per line, the normalised item columns."""

from __future__ import annotations

import json

import pandas as pd

from genjudge.data.dataset import ITEM_COLUMNS, OPTIONAL_COLUMNS, is_missing
from genjudge.errors import InputError
from genjudge.store import atomic


def write_shard(path, items: pd.DataFrame) -> None:
    lines = [
        json.dumps(
            {c: row.get(c) for c in ITEM_COLUMNS if c not in OPTIONAL_COLUMNS or not is_missing(row.get(c))},
            ensure_ascii=False,
        )
        for row in items.to_dict(orient="records")
    ]
    atomic.write_text(path, "".join(line + "\n" for line in lines))


def read_shard(path) -> pd.DataFrame:
    rows = []
    with open(path, encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise InputError(
                    f"{path}, line {lineno}: unreadable shard record ({exc.msg}); rerun the split or restore the file"
                ) from None
    return pd.DataFrame(rows, columns=ITEM_COLUMNS)
