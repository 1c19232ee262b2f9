"""The split job: validate the dataset, write the item table and the shards."""

from __future__ import annotations

import logging

from . import atomic
from .dataset import load_items
from .sharding import split_items
from .shardio import write_shard

log = logging.getLogger(__name__)


def run_split(dataset_path, fields: dict, fmt: str, items_path, shard_paths: list[str]) -> None:
    items = load_items(dataset_path, fields, fmt)
    shards = split_items(items, len(shard_paths))
    for path, shard in zip(shard_paths, shards):
        write_shard(path, shard)
    atomic.write_parquet(items_path, items)
    log.info("%d items from %s in %d shards of %s items", len(items), dataset_path, len(shards),
             sorted({len(s) for s in shards}))
