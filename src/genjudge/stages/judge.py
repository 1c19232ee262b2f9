"""Judge jobs: build the judge requests for a grading mode, run them, keep the raw text.

- reference: question + reference + candidate -> CORRECT / INCORRECT (/ PARTIAL)
- score: rubric grade 1-10
- pairwise: candidate vs a baseline run's answer, judged in both orders
  (order 0: candidate is A; order 1: candidate is B)
With `cascade`, items whose answer matches the reference after normalisation
are decided by that rule and never reach the judge model. With `verdict:
logprob` (reference mode) each request is one forward pass.
"""

from __future__ import annotations

import hashlib

import pandas as pd

from genjudge import atomic, meta as jobmeta
from genjudge.errors import InputError
from genjudge.engine.completion import PromptSet, complete, completion_meta
from genjudge.item_store import ItemStore
from genjudge.judging.templates import load_template, render
from genjudge.judging.textnorm import exact_match

RAW_COLUMNS = ["id", "order", "decided_by", "judge_prompt", "judge_output", "p_correct", "judge_n_prompt_tokens",
               "judge_n_generated_tokens", "judge_finish_reason", "judge_key"]


def load_baseline(path, ids) -> dict:
    if not path:
        raise InputError("judge.baseline: pairwise mode needs a baseline run's generations.parquet")
    try:
        base = pd.read_parquet(path, columns=["id", "output"])
    except FileNotFoundError:
        raise InputError(f"judge.baseline: {path!r} not found") from None
    answers = dict(zip(base["id"], base["output"]))
    missing = [i for i in ids if i not in answers]
    if missing:
        raise InputError(f"judge.baseline: {path} has no answer for {len(missing)} id(s), e.g. {missing[:5]}")
    return answers


def build_requests(gens: pd.DataFrame, spec: dict, template: str) -> list[dict]:
    """One request per judge call; cascade-decided items carry no text."""
    mode = spec["mode"]
    requests = []
    if mode == "pairwise":
        baseline = load_baseline(spec.get("baseline"), gens["id"].tolist())
        for row in gens.itertuples():
            pair = (row.output, baseline[row.id])
            for order, (a, b) in enumerate((pair, pair[::-1])):
                requests.append({"id": row.id, "order": order, "decided_by": "judge",
                                 "text": render(template, question=row.prompt, reference=row.reference,
                                                answer_a=a, answer_b=b)})
        return requests
    for row in gens.itertuples():
        if spec.get("cascade") and mode == "reference" and exact_match(row.output, row.reference):
            requests.append({"id": row.id, "order": 0, "decided_by": "rule", "text": None})
        else:
            requests.append({"id": row.id, "order": 0, "decided_by": "judge",
                             "text": render(template, question=row.prompt, reference=row.reference,
                                            candidate=row.output)})
    return requests


def shard_slice(gens: pd.DataFrame, shard: int, n_shards: int) -> pd.DataFrame:
    from genjudge.sharding import shard_bounds

    a, b = shard_bounds(len(gens), n_shards)[shard]
    return gens.iloc[a:b]


def run_judge(*, generations_path, out_path, meta_path, spec: dict, template_path, store_dir, run: str, lease,
              log_stream, shard: int = 0, n_shards: int = 1) -> dict:
    meta = jobmeta.base_meta(lease)
    meta.update(run=run, judge_shard=shard, model=spec["model"], revision=spec.get("revision"), mode=spec["mode"],
                verdict=spec.get("verdict", "generate"), cascade=bool(spec.get("cascade")),
                quantization=spec.get("quantization", "none"), device_map=spec.get("device_map", "auto"))
    gens = shard_slice(pd.read_parquet(generations_path), shard, n_shards)
    template = load_template(template_path, spec["mode"])
    requests = build_requests(gens, spec, template)
    to_judge = [r for r in requests if r["decided_by"] == "judge"]

    logprob = spec.get("verdict") == "logprob"
    scorer = None
    suffix = ""
    if logprob:
        from genjudge.engine.logprob import MARKER, LogprobScorer

        if spec["mode"] != "reference":
            raise InputError("judge.verdict: logprob works with mode reference only")
        scorer, suffix = LogprobScorer, MARKER
    pset = PromptSet(spec, kind="judge-logprob" if logprob else "judge", suffix=suffix,
                     extra_key={"quantization": spec.get("quantization", "none")})
    if logprob:
        from genjudge.engine.logprob import label_token_ids

        label_token_ids(pset.tok)  # refuse colliding labels before loading any weights
    store = ItemStore(store_dir, f"{run}-judge{shard}")
    c = complete(pset, [r["text"] for r in to_judge], [r["id"] for r in to_judge], store,
                 f"judge {shard}" if n_shards > 1 else "judge", log_stream, scorer=scorer)
    results = iter(zip(c.prompts, c.results, c.keys))
    rows = []
    for r in requests:
        row = {"id": r["id"], "order": r["order"], "decided_by": r["decided_by"], "judge_prompt": None,
               "judge_output": None, "p_correct": None, "judge_n_prompt_tokens": 0, "judge_n_generated_tokens": 0,
               "judge_finish_reason": None, "judge_key": None}
        if r["decided_by"] == "judge":
            prompt, res, key = next(results)
            row.update(judge_prompt=prompt, judge_output=res["output"], p_correct=res.get("p_correct"),
                       judge_n_prompt_tokens=int(res["n_prompt_tokens"]),
                       judge_n_generated_tokens=int(res["n_generated_tokens"]),
                       judge_finish_reason=res["finish_reason"], judge_key=key)
        rows.append(row)
    raw = pd.DataFrame(rows, columns=RAW_COLUMNS)
    raw["p_correct"] = raw["p_correct"].astype("float64")
    atomic.write_parquet(out_path, raw)
    meta.update(n_items=len(gens), n_requests=len(requests), n_decided_by_rule=len(requests) - len(to_judge),
                template=str(template_path), template_hash=hashlib.sha256(template.encode()).hexdigest()[:16],
                **completion_meta(c, "judge_seconds"))
    return jobmeta.finish(meta, meta_path)


def merge_judge_shards(raw_paths, meta_paths, out_path, meta_out_path) -> None:
    """Concatenate data-parallel judge shards; the combined meta lists each shard's."""
    import json

    raw = pd.concat([pd.read_parquet(p) for p in raw_paths], ignore_index=True)
    if raw[["id", "order"]].duplicated().any():
        raise ValueError("judge shards overlap: an (id, order) appears twice")
    atomic.write_parquet(out_path, raw)
    metas = [json.loads(open(p).read()) for p in meta_paths]
    combined = dict(metas[0]) if len(metas) == 1 else {
        "shards": metas, "n_items": sum(m["n_items"] for m in metas),
        "cuda_visible_devices": ";".join(str(m["cuda_visible_devices"]) for m in metas),
        "load_seconds": round(sum(m["load_seconds"] for m in metas), 3),
        "judge_seconds": round(sum(m["judge_seconds"] for m in metas), 3),
        "resumed_items": sum(m["resumed_items"] for m in metas),
        "computed_items": sum(m["computed_items"] for m in metas),
        "n_decided_by_rule": sum(m["n_decided_by_rule"] for m in metas),
        "model_fingerprint": metas[0]["model_fingerprint"],
        "placement": metas[0].get("placement"),
        "started_at": min(m["started_at"] for m in metas), "finished_at": max(m["finished_at"] for m in metas)}
    atomic.write_json(meta_out_path, combined)
