"""The run's report: summary.json for machines, report.md for people."""

from __future__ import annotations

import json

import pandas as pd

from genjudge import atomic
from genjudge.provenance import provenance
from genjudge.judging.stats import wilson_interval


def _rate(k: int, n: int) -> dict:
    ci = wilson_interval(k, n)
    return {"value": (k / n) if n else None, "ci95": list(ci) if ci else None, "n": n}


def _pct(x) -> str:
    return "n/a" if x is None else f"{100 * x:.1f}%"


def _ci(r: dict) -> str:
    return "" if not r["ci95"] else f" [{100 * r['ci95'][0]:.1f}, {100 * r['ci95'][1]:.1f}]"


def _mean_ci(values) -> dict:
    import math

    v = [float(x) for x in values]
    n = len(v)
    if n == 0:
        return {"value": None, "ci95": None, "n": 0}
    mean = sum(v) / n
    if n == 1:
        return {"value": mean, "ci95": None, "n": 1}
    sd = math.sqrt(sum((x - mean) ** 2 for x in v) / (n - 1))
    half = 1.96 * sd / math.sqrt(n)
    return {"value": mean, "ci95": [mean - half, mean + half], "n": n}


def _mode_metrics(g: pd.DataFrame, mode: str) -> dict:
    """The headline measures of one group of judgments."""
    parsed = g[g["verdict"].notna()]
    if mode == "reference":
        out = {"accuracy": _rate(int((parsed["verdict"] == "correct").sum()), len(parsed)),
               "verdict_counts": {str(k): int(v) for k, v in parsed["verdict"].value_counts().items()}}
        p = g["p_correct"].dropna() if "p_correct" in g else []
        if len(p):
            out["mean_p_correct"] = float(p.mean())
        return out
    if mode == "score":
        return {"mean_score": _mean_ci(parsed["score"]),
                "score_counts": {str(int(k)): int(v) for k, v in parsed["score"].value_counts().sort_index().items()}}
    n = len(parsed)
    out = {k: _rate(int((parsed["verdict"] == k).sum()), n) for k in ("win", "tie", "loss")}
    cons = parsed["position_consistent"].dropna().astype(bool)
    out["position_consistency"] = _rate(int(cons.sum()), len(cons))
    return out


def summarise(df: pd.DataFrame, gen_metas: list[dict], judge_meta: dict, config: dict) -> dict:
    mode = config["judge"]["mode"]
    n = len(df)
    parsed = df[df["verdict"].notna()]
    em_all = df["exact_match"].dropna().astype(bool)
    metrics = _mode_metrics(df, mode)
    per_cat = {}
    for cat, g in df.groupby(df["category"].fillna("(none)"), sort=True):
        em = g["exact_match"].dropna()
        per_cat[str(cat)] = {"n_items": len(g), "n_judged": int(g["verdict"].notna().sum()),
                             "n_unparsed": int(g["verdict"].isna().sum()),
                             "exact_match": _rate(int(em.astype(bool).sum()), len(em)), **_mode_metrics(g, mode)}
    summary = {"run": config["run"], "mode": mode, "n_items": n, "n_judged": len(parsed),
               "n_unparsed": n - len(parsed), "unparsed_rate": (n - len(parsed)) / n if n else None,
               "unparsed_reasons": {str(k): int(v) for k, v in df["unparsed_reason"].dropna().value_counts().items()},
               "accuracy": None, "accuracy_ci95": None, **metrics,
               "exact_match": _rate(int(em_all.sum()), len(em_all)), "per_category": per_cat}
    if mode == "reference":
        summary["accuracy"], summary["accuracy_ci95"] = metrics["accuracy"]["value"], metrics["accuracy"]["ci95"]
        both = parsed[parsed["exact_match"].notna() & (parsed["decided_by"] == "judge")]
        agree = int(((both["verdict"] == "correct") == both["exact_match"].astype(bool)).sum())
        summary["judge_exact_match_agreement"] = _rate(agree, len(both))
        summary["decided_by"] = {str(k): int(v) for k, v in df["decided_by"].value_counts().items()}
    warnings = []
    for m in [*gen_metas, *(judge_meta.get("shards") or [judge_meta])]:
        mp = m.get("memory_plan") or {}
        if mp.get("offloaded_to"):
            who = f"shard {m['shard']}" if "shard" in m else "judge"
            warnings.append(f"{who}: the memory plan put layers on {', '.join(mp['offloaded_to'])} "
                            f"({mp.get('recommendation', '')})")
    summary["placement_warnings"] = warnings
    summary["shards"] = [
        {"shard": m["shard"], "n_items": m["n_items"], "cuda_visible_devices": m["cuda_visible_devices"],
         "hostname": m["hostname"], "load_seconds": m["load_seconds"], "generate_seconds": m["generate_seconds"],
         "resumed_items": m["resumed_items"], "computed_items": m["computed_items"],
         "tokens_per_second": m["tokens_per_second"], "wall_seconds": round(m["finished_at"] - m["started_at"], 3)}
        for m in sorted(gen_metas, key=lambda m: m["shard"])]
    summary["generator"] = {
        "model": config["generator"]["model"], "revision": config["generator"].get("revision"),
        "max_new_tokens": config["generator"]["max_new_tokens"],
        "load_seconds": round(sum(m["load_seconds"] for m in gen_metas), 3),
        "generate_seconds": round(sum(m["generate_seconds"] for m in gen_metas), 3),
        "resumed_items": sum(m["resumed_items"] for m in gen_metas),
        "computed_items": sum(m["computed_items"] for m in gen_metas)}
    j = config["judge"]
    summary["judge"] = {
        "model": j["model"], "mode": mode, "verdict": j.get("verdict", "generate"), "cascade": j.get("cascade"),
        "quantization": j.get("quantization", "none"), "shards": j.get("shards", 1),
        "cuda_visible_devices": judge_meta.get("cuda_visible_devices"), "placement": judge_meta.get("placement"),
        "load_seconds": judge_meta.get("load_seconds"), "judge_seconds": judge_meta.get("judge_seconds"),
        "resumed_items": judge_meta.get("resumed_items"), "computed_items": judge_meta.get("computed_items")}
    return summary


def _headline(s: dict) -> list[str]:
    mode = s["mode"]
    rows = [f"| items | {s['n_items']} |", f"| judged (parsed verdicts) | {s['n_judged']} |",
            f"| unparsed | {s['n_unparsed']} ({_pct(s['unparsed_rate'])}) |"]
    if mode == "reference":
        rows.append(f"| accuracy (judge, over parsed) | {_pct(s['accuracy'])}{_ci({'ci95': s['accuracy_ci95']})} |")
        if "mean_p_correct" in s:
            rows.append(f"| mean judge probability of CORRECT (logprob) | {s['mean_p_correct']:.3f} |")
        rows.append(f"| judge agrees with exact match | {_pct(s['judge_exact_match_agreement']['value'])}"
                    f"{_ci(s['judge_exact_match_agreement'])} |")
        rows.append("| decided by | " + ", ".join(f"{k}: {v}" for k, v in s["decided_by"].items()) + " |")
    elif mode == "score":
        m = s["mean_score"]
        ci = f" [{m['ci95'][0]:.2f}, {m['ci95'][1]:.2f}]" if m["ci95"] else ""
        value = "n/a" if m["value"] is None else f"{m['value']:.2f}"
        rows.append(f"| mean score (1-10) | {value}{ci} |")
    else:
        for k in ("win", "tie", "loss"):
            rows.append(f"| {k} (vs baseline) | {_pct(s[k]['value'])}{_ci(s[k])} |")
        rows.append(f"| position consistency | {_pct(s['position_consistency']['value'])}{_ci(s['position_consistency'])} |")
    rows.append(f"| normalised exact match | {_pct(s['exact_match']['value'])}{_ci(s['exact_match'])} |")
    return ["| measure | value |", "|---|---|", *rows]


def _category_table(s: dict) -> list[str]:
    mode = s["mode"]
    if mode == "reference":
        head, cell = "accuracy", lambda c: f"{_pct(c['accuracy']['value'])}{_ci(c['accuracy'])}"
    elif mode == "score":
        head, cell = "mean score", lambda c: ("n/a" if c["mean_score"]["value"] is None
                                              else f"{c['mean_score']['value']:.2f}")
    else:
        head, cell = "win / tie / loss", lambda c: " / ".join(_pct(c[k]["value"]) for k in ("win", "tie", "loss"))
    out = [f"| category | items | judged | unparsed | {head} | exact match |", "|---|---|---|---|---|---|"]
    for cat, c in s["per_category"].items():
        out.append(f"| {cat} | {c['n_items']} | {c['n_judged']} | {c['n_unparsed']} | {cell(c)} | "
                   f"{_pct(c['exact_match']['value'])} |")
    return out


def _cell(text, width=80) -> str:
    text = "" if text is None else str(text)
    text = " ".join(text.split()).replace("|", "\\|")
    return text if len(text) <= width else text[: width - 1] + "…"


def render_markdown(s: dict, df: pd.DataFrame, n_examples: int = 3) -> str:
    out = [f"# Report: run `{s['run']}`", ""]
    out += [f"- Generator: `{s['generator']['model']}`", f"- Judge: `{s['judge']['model']}` "
            f"(mode {s['judge']['mode']}, verdict {s['judge']['verdict']}, quantization {s['judge']['quantization']}, "
            f"GPUs {s['judge']['cuda_visible_devices'] or 'none (CPU)'})", ""]
    for w in s.get("placement_warnings", []):
        out += [f"> **Warning:** {w}", ""]
    out += ["## Headline", "", *_headline(s), ""]
    out += ["Rates have 95% Wilson intervals, mean scores 95% normal intervals. Unparsed verdicts are excluded "
            "from every rate and mean, never counted as wrong.", ""]
    out += ["## By category", "", *_category_table(s), ""]
    if s["unparsed_reasons"]:
        out += ["## Unparsed verdicts", "", "| reason | count |", "|---|---|"]
        out += [f"| {r} | {k} |" for r, k in s["unparsed_reasons"].items()]
        out.append("")
    out += ["## Examples", ""]
    groups = [(v, df[df["verdict"] == v]) for v in sorted(df["verdict"].dropna().unique())]
    groups.append(("unparsed", df[df["verdict"].isna()]))
    for name, g in groups:
        if not len(g):
            continue
        out += [f"### {name}", "", "| id | question | reference | answer | judge said |", "|---|---|---|---|---|"]
        for row in g.head(n_examples).itertuples():
            out.append(f"| {_cell(row.id, 20)} | {_cell(row.prompt, 50)} | {_cell(row.reference, 30)} | "
                       f"{_cell(row.output, 50)} | {_cell(row.judge_output, 60)} |")
        out.append("")
    out += ["## Throughput", "", "Load time is paid once per job; when it dominates, use fewer, larger shards.", "",
            "| shard | items | GPUs | host | load s | generate s | tokens/s | resumed | computed |",
            "|---|---|---|---|---|---|---|---|---|"]
    for m in s["shards"]:
        out.append(f"| {m['shard']} | {m['n_items']} | {m['cuda_visible_devices'] or 'CPU'} | {m['hostname']} | "
                   f"{m['load_seconds']:.1f} | {m['generate_seconds']:.1f} | {m['tokens_per_second'] or '-'} | "
                   f"{m['resumed_items']} | {m['computed_items']} |")
    j = s["judge"]
    out += ["", f"Judge: load {j['load_seconds']} s, judging {j['judge_seconds']} s, "
            f"resumed {j['resumed_items']}, computed {j['computed_items']}; parameters per device: "
            f"{json.dumps(j['placement'])}", ""]
    return "\n".join(out)


def run_report(judgments_path, gen_meta_paths, judge_meta_path, config, summary_path, md_path,
               provenance_path, workflow_dir) -> dict:
    df = pd.read_parquet(judgments_path)
    gen_metas = [json.loads(open(p).read()) for p in gen_meta_paths]
    judge_meta = json.loads(open(judge_meta_path).read())
    s = summarise(df, gen_metas, judge_meta, config)
    atomic.write_json(provenance_path, provenance(config, gen_metas, judge_meta, workflow_dir))
    atomic.write_json(summary_path, s)
    atomic.write_text(md_path, render_markdown(s, df, int(config.get("report", {}).get("n_examples", 3))))
    return s
