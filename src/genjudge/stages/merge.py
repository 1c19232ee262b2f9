"""Merge generation shards: every input id exactly once, or a loud failure."""

from __future__ import annotations

import pandas as pd

from genjudge import atomic


class MergeError(Exception):
    pass


def merge_generations(items: pd.DataFrame, shard_paths: list[str]) -> pd.DataFrame:
    frames = []
    for shard, path in enumerate(shard_paths):
        df = pd.read_parquet(path)
        df.insert(1, "shard", shard)
        frames.append(df)
    gens = pd.concat(frames, ignore_index=True)

    dup = gens["id"][gens["id"].duplicated(keep=False)]
    if len(dup):
        where = gens[gens["id"].isin(dup)].groupby("id")["shard"].apply(list).head(10).to_dict()
        raise MergeError(f"{dup.nunique()} id(s) appear more than once across shards, e.g. {where}")
    expected = set(items["id"])
    got = set(gens["id"])
    missing = sorted(expected - got)
    extra = sorted(got - expected)
    if missing or extra:
        raise MergeError(f"shards do not match the dataset: {len(missing)} missing id(s) {missing[:10]}, "
                         f"{len(extra)} unexpected id(s) {extra[:10]}")
    merged = items.merge(gens, on="id", how="left", validate="one_to_one")
    return merged


def run_merge(items_path, shard_paths, out_path) -> pd.DataFrame:
    items = pd.read_parquet(items_path)
    merged = merge_generations(items, list(shard_paths))
    atomic.write_parquet(out_path, merged)
    return merged
