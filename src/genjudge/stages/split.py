"""The split job: validate the dataset, write the item table and the shards."""

from __future__ import annotations

import logging
from pathlib import Path

from genjudge.data.dataset import load_items
from genjudge.data.shard_files import write_shard
from genjudge.data.sharding import split_items
from genjudge.store import atomic

log = logging.getLogger(__name__)


def shard_path(shard_dir, shard: int) -> Path:
    return Path(shard_dir) / f"{shard}.jsonl"


def run_split(
    dataset_path, fields: dict, fmt: str, items_path, shard_dir, n_shards: int, hf: dict | None = None
) -> None:
    items = load_items(dataset_path, fields, fmt, hf)
    shards = split_items(items, n_shards)
    Path(shard_dir).mkdir(parents=True, exist_ok=True)
    for i, shard in enumerate(shards):
        write_shard(shard_path(shard_dir, i), shard)
    atomic.write_parquet(items_path, items)
    log.info(
        "%d items from %s in %d shards of %s items",
        len(items),
        dataset_path,
        len(shards),
        sorted({len(s) for s in shards}),
    )
