"""One generation job: a shard of items in, one output row per item and sample out
(`generator.n_samples`, default 1; rows are keyed by id + sample)."""

from __future__ import annotations

import json

import pandas as pd

from genjudge import atomic
from genjudge.dataset import is_missing
from genjudge.engine.completion import PromptSet, complete, completion_meta
from genjudge.item_store import ItemStore
from genjudge.records import GenerateMeta
from genjudge.shard_files import read_shard
from genjudge.specs import GeneratorSpec

OUTPUT_COLUMNS = [
    "id",
    "sample",
    "prompt_sent",
    "output",
    "n_prompt_tokens",
    "n_generated_tokens",
    "finish_reason",
    "key",
]


def run_generate(
    *,
    shard: int,
    shard_path,
    out_path,
    meta_path,
    spec: GeneratorSpec,
    store_dir,
    run: str,
    lease,
    log_stream,
    generator: str | None = None,
    dataset: str | None = None,
) -> GenerateMeta:
    meta = GenerateMeta.start(
        lease, shard=int(shard), run=run, model=spec.model, revision=spec.revision, generator=generator, dataset=dataset
    )
    items = read_shard(shard_path)
    pset = PromptSet(spec, kind="generate")
    store = ItemStore(store_dir, f"{run}-{generator}-{dataset}-shard{shard}")
    k = int(spec.n_samples)
    # Sample-major within the item: item i's samples 0..k-1 are rows i*k .. i*k+k-1.
    ids = [i for i in items["id"].tolist() for _ in range(k)]
    samples = list(range(k)) * len(items)
    texts = [t for t in items["prompt"].tolist() for _ in range(k)]
    conversations = [None if is_missing(m) else json.loads(m) for m in items["messages"] for _ in range(k)]
    c = complete(
        pset,
        texts,
        ids,
        store,
        f"shard {shard}",
        log_stream,
        conversations=conversations,
        samples=samples if spec.do_sample else None,
    )

    out = pd.DataFrame(
        [
            {
                "id": i,
                "sample": s,
                "prompt_sent": p,
                "output": r["output"],
                "n_prompt_tokens": int(r["n_prompt_tokens"]),
                "n_generated_tokens": int(r["n_generated_tokens"]),
                "finish_reason": r["finish_reason"],
                "key": k,
            }
            for i, s, p, r, k in zip(ids, samples, c.prompts, c.results, c.keys)
        ],
        columns=OUTPUT_COLUMNS,
    )
    atomic.write_parquet(out_path, out)
    meta.update(
        n_items=len(out),  # rows: items x samples
        n_samples=k,
        n_generated_tokens=int(out["n_generated_tokens"].sum()),
        **completion_meta(c, "generate_seconds"),
    )
    return meta.finish(meta_path)
