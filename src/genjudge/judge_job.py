"""The judge job: every generated answer graded by the judge model; raw text kept."""

from __future__ import annotations

import hashlib

import pandas as pd

from . import atomic, meta as jobmeta
from .generate_job import completion_meta
from .inference import PromptSet, complete
from .itemstore import ItemStore
from .templates import load_template, render

RAW_COLUMNS = ["id", "judge_prompt", "judge_output", "judge_n_prompt_tokens", "judge_n_generated_tokens",
               "judge_finish_reason", "judge_key"]


def run_judge(*, generations_path, out_path, meta_path, spec: dict, store_dir, run: str, lease,
              log_stream) -> dict:
    meta = jobmeta.base_meta(lease)
    meta.update(run=run, model=spec["model"], revision=spec.get("revision"), mode=spec["mode"],
                quantization=spec.get("quantization", "none"), device_map=spec.get("device_map", "auto"))
    gens = pd.read_parquet(generations_path)
    template = load_template(spec["template"], spec["mode"])
    texts = [render(template, question=q, reference=r, candidate=c)
             for q, r, c in zip(gens["prompt"], gens["reference"], gens["output"])]
    template_hash = hashlib.sha256(template.encode()).hexdigest()[:16]
    pset = PromptSet(spec, kind="judge", extra_key={"quantization": spec.get("quantization", "none")})
    store = ItemStore(store_dir, f"{run}-judge")
    ids = gens["id"].tolist()
    c = complete(pset, texts, ids, store, "judge", log_stream)
    raw = pd.DataFrame(
        [{"id": i, "judge_prompt": p, "judge_output": r["output"], "judge_n_prompt_tokens": int(r["n_prompt_tokens"]),
          "judge_n_generated_tokens": int(r["n_generated_tokens"]), "judge_finish_reason": r["finish_reason"],
          "judge_key": k} for i, p, r, k in zip(ids, c.prompts, c.results, c.keys)],
        columns=RAW_COLUMNS)
    atomic.write_parquet(out_path, raw)
    meta.update(n_items=len(raw), template=str(spec["template"]), template_hash=template_hash,
                **completion_meta(c, "judge_seconds"))
    return jobmeta.finish(meta, meta_path)
