"""Shard files: one JSON object per line, the normalised item columns."""

from __future__ import annotations

import json

import pandas as pd

from . import atomic
from .dataset import ITEM_COLUMNS


def write_shard(path, items: pd.DataFrame) -> None:
    lines = [json.dumps({c: row[c] for c in ITEM_COLUMNS}, ensure_ascii=False)
             for row in items.to_dict(orient="records")]
    atomic.write_text(path, "".join(line + "\n" for line in lines))


def read_shard(path) -> pd.DataFrame:
    with open(path, encoding="utf-8") as fh:
        rows = [json.loads(line) for line in fh if line.strip()]
    return pd.DataFrame(rows, columns=ITEM_COLUMNS)
