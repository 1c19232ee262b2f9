"""Deterministic, count-balanced split of the item table into shards."""

from __future__ import annotations

import pandas as pd

from genjudge.errors import InputError


def shard_bounds(n_items: int, n_shards: int) -> list[tuple[int, int]]:
    """Contiguous [start, end) ranges; sizes differ by at most one."""
    if n_shards < 1:
        raise InputError(f"shards must be >= 1, got {n_shards}")
    if n_shards > n_items:
        raise InputError(
            f"shards = {n_shards} is more than the {n_items} items of the dataset; use shards <= {n_items}"
        )
    base, extra = divmod(n_items, n_shards)
    bounds, start = [], 0
    for i in range(n_shards):
        end = start + base + (1 if i < extra else 0)
        bounds.append((start, end))
        start = end
    return bounds


def split_items(items: pd.DataFrame, n_shards: int) -> list[pd.DataFrame]:
    return [items.iloc[a:b].reset_index(drop=True) for a, b in shard_bounds(len(items), n_shards)]
