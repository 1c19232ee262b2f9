"""How big a generation shard should be: model load seconds against compute seconds, from the meta
files of a finished run (`genjudge shards results/<run>`).

Every generation job sets up (tokenizer, fingerprint) and loads its model once; a shard whose compute time
is small next to those fixed costs spends the cluster's GPU hours on them. From the measured load time and compute time per
item, the largest shard count that keeps loading under a share of each job (10% by default) is
the number of items divided by the items a job needs to earn its load.
"""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from genjudge.store.records import GenerateMeta


def shard_table(run_dir) -> pd.DataFrame:
    """One row per generation shard of the run: items, load and compute seconds."""
    rows = []
    for path in sorted(Path(run_dir).glob("generations/*/*/*.meta.json")):
        m = GenerateMeta.read(path)
        if m.error:  # a failed job (genjudge.store.failures) measured nothing
            continue
        rows.append(
            {
                "generator": m.generator,
                "dataset": m.dataset,
                "shard": m.shard,
                "n_items": m.n_items,
                "computed_items": m.computed_items,
                # A job's fixed costs, apart as the report shows them: set-up (tokenizer, fingerprint, the imports
                # they need), then the weights' load; only a job that computed something loaded its model.
                "setup_seconds": m.setup_seconds if m.computed_items else 0.0,
                "load_seconds": m.load_seconds if m.computed_items else 0.0,
                "generate_seconds": m.generate_seconds,
                "partition": m.slurm_partition,
            }
        )
    return pd.DataFrame(rows)


def sizing(run_dir, max_load_share: float = 0.1) -> pd.DataFrame:
    """Per generator and dataset: shards, median items, load and compute seconds per shard, the
    share of load in the jobs' time, and the most shards that keep loading under `max_load_share`."""
    table = shard_table(run_dir)
    if table.empty:
        raise FileNotFoundError(f"{run_dir}: no generation meta files (generations/*/*/*.meta.json)")
    out = []
    for (generator, dataset), g in table.groupby(["generator", "dataset"], sort=True):
        # Only the shards that computed something loaded the model: the others came from the item
        # cache and say nothing about load or compute time (None: nothing measured).
        computed = g[g.computed_items > 0]
        row = {
            "generator": generator,
            "dataset": dataset,
            "shards": len(g),
            "items_per_shard": float(g.n_items.median()),
            "setup_s": None,
            "load_s": None,
            "compute_s": None,
            "fixed_share": None,
            "compute_s_per_item": None,
            "max_shards": None,
        }
        if len(computed):
            per_item = computed.generate_seconds.sum() / computed.computed_items.sum()
            fixed = computed.setup_seconds + computed.load_seconds
            load = float(fixed.median())  # what a shard pays before its first item: set-up and load
            n_items = int(g.n_items.sum())
            # Items a job needs so that load <= share of (load + compute).
            need = load * (1 - max_load_share) / max_load_share / per_item if per_item > 0 else math.nan
            total = fixed.sum() + computed.generate_seconds.sum()
            row.update(
                setup_s=round(float(computed.setup_seconds.median()), 3),
                load_s=round(float(computed.load_seconds.median()), 3),
                compute_s=round(float(computed.generate_seconds.median()), 3),
                fixed_share=round(float(fixed.sum() / total), 3) if total else None,
                compute_s_per_item=round(float(per_item), 5),
                max_shards=max(1, min(n_items, math.floor(n_items / need))) if need > 0 else None,
            )
        out.append(row)
    return pd.DataFrame(out, dtype=object)


def render(frame: pd.DataFrame, max_load_share: float = 0.1) -> list[str]:
    cols = list(frame.columns)
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for _, row in frame.iterrows():
        lines.append("| " + " | ".join("-" if v is None else str(v) for v in row.tolist()) + " |")
    lines.append(
        f"max_shards: the most shards that keep a job's fixed costs under {max_load_share:.0%} of each generation "
        "job (setup_s: tokenizer, model fingerprint and the imports they need; load_s: the weights, as the report's "
        "load; fixed_share: both over the jobs' time; medians over the shards that loaded the model, against "
        "compute seconds per item; a job's scheduling and process start come on top)"
    )
    for row in frame.itertuples():
        if row.load_s is None:
            lines.append(
                f"{row.generator}/{row.dataset}: every shard came from the item cache: no model was loaded and "
                "nothing computed, so there is nothing to size by (a run that computes gives the figures)"
            )
    return lines
