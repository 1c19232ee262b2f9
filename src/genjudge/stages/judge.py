"""Judge jobs: the grading mode builds the judge requests, the engine runs them, the raw text is kept.

With `cascade`, items the mode's rule decides (exact matches) never reach the
judge model. With `verdict: logprob` each request is one forward pass that
scores the mode's labels after its marker.
"""

from __future__ import annotations

import hashlib

import pandas as pd

from genjudge.engine.completion import PromptSet, complete, completion_meta
from genjudge.item_store import ItemStore
from genjudge.judging import modes
from genjudge.judging.templates import load_template
from genjudge.records import JudgeMeta, JudgeRecord, read_judge_records, write_judge_records
from genjudge.sharding import shard_bounds
from genjudge.specs import JudgeSpec


def shard_slice(gens: pd.DataFrame, shard: int, n_shards: int) -> pd.DataFrame:
    a, b = shard_bounds(len(gens), n_shards)[shard]
    return gens.iloc[a:b]


def run_judge(*, generations_path, out_path, meta_path, spec: JudgeSpec, template_path, store_dir, run: str, lease,
              log_stream, shard: int = 0, n_shards: int = 1) -> JudgeMeta:
    mode = modes.get(spec.mode)
    meta = JudgeMeta.start(lease, run=run, judge_shard=shard, model=spec.model, revision=spec.revision,
                           mode=spec.mode, verdict=spec.verdict, cascade=spec.cascade,
                           quantization=spec.quantization, device_map=spec.device_map)
    gens = shard_slice(pd.read_parquet(generations_path), shard, n_shards)
    template = load_template(template_path, mode)
    requests = mode.requests(gens, spec, template)
    to_judge = [r for r in requests if r.decided_by == "judge"]

    scorer, suffix, kind = None, "", "judge"
    if spec.verdict == "logprob":
        from functools import partial

        from genjudge.engine.logprob import LogprobScorer, label_token_ids

        marker = f"{mode.marker}:"
        scorer, suffix, kind = partial(LogprobScorer, labels=mode.logprob_labels, marker=marker), marker, \
            "judge-logprob"
    pset = PromptSet(spec, kind=kind, suffix=suffix)
    if scorer is not None:
        label_token_ids(pset.tok, mode.logprob_labels, suffix)  # refuse colliding labels before loading weights
    store = ItemStore(store_dir, f"{run}-judge{shard}")
    c = complete(pset, [r.text for r in to_judge], [r.id for r in to_judge], store,
                 f"judge {shard}" if n_shards > 1 else "judge", log_stream, scorer=scorer)
    results = iter(zip(c.prompts, c.results, c.keys))
    rows = []
    for r in requests:
        row = JudgeRecord(id=r.id, order=r.order, decided_by=r.decided_by)
        if r.decided_by == "judge":
            prompt, res, key = next(results)
            row = JudgeRecord(id=r.id, order=r.order, decided_by=r.decided_by, judge_prompt=prompt,
                              judge_output=res["output"], p_correct=res.get("p_correct"),
                              judge_n_prompt_tokens=int(res["n_prompt_tokens"]),
                              judge_n_generated_tokens=int(res["n_generated_tokens"]),
                              judge_finish_reason=res["finish_reason"], judge_key=key)
        rows.append(row)
    write_judge_records(out_path, rows)
    meta.update(n_items=len(gens), n_requests=len(requests), n_decided_by_rule=len(requests) - len(to_judge),
                template=str(template_path), template_hash=hashlib.sha256(template.encode()).hexdigest()[:16],
                **completion_meta(c, "judge_seconds"))
    return meta.finish(meta_path)


def merge_judge_shards(raw_paths, meta_paths, out_path, meta_out_path) -> None:
    """Concatenate data-parallel judge shards; the combined meta lists each shard's."""
    raw = pd.concat([read_judge_records(p) for p in raw_paths], ignore_index=True)
    if raw[["id", "order"]].duplicated().any():
        raise ValueError("judge shards overlap: an (id, order) appears twice")
    write_judge_records(out_path, raw)
    JudgeMeta.merged([JudgeMeta.read(p) for p in meta_paths]).write(meta_out_path)
